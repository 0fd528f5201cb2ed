import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { tinyPng } from '@tamp/scripts/fixtures/media';
import type { Browser, BrowserContext, Cookie, Locator, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { verifyTampDelivery } from '../../services/webhook/examples/verify-delivery';
import {
  finishedJob,
  startTestStack,
  type TestAccount,
  type TestStack,
  uploadFile,
} from '../support/stack';
import { checkAccessibility } from './support/accessibility';
import {
  collectPageProblems,
  launchChromium,
  type PageProblems,
  screenshotPath,
  TEST_RESULTS_DIR,
} from './support/chromium';

/**
 * The account dashboard in real Chromium against the whole stack: every flow a customer has,
 * driven through labelled controls (the locators are by role and label, so they also prove the
 * controls are named), each asserting what the page shows and what the system did. Every page
 * visited is checked with axe (WCAG 2.1 A/AA, serious and critical), for console errors, CSP
 * violations and dialogs, and screenshotted into test-results/screenshots. The same flows over
 * plain HTTP: test/e2e/account-dashboard.test.ts.
 */

const MARKUP_FILE_NAME = '<img src=x onerror=alert(1)><script>alert(2)</script>.png';
/** Over 50 KB: a text job that is always queued, so its event goes to the default webhook URL. */
const LARGE_TEXT = 'Lorem ipsum   dolor sit amet.  '.repeat(2_000);

let stack: TestStack;
let account: TestAccount;
let browser: Browser;
let receiver: Receiver;

beforeAll(async () => {
  // Assigned one by one, so afterAll stops whatever started even when another part failed.
  await Promise.all([
    startTestStack().then((started) => {
      stack = started;
    }),
    launchChromium().then((launched) => {
      browser = launched;
    }),
    Receiver.start().then((started) => {
      receiver = started;
    }),
  ]);
  account = await stack.createAccount({ plan: 'pro' });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await stack?.stop();
});

// ---- A webhook receiver ------------------------------------------------------------------------

interface Received {
  body: Buffer;
  headers: IncomingHttpHeaders;
}

/** A node:http server on loopback that answers 204 and keeps every request's raw bytes. */
class Receiver {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly requests: Received[],
  ) {}

  static async start(): Promise<Receiver> {
    const requests: Received[] = [];
    const server = createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      requests.push({ body: Buffer.concat(chunks), headers: request.headers });
      response.writeHead(204).end();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    return new Receiver(server, `http://127.0.0.1:${port}/hook`, requests);
  }

  /** The deliveries of one job's events, in arrival order. */
  of(jobId: string): Received[] {
    return this.requests.filter(
      (received) =>
        (JSON.parse(received.body.toString('utf8')) as { job: { id: string } }).job.id === jobId,
    );
  }

  /** Waits (bounded) until `count` deliveries of the job have arrived. */
  async waitFor(jobId: string, count: number, timeout = 30_000): Promise<Received[]> {
    await expect
      .poll(() => this.of(jobId).length, { timeout, interval: 100 })
      .toBeGreaterThanOrEqual(count);
    return this.of(jobId);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** Tamp's signature and the Standard Webhooks one, both checked against `secret`. */
function signatureVerifies(
  received: Received,
  secret: string,
): { tamp: boolean; standard: boolean } {
  const tamp = verifyTampDelivery(received.body, received.headers, secret).ok;
  let standard = true;
  try {
    new Webhook(secret).verify(received.body, {
      'webhook-id': String(received.headers['webhook-id']),
      'webhook-timestamp': String(received.headers['webhook-timestamp']),
      'webhook-signature': String(received.headers['webhook-signature']),
    });
  } catch {
    standard = false;
  }
  return { tamp, standard };
}

// ---- Pages -------------------------------------------------------------------------------------

interface View {
  context: BrowserContext;
  page: Page;
  problems: PageProblems;
  /** Every dialog the page opened (each dismissed at once); there must be none. */
  dialogs: string[];
  /** Pages answered with a 4xx on purpose (see expectRefusal). */
  refusals: { status: number; path: string }[];
}

const contexts: BrowserContext[] = [];

afterEach(async () => {
  await Promise.all(contexts.splice(0).map((context) => context.close()));
});

/** A page in a fresh context (no cookies), recording its problems and dialogs from the start. */
async function openView(): Promise<View> {
  const context = await browser.newContext({
    baseURL: stack.publicUrl,
    viewport: { width: 1024, height: 768 },
  });
  contexts.push(context);
  // The copy buttons write to the clipboard; the test reads it back.
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], {
    origin: stack.publicUrl,
  });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.setDefaultNavigationTimeout(15_000);
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { context, page, problems: await collectPageProblems(page), dialogs, refusals: [] };
}

