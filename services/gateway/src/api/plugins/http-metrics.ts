import type { HttpMetrics } from '@tamp/kit';
import fp from 'fastify-plugin';

/**
 * Counts and times every answer of the app by its route pattern (`/v1/jobs/:id`, never the id),
 * on the service's /metrics (docs/operating.md). Unmatched paths share one series.
 */
export const httpMetricsPlugin = fp<{ metrics: HttpMetrics; api: 'public' | 'admin' }>(
  async (app, { metrics, api }) => {
    app.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const labels = { api, method: request.method, route };
      metrics.requests.inc({ ...labels, status: String(reply.statusCode) });
      metrics.duration.observe(labels, reply.elapsedTime / 1000);
    });
  },
  { name: 'http-metrics' },
);
