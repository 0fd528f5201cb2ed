import { join, resolve } from 'node:path';
import { runInForeground } from '../infra/processes';
import { PROJECT_ROOT } from '../infra/provision';
import { startTampCluster, TAMP_NAMESPACE, type TampCluster } from './tamp-cluster';

/**
 * `npm run cluster`: a one-node Kubernetes cluster on this machine (in a network namespace of
 * its own), the images built here, the dependencies of k8s/dependencies and Tamp installed with
 * Helm. Prints how to reach it; Ctrl-C (or SIGTERM) stops everything and removes the cluster.
 * Needs root (network namespaces, mounts, iptables). Data: `.data/cluster` (TAMP_CLUSTER_DIR);
 * TAMP_CLUSTER_NODES=2 joins a second node (a kubelet in a namespace of its own).
 */
const dataDir = resolve(PROJECT_ROOT, process.env.TAMP_CLUSTER_DIR ?? join('.data', 'cluster'));
const say = (message: string) => process.stdout.write(`[cluster] ${message}\n`);

let tamp: TampCluster | undefined;
await runInForeground({
  say,
  async start() {
    const started = Date.now();
    tamp = await startTampCluster({
      dataDir,
      nodes: Number(process.env.TAMP_CLUSTER_NODES ?? 1),
      log: say,
    });
    say(
      `ready in ${Math.round((Date.now() - started) / 1000)} s (helm install --wait: ${tamp.helmInstallSeconds.toFixed(1)} s)`,
    );
    say(`Kubernetes API: ${tamp.cluster.server}`);
    say(`kubeconfig:     ${tamp.kubeconfigPath}`);
    say(`  export KUBECONFIG=${tamp.kubeconfigPath}; .tools/bin/kubectl get pods -A`);
    say(`  .tools/bin/helm status tamp -n ${TAMP_NAMESPACE}`);
    say(`Tamp public API: ${tamp.publicUrl}   (try ${tamp.publicUrl}/docs)`);
    say(
      `Tamp admin API:  ${tamp.adminUrl}   (Authorization: Bearer <admin-token of the Secret tamp-secrets>)`,
    );
    say(
      `  curl -s -X POST ${tamp.adminUrl}/admin/accounts -H "Authorization: Bearer $(KUBECONFIG=${tamp.kubeconfigPath} .tools/bin/kubectl -n ${TAMP_NAMESPACE} get secret tamp-secrets -o jsonpath='{.data.admin-token}' | base64 -d)" -H 'Content-Type: application/json' -d '{"plan":"free"}'`,
    );
    say(`S3 (presigned URLs): ${tamp.s3PublicUrl}`);
    say('Ctrl-C stops the cluster');
  },
  async stop() {
    await tamp?.stop();
    say('stopped: no process, mount or network namespace of the cluster is left');
  },
});
