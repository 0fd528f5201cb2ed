import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { exponentialDelayMs, type JitterBand, jitteredDelayMs } from '@tamp/proto';
import pLimit from 'p-limit';
import type { JobKind } from './workload';

/**
 * The client side of a load run, behaving as a careful API client does: every queued creation
 * carries its own Idempotency-Key and is retried with that key after a 503, a 409, a 429, a
 * network error or a time-out, so retries can never create or charge twice; an inline request
 * (the contract does not deduplicate those) is retried only when the answer says nothing was
 * created (503, 429), never after a time-out. Every loop is bounded in count and time.
 */

export interface TrafficOptions {
  baseUrl: string;
  apiKey: string;
  kinds: readonly JobKind[];
  /** Creations started per second (open loop: arrivals do not wait for answers). */
  ratePerSecond: number;
  durationMs: number;
  /** One request's time-out, as a client would set it. */
  requestTimeoutMs?: number;
  /** How long one creation keeps retrying before the client gives up on it. */
  giveUpAfterMs?: number;
  /** Called for each creation once it has an outcome. */
  onCreation?: (creation: Creation) => void;
  /** Stops starting new creations (those under way finish their retries). */
  signal?: AbortSignal;
}

export interface Creation {
  kind: string;
  mode: 'inline' | 'queued';
  idempotencyKey: string | null;
  /** Set once a 200 or 202 arrived. */
  jobId: string | null;
  acceptedStatus: 200 | 202 | null;
  /** Job status in the accepting answer (inline: completed or failed). */
  statusAtCreation: string | null;
  /** First send to acceptance (or to giving up), retries included. */
  latencyMs: number;
  /** Every HTTP status seen; 0 for a network error, -1 for a client time-out. */
  statuses: number[];
  /**
   * What each try met and when, seconds from the first send: `12.3 503 (SERVICE_UNAVAILABLE,
   * unknown) in 5.0 s`, and how reading a job named with outcome unknown ended: what a slow
   * creation waited on, for the report.
   */
  trace: string[];
  /** 503 answers that carried Retry-After, and those that did not. */
  retryAfterPresent: number;
  retryAfterMissing: number;
  /** Errors answered that are not retried (4xx other than 409/429): the request was wrong. */
  error: string | null;
  /**
   * Job ids failed creations named (docs/decisions.md#when-a-creation-fails), by what they
   * said or what reading the id then settled: none of the `notCreated` may ever exist.
   */
  notCreated: string[];
  /** Named with outcome `unknown`, and still unsettled when this client gave up. */
  unsettled: string[];
  /** Named with outcome `unknown`, then found to exist when read: this creation's job. */
  foundAfterUnknown: boolean;
}

const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
const DEFAULT_GIVE_UP_AFTER_MS = 180_000;
/** A Retry-After above this is shortened: the run would otherwise measure the client's patience. */
const MAX_RETRY_WAIT_MS = 10_000;
/**
 * Around the wait a client chose rather than below it (proto's equal jitter is for servers):
 * clients told the same Retry-After still come back spread out, none much earlier than told.
 */
const CLIENT_JITTER: JitterBand = { low: 0.8, high: 1.2 };

export async function runTraffic(options: TrafficOptions): Promise<Creation[]> {
  const count = Math.floor((options.ratePerSecond * options.durationMs) / 1000);
  const intervalMs = 1000 / options.ratePerSecond;
  const startedAt = performance.now();
  const creations: Promise<Creation>[] = [];
  for (let index = 0; index < count; index++) {
    if (options.signal?.aborted) break;
    const due = startedAt + index * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const kind = options.kinds[index % options.kinds.length]!;
    creations.push(
      createWithRetries(options, kind).then((creation) => {
        options.onCreation?.(creation);
        return creation;
      }),
    );
  }
  return Promise.all(creations);
}

