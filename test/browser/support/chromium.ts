import { existsSync, mkdirSync } from 'node:fs';
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive } from '@tamp/scripts/infra/kubernetes/processes';
import { PROJECT_ROOT, provisionTools, TOOLS_DIR, toolPath } from '@tamp/scripts/infra/provision';
import { type Browser, chromium, type Page } from 'playwright-core';

/**
 * Real Chromium for the dashboard's end-to-end tests: Debian's `chromium` package (the `browser`
 * tools profile, linked as `.tools/bin/chromium`), driven by playwright-core over the DevTools
 * protocol. playwright-core never downloads a browser of its own.
 */

/** Artifacts of browser tests (screenshots, network logs): git-ignored, never committed. */
export const TEST_RESULTS_DIR = join(PROJECT_ROOT, 'test-results');
export const SCREENSHOTS_DIR = join(TEST_RESULTS_DIR, 'screenshots');

/**
 * The `--disable-features` list Chromium gets. Chromium honours only the LAST `--disable-features`
 * on its command line (measured: with a second one, playwright-core's NetworkTimeServiceQuerying
 * came back and asked clients2.google.com for the time), so this list repeats every feature
 * playwright-core 1.65 disables itself, and adds ours. harness.test.ts reads chrome://version and
 * fails if a newer playwright-core disables a feature missing here.
 */
export const DISABLED_FEATURES = [
  // playwright-core's own list (chromiumSwitches.ts).
  'AvoidUnnecessaryBeforeUnloadCheckSync',
  'DestroyProfileOnBrowserClose',
  'HttpsUpgrades',
  'HttpsFirstBalancedModeAutoEnable',
  'LensOverlay',
  'MediaRouter',
  'PaintHolding',
  'ThirdPartyStoragePartitioning',
  'AvoidCorsURLLoaderRestartOnRedirect',
  'TcpPortRandomizationWin',
  'OptimizationHints',
  'NetworkTimeServiceQuerying',
  'AimEnabled',
  'PreconnectToSearch',
  'msForceBrowserSignIn',
  'msEdgeUpdateLaunchServicesPreferredVersion',
  // Ours: services that talk to Google on their own.
  'Translate',
  'OptimizationHintsFetching',
  'AutofillServerCommunication',
  'DialMediaRouteProvider',
];

/**
 * Switches added to playwright-core's defaults (which already carry --disable-background-networking,
 * --disable-component-update, --disable-sync, --no-first-run, --disable-default-apps,
 * --disable-breakpad; repeated here so this list states the whole policy). The two loopback
 * redirections were found and checked with a NetLog of Chromium 156; harness.test.ts keeps
 * checking the whole set the same way (over the seconds a test run lasts, not hours).
 * Not here: --metrics-recording-only (playwright-core passes it) records UMA and only drops the
 * upload; a Chromium build without consent uploads nothing anyway.
 */
export const CHROMIUM_ARGS = [
  '--disable-background-networking',
  '--disable-component-update',
  // Chromium 156 still asks update.googleapis.com for the Optimization Guide's model manifest
  // at startup with both switches above; pointing the updater's source at a closed loopback port
  // keeps it off the network.
  '--component-updater=url-source=http://127.0.0.2:1/',
  // IdentityManager posts accounts.google.com/ListAccounts at startup and on a timer; no switch
  // of 156 turns it off (playwright-core's SkipListAccountsWithoutGaiaCookies is newer), so Gaia
  // is pointed at a closed loopback port too. 127.0.0.2, not 127.0.0.1: Chromium makes the Gaia
  // host an isolated origin (whatever the port), and the servers under test listen on 127.0.0.1.
  '--gaia-url=http://127.0.0.2:1',
  '--disable-sync',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-default-apps',
  '--disable-domain-reliability',
  '--no-pings',
  '--disable-breakpad',
  `--disable-features=${DISABLED_FEATURES.join(',')}`,
  // Belt and braces: any host name but loopback fails to resolve inside Chromium, so a request
  // nobody foresaw never leaves the machine (it still shows in a NetLog). Chromium's error-page
  // DNS probe (a lookup of google.com after a main-frame navigation fails to resolve) bypasses
  // these rules, so tests navigate to loopback addresses only.
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE *.localhost, EXCLUDE 127.*, EXCLUDE [::1]',
];

export interface LaunchChromiumOptions {
  /** Further switches, after ours (for Chromium the last of a repeated switch wins). */
  args?: string[];
  /** Writes Chromium's NetLog here (complete once the browser is closed); see netlog.ts. */
  netLogPath?: string;
}