/**
 * Notes that the page now shown was answered `status` on purpose. Chromium logs every document
 * answered 4xx as a console error ("Failed to load resource: … status of 400"), asynchronously;
 * that one line, for this status and path, is not a problem of the page.
 */
function expectRefusal(view: View, status: number): void {
  view.refusals.push({ status, path: new URL(view.page.url()).pathname });
}

function isExpectedRefusal(view: View, problem: PageProblems['problems'][number]): boolean {
  return view.refusals.some(
    ({ status, path }) =>
      problem.kind === 'console-error' &&
      problem.text.startsWith(
        `Failed to load resource: the server responded with a status of ${status} `,
      ) &&
      problem.location?.startsWith(`${stack.publicUrl}${path}:`) === true,
  );
}

/**
 * What every page must pass: no serious or critical WCAG A/AA violation, no console error, no CSP
 * violation, no dialog; then a full-page screenshot when named.
 */
async function inspect(view: View, screenshot?: string): Promise<void> {
  const where = new URL(view.page.url()).pathname;
  expect(await checkAccessibility(view.page), `accessibility of ${where}`).toEqual([]);
  const unexpected = view.problems.problems.filter((problem) => !isExpectedRefusal(view, problem));
  expect(unexpected, `problems of ${where}`).toEqual([]);
  expect(view.problems.cspViolations, `CSP violations of ${where}`).toEqual([]);
  expect(view.dialogs, `dialogs of ${where}`).toEqual([]);
  if (screenshot !== undefined) {
    await view.page.screenshot({ path: screenshotPath(screenshot), fullPage: true });
  }
}

const onPath = (path: string) => (url: URL) => url.pathname === path;

/**
 * Presses a form's submit button and checks the status the form's POST was answered with; when
 * it is not the expected one, the failure quotes the problem the page showed.
 */
async function submit(view: View, button: Locator, status: number): Promise<void> {
  const answered = view.page.waitForResponse(
    (response) =>
      response.request().method() === 'POST' && response.request().isNavigationRequest(),
  );
  await button.click();
  const response = await answered;
  if (response.status() !== status) {
    const body = await response.text().catch(() => '');
    const problem = /<p class="problem">([^<]*)<\/p>/.exec(body)?.[1] ?? body.slice(0, 300);
    const origin = await response.request().headerValue('origin');
    expect.fail(
      `POST ${new URL(response.url()).pathname} (Origin: ${origin}) answered ${response.status()}, not ${status}: ${problem}`,
    );
  }
}

async function heading(page: Page): Promise<string> {
  return ((await page.getByRole('heading', { level: 1 }).textContent()) ?? '').trim();
}

/** Signs in through the form (mouse and fill; the keyboard-only way is a test of its own). */
async function signedInView(): Promise<View> {
  const view = await openView();
  await view.page.goto('/dashboard/sign-in');
  await view.page.getByLabel('API key').fill(account.apiKey);
  await submit(view, view.page.getByRole('button', { name: 'Sign in' }), 303);
  await view.page.waitForURL(onPath('/dashboard'));
  await view.page.getByRole('heading', { name: 'Credits left' }).waitFor();
  return view;
}

/** Follows a link of the dashboard's navigation. */
async function navigate(view: View, label: string, path: string): Promise<void> {
  await view.page
    .getByRole('navigation', { name: 'Dashboard' })
    .getByRole('link', { name: label, exact: true })
    .click();
  await view.page.waitForURL(onPath(path));
}

const activeElementId = (page: Page): Promise<string> =>
  page.evaluate(() => {
    const scope = globalThis as unknown as { document: { activeElement: { id: string } | null } };
    return scope.document.activeElement?.id ?? '';
  });

