import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { creditsFor, type MixedFile, writeMixedFolder } from '@tamp/scripts/fixtures/mixed-folder';
import { freePort } from '@tamp/scripts/infra/launcher';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestAccount, type TestStack } from '../../test/support/stack';
import { STATE_FILE, type StateEntry } from '../src/cli/compress/state';
import { InsufficientCreditsError, Tamp } from '../src/index';
import { TmuxTerminal } from './terminal';

/**
 * The `tamp` command as a user runs it: a child process (plain node on the bundle that
 * bin/tamp.mjs builds), against every service of the real stack.
 */

const BIN = join(import.meta.dirname, '..', 'bin', 'tamp.mjs');
const FILES = 10;

let stack: TestStack;
let scratch: string;
let folder: string;
let mixed: MixedFile[];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], env: Record<string, string>, cwd = scratch): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function finish(child: ChildProcess, timeoutMs = 120_000): Promise<Run> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`tamp did not finish in ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      // 'exit' can come before the last output: let the streams end first.
      setImmediate(() => resolve({ code, stdout, stderr }));
    });
  });
}

const tamp = (args: string[], env: Record<string, string>, cwd?: string) =>
  finish(start(args, env, cwd));

function envOf(account: TestAccount): Record<string, string> {
  return { TAMP_API_KEY: account.apiKey, TAMP_BASE_URL: stack.publicUrl };
}

async function readState(out: string): Promise<Record<string, StateEntry>> {
  try {
    return (
      JSON.parse(await readFile(join(out, STATE_FILE), 'utf8')) as {
        files: Record<string, StateEntry>;
      }
    ).files;
  } catch {
    return {};
  }
}

async function jobsOf(account: TestAccount) {
  const client = new Tamp({ apiKey: account.apiKey, baseUrl: stack.publicUrl });
  const jobs = [];
  for await (const job of client.listJobs({ limit: 100 })) jobs.push(job);
  return jobs;
}

const EXTENSIONS = { image: '.webp', audio: '.ogg', text: '.txt' } as const;

beforeAll(async () => {
  [stack, scratch] = await Promise.all([
    startTestStack({
      env: { PLANS_JSON: JSON.stringify({ pro: { rateLimitPerMinute: 100_000 } }) },
    }),
    mkdtemp(join(tmpdir(), 'tamp-cli-')),
  ]);
  folder = join(scratch, 'media');
  mixed = await writeMixedFolder(folder, FILES);
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('tamp compress', () => {
  it('compresses a folder of mixed files, and a second run does nothing and says so', async () => {
    const account = await stack.createAccount({ plan: 'pro' });
    const out = join(scratch, 'out-plain');
    const first = await tamp(['compress', 'media', '--out', out], envOf(account));
    expect(first.code, first.stderr).toBe(0);
    // Not a terminal: one plain line per file, then the summary table.
    const lines = first.stdout.split('\n').filter((line) => line.startsWith('done '));
    expect(lines).toHaveLength(FILES);
    expect(first.stdout).toContain(`Total (${FILES} files)`);
    expect(first.stdout).toContain(`${FILES} done`);
    for (const file of mixed) {
      const layout = relative(folder, file.path);
      const output = join(out, layout.replace(/\.[a-z0-9]+$/, EXTENSIONS[file.pipeline]));
      expect(existsSync(output), output).toBe(true);
    }

    const second = await tamp(['compress', 'media', '--out', out], envOf(account));
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`Nothing to do: all ${FILES} files are already compressed`);
    const asJson = await tamp(['compress', 'media', '--out', out, '--json'], envOf(account));
    const document = JSON.parse(asJson.stdout) as {
      files: { status: string }[];
      totals: { skipped: number; done: number };
    };
    expect(document.totals).toMatchObject({ skipped: FILES, done: 0 });
    expect(await jobsOf(account)).toHaveLength(FILES);
  });

  it('names the output of a format the job chooses after its result, and skips it on a second run', async () => {
    const account = await stack.createAccount({ plan: 'pro' });
    const out = join(scratch, 'out-auto');
    const image = mixed.find((file) => file.pipeline === 'image')!;
    const auto = '{"image":[{"type":"encode","params":{"format":"auto"}}]}';
    const args = ['compress', image.path, '--ops', auto, '--out', out, '--json'];
    const first = await tamp(args, envOf(account));
    expect(first.code, first.stderr).toBe(0);
    const stem = relative(folder, image.path)
      .replace(/^.*\//, '')
      .replace(/\.[a-z0-9]+$/, '');
    const written = (await readdir(out)).filter((name) => !name.startsWith('.'));
    expect(written).toHaveLength(1);
    expect(written[0]).toMatch(new RegExp(`^${stem}\\.(avif|webp|jpg|png)$`));
    const second = JSON.parse((await tamp(args, envOf(account))).stdout) as {
      totals: { skipped: number };
    };
    expect(second.totals.skipped).toBe(1);
    expect((await readdir(out)).filter((name) => !name.startsWith('.'))).toEqual(written);
  });

  it('an interrupted run resumes where it stopped: every file charged once', {
    timeout: 240_000,
  }, async () => {
    const credits = creditsFor(mixed);
    const account = await stack.createAccount({ plan: 'pro', credits });
    const out = join(scratch, 'out-interrupted');
    const args = ['compress', 'media', '--out', out, '--concurrency', '2', '--json'];
    const child = start(args, envOf(account));
    const running = finish(child);
    // Interrupt once a job exists that has not finished: it must be picked up, not made again.
    let unfinished: StateEntry[] = [];
    for (let poll = 0; poll < 1200 && unfinished.length === 0; poll++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      unfinished = Object.values(await readState(out)).filter(
        (entry) => entry.status === 'created',
      );
    }
    expect(unfinished.length).toBeGreaterThan(0);
    child.kill('SIGINT');
    const interrupted = await running;
    expect(interrupted.code, interrupted.stderr).toBe(130);
    const stopped = JSON.parse(interrupted.stdout) as { totals: { interrupted: number } };
    expect(stopped.totals.interrupted).toBeGreaterThan(0);
    const recorded = new Map(
      Object.values(await readState(out))
        .filter((entry) => entry.jobId !== undefined)
        .map((entry) => [entry.source, entry.jobId]),
    );

    const resumed = await tamp(args, envOf(account));
    expect(resumed.code, resumed.stderr).toBe(0);
    const document = JSON.parse(resumed.stdout) as {
      files: { source: string; status: string; resumed: boolean; jobId: string | null }[];
    };
    expect(document.files.every((file) => ['done', 'skipped'].includes(file.status))).toBe(true);
    for (const file of document.files) {
      const earlier = recorded.get(file.source);
      if (earlier !== undefined && file.status === 'done') {
        expect(file.resumed).toBe(true);
        expect(file.jobId).toBe(earlier);
      }
    }

    // Exactly one job per file, and the credits, set to the exact total, are all used:
    // a second charge anywhere would have failed a file with INSUFFICIENT_CREDITS.
    expect(await jobsOf(account)).toHaveLength(FILES);
    const client = new Tamp({ apiKey: account.apiKey, baseUrl: stack.publicUrl });
    await expect(client.compress({ text: 'one more' }, { preset: 'chill' })).rejects.toBeInstanceOf(
      InsufficientCreditsError,
    );
    const count = (pipeline: string) => mixed.filter((file) => file.pipeline === pipeline).length;
    // Usage follows the jobs' events: billing records them in batches, half a second at most
    // behind the last completion.
    await expect
      .poll(
        async () => {
          const usage = await client.usage();
          return [usage.audio.requests, usage.image.requests, usage.text.requests];
        },
        { timeout: 10_000 },
      )
      .toEqual([count('audio'), count('image'), count('text')]);
  });

  it('draws per-file and overall progress on a real terminal', { timeout: 180_000 }, async () => {
    const account = await stack.createAccount({ plan: 'pro' });
    const out = join(scratch, 'out-terminal');
    const terminal = await TmuxTerminal.start({
      folder: scratch,
      command: `cd ${scratch} && ${process.execPath} ${BIN} compress media --out ${out} --concurrency 3; echo TAMP_EXIT=$?; sleep 600`,
      env: { ...envOf(account), NO_COLOR: '1' },
      width: 150,
      height: 50,
    });
    try {
      const frames: string[] = [];
      let screen = '';
      for (let poll = 0; poll < 1200 && !screen.includes('TAMP_EXIT='); poll++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        screen = await terminal.screen();
        frames.push(screen);
      }
      expect(screen).toContain('TAMP_EXIT=0');
      // While running: bars for files in flight under the overall bar, redrawn in place.
      const live = frames.filter(
        (frame) =>
          /^Total .*[█░]/m.test(frame) &&
          /^ {2}\S.*(↑ upload|⚙ working|… waiting|↓ download)/m.test(frame),
      );
      expect(live.length).toBeGreaterThan(0);
      expect(
        frames.some((frame) => /↑ upload .*\d+%/.test(frame) || /… waiting .*job/.test(frame)),
      ).toBe(true);
      // At the end: a line per finished file, no bar left but the complete total, the table.
      expect(screen.match(/^✓ done /gm)).toHaveLength(FILES);
      expect(screen).toMatch(new RegExp(`^Total .* ${FILES}/${FILES} files`, 'm'));
      expect(screen).not.toMatch(/↑ upload|… waiting|⚙ working/);
      expect(screen).toContain(`Total (${FILES} files)`);
    } finally {
      await terminal.stop();
    }
  });
});

describe('the other commands', () => {
  let account: TestAccount;
  let jobId: string;

  beforeAll(async () => {
    account = await stack.createAccount({ plan: 'pro' });
    const client = new Tamp({ apiKey: account.apiKey, baseUrl: stack.publicUrl });
    const upload = await client.upload(mixed.find((file) => file.pipeline === 'audio')!.path);
    jobId = (await client.createJob('audio', { audioId: upload.id, preset: 'chill' })).id;
  });

  it('jobs wait, get and list; usage; presets and operations', async () => {
    const waited = await tamp(['jobs', 'wait', jobId], envOf(account));
    expect(waited.code, waited.stderr).toBe(0);
    expect(waited.stdout).toContain(`${jobId}  completed`);
    const got = await tamp(['jobs', 'get', jobId, '--json'], envOf(account));
    expect(JSON.parse(got.stdout)).toMatchObject({ id: jobId, status: 'completed' });
    const list = await tamp(['jobs', 'list', '--type', 'audio'], envOf(account));
    expect(list.stdout).toContain(jobId);
    const usage = await tamp(['usage'], envOf(account));
    expect(usage.stdout).toMatch(/audio\s+│\s+1/);
    const presets = await tamp(['presets', 'image'], envOf(account));
    expect(presets.stdout).toContain('thumbnail');
    const operations = await tamp(['operations', 'audio'], envOf(account));
    expect(operations.stdout).toContain('speedup');
  });

  it('says what went wrong, with documented exit codes', async () => {
    const noKey = await tamp(['usage'], { TAMP_API_KEY: '', TAMP_BASE_URL: stack.publicUrl });
    expect(noKey).toMatchObject({ code: 2 });
    expect(noKey.stderr).toContain('no API key');

    const badKey = await tamp(['usage'], { ...envOf(account), TAMP_API_KEY: 'sk_live_nope' });
    expect(badKey.code).toBe(3);
    expect(badKey.stderr).toContain('UNAUTHORIZED');
    expect(badKey.stderr).toContain('hint: The API key was refused');

    const unknown = await tamp(['jobs', 'get', 'job_00000000000000000000000000'], envOf(account));
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('JOB_NOT_FOUND');

    const badPreset = await tamp(
      ['compress', 'media', '--preset', 'bogus', '--out', join(scratch, 'x')],
      envOf(account),
    );
    expect(badPreset.code).toBe(2);
    expect(badPreset.stderr).toContain('preset');

    const badFlag = await tamp(['compress'], envOf(account));
    expect(badFlag.code).toBe(2);

    const closed = await freePort();
    const down = await tamp(['usage'], {
      ...envOf(account),
      TAMP_BASE_URL: `http://127.0.0.1:${closed}`,
    });
    expect(down.code).toBe(5);
    expect(down.stderr).toContain('is it running');
  });

  it('webhook verify: a real delivery saved as received', async () => {
    let server: Server | undefined;
    const saved = new Promise<Buffer>((resolve) => {
      server = createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const head = [`${request.method} ${request.url} HTTP/1.1`];
          for (let index = 0; index < request.rawHeaders.length; index += 2) {
            head.push(`${request.rawHeaders[index]}: ${request.rawHeaders[index + 1]}`);
          }
          resolve(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), ...chunks]));
          response.writeHead(204).end();
        });
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server!.address() as AddressInfo).port;
      const client = new Tamp({ apiKey: account.apiKey, baseUrl: stack.publicUrl });
      await client.createJob('text', {
        text: 'Signed   delivery.',
        preset: 'chill',
        webhookUrl: `http://127.0.0.1:${port}/hook`,
      });
      const raw = await saved;
      const file = join(scratch, 'delivery.http');
      await writeFile(file, raw);
      const verified = await tamp(
        ['webhook', 'verify', file, '--secret', account.webhookSecret],
        {},
      );
      expect(verified.code, verified.stderr).toBe(0);
      expect(verified.stdout).toMatch(/^verified \(standard-webhooks/);
      // The same delivery with its body changed: a completed job claimed as failed.
      const bodyStart = raw.indexOf('\r\n\r\n') + 4;
      const forgedBody = raw
        .subarray(bodyStart)
        .toString('utf8')
        .replace('job.completed', 'job.failed');
      await writeFile(file, Buffer.concat([raw.subarray(0, bodyStart), Buffer.from(forgedBody)]));
      const forged = await tamp(['webhook', 'verify', file], {
        TAMP_WEBHOOK_SECRET: account.webhookSecret,
      });
      expect(forged.code).toBe(7);
      expect(forged.stderr).toContain('does not match');
    } finally {
      server?.close();
    }
  });
});
