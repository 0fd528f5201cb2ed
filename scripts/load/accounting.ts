import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createTopology, creditCost, PIPELINES, type Pipeline } from '@tamp/proto';
import { MongoClient } from 'mongodb';
import type { Creation } from './traffic';

/**
 * The books after a run, read where each fact lives (the public API, billing's ledger and the
 * account document, the EVENTS stream), and the invariants they must satisfy: nothing lost,
 * every job terminal once, charged once, refunded once if it failed, and credits exact.
 */
export interface Accounting {
  jobs: number;
  completed: number;
  failed: number;
  unfinished: number;
  /** Accepted by the API but absent from the job list: lost. */
  lost: number;
  /**
   * In the job list, but no answer the client got named it (a 503 without the job id, a lost
   * answer): a job the client cannot know it has, and may pay for twice.
   */
  unanswered: number;
  /** Named by a failed creation as not created (or settled so when read), yet existing. */
  createdThoughToldNot: number;
  /** Named with outcome unknown and never settled by reading them. */
  unsettled: number;
  /** Jobs with other than one terminal event (none, or two). */
  eventMismatches: number;
  /** Jobs with other than one applied reservation. */
  reservationMismatches: number;
  /** Failed jobs without exactly one refund, or completed ones with a refund. */
  refundMismatches: number;
  /** Reservations whose job does not exist and that were not released. */
  orphanReservations: number;
  creditsCharged: number;
  /** What the completed jobs cost: must equal creditsCharged. */
  creditsOfCompletedJobs: number;
  /** Usage requests per pipeline against completed jobs per pipeline (must match). */
  usageMismatches: string[];
}

export interface BooksSource {
  baseUrl: string;
  adminUrl: string;
  adminToken: string;
  apiKey: string;
  accountId: string;
  mongoUrl: string;
  natsUrl: string;
  database?: string;
  namespace?: string;
}

interface ListedJob {
  id: string;
  type: Pipeline;
  status: string;
  metrics?: { inputSize: number };
}

export async function accountCredits(source: BooksSource): Promise<number> {
  const response = await fetch(`${source.adminUrl}/admin/accounts/${source.accountId}`, {
    headers: { authorization: `Bearer ${source.adminToken}` },
  });
  const body = (await response.json()) as { data: { credits: { available: number } } };
  return body.data.credits.available;
}

export async function auditBooks(
  source: BooksSource,
  creations: readonly Creation[],
  creditsBefore: number,
): Promise<Accounting> {
  const jobs = await listAllJobs(source);
  const byId = new Map(jobs.map((job) => [job.id, job]));
  const accepted = new Set(creations.flatMap((creation) => creation.jobId ?? []));
  const completed = jobs.filter((job) => job.status === 'completed');
  const failed = jobs.filter((job) => job.status === 'failed');
  const events = await terminalEvents(source);
  const ledger = await ledgerOf(source);
  const creditsOfCompletedJobs = completed.reduce(
    (sum, job) => sum + creditCost(job.type, job.metrics?.inputSize ?? 0),
    0,
  );
  return {
    jobs: jobs.length,
    completed: completed.length,
    failed: failed.length,
    unfinished: jobs.length - completed.length - failed.length,
    lost: [...accepted].filter((id) => !byId.has(id)).length,
    unanswered: jobs.filter((job) => !accepted.has(job.id)).length,
    createdThoughToldNot: creations
      .flatMap((creation) => creation.notCreated)
      .filter((jobId) => byId.has(jobId)).length,
    unsettled: creations.flatMap((creation) => creation.unsettled).length,
    eventMismatches: jobs.filter((job) => {
      const seen = events.get(job.id) ?? { completed: 0, failed: 0 };
      return job.status === 'completed'
        ? seen.completed !== 1 || seen.failed !== 0
        : job.status === 'failed'
          ? seen.failed !== 1 || seen.completed !== 0
          : seen.completed + seen.failed !== 0;
    }).length,
    reservationMismatches: jobs.filter((job) => ledger.reserved.get(job.id) !== 1).length,
    refundMismatches: jobs.filter(
      (job) => (ledger.refunded.get(job.id) ?? 0) !== (job.status === 'failed' ? 1 : 0),
    ).length,
    orphanReservations: [...ledger.reserved.keys()].filter(
      (jobId) => !byId.has(jobId) && ledger.refunded.get(jobId) !== 1,
    ).length,
    creditsCharged: creditsBefore - (await accountCredits(source)),
    creditsOfCompletedJobs,
    usageMismatches: await usageMismatches(source, completed),
  };
}