const activeElementTag = (page: Page): Promise<string> =>
  page.evaluate(() => {
    const scope = globalThis as unknown as {
      document: { activeElement: { tagName: string } | null };
    };
    return scope.document.activeElement?.tagName.toLowerCase() ?? '';
  });

/** Presses Tab until `isThere` holds, at most `limit` times; true when it got there. */
async function tabUntil(page: Page, isThere: () => Promise<boolean>, limit = 20): Promise<boolean> {
  for (let press = 0; press < limit; press += 1) {
    if (await isThere()) return true;
    await page.keyboard.press('Tab');
  }
  return isThere();
}

async function apiStatus(apiKey: string): Promise<number> {
  return (await stack.api('GET', '/v1/usage/current', { token: apiKey })).status;
}

/** A performance entry's fields used here (the test's TypeScript has no DOM library). */
interface TimingEntry {
  name: string;
  initiatorType: string;
  transferSize: number;
  encodedBodySize: number;
  decodedBodySize: number;
  responseStart: number;
  domContentLoadedEventEnd: number;
  loadEventEnd: number;
}

/**
 * Runs in the page (`page.evaluate(pageTimings)`, so it uses nothing from this module): the
 * document's navigation entry and its resources' entries, as plain objects.
 */
function pageTimings(): { navigation: TimingEntry | undefined; resources: TimingEntry[] } {
  type Entry = { toJSON(): TimingEntry };
  const timeline = (
    globalThis as unknown as { performance: { getEntriesByType(type: string): Entry[] } }
  ).performance;
  return {
    navigation: timeline.getEntriesByType('navigation')[0]?.toJSON(),
    resources: timeline.getEntriesByType('resource').map((entry) => entry.toJSON()),
  };
}

// ---- Shared fixtures ---------------------------------------------------------------------------

interface ImageJob {
  id: string;
}

let imageJobPromise: Promise<ImageJob> | undefined;

/**
 * The image job of an upload named with markup, queued (it has a webhookUrl) so its event is
 * delivered to the receiver; created once, by whichever test needs it first.
 */
