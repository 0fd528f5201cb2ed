import { readFile } from 'node:fs/promises';

/** One span as the collector's file exporter wrote it (OTLP/JSON), with its service. */
export interface CollectedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's numbering: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** OTLP's numbering: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Record<string, string | number | boolean | string[]>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
export const STATUS_ERROR = 2;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpTracesData {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        startTimeUnixNano: string;
        endTimeUnixNano: string;
        status?: { code?: number };
        attributes?: OtlpAttribute[];
      }[];
    }[];
  }[];
}

function attributeValue(value: OtlpValue): string | number | boolean | string[] {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return (value.arrayValue?.values ?? []).map((item) => String(attributeValue(item)));
}

function attributesOf(list: OtlpAttribute[] | undefined): CollectedSpan['attributes'] {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, attributeValue(value)]));
}

/** Every span in the file the collector writes: one `TracesData` JSON object per line. */
export async function readCollectedSpans(file: string): Promise<CollectedSpan[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return [];
  }
  const spans: CollectedSpan[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let data: OtlpTracesData;
    try {
      data = JSON.parse(line) as OtlpTracesData;
    } catch {
      continue; // a line the collector is still writing
    }
    for (const resourceSpans of data.resourceSpans ?? []) {
      const service = String(
        attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '?',
      );
      for (const scope of resourceSpans.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          spans.push({
            service,
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId ?? '',
            name: span.name,
            kind: span.kind ?? 0,
            statusCode: span.status?.code ?? 0,
            startTimeUnixNano: BigInt(span.startTimeUnixNano),
            endTimeUnixNano: BigInt(span.endTimeUnixNano),
            attributes: attributesOf(span.attributes),
          });
        }
      }
    }
  }
  return spans;
}

/** Spans whose parent is not among `spans`: a trace is whole when there are none but its root. */
export function orphansOf(spans: readonly CollectedSpan[]): CollectedSpan[] {
  const ids = new Set(spans.map((span) => span.spanId));
  return spans.filter((span) => span.parentSpanId !== '' && !ids.has(span.parentSpanId));
}

/** One line per span, indented under its parent, children in start order. */
export function renderTraceTree(spans: readonly CollectedSpan[]): string {
  const children = new Map<string, CollectedSpan[]>();
  for (const span of spans) {
    const siblings = children.get(span.parentSpanId) ?? [];
    siblings.push(span);
    children.set(span.parentSpanId, siblings);
  }
  for (const siblings of children.values()) {
    siblings.sort((a, b) => (a.startTimeUnixNano < b.startTimeUnixNano ? -1 : 1));
  }
  const kinds = ['', '', 'server', 'client', 'producer', 'consumer'];
  const lines: string[] = [];
  const visit = (span: CollectedSpan, depth: number) => {
    const kind = kinds[span.kind] ? ` (${kinds[span.kind]})` : '';
    const error = span.statusCode === STATUS_ERROR ? ' [error]' : '';
    lines.push(`${'  '.repeat(depth)}${span.service}: ${span.name}${kind}${error}`);
    for (const child of children.get(span.spanId) ?? []) visit(child, depth + 1);
  };
  for (const root of orphansOf(spans).concat(children.get('') ?? [])) visit(root, 0);
  return lines.join('\n');
}
