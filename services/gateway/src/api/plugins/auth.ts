import { ServiceError } from '@tamp/proto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { AuthenticatedAccount, Authenticator } from '../../adapters/authenticator';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth plugin on every /v1 request that reaches a handler. */
    account: AuthenticatedAccount;
  }
}

const BEARER = /^Bearer +(sk_live_[A-Za-z0-9]{16,200})\s*$/i;

/**
 * `Authorization: Bearer sk_live_…` on every request of the scope it is registered in.
 * Missing, malformed, unknown or revoked → 401 UNAUTHORIZED with `WWW-Authenticate: Bearer`.
 * Runs at onRequest, before the body is read.
 */
export const authPlugin = fp(
  async (app: FastifyInstance, options: { authenticator: Authenticator }) => {
    app.decorateRequest('account', null as unknown as AuthenticatedAccount);
    app.addHook('onRequest', async (request, reply) => {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? BEARER.exec(header) : null;
      try {
        if (match === null) {
          throw new ServiceError(
            'UNAUTHORIZED',
            header === undefined
              ? 'Missing Authorization header; send Authorization: Bearer <API key>'
              : 'Malformed Authorization header; send Authorization: Bearer sk_live_…',
          );
        }
        request.account = await options.authenticator.authenticate(match[1]!);
      } catch (error) {
        if (error instanceof ServiceError && error.code === 'UNAUTHORIZED') {
          reply.header('www-authenticate', 'Bearer realm="tamp"');
          throw new ServiceError('UNAUTHORIZED', error.message);
        }
        throw error;
      }
    });
  },
  { name: 'auth' },
);