/**
 * Side effects settle after the last job is terminal (billing counts usage from events, a
 * refund may be retried by the reconciler): audits until the books are exact or `timeoutMs`
 * passes, and returns the last audit.
 */
export async function auditSettledBooks(
  source: BooksSource,
  creations: readonly Creation[],
  creditsBefore: number,
  timeoutMs: number,
): Promise<Accounting> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const books = await auditBooks(source, creations, creditsBefore);
    if (violations(books).length === 0 || Date.now() > deadline) return books;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
}

/** The invariants, as messages; empty when the books are exact. */
export function violations(books: Accounting): string[] {
  const problems: string[] = [];
  if (books.lost > 0) problems.push(`${books.lost} accepted jobs are missing`);
  if (books.unanswered > 0) problems.push(`${books.unanswered} jobs no answer named`);
  if (books.createdThoughToldNot > 0)
    problems.push(`${books.createdThoughToldNot} jobs exist that an answer said were not created`);
  if (books.unsettled > 0)
    problems.push(`${books.unsettled} creations of unknown outcome never settled when read`);
  if (books.unfinished > 0) problems.push(`${books.unfinished} jobs never finished`);
  if (books.eventMismatches > 0)
    problems.push(`${books.eventMismatches} jobs without exactly one terminal event`);
  if (books.reservationMismatches > 0)
    problems.push(`${books.reservationMismatches} jobs without exactly one reservation`);
  if (books.refundMismatches > 0) problems.push(`${books.refundMismatches} jobs refunded wrongly`);
  if (books.orphanReservations > 0)
    problems.push(`${books.orphanReservations} reservations without a job were kept`);
  if (books.creditsCharged !== books.creditsOfCompletedJobs) {
    problems.push(
      `charged ${books.creditsCharged} credits for completed jobs worth ${books.creditsOfCompletedJobs}`,
    );
  }
  problems.push(...books.usageMismatches);
  return problems;
}

async function listAllJobs(source: BooksSource): Promise<ListedJob[]> {
  const jobs: ListedJob[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 10_000; page++) {
    const query = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
    const response = await fetch(`${source.baseUrl}/v1/jobs?limit=100${query}`, {
      headers: { authorization: `Bearer ${source.apiKey}` },
    });
    const body = (await response.json()) as {
      data: { items: ListedJob[]; nextCursor: string | null };
    };
    jobs.push(...body.data.items);
    cursor = body.data.nextCursor;
    if (cursor === null) break;
  }
  return jobs;
}

/**
 * EVENTS' state and each of its consumers' positions, one line each: what a usage record or a
 * delivery missing for an event that is in the stream needs to be explained (a consumer whose
 * delivered or acknowledged sequence is past the stream's last one skips what is stored next).
 */
export async function eventConsumerStates(source: BooksSource): Promise<string[]> {
  const topology = createTopology(source.namespace ?? '');
  const nats = await connect({ servers: source.natsUrl.split(','), name: 'load-audit' });
  try {
    const manager = await jetstreamManager(nats);
    const stream = topology.streams.events.name;
    const { state } = await manager.streams.info(stream);
    const lines = [
      `${stream}: ${state.messages} messages, sequences ${state.first_seq}–${state.last_seq}`,
    ];
    for await (const consumer of manager.consumers.list(stream)) {
      lines.push(
        `${stream} consumer ${consumer.name}: delivered ${consumer.delivered.stream_seq}, ` +
          `acknowledged ${consumer.ack_floor.stream_seq}, pending ${consumer.num_pending}, ` +
          `waiting for an ack ${consumer.num_ack_pending}, redelivered ${consumer.num_redelivered}`,
      );
    }
    return lines;
  } finally {
    await nats.close();
  }
}

