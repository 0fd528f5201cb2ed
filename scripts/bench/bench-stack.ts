import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, launchInfrastructure, type RunningInfrastructure } from '../infra/launcher';
import { provisionTools } from '../infra/provision';
import { type RunningServices, startServices } from '../stack/services';

export interface BenchStack {
  publicUrl: string;
  adminUrl: string;
  adminToken: string;
  /** A pro account whose rate limit is raised out of the way: benchmarks measure the work. */
  apiKey: string;
  stop(): Promise<void>;
}

/** Fresh servers in a temp folder and every service, as `npm start` runs them, for one benchmark. */
export async function startBenchStack(options: {
  name: string;
  toolsProfile: 'stack' | 'test';
  log: (message: string) => void;
}): Promise<BenchStack> {
  const dataDir = await mkdtemp(join(tmpdir(), `tamp-bench-${options.name}-`));
  let infrastructure: RunningInfrastructure | undefined;
  let services: RunningServices | undefined;
  const stop = async () => {
    await services?.stop();
    await infrastructure?.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await provisionTools(options.toolsProfile, options.log);
    infrastructure = await launchInfrastructure({ dataDir, env: {} });
    const [publicPort, adminPort] = await Promise.all([freePort(), freePort()]);
    const adminToken = randomBytes(16).toString('hex');
    const serviceLogs: string[] = [];
    services = await startServices({
      infrastructure,
      publicPort,
      adminPort,
      env: {
        ADMIN_TOKEN: adminToken,
        LOG_LEVEL: 'warn',
        PLANS_JSON: JSON.stringify({ pro: { rateLimitPerMinute: 10_000_000 } }),
      },
      onLine: (service, line) => {
        serviceLogs.push(`${service} | ${line}`);
        if (serviceLogs.length > 200) serviceLogs.shift();
      },
    });
    try {
      await services.waitUntilReady(180_000);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${serviceLogs.join('\n')}`);
    }
    const response = await fetch(`${services.adminUrl}/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'pro' }),
    });
    const account = (await response.json()) as { data: { apiKey: string } };
    options.log(`stack ready at ${services.publicUrl}`);
    return {
      publicUrl: services.publicUrl,
      adminUrl: services.adminUrl,
      adminToken,
      apiKey: account.data.apiKey,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
