import Fastify from 'fastify';
import type { Logger } from 'pino';
import { envelopePlugin, requestIdFor } from './http/envelope';

export interface GatewayOptions {
  logger: Logger;
}

/** The public API. Features register as encapsulated plugins under /v1. */
export async function buildPublicApp(options: GatewayOptions) {
  const app = Fastify({
    loggerInstance: options.logger,
    genReqId: requestIdFor,
    // Behind an ingress the client address comes from X-Forwarded-For.
    trustProxy: true,
    return503OnClosing: true,
  });
  await app.register(envelopePlugin);
  return app;
}

/** The admin API, on its own port, for operators and the admin CLI. */
export async function buildAdminApp(options: GatewayOptions) {
  const app = Fastify({ loggerInstance: options.logger, genReqId: requestIdFor });
  await app.register(envelopePlugin);
  return app;
}
