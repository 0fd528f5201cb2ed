import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type JobOutcomeLabel =
  | 'completed'
  | 'retried'
  | 'failed'
  | 'skipped'
  | 'handed_back'
  | 'rejected';

export interface JobWorkerMetrics {
  processed: Counter<'mode' | 'outcome'>;
  duration: Histogram<'mode' | 'outcome'>;
  inFlight: Gauge<'mode'>;
  admissionWaits: Counter<'reason'>;
}

const NAMES = {
  processed: 'tamp_jobs_processed_total',
  duration: 'tamp_job_processing_seconds',
  inFlight: 'tamp_jobs_in_flight',
  admissionWaits: 'tamp_worker_admission_waits_total',
} as const;

/**
 * The job metrics of a worker process, on the service registry. Queued and inline work share
 * them (label `mode`), so both `startJobWorker` and `serveInlineWork` call this; the second
 * call returns the metrics the first one registered.
 */
export function jobWorkerMetrics(registry: Registry): JobWorkerMetrics {
  const existing = registry.getSingleMetric(NAMES.processed);
  if (existing) {
    return {
      processed: existing as Counter<'mode' | 'outcome'>,
      duration: registry.getSingleMetric(NAMES.duration) as Histogram<'mode' | 'outcome'>,
      inFlight: registry.getSingleMetric(NAMES.inFlight) as Gauge<'mode'>,
      admissionWaits: registry.getSingleMetric(NAMES.admissionWaits) as Counter<'reason'>,
    };
  }
  const admissionWaits = new Counter({
    name: NAMES.admissionWaits,
    help: 'Times a free slot stayed unused because the machine could carry no more (reason: cpu, memory, budget)',
    labelNames: ['reason'],
    registers: [registry],
  });
  // Zero from the start, so a dashboard shows "no waits" rather than "no data".
  for (const reason of ['cpu', 'memory', 'budget']) admissionWaits.inc({ reason }, 0);
  return {
    admissionWaits,
    processed: new Counter({
      name: NAMES.processed,
      help: 'Jobs handled by this worker, by outcome (completed, retried, failed, skipped, handed_back, rejected)',
      labelNames: ['mode', 'outcome'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: NAMES.duration,
      help: 'Time from starting a job to its outcome, in seconds',
      labelNames: ['mode', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
      registers: [registry],
    }),
    inFlight: new Gauge({
      name: NAMES.inFlight,
      help: 'Jobs being processed right now',
      labelNames: ['mode'],
      registers: [registry],
    }),
  };
}
