import { provisionTools } from '@tamp/scripts/infra/provision';

/**
 * The Kubernetes binaries (etcd, the control plane, the node's, CoreDNS) take about 20 minutes
 * of both cores to build where nothing is built yet, and only the operator's integration tests
 * and the cluster project run them. Those projects run last (vitest.config.ts, `groupOrder`), so
 * the cluster project's setup starts the build with the run, at the lowest CPU priority, while
 * the other tests go on; a test that needs the binaries before it ends waits for it through
 * provisionTools' build lock. A run without the cluster project (vitest sets a project up only
 * when it has files to run) starts nothing here: its operator tests, if any, build in the
 * foreground. The build is stopped at the end if it is still going (Go's build cache keeps what
 * it compiled).
 */
export default function setup(): () => Promise<void> {
  const log = (message: string) => console.log(`[kubernetes builds] ${message}`);
  const stop = new AbortController();
  const built = provisionTools('kubernetes-builds', log, { background: stop.signal }).catch(
    (error: Error) => {
      // Whoever needs the binaries builds them again and fails with the cause in its test.
      if (!stop.signal.aborted) log(`the background build failed: ${error.message}`);
    },
  );
  return async () => {
    stop.abort();
    await built;
  };
}
