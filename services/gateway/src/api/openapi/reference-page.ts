import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui';
import { readAsset } from '../dashboard/asset-files';

export const REFERENCE_PAGE_PATH = '/docs';
export const REFERENCE_PAGE_TITLE = 'Tamp API reference';

/**
 * GET /docs: Swagger UI as Tamp's API reference, with Tamp's name, mark and colours (the
 * dashboard's) instead of Swagger's, and "Try it out" sending requests to the document's server.
 */
export const REFERENCE_PAGE: FastifySwaggerUiOptions = {
  routePrefix: REFERENCE_PAGE_PATH,
  logo: {
    type: 'image/svg+xml',
    content: readAsset('api-reference-logo.svg'),
    href: REFERENCE_PAGE_PATH,
    target: '_self',
  },
  theme: {
    title: REFERENCE_PAGE_TITLE,
    css: [{ filename: 'tamp.css', content: readAsset('api-reference.css') }],
    favicon: [
      {
        filename: 'favicon.svg',
        rel: 'icon',
        type: 'image/svg+xml',
        sizes: 'any',
        content: readAsset('favicon.svg'),
      },
    ],
  },
  uiConfig: {
    docExpansion: 'list',
    deepLinking: true,
    displayRequestDuration: true,
    // The models are listed once, under their component names, at the end.
    defaultModelsExpandDepth: 0,
  },
};