/** One logical creation: retried as described above until accepted, refused or given up. */
export async function createWithRetries(
  options: Pick<TrafficOptions, 'baseUrl' | 'apiKey' | 'requestTimeoutMs' | 'giveUpAfterMs'> & {
    /** A key of the caller's (twins of one creation); default a fresh one for queued kinds. */
    idempotencyKey?: string;
    /**
     * Leave a job named with outcome unknown in `unsettled` for settleDeferred instead of
     * reading it until settled now (the health probe: its answer is whether it got one).
     */
    deferSettling?: boolean;
  },
  kind: JobKind,
): Promise<Creation> {
  const started = performance.now();
  const giveUpAt = started + (options.giveUpAfterMs ?? DEFAULT_GIVE_UP_AFTER_MS);
  const creation: Creation = {
    kind: kind.name,
    mode: kind.mode,
    idempotencyKey: kind.mode === 'queued' ? (options.idempotencyKey ?? randomUUID()) : null,
    jobId: null,
    acceptedStatus: null,
    statusAtCreation: null,
    latencyMs: 0,
    statuses: [],
    trace: [],
    retryAfterPresent: 0,
    retryAfterMissing: 0,
    error: null,
    notCreated: [],
    unsettled: [],
    foundAfterUnknown: false,
  };
  for (let attempt = 0; attempt < 1_000 && performance.now() < giveUpAt; attempt++) {
    const sentAt = performance.now();
    const answer = await send(options, kind, creation.idempotencyKey);
    creation.statuses.push(answer.status);
    creation.trace.push(describeTry(started, sentAt, answer));
    if (answer.outcome?.outcome === 'unknown' && options.deferSettling === true) {
      creation.unsettled.push(answer.outcome.jobId);
      break;
    }
    if (answer.outcome?.outcome === 'unknown') {
      // As the contract asks: read the named job before creating anything again.
      const readAt = performance.now();
      const settled = await settleCreation(options, answer.outcome.jobId);
      creation.trace.push(
        `${secondsSince(started, readAt)} read ${answer.outcome.jobId}: ` +
          `${typeof settled === 'string' ? settled : settled.status} in ${secondsSince(readAt)}`,
      );
      if (settled === 'unsettled') {
        creation.unsettled.push(answer.outcome.jobId);
        break;
      }
      if (settled !== 'not-created') {
        creation.jobId = answer.outcome.jobId;
        creation.acceptedStatus = 200;
        creation.statusAtCreation = settled.status;
        creation.foundAfterUnknown = true;
        break;
      }
      creation.notCreated.push(answer.outcome.jobId);
    } else if (answer.outcome?.outcome === 'not-created') {
      creation.notCreated.push(answer.outcome.jobId);
    }
    if (answer.status === 200 || answer.status === 202) {
      creation.jobId = answer.jobId;
      creation.acceptedStatus = answer.status;
      creation.statusAtCreation = answer.jobStatus;
      break;
    }
    if (answer.status === 503) {
      if (answer.retryAfterMs === null) creation.retryAfterMissing++;
      else creation.retryAfterPresent++;
    }
    const retryable =
      answer.status === 503 ||
      answer.status === 429 ||
      answer.status === 409 ||
      // Unknown outcome: only a keyed request may be sent again.
      ((answer.status === 0 || answer.status === -1) && creation.idempotencyKey !== null);
    if (!retryable) {
      creation.error = answer.error;
      break;
    }
    const backoff = exponentialDelayMs(250, attempt, MAX_RETRY_WAIT_MS);
    const waitMs = Math.min(answer.retryAfterMs ?? backoff, MAX_RETRY_WAIT_MS);
    await sleep(jitteredDelayMs(waitMs, Math.random, CLIENT_JITTER));
  }
  creation.latencyMs = performance.now() - started;
  return creation;
}

function secondsSince(from: number, to = performance.now()): string {
  return `${((to - from) / 1000).toFixed(1)} s`;
}

function describeTry(started: number, sentAt: number, answer: Answer): string {
  const refusal =
    answer.code === null
      ? ''
      : ` (${[answer.code, answer.outcome?.outcome].filter(Boolean).join(', ')})`;
  return `${secondsSince(started, sentAt)} ${answer.status}${refusal} in ${secondsSince(sentAt)}`;
}

interface Answer {
  status: number;
  jobId: string | null;
  jobStatus: string | null;
  retryAfterMs: number | null;
  error: string | null;
  /** The error code of a refusal, or what the request failed with (`TimeoutError`). */
  code: string | null;
  /** What a failed creation said of its job, when it named one. */
  outcome: { jobId: string; outcome: 'not-created' | 'unknown' } | null;
}

/** Settles what creations left in `unsettled` (deferSettling): found jobs become theirs. */
export async function settleDeferred(
  options: Pick<TrafficOptions, 'baseUrl' | 'apiKey'>,
  creations: readonly Creation[],
): Promise<void> {
  await Promise.all(
    creations.map(async (creation) => {
      const waiting = creation.unsettled.splice(0);
      for (const jobId of waiting) {
        const settled = await settleCreation(options, jobId);
        if (settled === 'unsettled') creation.unsettled.push(jobId);
        else if (settled === 'not-created') creation.notCreated.push(jobId);
        else {
          creation.jobId = jobId;
          creation.statusAtCreation = settled.status;
          creation.foundAfterUnknown = true;
        }
      }
    }),
  );
}

/** Longer than the job service takes to settle any creation (about 2 minutes). */
const SETTLE_WITHIN_MS = 4 * 60_000;

/**
 * Reads the job a creation named with outcome unknown until it is settled: the job (it was
 * created after all), or `not-created` (404 saying so, final).
 */
