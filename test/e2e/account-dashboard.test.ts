import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LIMITS } from '@tamp/proto';
import { tinyPng } from '@tamp/scripts/fixtures/media';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  finishedJob,
  startTestStack,
  type TestAccount,
  type TestStack,
  uploadFile,
} from '../support/stack';

/**
 * The account dashboard over plain HTTP, against the whole stack: what a browser is sent and
 * what the server refuses (cookies, forms without their token, other origins, ended sessions,
 * markup in customer-chosen names). The same flows in real Chromium: test/browser.
 */
let stack: TestStack;
let account: TestAccount;

beforeAll(async () => {
  stack = await startTestStack();
  account = await stack.createAccount({ plan: 'pro' });
}, 180_000);
afterAll(() => stack?.stop());

/** A browser without a browser: one session cookie, forms posted as a page would post them. */
class DashboardClient {
  cookie: string | null = null;

  constructor(private readonly baseUrl: string) {}

  async get(path: string): Promise<Response> {
    return fetch(`${this.baseUrl}${path}`, {
      redirect: 'manual',
      headers: this.cookie === null ? {} : { cookie: this.cookie },
    });
  }

  async post(
    path: string,
    fields: Record<string, string>,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: this.baseUrl,
        ...(this.cookie === null ? {} : { cookie: this.cookie }),
        ...headers,
      },
      body: new URLSearchParams(fields).toString(),
    });
    const setCookie = response.headers.get('set-cookie');
    if (setCookie !== null) this.cookie = setCookie.split(';')[0]!;
    return response;
  }

  /** The form token of the signed-in page at `path`. */
  async csrfToken(path = '/dashboard'): Promise<string> {
    const page = await (await this.get(path)).text();
    const token = /name="_csrf" value="([^"]+)"/.exec(page)?.[1];
    if (token === undefined) throw new Error(`no form token on ${path}:\n${page.slice(0, 500)}`);
    return token;
  }
}

async function signedIn(apiKey = account.apiKey): Promise<DashboardClient> {
  const client = new DashboardClient(stack.publicUrl);
  const response = await client.post('/dashboard/sign-in', { apiKey });
  expect(response.status).toBe(303);
  return client;
}

