import type { EndpointResponse, Logger } from '@tamp/kit';
import type { webhookEndpoints } from '@tamp/proto';
import type { AttemptRepository } from '../adapters/attempt-repository';
import type { BillingAccounts } from '../adapters/billing-accounts';
import type { FinishedJobs } from '../adapters/finished-jobs';
import { buildPayload, serializePayload, webhookIdFor } from '../domain/payload';
import { attemptRecordOf, type SignedSender } from './delivery-attempt';

type TestDeliveryAnswer = EndpointResponse<typeof webhookEndpoints.sendTestDelivery>;

const NO_TARGET: TestDeliveryAnswer = {
  outcome: 'no-target',
  target: null,
  statusCode: null,
  latencyMs: null,
  error: null,
};

/**
 * The dashboard's "send a test delivery": the real event of one of the account's finished jobs,
 * sent once, now, to the account's current default URL through the same SignedSender as every
 * scheduled attempt (payload, headers, signatures with the current secrets, target policy,
 * deadline), and recorded in the job's attempt log. It neither reads nor changes the job's
 * delivery sequence (`webhook_deliveries`) and schedules nothing: a failure is not retried.
 * Inline jobs' events are sent too (the sequences skip them: their result was in the response).
 */
export class TestDelivery {
  constructor(
    private readonly accounts: BillingAccounts,
    private readonly jobs: FinishedJobs,
    private readonly sender: SignedSender,
    private readonly attempts: AttemptRepository,
    /** Recorded with the attempt. */
    private readonly instance: string,
    private readonly logger: Logger,
  ) {}

  async send(accountId: string, jobId: string, deadline?: number): Promise<TestDeliveryAnswer> {
    // Read now, never cached: the default URL and the secrets as they are at this moment. An
    // account billing does not know has no default URL either.
    const account = await this.accounts.find(accountId);
    const target = account?.webhookUrl ?? null;
    if (account === null || target === null || target === '') return NO_TARGET;
    const event = await this.jobs.eventOf(accountId, jobId, deadline);
    const sent = await this.sender.send(
      {
        target,
        event: event.event,
        body: serializePayload(buildPayload(event)),
        webhookId: webhookIdFor(event.jobId, event.event),
      },
      account,
    );
    await this.attempts.insert(
      attemptRecordOf(sent, {
        jobId: event.jobId,
        event: event.event,
        target,
        sequence: 0,
        attempt: 1,
        instance: this.instance,
        test: true,
      }),
    );
    const { outcome, statusCode, latencyMs, error } = sent;
    this.logger.info(
      { jobId: event.jobId, event: event.event, target, outcome, statusCode, error },
      'webhook test delivery sent',
    );
    return { outcome, target, statusCode, latencyMs, error };
  }
}
