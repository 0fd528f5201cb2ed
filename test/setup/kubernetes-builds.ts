import { provisionTools } from '@tamp/scripts/infra/provision';

/**
 * The Kubernetes binaries (etcd, the control plane, the node's, CoreDNS) take about 20 minutes
 * of both cores to build where nothing is built yet, and only the operator's integration tests
 * and the cluster project run them. Those projects run last (vitest.config.ts, `groupOrder`), so
 * the build starts here, at the lowest CPU priority, while the other tests run; a test that
 * needs the binaries before it ends waits for it through provisionTools' build lock. Listed by
 * both projects and started once; a run that never needed the binaries stops it at its end
 * (Go's build cache keeps what it compiled).
 */
const SHARED = Symbol.for('tamp.test.kubernetes-builds');
type Shared = { stop: AbortController; built: Promise<void>; users: number };

export default function setup(): () => Promise<void> {
  const holder = globalThis as { [SHARED]?: Shared };
  holder[SHARED] ??= startBuild();
  const shared = holder[SHARED];
  shared.users += 1;
  return async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    delete holder[SHARED];
    shared.stop.abort();
    await shared.built;
  };
}

function startBuild(): Shared {
  const log = (message: string) => console.log(`[kubernetes builds] ${message}`);
  const stop = new AbortController();
  const built = provisionTools('kubernetes-builds', log, { background: stop.signal }).catch(
    (error: Error) => {
      // Whoever needs the binaries builds them again and fails with the cause in its test.
      if (!stop.signal.aborted) log(`the background build failed: ${error.message}`);
    },
  );
  return { stop, built, users: 0 };
}
