/** Every Tamp service, in start order: dependencies of the gateway first. */
export const SERVICE_NAMES = [
  'billing',
  'upload',
  'job',
  'worker-image',
  'worker-text',
  'worker-audio',
  'webhook',
  'operator',
  'gateway',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];