function imageJob(): Promise<ImageJob> {
  imageJobPromise ??= (async () => {
    const uploadId = await uploadFile(stack, account.apiKey, MARKUP_FILE_NAME, await tinyPng());
    const created = await stack.api<{ id: string }>('POST', '/v1/image', {
      token: account.apiKey,
      body: { imageId: uploadId, preset: 'chill', webhookUrl: receiver.url },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    const id = created.body.data!.id;
    const job = await finishedJob(stack, account.apiKey, id);
    expect(job.status).toBe('completed');
    return { id };
  })();
  return imageJobPromise;
}

// ---- The flows ---------------------------------------------------------------------------------

describe('account dashboard in Chromium', () => {
  it('serves the sign-in page with a few kilobytes of script (timings measured, not asserted)', async () => {
    const view = await openView();
    const response = await view.page.goto('/dashboard/sign-in');
    expect(response?.status()).toBe(200);
    // loadEventEnd is written once the load handlers have returned: wait for it, bounded.
    await expect
      .poll(async () => (await view.page.evaluate(pageTimings)).navigation?.loadEventEnd ?? 0, {
        timeout: 10_000,
        interval: 50,
      })
      .toBeGreaterThan(0);
    const timed = await view.page.evaluate(pageTimings);
    const scriptSources = await view.page.evaluate(() => {
      const scope = globalThis as unknown as {
        document: { scripts: ArrayLike<{ src: string }> };
      };
      return Array.from(scope.document.scripts, (script) => script.src);
    });
    const sizes = (entry: TimingEntry) => ({
      name: entry.name,
      initiatorType: entry.initiatorType,
      transferSize: entry.transferSize,
      encodedBodySize: entry.encodedBodySize,
      decodedBodySize: entry.decodedBodySize,
    });
    const navigation = timed.navigation!;
    const resources = timed.resources.map(sizes);
    const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
    const scripts = resources.filter((resource) => resource.initiatorType === 'script');
    const timings = {
      page: `${stack.publicUrl}/dashboard/sign-in`,
      browser: `Chromium ${browser.version()}`,
      timeToFirstByteMs: Math.round(navigation.responseStart),
      domContentLoadedMs: Math.round(navigation.domContentLoadedEventEnd),
      loadMs: Math.round(navigation.loadEventEnd),
      transferredBytes:
        navigation.transferSize + sum(resources.map((resource) => resource.transferSize)),
      bodyBytes:
        navigation.encodedBodySize + sum(resources.map((resource) => resource.encodedBodySize)),
      documentBytes: navigation.encodedBodySize,
      scriptBytes: sum(scripts.map((script) => script.decodedBodySize)),
      resources,
    };
    console.log(`dashboard sign-in page timings: ${JSON.stringify(timings, null, 2)}`);
    await mkdir(TEST_RESULTS_DIR, { recursive: true });
    await writeFile(
      join(TEST_RESULTS_DIR, 'dashboard-timings.json'),
      `${JSON.stringify(timings, null, 2)}\n`,
    );

    // Every script of the page was loaded and measured, and together they are small.
    expect(scriptSources).toEqual([`${stack.publicUrl}/dashboard/assets/dashboard.js`]);
    expect(scripts.map((script) => script.name)).toEqual(scriptSources);
    expect(timings.scriptBytes).toBeGreaterThan(0);
    expect(timings.scriptBytes).toBeLessThan(20 * 1024);

    expect(await heading(view.page)).toBe('Sign in');
    await inspect(view, 'sign-in');
  });

  it('signs in with an API key typed with the keyboard alone, keeping the key and the session out of reach of scripts', async () => {
    const view = await openView();
    const { page } = view;
    // A signed-out visitor asking for the dashboard is sent to sign in.
    await page.goto('/dashboard');
    expect(new URL(page.url()).pathname).toBe('/dashboard/sign-in');

    const field = page.getByLabel('API key');
    const fieldId = await field.getAttribute('id');
    expect(fieldId).toBeTruthy();
    expect(await tabUntil(page, async () => (await activeElementId(page)) === fieldId, 10)).toBe(
      true,
    );
    await page.keyboard.type(account.apiKey);
    await page.keyboard.press('Enter');
    await page.waitForURL(onPath('/dashboard'));
    await page.getByRole('heading', { name: 'Credits left' }).waitFor();
    expect(await heading(page)).toBe('Usage');

    const stored = await page.evaluate(() => {
      const scope = globalThis as unknown as {
        document: { cookie: string };
        localStorage: {
          length: number;
          key(index: number): string | null;
          getItem(key: string): string | null;
        };
        sessionStorage: {
          length: number;
          key(index: number): string | null;
          getItem(key: string): string | null;
        };
      };
      const dump = (storage: typeof scope.localStorage) =>
        Array.from({ length: storage.length }, (_, index) => {
          const key = storage.key(index) ?? '';
          return `${key}=${storage.getItem(key) ?? ''}`;
        }).join('\n');
      return {
        cookie: scope.document.cookie,
        local: dump(scope.localStorage),
        session: dump(scope.sessionStorage),
      };
    });
    expect(stored.cookie).not.toContain(account.apiKey);
    expect(stored.local).not.toContain(account.apiKey);
    expect(stored.session).not.toContain(account.apiKey);
    // The session cookie exists, but no script can read it (HttpOnly).
    expect(stored.cookie).not.toContain('tamp_session');
    const cookies = await view.context.cookies();
    expect(cookies).toEqual([
      expect.objectContaining({
        name: 'tamp_session',
        path: '/dashboard',
        httpOnly: true,
        sameSite: 'Strict',
      }),
    ]);
    expect(cookies[0]!.value).not.toContain(account.apiKey);
    expect(page.url()).not.toContain(account.apiKey);

    await inspect(view, 'usage');
  });

  it('signs in once with an operator sign-in link, and refuses the same link a second time', async () => {
    const minted = await stack.admin<{ path: string }>(
      'POST',
      `/admin/accounts/${account.accountId}/sign-in-links`,
    );
    expect(minted.status).toBe(201);
    const linkPath = minted.body.data!.path;
    expect(linkPath).toMatch(/^\/dashboard\/sign-in\/link\?token=/);

    const first = await openView();
    expect((await first.page.goto(linkPath))?.status()).toBe(200);
    expect(await heading(first.page)).toBe('Sign in');
    await inspect(first);
    await submit(first, first.page.getByRole('button', { name: 'Continue' }), 303);
    await first.page.waitForURL(onPath('/dashboard'));
    await first.page.getByRole('heading', { name: 'Credits left' }).waitFor();
    expect((await first.context.cookies()).map((cookie) => cookie.name)).toEqual(['tamp_session']);
    await inspect(first);

    const second = await openView();
    await second.page.goto(linkPath);
    await submit(second, second.page.getByRole('button', { name: 'Continue' }), 401);
    await second.page.waitForURL(onPath('/dashboard/sign-in/link'));
    expect(await heading(second.page)).toBe('Sign in');
    expect(await second.page.getByRole('alert').textContent()).toContain(
      'The sign-in link is invalid, used or expired',
    );
    await second.page.getByLabel('API key').waitFor();
    expect(await second.context.cookies()).toEqual([]);
    expectRefusal(second, 401);
    await inspect(second);
  });

  it('creates a key shown once with a working Copy button, and revokes it so the API refuses it', async () => {
    const view = await signedInView();
    const { page } = view;
    await navigate(view, 'API keys', '/dashboard/keys');
    expect(await heading(page)).toBe('API keys');
    await inspect(view, 'keys');

    await submit(view, page.getByRole('button', { name: 'Create a key' }), 200);
    await page.getByRole('heading', { name: 'Your new key' }).waitFor();
    const apiKey = await page.getByLabel('New API key').inputValue();
    expect(apiKey).toMatch(/^sk_live_[A-Za-z0-9]{32,}$/);
    expect(page.url()).not.toContain(apiKey);
    await inspect(view, 'keys-created');

    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor({ timeout: 5_000 });
    expect(
      await page.evaluate(() =>
        (
          globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
        ).navigator.clipboard.readText(),
      ),
    ).toBe(apiKey);

    // The key works against the API.
    expect(await apiStatus(apiKey)).toBe(200);

    // Its row: the revoke button is named after the key's display prefix.
    const revokeButtons = page
      .getByRole('region', { name: 'Active keys' })
      .getByRole('button', { name: /^Revoke key / });
    const labels = await Promise.all(
      (await revokeButtons.all()).map((button) => button.getAttribute('aria-label')),
    );
    const prefixes = labels
      .map((label) => (label ?? '').replace(/^Revoke key /, ''))
      .filter((prefix) => prefix !== '' && apiKey.startsWith(prefix));
    expect(prefixes).toHaveLength(1);
    const prefix = prefixes[0]!;
    await submit(
      view,
      page.getByRole('button', { name: `Revoke key ${prefix}`, exact: true }),
      303,
    );
    await page.getByRole('status').getByText('The key is revoked').waitFor();

    // The API refuses it within 5 seconds.
    await expect.poll(() => apiStatus(apiKey), { timeout: 5_000, interval: 200 }).toBe(401);
    const revoked = page.getByRole('region', { name: 'Revoked keys' });
    await revoked.getByRole('cell', { name: `${prefix}…`, exact: true }).waitFor();
    expect(
      await page
        .getByRole('region', { name: 'Active keys' })
        .getByRole('button', { name: `Revoke key ${prefix}`, exact: true })
        .count(),
    ).toBe(0);
    // The key the test signed in with is still active and still works.
    expect(await apiStatus(account.apiKey)).toBe(200);
    await inspect(view);
  });

  it('sets the default webhook URL, refuses a metadata URL, reveals and rotates the signing secret', async () => {
    const view = await signedInView();
    const { page } = view;
    await navigate(view, 'Webhooks', '/dashboard/webhooks');
    expect(await heading(page)).toBe('Webhooks');
    // The secret is not on the page until asked for.
    expect(await page.content()).not.toContain(account.webhookSecret);
    await inspect(view, 'webhooks');

    const urlField = page.getByLabel('URL', { exact: true });
    await urlField.fill('http://169.254.169.254/');
    await submit(view, page.getByRole('button', { name: 'Save URL' }), 400);
    await page.waitForURL(onPath('/dashboard/webhooks/url'));
    expect(await page.getByRole('alert').textContent()).toContain(
      'This URL cannot receive webhooks',
    );
    const refused = await stack.admin<{ webhookUrl: string | null }>(
      'GET',
      `/admin/accounts/${account.accountId}`,
    );
    expect(refused.body.data!.webhookUrl).toBeNull();
    expectRefusal(view, 400);
    await inspect(view);

    await page.getByLabel('URL', { exact: true }).fill(receiver.url);
    await submit(view, page.getByRole('button', { name: 'Save URL' }), 303);
    await page.getByRole('status').getByText('Webhook URL saved.').waitFor();
    expect(await page.getByLabel('URL', { exact: true }).inputValue()).toBe(receiver.url);
    const saved = await stack.admin<{ webhookUrl: string | null }>(
      'GET',
      `/admin/accounts/${account.accountId}`,
    );
    expect(saved.body.data!.webhookUrl).toBe(receiver.url);

    await submit(view, page.getByRole('button', { name: 'Reveal the secret' }), 200);
    const secretField = page.getByLabel('Current secret', { exact: true });
    expect(await secretField.inputValue()).toBe(account.webhookSecret);
    await inspect(view, 'webhooks-secret');

    await page
      .getByLabel('Keep the current secret signing for')
      .selectOption({ label: 'Stop at once (a leaked secret)' });
    await submit(view, page.getByRole('button', { name: 'Rotate the secret' }), 200);
    await page.getByRole('status').getByText('A new signing secret is in use').waitFor();
    const newSecret = await page.getByLabel('Current secret', { exact: true }).inputValue();
    expect(newSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(newSecret).not.toBe(account.webhookSecret);
    // With no grace period nothing says the old secret still signs.
    expect(await page.getByText('The previous secret also signs').count()).toBe(0);
    const rotated = await stack.admin<{
      webhookSecret: string;
      previousWebhookSecret: unknown;
    }>('GET', `/admin/accounts/${account.accountId}`);
    expect(rotated.body.data!.webhookSecret).toBe(newSecret);
    expect(rotated.body.data!.previousWebhookSecret).toBeNull();
    await inspect(view);

    // A queued job without its own webhookUrl reports to the default URL, signed with the new
    // secret alone.
    const created = await stack.api<{ id: string }>('POST', '/v1/text', {
      token: account.apiKey,
      body: { text: LARGE_TEXT, preset: 'chill' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    const [delivery] = await receiver.waitFor(created.body.data!.id, 1, 60_000);
    expect(signatureVerifies(delivery!, newSecret)).toEqual({ tamp: true, standard: true });
    expect(signatureVerifies(delivery!, account.webhookSecret)).toEqual({
      tamp: false,
      standard: false,
    });
    expect(String(delivery!.headers['webhook-signature']).split(' ')).toHaveLength(1);
  }, 120_000);

  it('shows a job named with markup as inert text, with its result and webhook deliveries', async () => {
    const job = await imageJob();
    // The event reached the receiver before the page is looked at, so the table has a row.
    await receiver.waitFor(job.id, 1);
    const view = await signedInView();
    const { page } = view;
    await navigate(view, 'Jobs', '/dashboard/jobs');
    await page.getByLabel('Type').selectOption('image');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(
      (url) => url.pathname === '/dashboard/jobs' && url.searchParams.get('type') === 'image',
    );
    expect(await page.getByLabel('Type').inputValue()).toBe('image');

    const rows = page.getByRole('table').getByRole('row');
    // The header row, then jobs: every one an image job.
    const types = await Promise.all(
      (await rows.all()).slice(1).map(async (row) => row.getByRole('cell').nth(2).textContent()),
    );
    expect(types.length).toBeGreaterThanOrEqual(1);
    expect(new Set(types)).toEqual(new Set(['image']));
    const row = rows.filter({ has: page.getByRole('link', { name: job.id, exact: true }) });
    expect(await row.count()).toBe(1);
    expect(await row.getByRole('cell').nth(1).textContent()).toBe(MARKUP_FILE_NAME);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);
    await inspect(view, 'jobs');

    await row.getByRole('link', { name: job.id, exact: true }).click();
    await page.waitForURL(onPath(`/dashboard/jobs/${job.id}`));
    expect(await heading(page)).toBe(`Job ${job.id}`);
    expect(await page.getByText('completed', { exact: true }).count()).toBeGreaterThanOrEqual(1);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);

    const download = page.getByRole('link', { name: 'Download the result' });
    const href = await download.getAttribute('href');
    expect(href).toBeTruthy();
    const fetched = await fetch(new URL(href!, page.url()));
    expect(fetched.status).toBe(200);
    const bytes = Buffer.from(await fetched.arrayBuffer());
    expect(bytes.length).toBeGreaterThan(0);

    const deliveries = page.getByRole('region', { name: 'Webhook deliveries' });
    const deliveryRows = deliveries.getByRole('table').getByRole('row');
    expect(await deliveryRows.count()).toBeGreaterThanOrEqual(2);
    const firstDelivery = await deliveryRows.nth(1).getByRole('cell').allTextContents();
    expect(firstDelivery).toEqual([
      '1',
      'job.completed',
      expect.stringMatching(/ UTC$/),
      receiver.url,
      '204',
      'delivered',
    ]);
    await inspect(view, 'job');

    await submit(view, page.getByRole('button', { name: 'Deliver the webhook again' }), 303);
    await page.getByRole('status').getByText('A new delivery is on its way.').waitFor();
    // And the system did deliver it again.
    await receiver.waitFor(job.id, 2);
    await inspect(view);
  }, 120_000);

  it('tries a file: picks a preset, sends a PNG, watches the job finish, and downloads the result', async () => {
    const view = await signedInView();
    const { page } = view;
    await navigate(view, 'Try it', '/dashboard/try');
    await inspect(view, 'try');
    await page.getByLabel('Preset').selectOption('image:thumbnail');
    await page
      .getByLabel('File')
      .setInputFiles({ name: 'tried.png', mimeType: 'image/png', buffer: await tinyPng() });
    await submit(view, page.getByRole('button', { name: 'Compress' }), 303);
    await page.waitForURL((url) => /^\/dashboard\/jobs\/job_[A-Za-z0-9]+$/.test(url.pathname));
    const jobId = page.url().split('/').pop()!;
    // A running job's page reloads itself (dashboard.js); a finished one shows its result.
    await page.getByRole('link', { name: 'Download the result' }).waitFor({ timeout: 60_000 });
    expect(await page.locator('#job-status').textContent()).toBe('completed');
    const href = await page.getByRole('link', { name: 'Download the result' }).getAttribute('href');
    const fetched = await fetch(new URL(href!, page.url()));
    expect(fetched.status).toBe(200);
    expect((await fetched.arrayBuffer()).byteLength).toBeGreaterThan(0);
    // An ordinary job of the account, as the API reads it.
    const read = await stack.api<{ status: string }>('GET', `/v1/jobs/${jobId}`, {
      token: account.apiKey,
    });
    expect(read.body.data?.status).toBe('completed');
    await inspect(view, 'job-tried');
  }, 120_000);

  it("sends a test delivery of the latest finished job's event to the default URL, signed with the current secret", async () => {
    // A finished job of the account (inline: answered completed).
    const inline = await stack.api('POST', '/v1/text', {
      token: account.apiKey,
      body: { text: 'hello   world', preset: 'medium' },
    });
    expect(inline.status).toBe(200);
    const view = await signedInView();
    const { page } = view;
    await navigate(view, 'Webhooks', '/dashboard/webhooks');
    await page.getByLabel('URL', { exact: true }).fill(receiver.url);
    await submit(view, page.getByRole('button', { name: 'Save URL' }), 303);
    const before = receiver.requests.length;
    await submit(view, page.getByRole('button', { name: 'Send a test delivery' }), 200);
    await page
      .getByRole('status')
      .getByText(/HTTP 204 in \d+ ms, delivered\./)
      .waitFor();
    expect(receiver.requests.length).toBe(before + 1);
    const sent = receiver.requests.at(-1)!;
    const secret = (
      await stack.admin<{ webhookSecret: string }>('GET', `/admin/accounts/${account.accountId}`)
    ).body.data!.webhookSecret;
    expect(signatureVerifies(sent, secret).tamp).toBe(true);
    await inspect(view);
  }, 60_000);

  it('shows usage by pipeline, a named chart, and the figures per day behind a keyboard-operable disclosure', async () => {
    await imageJob();
    const view = await signedInView();
    const { page } = view;
    const imageJobs = async (): Promise<number> => {
      const row = page
        .getByRole('region', { name: 'This period by pipeline' })
        .getByRole('row')
        .filter({ has: page.getByRole('rowheader', { name: 'image', exact: true }) });
      if ((await row.count()) !== 1) return 0;
      return Number((await row.getByRole('cell').first().textContent())?.replace(/,/g, ''));
    };
    // Usage is recorded as jobs complete: reload until it shows (bounded).
    await expect
      .poll(
        async () => {
          if ((await imageJobs()) >= 1) return true;
          await page.reload();
          return (await imageJobs()) >= 1;
        },
        { timeout: 15_000, interval: 500 },
      )
      .toBe(true);

    const chart = page.getByRole('img', { name: /^\d+ jobs over \d+ days, at most \d+ in a day$/ });
    expect(await chart.count()).toBe(1);
    const chartName = (await page.locator('svg title#chart-title').textContent()) ?? '';
    expect(Number(/^(\d+) jobs/.exec(chartName)?.[1])).toBeGreaterThanOrEqual(1);

    const summary = page.getByText('Figures per day', { exact: true });
    const details = page.locator('details', { has: summary });
    expect(
      await details.evaluate((element) => (element as unknown as { open: boolean }).open),
    ).toBe(false);
    expect(await details.getByRole('table').isVisible()).toBe(false);
    expect(await tabUntil(page, async () => (await activeElementTag(page)) === 'summary', 30)).toBe(
      true,
    );
    expect(await summary.textContent()).toBe('Figures per day');
    await page.keyboard.press('Enter');
    await expect
      .poll(() => details.evaluate((element) => (element as unknown as { open: boolean }).open), {
        timeout: 5_000,
        interval: 50,
      })
      .toBe(true);
    expect(await details.getByRole('table').isVisible()).toBe(true);
    expect(await details.getByRole('rowheader').count()).toBeGreaterThanOrEqual(1);
    // docs/accounts.md's picture of the dashboard: the usage page once jobs have run.
    await inspect(view, 'usage-with-jobs');
  }, 90_000);

  it('signs out: the sign-in page, no way back, and the old cookie refused in another browser', async () => {
    const view = await signedInView();
    const { page } = view;
    const [session] = (await view.context.cookies()).filter(
      (cookie) => cookie.name === 'tamp_session',
    );
    expect(session).toBeDefined();

    // Control: before sign-out, the copied cookie opens the dashboard in another context.
    const replayed = async (cookie: Cookie): Promise<string> => {
      const other = await openView();
      await other.context.addCookies([cookie]);
      expect((await other.context.cookies()).map((each) => each.value)).toEqual([cookie.value]);
      await other.page.goto('/dashboard');
      return new URL(other.page.url()).pathname;
    };
    expect(await replayed(session!)).toBe('/dashboard');

    await submit(view, page.getByRole('button', { name: 'Sign out' }), 303);
    await page.waitForURL(onPath('/dashboard/sign-in'));
    expect(await heading(page)).toBe('Sign in');
    expect(await view.context.cookies()).toEqual([]);
    await inspect(view);

    // Back to the page seen while signed in: it is asked for again and refused.
    await page.goBack();
    await page.waitForURL(onPath('/dashboard/sign-in'));
    expect(await page.getByRole('heading', { name: 'Credits left' }).count()).toBe(0);
    await page.goto('/dashboard');
    expect(new URL(page.url()).pathname).toBe('/dashboard/sign-in');
    expect(await heading(page)).toBe('Sign in');

    // The session is over in billing, not only forgotten by this browser.
    expect(await replayed(session!)).toBe('/dashboard/sign-in');
  });

  it('signs every browser out with "Sign out everywhere"', async () => {
    const [here, elsewhere] = [await signedInView(), await signedInView()];
    await navigate(here, 'API keys', '/dashboard/keys');
    await submit(here, here.page.getByRole('button', { name: 'Sign out everywhere' }), 303);
    await here.page.waitForURL(onPath('/dashboard/sign-in'));
    await elsewhere.page.goto('/dashboard');
    expect(new URL(elsewhere.page.url()).pathname).toBe('/dashboard/sign-in');
    await inspect(here);
  });
});
