import {
  describeOperations,
  describePresets,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  publicOperationCatalogue,
  publicPresetCatalogue,
} from '@tamp/proto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { capitalized } from './job-creation';
import { ok, responds } from './responses';

/** `GET /v1/<pipeline>/presets` and `/operations`: proto's catalogue, computed once. */
export const pipelineCatalogueRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const pipeline of PIPELINES) {
    const definition = PIPELINE_DEFINITIONS[pipeline];
    const presets = describePresets(definition);
    const operations = describeOperations(definition);
    const name = capitalized(pipeline);

    app.get(
      `/${pipeline}/presets`,
      {
        schema: {
          operationId: `list${name}Presets`,
          summary: `The ${pipeline} presets and the chains they expand to`,
          tags: [pipeline],
          response: responds(publicPresetCatalogue, `The ${pipeline} presets`),
        },
      },
      async () => ok(presets),
    );

    app.get(
      `/${pipeline}/operations`,
      {
        schema: {
          operationId: `list${name}Operations`,
          summary: `The ${pipeline} operations, their parameters, ranges and defaults`,
          tags: [pipeline],
          response: responds(publicOperationCatalogue, `The ${pipeline} operations`),
        },
      },
      async () => ok(operations),
    );
  }
};
