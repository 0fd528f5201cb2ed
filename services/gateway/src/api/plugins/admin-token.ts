import { createHash, timingSafeEqual } from 'node:crypto';
import { ServiceError } from '@tamp/proto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time. Without a configured token
 * the admin API refuses everything.
 */
export const adminTokenPlugin = fp(
  async (app: FastifyInstance, options: { adminToken: string | undefined }) => {
    const expected = options.adminToken ? digest(options.adminToken) : undefined;
    app.addHook('onRequest', async (_request, reply) => {
      const header = _request.headers.authorization;
      const token =
        typeof header === 'string' ? /^Bearer +(\S+)\s*$/i.exec(header)?.[1] : undefined;
      if (
        expected === undefined ||
        token === undefined ||
        !timingSafeEqual(digest(token), expected)
      ) {
        reply.header('www-authenticate', 'Bearer realm="tamp-admin"');
        throw new ServiceError(
          'UNAUTHORIZED',
          expected === undefined
            ? 'The admin API is disabled: ADMIN_TOKEN is not configured'
            : 'A valid admin token is required',
        );
      }
    });
  },
  { name: 'admin-token' },
);
