import { readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAccessibility } from './support/accessibility';
import {
  collectPageProblems,
  DISABLED_FEATURES,
  launchChromium,
  screenshotPath,
  TEST_RESULTS_DIR,
} from './support/chromium';
import { isLoopbackHost, netLogHosts } from './support/netlog';

/**
 * Smoke test of the browser harness itself, on pages served here: real Debian Chromium starts,
 * obeys a strict CSP, is driven by keyboard, is checked by axe through that CSP, takes a
 * screenshot with real fonts, and reaches nothing but this machine's loopback.
 */

const STRICT_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const page = (title: string, body: string): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/app.css">
</head>
<body>
<main>
<h1>${title}</h1>
${body}
</main>
</body>
</html>
`;

const ROUTES: Record<string, { type: string; body: string }> = {
  '/': {
    type: 'text/html',
    body: page(
      'Account settings',
      `<p id="external-status">external script did not run</p>
<p id="inline-status">inline script did not run</p>
<form action="/account" method="post">
<p><label for="name">Name</label> <input id="name" name="name" autocomplete="name"></p>
<p><label for="email">Email</label> <input id="email" name="email" type="email" autocomplete="email"></p>
<p><label for="plan">Plan</label> <select id="plan" name="plan"><option>Free</option><option>Pro</option></select></p>
<p><button id="save" type="submit">Save</button></p>
</form>
<script src="/app.js"></script>
<script>document.getElementById('inline-status').textContent = 'inline script ran';</script>`,
    ),
  },
  '/bad': {
    type: 'text/html',
    body: page('Unlabelled field', '<form action="/search"><input id="query" name="q"></form>'),
  },
  '/broken': {
    type: 'text/html',
    body: page('Broken script', '<script src="/broken.js"></script>'),
  },
  '/app.js': {
    type: 'text/javascript',
    body: "document.getElementById('external-status').textContent = 'external script ran';\n",
  },
  '/broken.js': {
    type: 'text/javascript',
    body: "console.error('broken.js logged an error');\nthrow new Error('broken.js threw');\n",
  },
  '/app.css': {
    type: 'text/css',
    body: `body { font-family: Arial, sans-serif; color: #1a1a1a; background: #ffffff; margin: 2rem; }
label { display: inline-block; min-width: 5rem; }
button { color: #ffffff; background: #0b5394; border: 0; padding: 0.5rem 1rem; }
`,
  },
};

let server: Server;
let baseUrl: string;
let browser: Browser;
let launchMs: number;
const netLogPath = join(TEST_RESULTS_DIR, 'netlog', `harness-${process.pid}.json`);

beforeAll(async () => {
  server = createServer((request, response) => {
    const route = ROUTES[new URL(request.url ?? '/', 'http://127.0.0.1').pathname];
    if (route === undefined) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    response.writeHead(200, {
      'content-type': `${route.type}; charset=utf-8`,
      'content-security-policy': STRICT_CSP,
    });
    response.end(route.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const started = performance.now();
  browser = await launchChromium({ netLogPath });
  launchMs = performance.now() - started;
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
});

/** A fresh page in its own context, with its problems recorded from the first document on. */
async function openPage(): Promise<{
  page: Page;
  problems: Awaited<ReturnType<typeof collectPageProblems>>;
}> {
  const context = await browser.newContext({ viewport: { width: 800, height: 600 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  return { page, problems: await collectPageProblems(page) };
}

const activeElementId = (page: Page): Promise<string> =>
  page.evaluate(() => {
    const scope = globalThis as unknown as { document: { activeElement: { id: string } | null } };
    return scope.document.activeElement?.id ?? '';
  });

describe('browser harness (Debian Chromium via playwright-core)', () => {
  it('runs the external script, blocks the inline one under the CSP, and reports only that', async () => {
    const { page, problems } = await openPage();
    const started = performance.now();
    const response = await page.goto(`${baseUrl}/`);
    const loadMs = performance.now() - started;
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toBe(STRICT_CSP);
    console.info(
      `Chromium ${browser.version()}: launch ${launchMs.toFixed(0)} ms, first smoke-page load ${loadMs.toFixed(0)} ms`,
    );

    expect(await page.textContent('#external-status')).toBe('external script ran');
    expect(await page.textContent('#inline-status')).toBe('inline script did not run');

    await expect
      .poll(() => problems.cspViolations, { timeout: 5_000, interval: 50 })
      .toEqual([
        expect.objectContaining({
          effectiveDirective: 'script-src-elem',
          blockedURI: 'inline',
          disposition: 'enforce',
        }),
      ]);
    await expect
      .poll(() => problems.problems, { timeout: 5_000, interval: 50 })
      .toEqual([
        expect.objectContaining({
          kind: 'csp-violation',
          text: expect.stringContaining("script-src 'self'"),
        }),
      ]);

    await page.screenshot({ path: screenshotPath('harness-account-settings'), fullPage: true });
    const png = await readFile(screenshotPath('harness-account-settings'));
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(png.length).toBeGreaterThan(5_000);
    await page.context().close();
  });

  it('renders text with the provisioned fonts', async () => {
    const { page } = await openPage();
    await page.goto(`${baseUrl}/`);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('DOM.enable');
    await cdp.send('CSS.enable');
    const { root } = await cdp.send('DOM.getDocument');
    const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: 'h1' });
    const { fonts } = await cdp.send('CSS.getPlatformFontsForNode', { nodeId });
    // Arial is asked for; fontconfig hands Chromium its metric-compatible stand-in.
    expect(fonts).toEqual([expect.objectContaining({ familyName: 'Liberation Sans' })]);
    expect(fonts[0]!.glyphCount).toBe('Account settings'.length);
    await page.context().close();
  });

  it('moves keyboard focus through the form controls in document order', async () => {
    const { page, problems } = await openPage();
    await page.goto(`${baseUrl}/`);
    expect(await page.getByLabel('Email').getAttribute('id')).toBe('email');
    const focused: string[] = [];
    for (let press = 0; press < 4; press += 1) {
      await page.keyboard.press('Tab');
      focused.push(await activeElementId(page));
    }
    expect(focused).toEqual(['name', 'email', 'plan', 'save']);
    expect(problems.problems.filter((problem) => problem.kind !== 'csp-violation')).toEqual([]);
    await page.context().close();
  });

  it('injects axe through the CSP that refuses a script tag, and finds the page clean', async () => {
    const { page, problems } = await openPage();
    await page.goto(`${baseUrl}/`);
    await expect(page.addScriptTag({ content: 'globalThis.injected = true;' })).rejects.toThrow(
      /Content Security Policy directive 'script-src 'self''/,
    );
    expect(await page.evaluate(() => 'injected' in globalThis)).toBe(false);
    await expect
      .poll(() => problems.cspViolations.length, { timeout: 5_000, interval: 50 })
      .toBe(2);

    expect(await checkAccessibility(page)).toEqual([]);
    expect(await page.evaluate(() => 'axe' in globalThis)).toBe(true);
    await page.context().close();
  });

  it('reports a form field without a label as a critical violation', async () => {
    const { page, problems } = await openPage();
    await page.goto(`${baseUrl}/bad`);
    const violations = await checkAccessibility(page);
    expect(violations).toEqual([
      expect.objectContaining({
        id: 'label',
        impact: 'critical',
        nodes: [expect.objectContaining({ target: '#query' })],
      }),
    ]);
    await page.screenshot({ path: screenshotPath('harness-unlabelled-field') });
    expect(problems.problems).toEqual([]);
    await page.context().close();
  });

  it('collects console errors and uncaught exceptions', async () => {
    const { page, problems } = await openPage();
    await page.goto(`${baseUrl}/broken`);
    await expect
      .poll(() => problems.problems.map(({ kind, text }) => ({ kind, text })), {
        timeout: 5_000,
        interval: 50,
      })
      .toEqual([
        { kind: 'console-error', text: 'broken.js logged an error' },
        { kind: 'page-error', text: expect.stringContaining('broken.js threw') },
      ]);
    await page.context().close();
  });

  it("keeps playwright-core's disabled features while adding its own", async () => {
    const { page } = await openPage();
    await page.goto('chrome://version');
    const commandLine = (await page.textContent('#command_line')) ?? '';
    const lists = [...commandLine.matchAll(/--disable-features=(\S+)/g)].map((match) =>
      match[1]!.split(','),
    );
    expect(lists.length).toBeGreaterThan(0);
    // Chromium takes the last --disable-features; it must hold every one before it.
    const effective = lists.at(-1)!;
    expect(effective).toEqual(DISABLED_FEATURES);
    for (const earlier of lists.slice(0, -1)) {
      expect(earlier.filter((feature) => !effective.includes(feature))).toEqual([]);
    }
    await page.context().close();
  });

  it('reaches no host but loopback (from its NetLog, after the browser closes)', async () => {
    // Keep the browser up a little past its startup, when the background requests are made.
    const { page } = await openPage();
    await page.goto(`${baseUrl}/`);
    await page.waitForTimeout(2_000);
    await browser.close();
    const hosts = [...(await netLogHosts(netLogPath))];
    expect(hosts).toContain('127.0.0.1');
    expect(hosts.filter((host) => !isLoopbackHost(host))).toEqual([]);
    // Kept as an artifact only when this fails.
    await rm(netLogPath);
  });
});
