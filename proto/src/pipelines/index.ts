import type { Pipeline } from '../limits';
import { audioPipeline } from './audio';
import type { PipelineDefinition } from './definition';
import { imagePipeline } from './image';
import { textPipeline } from './text';

export * from './audio';
export * from './definition';
export * from './image';
export * from './text';

export const PIPELINE_DEFINITIONS: Record<
  Pipeline,
  PipelineDefinition<{ type: string; params: unknown }, string>
> = {
  audio: audioPipeline,
  image: imagePipeline,
  text: textPipeline,
};
