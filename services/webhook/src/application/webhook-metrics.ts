import type { Logger, Registry } from '@tamp/kit';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { DeliveryRepository } from '../adapters/delivery-repository';

/** The service's Prometheus metrics; `close` stops the gauge from reading the store. */
export class WebhookMetrics {
  readonly deliveriesTotal: Counter<'outcome'>;
  readonly attemptDuration: Histogram;
  private closed = false;

  constructor(registry: Registry, store: DeliveryRepository, logger: Logger) {
    this.deliveriesTotal = new Counter({
      name: 'tamp_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome (delivered, failed = will retry, exhausted = last retry failed, refused)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    });
    this.attemptDuration = new Histogram({
      name: 'tamp_webhook_attempt_duration_seconds',
      help: 'Duration of one webhook delivery attempt, body included',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    const metrics = this;
    new Gauge({
      name: 'tamp_webhook_retries_pending',
      help: 'Delivery sequences with a failed attempt that wait for (or are making) a retry',
      registers: [registry],
      async collect() {
        if (metrics.closed) return;
        try {
          this.set(await store.countPendingRetries());
        } catch (error) {
          logger.warn({ err: error }, 'could not count pending webhook retries');
        }
      },
    });
  }

  close(): void {
    this.closed = true;
  }
}
