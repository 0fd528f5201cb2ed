import { afterEach, describe, expect, it } from 'vitest';
import { createMetricsRegistry } from './metrics';
import { OpsServer } from './ops-server';

let server: OpsServer | undefined;
afterEach(async () => server?.close());

async function get(port: number, path: string) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, body: await response.text() };
}

describe('ops server', () => {
  it('is live at once, ready only after start, and unready while a check fails or it drains', async () => {
    server = new OpsServer(createMetricsRegistry('test'));
    let healthy = true;
    server.addReadinessCheck('dependency', () => {
      if (!healthy) throw new Error('dependency down');
    });
    const port = await server.listen(0, '127.0.0.1');
    expect((await get(port, '/healthz')).status).toBe(200);
    expect((await get(port, '/readyz')).status).toBe(503);
    server.markReady();
    expect((await get(port, '/readyz')).status).toBe(200);
    healthy = false;
    const unready = await get(port, '/readyz');
    expect(unready.status).toBe(503);
    expect(unready.body).toContain('dependency down');
    healthy = true;
    server.markDraining();
    expect(JSON.parse((await get(port, '/readyz')).body)).toEqual({ status: 'draining' });
  });

  it('serves Prometheus metrics with the service label and default metrics', async () => {
    server = new OpsServer(createMetricsRegistry('metrics-test'));
    const port = await server.listen(0, '127.0.0.1');
    const metrics = await get(port, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/process_cpu_user_seconds_total\{service="metrics-test"\}/);
  });
});
