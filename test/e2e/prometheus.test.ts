import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { photo } from '@tamp/scripts/fixtures/media';
import { generateLongWav } from '@tamp/scripts/fixtures/speech';
import { freePort, httpOk, spawnOwned, stopProcess } from '@tamp/scripts/infra/processes';
import { toolPath } from '@tamp/scripts/infra/provision';
import { SERVICE_NAMES } from '@tamp/scripts/stack/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { asPromQL, dashboardQueries, labelNames, metricNames } from '../deploy/dashboard';
import { NAMESPACE, ofKind, RELEASE, render, valuesArgs } from '../deploy/helm';
import { renderDashboardPicture } from '../support/dashboard-picture';
import {
  finishedJob,
  startTestStack,
  type TestAccount,
  type TestStack,
  uploadFile,
} from '../support/stack';

/** Short enough that a job's effect shows within seconds; a real install scrapes every 30 s. */
const SCRAPE_INTERVAL = '1s';
/** The first webhook retry waits this long, so the pending retry is seen by a scrape. */
const RETRY_SCHEDULE_MS = [3_000, 300, 300, 300, 300];
const AUDIO_JOBS = 3;

interface Sample {
  metric: Record<string, string>;
  value: number;
}

interface JobBody {
  id: string;
  status: string;
  error?: string;
}

/**
 * A real Prometheus (Debian's) scraping every service of the local stack, labelled as the
 * chart's ServiceMonitor labels them on Kubernetes (job <release>-<service>, the namespace), and
 * evaluating the chart's rendered rules. After text jobs (from a preset and from explicit
 * operations), an image, three audio jobs and one that fails, the job metrics (by pipeline and
 * preset), queue, credit and webhook metrics must be there and have moved, every panel of the
 * chart's dashboard must answer with data and read only labels its series carry, and no target
 * may look down.
 */
