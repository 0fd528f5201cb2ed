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
 * One line of a service's output for people watching `npm start`: a pino JSON line becomes
 * `LEVEL message key=value…`, with the service it names (its `service` field, which tells the
 * services of the one process apart); anything else passes through unchanged.
 */
export function readLogLine(line: string): { text: string; service: string | undefined } {
  if (!line.startsWith('{')) return { text: line, service: undefined };
  try {
    const record = JSON.parse(line) as Record<string, unknown>;
    const level = LEVELS[Number(record.level)] ?? 'INFO ';
    const extras = Object.entries(record)
      .filter(([key]) => !QUIET_KEYS.has(key))
      .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
    return {
      text: [level, String(record.msg ?? ''), ...extras].join(' '),
      service: typeof record.service === 'string' ? record.service : undefined,
    };
  } catch {
    return { text: line, service: undefined };
  }
}

export function prefixFor(name: string, width: number): string {
  return `${name.padEnd(width)} |`;
}
