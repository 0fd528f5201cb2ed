import { ServiceError } from '@tamp/proto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { RateLimiter } from '../../adapters/rate-limiter';

/**
 * Per-account request rate shared by all replicas (see RateLimiter). Must be registered after
 * auth. Every authenticated response carries RateLimit-Limit/-Remaining/-Reset; over the limit
 * is 429 RATE_LIMITED with Retry-After. A long-poll counts once: it is one request.
 */
export const rateLimitPlugin = fp(
  async (app: FastifyInstance, options: { limiter: RateLimiter }) => {
    app.addHook('onRequest', async (request, reply) => {
      const { accountId, rateLimitPerMinute } = request.account;
      const decision = await options.limiter.hit(accountId, rateLimitPerMinute);
      reply.header('ratelimit-limit', String(decision.limit));
      reply.header('ratelimit-remaining', String(decision.remaining));
      reply.header('ratelimit-reset', String(decision.resetSeconds));
      if (!decision.allowed) {
        reply.header('retry-after', String(decision.resetSeconds));
        throw new ServiceError(
          'RATE_LIMITED',
          `Rate limit of ${decision.limit} requests per minute exceeded; retry in ${decision.resetSeconds} s`,
        );
      }
    });
  },
  { name: 'rate-limit', dependencies: ['auth'] },
);