describe('Prometheus scraping the stack', () => {
  let stack: TestStack;
  let account: TestAccount;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl: string;
  let dataDir: string;
  let receiver: Server;
  let receiverUrl: string;
  let webhookRequests = 0;
  let prometheusLog = '';
  let serviceDown: string;

  beforeAll(async () => {
    // Refuses the first delivery, so one attempt fails and its retry waits in the schedule.
    receiver = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        webhookRequests += 1;
        response.writeHead(webhookRequests === 1 ? 500 : 200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

    stack = await startTestStack({
      env: { WEBHOOK_RETRY_SCHEDULE_MS: RETRY_SCHEDULE_MS.join(',') },
    });
    account = await stack.createAccount({ plan: 'pro', credits: 10_000 });

    dataDir = await mkdtemp(join(tmpdir(), 'tamp-prometheus-'));
    const [rule] = ofKind(
      await render(await valuesArgs({ metrics: { prometheusRule: { enabled: true } } })),
      'PrometheusRule',
    );
    const groups = rule!.spec.groups as Array<{ rules: Array<{ alert: string; expr: string }> }>;
    serviceDown = groups
      .flatMap((group) => group.rules)
      .find((candidate) => candidate.alert === 'TampServiceDown')!.expr;
    await writeFile(join(dataDir, 'rules.yaml'), stringify({ groups }));
    await writeFile(
      join(dataDir, 'prometheus.yml'),
      stringify({
        global: { scrape_interval: SCRAPE_INTERVAL, evaluation_interval: SCRAPE_INTERVAL },
        rule_files: [join(dataDir, 'rules.yaml')],
        scrape_configs: stack.services.services.map((service) => ({
          job_name: `${RELEASE}-${service.name}`,
          static_configs: [
            {
              targets: [`127.0.0.1:${service.opsPort}`],
              labels: { namespace: NAMESPACE, pod: `${service.name}-0` },
            },
          ],
        })),
      }),
    );
    const port = await freePort();
    prometheusUrl = `http://127.0.0.1:${port}`;
    prometheus = spawnOwned(
      toolPath('prometheus'),
      [
        `--config.file=${join(dataDir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dataDir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--storage.tsdb.retention.time=1h',
        '--log.level=warn',
      ],
      { env: { PATH: process.env.PATH ?? '' }, cwd: dataDir },
    );
    // Its log (warnings only) is kept for a failure message; Prometheus sends nothing anywhere.
    prometheus.stdout?.resume();
    prometheus.stderr?.on('data', (chunk: Buffer) => {
      prometheusLog = `${prometheusLog}${chunk}`.slice(-4_000);
    });
    await waitFor('Prometheus ready', () => httpOk(`${prometheusUrl}/-/ready`), 30_000).catch(
      (error: Error) => {
        throw new Error(`${error.message}\n${prometheusLog}`);
      },
    );
  }, 240_000);

  afterAll(async () => {
    if (prometheus !== undefined) await stopProcess(prometheus, 10_000);
    await stack?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  });

  async function query(promql: string): Promise<Sample[]> {
    const url = `${prometheusUrl}/api/v1/query?query=${encodeURIComponent(promql)}`;
    const body = (await (await fetch(url)).json()) as {
      status: string;
      error?: string;
      data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
    };
    if (body.status !== 'success') throw new Error(`${promql}: ${body.error}`);
    return body.data.result.map((row) => ({ metric: row.metric, value: Number(row.value[1]) }));
  }

  /** The value of a query that sums to one series (0 when it has none). */
  async function scalar(promql: string): Promise<number> {
    return (await query(promql))[0]?.value ?? 0;
  }

  async function create(pipeline: string, body: Record<string, unknown>): Promise<JobBody> {
    const response = await stack.api<JobBody>('POST', `/v1/${pipeline}`, {
      token: account.apiKey,
      body,
    });
    expect([200, 202], JSON.stringify(response.body)).toContain(response.status);
    return finishedJob<JobBody>(stack, account.apiKey, response.body.data!.id);
  }

  it('scrapes every service, each up', async () => {
    await waitFor(
      'every target up',
      async () => (await scalar(`sum(up{namespace="${NAMESPACE}"})`)) === SERVICE_NAMES.length,
      30_000,
    );
    const up = await query(`up{namespace="${NAMESPACE}"}`);
    expect(up.map((sample) => sample.metric.job).sort()).toEqual(
      SERVICE_NAMES.map((name) => `${RELEASE}-${name}`).sort(),
    );
    expect(up.every((sample) => sample.value === 1)).toBe(true);
  });

  it('sees jobs, the queue, credits and webhooks move', async () => {
    const startedAt = new Date(Date.now() - 3_000);
    const inline = await create('text', {
      text: 'Hello    world,\n\n\nthis is Tamp.',
      preset: 'aggressive',
    });
    expect(inline.status).toBe('completed');
    // An explicit chain rather than a preset: its metrics carry preset="custom".
    const custom = await create('text', {
      text: 'Explicit    operations,    no    preset.',
      operations: [{ type: 'trim', params: { intensity: 50 } }],
    });
    expect(custom.status).toBe('completed');
    const queuedText = await create('text', {
      text: 'Queued   because   of   its   webhook.',
      preset: 'aggressive',
      webhookUrl: receiverUrl,
    });
    expect(queuedText.status).toBe('completed');
    const imageId = await uploadFile(stack, account.apiKey, 'photo.jpg', await photo(640, 480));
    expect((await create('image', { imageId, preset: 'thumbnail' })).status).toBe('completed');
    // A PNG signature then bytes no decoder accepts: fails at once, and its credits come back.
    const corrupt = Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      Buffer.alloc(2_000, 0x5a),
    ]);
    const brokenId = await uploadFile(stack, account.apiKey, 'broken.png', corrupt);
    const broken = await create('image', {
      imageId: brokenId,
      preset: 'thumbnail',
      webhookUrl: receiverUrl,
    });
    expect(broken.status).toBe('failed');
    // worker-audio takes one job at a time: the others wait in its consumer, a backlog to see.
    // A minute of speech each, so the backlog outlives a 1 s scrape: the static ffmpeg takes a
    // few seconds of speech through `podcast` in a fifth of a second.
    const wavPath = join(dataDir, 'speech-minute.wav');
    await generateLongWav(wavPath, 60);
    const wav = await readFile(wavPath);
    const audio = await Promise.all(
      Array.from({ length: AUDIO_JOBS }, async (_, index) => {
        const audioId = await uploadFile(stack, account.apiKey, `speech-${index}.wav`, wav);
        return create('audio', { audioId, preset: 'podcast', webhookUrl: receiverUrl });
      }),
    );
    expect(audio.map((job) => job.status)).toEqual(Array(AUDIO_JOBS).fill('completed'));

    const webhookJobs = 2 + AUDIO_JOBS;
    await waitFor('every webhook delivered', async () => webhookRequests > webhookJobs, 30_000);

    const selector = `namespace="${NAMESPACE}"`;
    const expectations: Array<[string, string, (value: number) => boolean]> = [
      [
        'jobs created, text',
        `sum(tamp_jobs_created_total{${selector}, pipeline="text"})`,
        (v) => v === 3,
      ],
      [
        'jobs created, image',
        `sum(tamp_jobs_created_total{${selector}, pipeline="image"})`,
        (v) => v === 2,
      ],
      [
        'jobs created, audio',
        `sum(tamp_jobs_created_total{${selector}, pipeline="audio", preset="podcast"})`,
        (v) => v === AUDIO_JOBS,
      ],
      [
        'jobs completed',
        `sum(tamp_jobs_finished_total{${selector}, status="completed"})`,
        (v) => v === 4 + AUDIO_JOBS,
      ],
      [
        'jobs failed',
        `sum(tamp_jobs_finished_total{${selector}, status="failed"})`,
        (v) => v === 1,
      ],
      [
        'job durations',
        `sum(tamp_job_duration_seconds_count{${selector}})`,
        (v) => v === 5 + AUDIO_JOBS,
      ],
      [
        'worker attempts',
        `sum(tamp_jobs_processed_total{${selector}, outcome="completed"})`,
        (v) => v >= 4 + AUDIO_JOBS,
      ],
      [
        'consumers with a backlog series',
        `count(count by (consumer) (tamp_queue_messages{${selector}}))`,
        (v) => v === 5,
      ],
      [
        'audio backlog seen',
        `max_over_time(sum(tamp_queue_messages{${selector}, consumer="worker-audio"})[5m:1s])`,
        (v) => v >= 1,
      ],
      [
        'audio backlog drained',
        `sum(tamp_queue_messages{${selector}, consumer="worker-audio"})`,
        (v) => v === 0,
      ],
      ['credits reserved', `sum(tamp_credits_reserved_total{${selector}})`, (v) => v > 0],
      ['credits refunded', `sum(tamp_credits_refunded_total{${selector}})`, (v) => v > 0],
      [
        'webhook attempts failed',
        `sum(tamp_webhook_deliveries_total{${selector}, outcome="failed"})`,
        (v) => v === 1,
      ],
      [
        'webhooks delivered',
        `sum(tamp_webhook_deliveries_total{${selector}, outcome="delivered"})`,
        (v) => v === webhookJobs,
      ],
      [
        'webhook retry seen pending',
        `max_over_time(sum(tamp_webhook_retries_pending{${selector}})[5m:1s])`,
        (v) => v >= 1,
      ],
      [
        'audio requests answered 202',
        `sum(tamp_http_requests_total{${selector}, route="/v1/audio", status="202"})`,
        (v) => v === AUDIO_JOBS,
      ],
      [
        'long-polls by route pattern',
        `sum(tamp_http_requests_total{${selector}, route="/v1/jobs/:id"})`,
        (v) => v >= 5 + AUDIO_JOBS,
      ],
    ];
    const last = new Map<string, number>();
    const pending = async () => {
      const failing: string[] = [];
      for (const [name, promql, holds] of expectations) {
        const value = await scalar(promql);
        last.set(name, value);
        if (!holds(value)) failing.push(`${name}: ${value}`);
      }
      return failing;
    };
    // Counters reach Prometheus one scrape after the fact; wait a few scrapes at most.
    await waitFor(
      'the metrics to settle',
      async () => (await pending()).length === 0,
      20_000,
    ).catch(async () => {
      throw new Error(`not as expected: ${(await pending()).join('; ')}`);
    });
    // Every job by its pipeline and preset (`custom`: the explicit chain), finished and timed
    // once each with its status; the counts above settled, so these have too.
    const split = async (promql: string) =>
      Object.fromEntries(
        (await query(promql)).map(({ metric, value }) => [
          [metric.pipeline, metric.preset, metric.status].filter(Boolean).join(' '),
          value,
        ]),
      );
    const settled = {
      'text aggressive completed': 2,
      'text custom completed': 1,
      'image thumbnail completed': 1,
      'image thumbnail failed': 1,
      'audio podcast completed': AUDIO_JOBS,
    };
    const byPreset = 'pipeline, preset, status';
    expect(await split(`sum by (${byPreset}) (tamp_jobs_finished_total{${selector}})`)).toEqual(
      settled,
    );
    expect(
      await split(`sum by (${byPreset}) (tamp_job_duration_seconds_count{${selector}})`),
    ).toEqual(settled);
    expect(await split(`sum by (pipeline, preset) (tamp_jobs_created_total{${selector}})`)).toEqual(
      {
        'text aggressive': 2,
        'text custom': 1,
        'image thumbnail': 2,
        'audio podcast': AUDIO_JOBS,
      },
    );
    console.log(`prometheus: ${[...last].map(([name, value]) => `${name}=${value}`).join(', ')}`);
    // What a scrape costs: the job service's includes reading every consumer from JetStream.
    const slowest = await query(
      `max by (job) (max_over_time(scrape_duration_seconds{${selector}}[5m]))`,
    );
    console.log(
      `slowest scrape (ms): ${slowest.map((sample) => `${sample.metric.job}=${(sample.value * 1000).toFixed(1)}`).join(', ')}`,
    );

    const picture = process.env.TAMP_DASHBOARD_PICTURE;
    if (picture !== undefined)
      await renderDashboardPicture(prometheusUrl, NAMESPACE, picture, startedAt);
  }, 240_000);

  /** The label names of the series of `name` Prometheus holds. */
  async function liveLabels(name: string): Promise<Set<string>> {
    const match = encodeURIComponent(`${name}{namespace="${NAMESPACE}"}`);
    const body = (await (
      await fetch(`${prometheusUrl}/api/v1/series?match[]=${match}`)
    ).json()) as {
      data: Array<Record<string, string>>;
    };
    return new Set(body.data.flatMap((series) => Object.keys(series)));
  }

  it('answers every dashboard panel with data, from metrics and labels the services export', async () => {
    const exported = new Set(
      (await query(`count by (__name__) ({namespace="${NAMESPACE}"})`)).map(
        (sample) => sample.metric.__name__!,
      ),
    );
    const withoutData: string[] = [];
    // The operator's metrics exist only where it reaches a Kubernetes API (the cluster test).
    const local = (await dashboardQueries()).filter((query) => !query.needsKubernetes);
    for (const { panel, expr } of local) {
      for (const name of metricNames(expr)) {
        expect(exported, `${panel}: ${name}`).toContain(name);
        // A label no series has would group everything into one line or match nothing.
        const carried = await liveLabels(name);
        for (const label of labelNames(expr)) expect(carried, `${panel}: ${name}`).toContain(label);
      }
      const promql = asPromQL(expr, { namespace: NAMESPACE, rateInterval: '1m' });
      if ((await query(promql)).length === 0) withoutData.push(`${panel}: ${promql}`);
    }
    expect(withoutData).toEqual([]);
  });

  it("evaluates the chart's rules without errors, and no service looks down", async () => {
    const url = `${prometheusUrl}/api/v1/rules`;
    const body = (await (await fetch(url)).json()) as {
      data: {
        groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }>;
      };
    };
    const rules = body.data.groups.flatMap((group) => group.rules);
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) expect(rule.health, `${rule.name}: ${rule.lastError}`).toBe('ok');
    // Its expression, on the live series: no target down and none missing (absent()).
    expect(await query(serviceDown)).toEqual([]);
    // Rules ran before the first scrapes and saw nothing yet: pending then, gone since.
    await waitFor(
      'TampServiceDown to clear',
      async () => (await query('ALERTS{alertname="TampServiceDown"}')).length === 0,
      10_000,
    );
  });
});

async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
