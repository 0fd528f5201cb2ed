import { type PipelineWorkerDependencies, startPipelineWorker } from '@tamp/kit';
import { startPdfTextPool } from './adapters/pdf';
import { startTextPipelinePool } from './adapters/text-pipeline-pool';
import { createTextJobProcessor } from './application/text-job';
import type { WorkerTextSettings } from './config';

export interface WorkerTextDependencies extends PipelineWorkerDependencies {
  settings: WorkerTextSettings;
}

/**
 * Queued jobs from JOBS and inline requests on `work.text.inline`, one processJob for both;
 * the pipeline itself, and pdf.js for PDF uploads, run in worker thread pools.
 */
export async function startWorkerTextService(
  dependencies: WorkerTextDependencies,
): Promise<{ stop(): Promise<void> }> {
  const { settings } = dependencies;
  const threads = settings.pipelineThreads;
  const pdfPool = startPdfTextPool({ threads });
  const pool = await startTextPipelinePool({ threads }).catch(async (error: unknown) => {
    await pdfPool.close();
    throw error;
  });
  const closePools = () => Promise.all([pool.close(), pdfPool.close()]);
  const processJob = createTextJobProcessor({
    store: dependencies.store,
    maxOutputTextBytes: settings.maxOutputTextBytes,
    runPipeline: pool.run,
    extractPdfText: pdfPool.extract,
  });
  let worker: { stop(): Promise<void> };
  try {
    worker = await startPipelineWorker({
      ...dependencies,
      settings: settings.worker,
      pipeline: 'text',
      processJob,
    });
  } catch (error) {
    await closePools();
    throw error;
  }
  dependencies.logger.info({ threads }, 'text pipeline thread pool started');
  return {
    async stop() {
      try {
        await worker.stop();
      } finally {
        // Only after the kit's stop: by then every job has finished or been aborted, so no
        // thread still holds work anyone waits for.
        await closePools();
      }
    },
  };
}
