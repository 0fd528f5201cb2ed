// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runServices } from '@tamp/kit';
import { billingService } from '../../services/billing/src/definition';
import { gatewayService } from '../../services/gateway/src/definition';
import { jobService } from '../../services/job/src/definition';
import { operatorService } from '../../services/operator/src/definition';
import { uploadService } from '../../services/upload/src/definition';
import { webhookService } from '../../services/webhook/src/definition';
import { workerAudioService } from '../../services/worker-audio/src/definition';
import { workerImageService } from '../../services/worker-image/src/definition';
import { workerTextService } from '../../services/worker-text/src/definition';
import { SERVICE_NAMES } from './service-names';

/**
 * Every service of an installation in one process (`TAMP_PROCESSES=single`, see
 * docs/service-layout.md): started in SERVICE_NAMES order, so the gateway opens last and stops
 * first, with their calls to one another in memory.
 */
const definitions = {
  billing: billingService,
  upload: uploadService,
  job: jobService,
  'worker-image': workerImageService,
  'worker-text': workerTextService,
  'worker-audio': workerAudioService,
  webhook: webhookService,
  operator: operatorService,
  gateway: gatewayService,
};

await runServices(
  'tamp',
  SERVICE_NAMES.map((name) => definitions[name]),
);
