const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};
const QUIET_KEYS = new Set(['level', 'time', 'pid', 'hostname', 'service', 'msg']);

/**
 * Turns one pino JSON line into `LEVEL message key=value…` for people watching `npm start`;
 * anything that is not pino JSON passes through unchanged.
 */
export function formatLogLine(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const record = JSON.parse(line) as Record<string, unknown>;
    const level = LEVELS[Number(record.level)] ?? 'INFO ';
    const extras = Object.entries(record)
      .filter(([key]) => !QUIET_KEYS.has(key))
      .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
    return [level, String(record.msg ?? ''), ...extras].join(' ');
  } catch {
    return line;
  }
}

/**
 * The service a pino JSON line names (its `service` field), for the one process that runs them
 * all; undefined for anything else.
 */
export function serviceOfLogLine(line: string): string | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const service = (JSON.parse(line) as { service?: unknown }).service;
    return typeof service === 'string' ? service : undefined;
  } catch {
    return undefined;
  }
}

export function prefixFor(name: string, width: number): string {
  return `${name.padEnd(width)} |`;
}
