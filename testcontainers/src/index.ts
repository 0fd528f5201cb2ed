export {
  DEFAULT_IMAGES,
  imagesEnvironment,
  imagesFromEnvironment,
  type TampImages,
} from './images.js';
export type { NetworkMode } from './placement.js';
export { TAMP_SERVICE_NAMES, type TampService } from './services.js';
export {
  type AccountOptions,
  StartedTampContainer,
  type TampAccount,
  TampContainer,
  type TampDependencies,
} from './tamp-container.js';
export type { WebhookDelivery, WebhookReceiver } from './webhook-receiver.js';
