import { type PipelineWorkerDependencies, startPipelineWorker } from '@tamp/kit';
import { Gauge, type Registry } from 'prom-client';
import { configureSharp } from './adapters/sharp-runtime';
import { createImageJobProcessor } from './application/image-job';
import type { WorkerImageSettings } from './config';
import { MemoryBudget } from './domain/memory-budget';

export interface WorkerImageDependencies extends PipelineWorkerDependencies {
  settings: WorkerImageSettings;
}

/** Queued jobs from JOBS and inline requests on `work.image.inline`, one processJob for both. */
export function startWorkerImageService(deps: WorkerImageDependencies) {
  const { settings } = deps;
  const sharpState = configureSharp({
    cacheMemoryMb: settings.sharpCacheMb,
    concurrency: settings.sharpConcurrency,
  });
  deps.logger.info(sharpState, 'sharp configured');
  if (!sharpState.jemalloc) {
    deps.logger.warn(
      'not running on jemalloc; see recommendedImageWorkerEnv() in services/worker-image/README.md',
    );
  }
  const memory = new MemoryBudget(settings.memoryBudgetBytes);
  registerMemoryMetrics(deps.metrics, memory);
  const processJob = createImageJobProcessor({
    store: deps.store,
    limitInputPixels: settings.maxPixels,
    memory,
  });
  return startPipelineWorker({
    ...deps,
    settings: settings.worker,
    pipeline: 'image',
    processJob,
    // A job already waiting for room in the budget: another one would only queue behind it.
    resourceGate: { blockedBy: () => (memory.waitingCount > 0 ? 'budget' : null) },
  });
}

function registerMemoryMetrics(registry: Registry, memory: MemoryBudget): void {
  new Gauge({
    name: 'tamp_image_memory_reserved_bytes',
    help: 'Image memory reserved by running jobs, of IMAGE_MEMORY_BUDGET_MB',
    registers: [registry],
    collect() {
      this.set(memory.reservedBytes);
    },
  });
  new Gauge({
    name: 'tamp_image_memory_waiting_jobs',
    help: 'Image jobs waiting for room in the memory budget',
    registers: [registry],
    collect() {
      this.set(memory.waitingCount);
    },
  });
}
