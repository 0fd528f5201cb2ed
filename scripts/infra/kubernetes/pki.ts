import { execFile as execFileCallback } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { toolPath } from '../provision';

const execFile = promisify(execFileCallback);

/** One client identity of the cluster: its certificate's subject decides what RBAC grants it. */
export interface ClientIdentity {
  /** File stem under `pki/`. */
  name: string;
  commonName: string;
  organization?: string;
}

/** The identities the launcher's components use; each gets only what its subject implies. */
export const CLIENT_IDENTITIES = {
  admin: { name: 'admin', commonName: 'tamp-admin', organization: 'system:masters' },
  controllerManager: {
    name: 'kube-controller-manager',
    commonName: 'system:kube-controller-manager',
  },
  scheduler: { name: 'kube-scheduler', commonName: 'system:kube-scheduler' },
  kubeProxy: { name: 'kube-proxy', commonName: 'system:kube-proxy' },
  // kube-apiserver's identity towards kubelets (logs, exec, port-forward): the kubelet asks the
  // API server whether it may, and this group may.
  apiserverKubeletClient: {
    name: 'apiserver-kubelet-client',
    commonName: 'kube-apiserver-kubelet-client',
    organization: 'system:masters',
  },
} satisfies Record<string, ClientIdentity>;

export function kubeletIdentity(nodeName: string): ClientIdentity {
  return { name: 'kubelet', commonName: `system:node:${nodeName}`, organization: 'system:nodes' };
}

export interface CertificateFiles {
  cert: string;
  key: string;
}

/**
 * A private certificate authority under `<dataDir>/pki`, made with openssl on first use and
 * reused afterwards (files are written under temporary names and renamed, so an interrupted
 * run never leaves half a key). Keys are ECDSA P-256: fast to make, accepted everywhere here.
 */
export class ClusterPki {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'pki');
  }

  get ca(): CertificateFiles {
    return { cert: join(this.dir, 'ca.crt'), key: join(this.dir, 'ca.key') };
  }

  /** Signs and verifies service account tokens. */
  get serviceAccount(): { privateKey: string; publicKey: string } {
    return { privateKey: join(this.dir, 'sa.key'), publicKey: join(this.dir, 'sa.pub') };
  }

  async ensureAuthority(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    if (!existsSync(this.ca.cert)) {
      await this.#atomically([this.ca.key, this.ca.cert], ([key, cert]) => [
        'req',
        '-x509',
        '-new',
        '-nodes',
        ...ecKey(key!),
        '-out',
        cert!,
        '-days',
        '3650',
        '-subj',
        '/CN=tamp-local-cluster-ca',
      ]);
    }
    const { privateKey, publicKey } = this.serviceAccount;
    if (!existsSync(publicKey)) {
      await this.#atomically([privateKey], ([key]) => [
        'genpkey',
        '-algorithm',
        'EC',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-out',
        key!,
      ]);
      await this.#atomically([publicKey], ([pub]) => [
        'pkey',
        '-in',
        privateKey,
        '-pubout',
        '-out',
        pub!,
      ]);
    }
  }

  /** A serving certificate for the given host names and IP addresses. */
  async serving(name: string, hosts: string[]): Promise<CertificateFiles> {
    const sans = hosts.map((host) => (/^[\d.]+$|:/.test(host) ? `IP:${host}` : `DNS:${host}`));
    return this.#leaf(name, `/CN=${hosts[0] ?? name}`, [
      `subjectAltName=${sans.join(',')}`,
      'extendedKeyUsage=serverAuth',
    ]);
  }

  async client(identity: ClientIdentity): Promise<CertificateFiles> {
    const subject = `${identity.organization ? `/O=${identity.organization}` : ''}/CN=${identity.commonName}`;
    return this.#leaf(identity.name, subject, ['extendedKeyUsage=clientAuth']);
  }

  async #leaf(name: string, subject: string, extensions: string[]): Promise<CertificateFiles> {
    const files = { cert: join(this.dir, `${name}.crt`), key: join(this.dir, `${name}.key`) };
    // A certificate whose subject or names changed (another address) is made again.
    const recipe = `${subject}\n${extensions.join('\n')}\n`;
    const recipeFile = join(this.dir, `${name}.recipe`);
    if (existsSync(files.cert) && (await readOptional(recipeFile)) === recipe) return files;
    await this.#atomically([files.key, files.cert], ([key, cert]) => [
      'req',
      '-x509',
      '-CA',
      this.ca.cert,
      '-CAkey',
      this.ca.key,
      '-nodes',
      ...ecKey(key!),
      '-out',
      cert!,
      '-days',
      '3650',
      '-subj',
      subject,
      '-addext',
      'basicConstraints=critical,CA:FALSE',
      ...extensions.flatMap((extension) => ['-addext', extension]),
    ]);
    await writeFile(`${recipeFile}.${process.pid}.tmp`, recipe);
    await rename(`${recipeFile}.${process.pid}.tmp`, recipeFile);
    return files;
  }

  /** Runs openssl writing to temporary names, then renames every output into place. */
  async #atomically(outputs: string[], command: (temporary: string[]) => string[]): Promise<void> {
    const temporary = outputs.map((path) => `${path}.${process.pid}.tmp`);
    try {
      await execFile(toolPath('openssl'), command(temporary), {
        env: { PATH: process.env.PATH ?? '' },
      });
      for (const [index, path] of outputs.entries()) await rename(temporary[index]!, path);
    } finally {
      await Promise.all(temporary.map((path) => rm(path, { force: true })));
    }
  }
}

function ecKey(keyFile: string): string[] {
  return ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-keyout', keyFile];
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}