async function settleCreation(
  options: Pick<TrafficOptions, 'baseUrl' | 'apiKey'>,
  jobId: string,
): Promise<{ status: string } | 'not-created' | 'unsettled'> {
  const giveUpAt = performance.now() + SETTLE_WITHIN_MS;
  for (let attempt = 0; attempt < 100 && performance.now() < giveUpAt; attempt++) {
    try {
      const response = await fetch(`${options.baseUrl}/v1/jobs/${jobId}`, {
        headers: { authorization: `Bearer ${options.apiKey}` },
        signal: AbortSignal.timeout(30_000),
      });
      const body = (await response.json().catch(() => ({}))) as {
        data?: { status: string };
        error?: { details?: { outcome?: string } };
      };
      if (response.status === 200 && body.data !== undefined) return body.data;
      if (response.status === 404 && body.error?.details?.outcome === 'not-created') {
        return 'not-created';
      }
    } catch {
      // Not answering yet (the job service is restarting): read again.
    }
    await sleep(Math.min(MAX_RETRY_WAIT_MS, 500 * 2 ** Math.min(attempt, 4)));
  }
  return 'unsettled';
}

async function send(
  options: Pick<TrafficOptions, 'baseUrl' | 'apiKey' | 'requestTimeoutMs'>,
  kind: JobKind,
  idempotencyKey: string | null,
): Promise<Answer> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.apiKey}`,
    'content-type': 'application/json',
  };
  if (idempotencyKey !== null) headers['idempotency-key'] = idempotencyKey;
  try {
    const response = await fetch(`${options.baseUrl}${kind.path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(kind.body),
      signal: AbortSignal.timeout(options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS),
    });
    const body = (await response.json().catch(() => ({}))) as {
      data?: { id?: string; status?: string };
      error?: {
        code?: string;
        message?: string;
        details?: { jobId?: string; outcome?: 'not-created' | 'unknown' };
      };
    };
    const retryAfter = response.headers.get('retry-after');
    const details = body.error?.details;
    return {
      status: response.status,
      jobId: body.data?.id ?? null,
      jobStatus: body.data?.status ?? null,
      retryAfterMs: retryAfter === null ? null : Number(retryAfter) * 1000,
      error: body.error === undefined ? null : `${body.error.code}: ${body.error.message}`,
      code: body.error?.code ?? null,
      outcome:
        details?.jobId !== undefined && details.outcome !== undefined
          ? { jobId: details.jobId, outcome: details.outcome }
          : null,
    };
  } catch (error) {
    const timedOut = error instanceof Error && error.name === 'TimeoutError';
    return {
      status: timedOut ? -1 : 0,
      jobId: null,
      jobStatus: null,
      retryAfterMs: null,
      error: String(error),
      code: error instanceof Error ? error.name : 'error',
      outcome: null,
    };
  }
}

export interface FinishedJob {
  jobId: string;
  kind: string;
  status: string;
  error: string | null;
  /** From the job's acceptance until this client saw it terminal. */
  waitedMs: number;
}

/**
 * Long-polls every accepted job until it is terminal or `timeoutMs` passes (no busy polling:
 * each read waits up to 30 s server-side). Returns the last status seen of each.
 */
export async function drainJobs(
  options: Pick<TrafficOptions, 'baseUrl' | 'apiKey'>,
  creations: readonly Creation[],
  timeoutMs: number,
): Promise<FinishedJob[]> {
  const deadline = Date.now() + timeoutMs;
  const limit = pLimit(64);
  // Twins of one keyed creation share a job: each job is waited for once.
  const accepted = [
    ...new Map(
      creations
        .filter((creation) => creation.jobId !== null)
        .map((creation) => [creation.jobId, creation]),
    ).values(),
  ];
  return Promise.all(
    accepted.map((creation) =>
      limit(async () => {
        const started = performance.now();
        let status = creation.statusAtCreation ?? 'created';
        let error: string | null = null;
        while (!isTerminal(status) && Date.now() < deadline) {
          const wait = Math.max(1, Math.min(30, Math.floor((deadline - Date.now()) / 1000)));
          try {
            const response = await fetch(
              `${options.baseUrl}/v1/jobs/${creation.jobId}?wait=${wait}`,
              {
                headers: { authorization: `Bearer ${options.apiKey}` },
                signal: AbortSignal.timeout((wait + 15) * 1000),
              },
            );
            if (response.status === 200) {
              const body = (await response.json()) as { data: { status: string; error?: string } };
              status = body.data.status;
              error = body.data.error ?? null;
            } else {
              await response.body?.cancel();
              await sleep(1_000);
            }
          } catch {
            await sleep(1_000);
          }
        }
        return {
          jobId: creation.jobId!,
          kind: creation.kind,
          status,
          error,
          waitedMs: performance.now() - started,
        };
      }),
    ),
  );
}

function isTerminal(status: string): boolean {
  return status === 'completed' || status === 'failed';
}
