export * from './config';
export * from './inline';
export * from './job-worker';
export * from './metrics';
export * from './pipeline-worker';
export * from './resource-gate';
export * from './types';
export * from './workspace';