async function terminalEvents(
  source: BooksSource,
): Promise<Map<string, { completed: number; failed: number }>> {
  const topology = createTopology(source.namespace ?? '');
  const nats = await connect({ servers: source.natsUrl.split(','), name: 'load-audit' });
  const counts = new Map<string, { completed: number; failed: number }>();
  try {
    const stream = topology.streams.events.name;
    const { state } = await (await jetstreamManager(nats)).streams.info(stream);
    if (state.messages === 0) return counts;
    const messages = await (await jetstream(nats).consumers.get(stream)).consume();
    for await (const message of messages) {
      const { jobId } = message.json<{ jobId: string }>();
      const seen = counts.get(jobId) ?? { completed: 0, failed: 0 };
      if (message.subject === topology.subjects.events.completed) seen.completed++;
      else seen.failed++;
      counts.set(jobId, seen);
      if (message.seq >= state.last_seq) break;
    }
    return counts;
  } finally {
    await nats.close();
  }
}

async function ledgerOf(
  source: BooksSource,
): Promise<{ reserved: Map<string, number>; refunded: Map<string, number> }> {
  const client = await new MongoClient(source.mongoUrl).connect();
  try {
    const entries = await client
      .db(source.database ?? 'tamp')
      .collection<{ kind: string; jobId: string | null; state: string; accountId: string }>(
        'ledger',
      )
      .find({ accountId: source.accountId, state: 'applied' })
      .toArray();
    const reserved = new Map<string, number>();
    const refunded = new Map<string, number>();
    for (const entry of entries) {
      if (entry.jobId === null) continue;
      const map = entry.kind === 'reserve' ? reserved : entry.kind === 'refund' ? refunded : null;
      map?.set(entry.jobId, (map.get(entry.jobId) ?? 0) + 1);
    }
    return { reserved, refunded };
  } finally {
    await client.close();
  }
}

/**
 * The usage report per pipeline against the completed jobs, and, when they differ, which jobs
 * lack a usage record (read from billing's collection, as the ledger is): an id to follow in
 * the services' logs.
 */
async function usageMismatches(source: BooksSource, completed: ListedJob[]): Promise<string[]> {
  const response = await fetch(`${source.baseUrl}/v1/usage/current`, {
    headers: { authorization: `Bearer ${source.apiKey}` },
  });
  const usage = ((await response.json()) as { data: Record<Pipeline, { requests: number }> }).data;
  const mismatched = PIPELINES.filter(
    (pipeline) =>
      usage[pipeline].requests !== completed.filter((job) => job.type === pipeline).length,
  );
  if (mismatched.length === 0) return [];
  const recorded = await usageRecordIds(source);
  return mismatched.map((pipeline) => {
    const jobs = completed.filter((job) => job.type === pipeline);
    const unrecorded = jobs.filter((job) => !recorded.has(job.id)).map((job) => job.id);
    return (
      `usage counts ${usage[pipeline].requests} ${pipeline} jobs, ${jobs.length} completed` +
      (unrecorded.length === 0 ? '' : ` (no usage record: ${unrecorded.slice(0, 5).join(', ')})`)
    );
  });
}

async function usageRecordIds(source: BooksSource): Promise<Set<string>> {
  const client = await new MongoClient(source.mongoUrl).connect();
  try {
    const records = await client
      .db(source.database ?? 'tamp')
      .collection<{ _id: string }>('usage')
      .find({ accountId: source.accountId }, { projection: { _id: 1 } })
      .toArray();
    return new Set(records.map((record) => record._id));
  } finally {
    await client.close();
  }
}
