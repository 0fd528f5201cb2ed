import { type StartedTampContainer, TampContainer } from '@tamp/testcontainers';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Tamp's webhook verification example, which receivers copy (services/webhook/examples).
import { verifyTampDelivery } from '../../services/webhook/examples/verify-delivery';
import { compressNotes, thumbnail } from './thumbnails';

/**
 * A customer's test suite, as the package's README shows it: a real Tamp for the suite, the
 * customer's own code pointed at it. On a machine with Docker it needs nothing else; this
 * repository runs it on podman with the images it builds (TAMP_TESTCONTAINERS_NETWORK and
 * TAMP_*_IMAGE, set by test/setup/container-engine.ts).
 */

let tamp: StartedTampContainer;

beforeAll(async () => {
  tamp = await new TampContainer().start();
}, 300_000);

afterAll(async () => {
  await tamp?.stop();
});

describe('thumbnails, against a real Tamp', () => {
  it('makes a WebP thumbnail of a photo', async () => {
    const photo = await sharp({
      create: { width: 1200, height: 800, channels: 3, background: '#2a6f97' },
    })
      .jpeg()
      .toBuffer();

    const small = await thumbnail(photo, { baseUrl: tamp.baseUrl, apiKey: tamp.apiKey });

    const metadata = await sharp(small).metadata();
    expect(metadata.format).toBe('webp');
    expect(metadata.width).toBeLessThan(1200);
  });

  it('is told by a signed webhook when queued notes are compressed', async () => {
    const receiver = await tamp.startWebhookReceiver();

    const jobId = await compressNotes('Notes   with   too   many   spaces.', receiver.url, tamp);

    const delivery = await receiver.waitForDelivery((d) => d.body.includes(jobId));
    const verified = verifyTampDelivery(
      Buffer.from(delivery.body),
      delivery.headers,
      tamp.webhookSecret,
    );
    expect(verified).toMatchObject({ ok: true, event: { event: 'job.completed' } });
  });

  it('keeps tenants apart: another account does not see this one’s jobs', async () => {
    const other = await tamp.createAccount({ plan: 'free' });
    const jobId = await compressNotes('Private   notes.', undefined, tamp);

    const listed = async (apiKey: string) => {
      const response = await fetch(`${tamp.baseUrl}/v1/jobs`, {
        headers: { authorization: `Bearer ${apiKey}` },
      });
      const page = (await response.json()) as { data: { items: Array<{ id: string }> } };
      return page.data.items.map((job) => job.id);
    };
    expect(await listed(tamp.apiKey)).toContain(jobId);
    expect(await listed(other.apiKey)).not.toContain(jobId);
  });
});
