import { readFile } from 'node:fs/promises';

/**
 * Reads a Chromium NetLog (`launchChromium({ netLogPath })`, complete once the browser is closed)
 * and returns every host Chromium tried to reach: URL requests, host resolutions and DNS
 * queries, whether or not they succeeded. The browser's own background requests are in it too,
 * which page-level request events never show.
 */
export async function netLogHosts(path: string): Promise<Set<string>> {
  const text = await readFile(path, 'utf8');
  let log: NetLog;
  try {
    log = JSON.parse(text) as NetLog;
  } catch {
    // A browser that did not shut down cleanly leaves the events array unterminated.
    log = JSON.parse(`${text.replace(/,?\s*$/, '')}]}`) as NetLog;
  }
  const hosts = new Set<string>();
  for (const event of log.events) {
    const params = event.params ?? {};
    for (const key of ['url', 'original_url', 'host', 'hostname'] as const) {
      const value = params[key];
      if (typeof value === 'string' && value !== '') hosts.add(hostOf(value));
    }
  }
  return hosts;
}

/** Loopback as Chromium names it: 127.0.0.0/8, ::1, localhost and *.localhost. */
export function isLoopbackHost(host: string): boolean {
  return (
    /^127(\.\d{1,3}){3}$/.test(host) ||
    host === '[::1]' ||
    host === '::1' ||
    host === 'localhost' ||
    host.endsWith('.localhost')
  );
}

interface NetLog {
  events: Array<{ params?: Partial<Record<string, unknown>> }>;
}

/** `https://a.b/c`, `https://a.b` (a resolver request), `a.b:443` or `a.b` -> `a.b`. */
function hostOf(value: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  try {
    return new URL(withScheme).hostname;
  } catch {
    return value;
  }
}