/** Launches headless Debian Chromium, provisioning it first if `.tools/bin/chromium` is missing. */
export async function launchChromium(options: LaunchChromiumOptions = {}): Promise<Browser> {
  await ensureChromium();
  // Chromium's sandbox refuses to start as root ("Running as root without --no-sandbox is not
  // supported"), and this machine, its containers and CI run tests as root. Any other user keeps
  // the sandbox. playwright-core adds --no-sandbox itself unless chromiumSandbox is true.
  const runningAsRoot = process.getuid?.() === 0;
  const args = [...CHROMIUM_ARGS];
  if (options.netLogPath !== undefined) {
    await mkdir(join(options.netLogPath, '..'), { recursive: true });
    args.push(`--log-net-log=${options.netLogPath}`);
  }
  args.push(...(options.args ?? []));
  return chromium.launch({
    executablePath: toolPath('chromium'),
    headless: true,
    chromiumSandbox: !runningAsRoot,
    args,
    timeout: 60_000,
  });
}

/**
 * Provisions the `browser` profile when Chromium is missing: test files may run at once in
 * several processes, so one provisions (apt-get takes dpkg's lock; two at once would fail)
 * while the others wait for it, for a bounded time. The lock names its owner's pid, so a lock
 * left by a killed run is taken over.
 */
async function ensureChromium(): Promise<void> {
  if (existsSync(toolPath('chromium'))) return;
  await mkdir(TOOLS_DIR, { recursive: true });
  const lockPath = join(TOOLS_DIR, 'browser-provision.lock');
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      const lock = await open(lockPath, 'wx');
      try {
        await lock.writeFile(String(process.pid));
        await lock.close();
        if (!existsSync(toolPath('chromium'))) await provisionTools('browser');
        return;
      } finally {
        await rm(lockPath, { force: true });
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (existsSync(toolPath('chromium'))) return;
    const owner = Number(await readFile(lockPath, 'utf8').catch(() => ''));
    if (Number.isInteger(owner) && owner > 0 && !isAlive(owner)) {
      await rm(lockPath, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`Chromium is still being provisioned by pid ${owner} after 10 minutes`);
    }
    await sleep(500);
  }
}

/** Where a screenshot goes: test-results/screenshots/NAME.png (the folder is created). */
export function screenshotPath(name: string): string {
  mkdirSync(SCREENSHOTS_DIR, { recursive: true });
  const safe = name.replace(/\.png$/, '').replace(/[^A-Za-z0-9._-]+/g, '-');
  return join(SCREENSHOTS_DIR, `${safe}.png`);
}

export type PageProblemKind = 'console-error' | 'csp-violation' | 'page-error' | 'crash';

export interface PageProblem {
  kind: PageProblemKind;
  text: string;
  /** url:line of the console message, when Chromium gives one. */
  location?: string;
}

/** A `securitypolicyviolation` event, as the page saw it. */
export interface CspViolation {
  effectiveDirective: string;
  blockedURI: string;
  sourceFile: string;
  lineNumber: number;
  disposition: string;
}

export interface PageProblems {
  /** Console errors, CSP violations (Chromium reports each in the console), uncaught errors. */
  readonly problems: PageProblem[];
  /** The same CSP violations from the page's own `securitypolicyviolation` events. */
  readonly cspViolations: CspViolation[];
}

/**
 * Records what a page gets wrong, for a test to assert that nothing did: console errors, CSP
 * violations, uncaught exceptions and renderer crashes. Call once per page, before navigating
 * (the CSP listener is installed in every document the page loads). Console and binding events
 * arrive asynchronously: poll (`expect.poll`) rather than read once right after an action.
 */
export async function collectPageProblems(page: Page): Promise<PageProblems> {
  const problems: PageProblem[] = [];
  const cspViolations: CspViolation[] = [];
  page.on('console', (message) => {
    const text = message.text();
    const { url, lineNumber } = message.location();
    const location = url === '' ? undefined : `${url}:${lineNumber}`;
    if (text.includes('Content Security Policy')) {
      problems.push({ kind: 'csp-violation', text, location });
    } else if (message.type() === 'error') {
      problems.push({ kind: 'console-error', text, location });
    }
  });
  page.on('pageerror', (error) => problems.push({ kind: 'page-error', text: String(error) }));
  page.on('crash', () => problems.push({ kind: 'crash', text: 'the renderer crashed' }));
  // A DevTools binding and a document-start script: neither is subject to the page's CSP.
  await page.exposeBinding('__tampReportCspViolation', (_source, violation: CspViolation) => {
    cspViolations.push(violation);
  });
  await page.addInitScript(() => {
    type Report = (violation: unknown) => void;
    interface ViolationEvent {
      effectiveDirective: string;
      blockedURI: string;
      sourceFile: string;
      lineNumber: number;
      disposition: string;
    }
    const scope = globalThis as unknown as {
      __tampReportCspViolation: Report;
      addEventListener(type: string, listener: (event: ViolationEvent) => void): void;
    };
    scope.addEventListener('securitypolicyviolation', (event) => {
      scope.__tampReportCspViolation({
        effectiveDirective: event.effectiveDirective,
        blockedURI: event.blockedURI,
        sourceFile: event.sourceFile,
        lineNumber: event.lineNumber,
        disposition: event.disposition,
      });
    });
  });
  return { problems, cspViolations };
}
