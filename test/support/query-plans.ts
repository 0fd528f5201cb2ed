import type { CommandStartedEvent, Db, Document, MongoClient } from 'mongodb';

/** One query a client sent: the collection and the filter that selects documents. */
export interface RecordedQuery {
  command: string;
  collection: string;
  filter: Document;
}

/**
 * Records the document-selecting filter of every find, update, delete, findAndModify, count and
 * aggregate ($match) a client sends. The client must be connected with `monitorCommands`.
 */
export function recordQueries(client: MongoClient): { queries: RecordedQuery[]; stop(): void } {
  const queries: RecordedQuery[] = [];
  const listener = (event: CommandStartedEvent) => {
    for (const filter of filtersOf(event.commandName, event.command)) {
      queries.push({
        command: event.commandName,
        collection: String(event.command[event.commandName]),
        filter,
      });
    }
  };
  client.on('commandStarted', listener);
  return { queries, stop: () => client.off('commandStarted', listener) };
}

function filtersOf(name: string, command: Document): Document[] {
  switch (name) {
    case 'find':
      return [command.filter ?? {}];
    case 'update':
      return (command.updates as Document[]).map((update) => update.q);
    case 'delete':
      return (command.deletes as Document[]).map((deletion) => deletion.q);
    case 'findAndModify':
      return [command.query ?? {}];
    case 'count':
      return [command.query ?? {}];
    case 'aggregate': {
      const first = (command.pipeline as Document[])[0];
      return [first?.$match ?? {}];
    }
    default:
      return [];
  }
}

/**
 * The recorded queries whose plan reads their whole collection, one line each (command,
 * collection, filter shape), deduplicated by shape. Works on MongoDB (a COLLSCAN stage) and on
 * FerretDB, whose explain answers with PostgreSQL's plan (a Seq Scan node).
 */
export async function queriesThatScan(
  db: Db,
  queries: readonly RecordedQuery[],
): Promise<string[]> {
  const scanning = new Set<string>();
  const seen = new Set<string>();
  for (const query of queries) {
    const shape = `${query.command} ${query.collection} ${JSON.stringify(shapeOf(query.filter))}`;
    if (seen.has(shape)) continue;
    seen.add(shape);
    const explained = await db.command({
      explain: { find: query.collection, filter: query.filter },
      verbosity: 'queryPlanner',
    });
    if (readsWholeCollection(explained.queryPlanner)) scanning.add(shape);
  }
  return [...scanning].sort();
}

/** The filter with every value replaced by its type: what the query asks, not for what. */
function shapeOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shapeOf);
  if (value instanceof Date) return 'date';
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, shapeOf(inner)]));
  }
  return typeof value;
}

function readsWholeCollection(plan: unknown): boolean {
  if (plan === null || typeof plan !== 'object') return false;
  const node = plan as Record<string, unknown>;
  if (node['Node Type'] === 'Seq Scan' || node.stage === 'COLLSCAN') return true;
  return Object.values(node).some((child) =>
    Array.isArray(child) ? child.some(readsWholeCollection) : readsWholeCollection(child),
  );
}