describe('account dashboard', () => {
  it('sends a signed-out visitor to sign in, and signs in with an API key into an HttpOnly, SameSite=Strict cookie', async () => {
    const visitor = new DashboardClient(stack.publicUrl);
    const refused = await visitor.get('/dashboard');
    expect(refused.status).toBe(303);
    expect(refused.headers.get('location')).toBe('/dashboard/sign-in');

    const response = await visitor.post('/dashboard/sign-in', { apiKey: account.apiKey });
    expect(response.status).toBe(303);
    const cookie = response.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^tamp_session=tss_/);
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    expect(cookie).toMatch(/Path=\/dashboard/);
    expect(cookie).not.toContain(account.apiKey);

    const home = await visitor.get('/dashboard');
    expect(home.status).toBe(200);
    const csp = home.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(home.headers.get('cache-control')).toBe('no-store');
    const stylesheet = await visitor.get('/dashboard/assets/dashboard.css');
    expect(stylesheet.headers.get('cache-control')).toBe('public, max-age=3600');
    expect(await home.text()).toContain('Credits left');
  });

  it('refuses a wrong API key with the sign-in page and no cookie', async () => {
    const visitor = new DashboardClient(stack.publicUrl);
    const response = await visitor.post('/dashboard/sign-in', {
      apiKey: `sk_live_${'x'.repeat(40)}`,
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('set-cookie')).toBeNull();
  });

  it('refuses a change without the form token or from another origin, and accepts it with both', async () => {
    const client = await signedIn();
    const token = await client.csrfToken('/dashboard/keys');
    expect((await client.post('/dashboard/keys', {})).status).toBe(403);
    expect((await client.post('/dashboard/keys', { _csrf: `${token}x` })).status).toBe(403);
    const elsewhere = await client.post(
      '/dashboard/keys',
      { _csrf: token },
      { origin: 'https://evil.example' },
    );
    expect(elsewhere.status).toBe(403);
    const created = await client.post('/dashboard/keys', { _csrf: token });
    expect(created.status).toBe(200);
    expect(await created.text()).toMatch(/value="sk_live_[A-Za-z0-9]+"/);
  });

  it('says on the page when the account has as many active keys as it may', async () => {
    const crowded = await stack.createAccount({ plan: 'pro' });
    const path = `/admin/accounts/${crowded.accountId}/keys`;
    for (let key = 1; key < LIMITS.activeApiKeysPerAccount; key++) {
      expect((await stack.admin('POST', path)).status).toBe(201);
    }
    const client = await signedIn(crowded.apiKey);
    const refused = await client.post('/dashboard/keys', {
      _csrf: await client.csrfToken('/dashboard/keys'),
    });
    expect(refused.status).toBe(400);
    const page = await refused.text();
    expect(page).toContain(`at most ${LIMITS.activeApiKeysPerAccount} active API keys`);
    expect(page).not.toMatch(/value="sk_live_/);
  });

  it('revokes a key created in the dashboard, and the API refuses it within 5 seconds', async () => {
    const client = await signedIn();
    const page = await (
      await client.post('/dashboard/keys', { _csrf: await client.csrfToken('/dashboard/keys') })
    ).text();
    const apiKey = /value="(sk_live_[A-Za-z0-9]+)"/.exec(page)![1]!;
    expect((await stack.api('GET', '/v1/usage/current', { token: apiKey })).status).toBe(200);
    const keys = await stack.admin<{ keys: { keyId: string; displayPrefix: string }[] }>(
      'GET',
      `/admin/accounts/${account.accountId}/keys`,
    );
    const key = keys.body.data!.keys.find((candidate) =>
      apiKey.startsWith(candidate.displayPrefix),
    )!;
    const revoked = await client.post(`/dashboard/keys/${key.keyId}/revoke`, {
      _csrf: await client.csrfToken('/dashboard/keys'),
    });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get('location')).toBe('/dashboard/keys?done=key-revoked');
    // Revocation reaches the gateway within 5 s (its key cache lives at most 4 s).
    await expect
      .poll(async () => (await stack.api('GET', '/v1/usage/current', { token: apiKey })).status, {
        timeout: 5_000,
        interval: 250,
      })
      .toBe(401);
  });

  it("refuses to revoke another account's key", async () => {
    const other = await stack.createAccount();
    const keys = await stack.admin<{ keys: { keyId: string }[] }>(
      'GET',
      `/admin/accounts/${other.accountId}/keys`,
    );
    const client = await signedIn();
    const response = await client.post(`/dashboard/keys/${keys.body.data!.keys[0]!.keyId}/revoke`, {
      _csrf: await client.csrfToken('/dashboard/keys'),
    });
    expect(response.status).toBe(404);
    expect((await stack.api('GET', '/v1/usage/current', { token: other.apiKey })).status).toBe(200);
  });

  it('signs in once with an operator sign-in link; the link page itself does not use it up', async () => {
    const minted = await stack.admin<{ path: string }>(
      'POST',
      `/admin/accounts/${account.accountId}/sign-in-links`,
    );
    expect(minted.status).toBe(201);
    const token = new URL(minted.body.data!.path, stack.publicUrl).searchParams.get('token')!;
    const visitor = new DashboardClient(stack.publicUrl);
    expect((await visitor.get(minted.body.data!.path)).status).toBe(200);
    expect((await visitor.get(minted.body.data!.path)).status).toBe(200);
    const first = await visitor.post('/dashboard/sign-in/link', { token });
    expect(first.status).toBe(303);
    expect((await visitor.get('/dashboard')).status).toBe(200);
    const again = await new DashboardClient(stack.publicUrl).post('/dashboard/sign-in/link', {
      token,
    });
    expect(again.status).toBe(401);
  });

  it('refuses the session after sign-out, and every session after "sign out everywhere"', async () => {
    const client = await signedIn();
    const cookie = client.cookie;
    expect(
      (await client.post('/dashboard/sign-out', { _csrf: await client.csrfToken() })).status,
    ).toBe(303);
    client.cookie = cookie;
    expect((await client.get('/dashboard')).status).toBe(303);

    const first = await signedIn();
    const second = await signedIn();
    expect(
      (await first.post('/dashboard/sessions/revoke', { _csrf: await first.csrfToken() })).status,
    ).toBe(303);
    expect((await second.get('/dashboard')).status).toBe(303);
  });

  it('lets an operator end every dashboard session of an account', async () => {
    const client = await signedIn();
    expect((await client.get('/dashboard')).status).toBe(200);
    const revoked = await stack.admin<{ revoked: number }>(
      'POST',
      `/admin/accounts/${account.accountId}/sessions/revoke`,
    );
    expect(revoked.status).toBe(200);
    expect(revoked.body.data!.revoked).toBeGreaterThanOrEqual(1);
    expect((await client.get('/dashboard')).status).toBe(303);
  });

  it('saves a default webhook URL only when deliveries may reach it', async () => {
    const client = await signedIn();
    const token = await client.csrfToken('/dashboard/webhooks');
    const metadata = await client.post('/dashboard/webhooks/url', {
      _csrf: token,
      webhookUrl: 'http://169.254.169.254/latest/meta-data',
    });
    expect(metadata.status, await metadata.clone().text()).toBe(400);
    expect(await metadata.text()).toContain('cannot receive webhooks');
    const saved = await client.post('/dashboard/webhooks/url', {
      _csrf: token,
      webhookUrl: 'http://127.0.0.1:9/hooks?a=<b>',
    });
    expect(saved.status).toBe(303);
    const shown = await (await client.get(saved.headers.get('location')!)).text();
    expect(shown).toContain('value="http://127.0.0.1:9/hooks?a=&lt;b&gt;"');
    expect(shown).toContain('Webhook URL saved.');
    const stored = await stack.admin<{ webhookUrl: string }>(
      'GET',
      `/admin/accounts/${account.accountId}`,
    );
    expect(stored.body.data!.webhookUrl).toBe('http://127.0.0.1:9/hooks?a=<b>');
    await client.post('/dashboard/webhooks/url', { _csrf: token, webhookUrl: '' });
  });

  it('reveals the signing secret only when asked, and rotates it with a grace period', async () => {
    const client = await signedIn();
    const page = await (await client.get('/dashboard/webhooks')).text();
    expect(page).not.toContain(account.webhookSecret);
    const token = await client.csrfToken('/dashboard/webhooks');
    const revealed = await (
      await client.post('/dashboard/webhooks/secret/reveal', { _csrf: token })
    ).text();
    expect(revealed).toContain(account.webhookSecret);
    const rotated = await client.post('/dashboard/webhooks/secret/rotate', {
      _csrf: token,
      gracePeriodSeconds: '3600',
    });
    expect(rotated.status, await rotated.clone().text()).toBe(200);
    const after = await stack.admin<{
      webhookSecret: string;
      previousWebhookSecret: { secret: string; validUntil: string } | null;
    }>('GET', `/admin/accounts/${account.accountId}`);
    expect(after.body.data!.webhookSecret).not.toBe(account.webhookSecret);
    expect(after.body.data!.previousWebhookSecret?.secret).toBe(account.webhookSecret);
    expect(await rotated.text()).toContain(after.body.data!.webhookSecret);
  });

  it('renders a file name full of markup as inert text in the job list and the job page', async () => {
    const name = `<img src=x onerror=alert(1)><script>alert(2)</script>.png`;
    const uploadId = await uploadFile(stack, account.apiKey, name, await tinyPng());
    const created = await stack.api<{ id: string }>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId: uploadId, preset: 'chill' },
    });
    expect([200, 202]).toContain(created.status);
    const jobId = created.body.data!.id;
    await finishedJob(stack, account.apiKey, jobId);
    const client = await signedIn();
    const list = await (await client.get('/dashboard/jobs?type=image')).text();
    expect(list).toContain(jobId);
    expect(list).toContain(
      '&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;.png',
    );
    expect(list).not.toContain('<img src=x');
    expect(list).not.toContain('<script>alert');
    const detail = await client.get(`/dashboard/jobs/${jobId}`);
    expect(detail.status).toBe(200);
    expect(await detail.text()).toContain('Download the result');
  });

  it('compresses a file sent with the "try it" form, as an ordinary job of the account', async () => {
    const client = await signedIn();
    const token = await client.csrfToken('/dashboard/try');
    const send = (fields: Record<string, string>, file: { name: string; bytes: Buffer }) => {
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) form.append(name, value);
      form.append('file', new Blob([file.bytes]), file.name);
      return fetch(`${stack.publicUrl}/dashboard/try`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: client.cookie!, origin: stack.publicUrl },
        body: form,
      });
    };
    const png = { name: 'photo.png', bytes: await tinyPng() };
    expect((await send({ preset: 'image:chill' }, png)).status).toBe(403);
    expect((await send({ _csrf: 'forged', preset: 'image:chill' }, png)).status).toBe(403);
    const wrongKind = await send({ _csrf: token, preset: 'audio:podcast' }, png);
    expect(wrongKind.status).toBe(400);
    expect(await wrongKind.text()).toContain('class="problem"');

    const sent = await send({ _csrf: token, preset: 'image:chill' }, png);
    expect(sent.status).toBe(303);
    const jobId = /\/dashboard\/jobs\/(job_[A-Za-z0-9]+)$/.exec(
      sent.headers.get('location') ?? '',
    )?.[1];
    expect(jobId).toBeDefined();
    const job = await finishedJob<{ status: string; result?: { outputUrl?: string } }>(
      stack,
      account.apiKey,
      jobId!,
    );
    expect(job.status).toBe('completed');
    expect(job.result?.outputUrl).toBeDefined();
  });

  it('sends a test delivery of the latest finished job to the default URL, signed', async () => {
    const received: { headers: Record<string, unknown>; body: string }[] = [];
    const receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => {
        body += chunk;
      });
      request.on('end', () => {
        received.push({ headers: request.headers, body });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const fresh = await stack.createAccount({ plan: 'pro' });
      const client = await signedIn(fresh.apiKey);
      const token = await client.csrfToken('/dashboard/webhooks');
      const { port } = receiver.address() as AddressInfo;
      await client.post('/dashboard/webhooks/url', {
        _csrf: token,
        webhookUrl: `http://127.0.0.1:${port}/hook`,
      });
      const nothingYet = await (
        await client.post('/dashboard/webhooks/test', { _csrf: token })
      ).text();
      expect(nothingYet).toContain('run a job first');
      expect(received).toHaveLength(0);

      await stack.api('POST', '/v1/text', {
        token: fresh.apiKey,
        body: { text: 'hello   world', preset: 'medium' },
      });
      const sent = await (await client.post('/dashboard/webhooks/test', { _csrf: token })).text();
      expect(sent).toContain('HTTP 204');
      expect(sent).toContain('delivered');
      expect(received).toHaveLength(1);
      const [delivery] = received;
      expect(JSON.parse(delivery!.body).event).toBe('job.completed');
      expect(delivery!.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    } finally {
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  it("renders a text job's output full of markup as inert text", async () => {
    const text = '</textarea><script>alert(1)</script><img src=x onerror=alert(2)>';
    const created = await stack.api<{ id: string; status: string }>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text, preset: 'chill' },
    });
    expect(created.status).toBe(200);
    const client = await signedIn();
    const page = await (await client.get(`/dashboard/jobs/${created.body.data!.id}`)).text();
    expect(page).toContain('&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page).not.toContain('<script>alert');
    expect(page).not.toContain('<img src=x');
  });

  it("answers another account's job as not found", async () => {
    const other = await stack.createAccount();
    const created = await stack.api<{ id: string }>('POST', '/v1/text', {
      token: other.apiKey,
      body: { text: 'hello', preset: 'chill' },
    });
    const client = await signedIn();
    const response = await client.get(`/dashboard/jobs/${created.body.data!.id}`);
    expect(response.status).toBe(404);
  });
});
