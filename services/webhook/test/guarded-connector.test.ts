import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { LOCAL_DEVELOPMENT_POLICY } from '@tamp/proto';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedConnector, TargetRefusedError } from '../src/adapters/guarded-connector';
import type { HostnameResolver } from '../src/adapters/hostname-resolver';
import { startReceiver } from './support/loopback-receiver';

/**
 * A self-signed certificate for the name hooks.test only, made for this run: no private key is
 * kept in the repository.
 */
function selfSignedCertificate(name: string): { certificate: Buffer; privateKey: Buffer } {
  const directory = mkdtempSync(join(tmpdir(), 'tamp-tls-'));
  try {
    const keyPath = join(directory, 'key.pem');
    const certificatePath = join(directory, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        keyPath,
        '-out',
        certificatePath,
        '-days',
        '2',
        '-subj',
        `/CN=${name}`,
        '-addext',
        `subjectAltName=DNS:${name}`,
      ],
      { stdio: 'ignore' },
    );
    return { certificate: readFileSync(certificatePath), privateKey: readFileSync(keyPath) };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

const { certificate, privateKey } = selfSignedCertificate('hooks.test');

const resolveTo =
  (table: Record<string, string[]>): HostnameResolver =>
  async (hostname) => {
    const addresses = table[hostname];
    if (!addresses) throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses;
  };

function guardedAgent(resolveHostname: HostnameResolver): Agent {
  return new Agent({
    connect: createGuardedConnector({
      policy: LOCAL_DEVELOPMENT_POLICY,
      resolveHostname,
      connectTimeoutMs: 5_000,
      trustedCa: certificate,
    }),
  });
}

describe('TLS through the guarded connector', () => {
  let server: Server;
  let port: number;
  const serverNames: Array<string | false | null> = [];

  beforeAll(async () => {
    server = createServer({ cert: certificate, key: privateKey }, (req, res) => {
      serverNames.push((req.socket as TLSSocket).servername);
      res.end('secure');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('connects to the checked IP yet sends SNI for, and verifies the certificate of, the name', async () => {
    const agent = guardedAgent(resolveTo({ 'hooks.test': ['127.0.0.1'] }));
    try {
      const response = await request(`https://hooks.test:${port}/`, { dispatcher: agent });
      expect(response.statusCode).toBe(200);
      expect(await response.body.text()).toBe('secure');
      expect(serverNames.at(-1)).toBe('hooks.test');
    } finally {
      await agent.destroy();
    }
  });

  it('rejects a certificate that does not name the host, though the address is allowed', async () => {
    const agent = guardedAgent(resolveTo({ 'other.test': ['127.0.0.1'] }));
    try {
      await expect(
        request(`https://other.test:${port}/`, { dispatcher: agent }),
      ).rejects.toMatchObject({
        code: 'ERR_TLS_CERT_ALTNAME_INVALID',
      });
      await expect(
        request(`https://127.0.0.1:${port}/`, { dispatcher: agent }),
      ).rejects.toMatchObject({
        code: 'ERR_TLS_CERT_ALTNAME_INVALID',
      });
    } finally {
      await agent.destroy();
    }
  });
});

describe('address selection', () => {
  it('passes the bare host name to the resolver and falls through unreachable addresses', async () => {
    const target = await startReceiver((_req, res) => res.end('second address'));
    const lookups: string[] = [];
    const agent = guardedAgent(async (hostname) => {
      lookups.push(hostname);
      // Nothing listens on 127.0.0.3 at this port, so that connect is refused.
      return ['127.0.0.3', '127.0.0.1'];
    });
    try {
      const response = await request(`http://two.test:${target.port}/`, { dispatcher: agent });
      expect(await response.body.text()).toBe('second address');
      expect(lookups).toEqual(['two.test']);
    } finally {
      await agent.destroy();
      await target.close();
    }
  });

  it('surfaces a refusal as TargetRefusedError', async () => {
    const agent = new Agent({
      connect: createGuardedConnector({
        policy: { allowHttp: true, allowCidrs: [] },
        resolveHostname: resolveTo({ 'inward.test': ['127.0.0.1'] }),
        connectTimeoutMs: 5_000,
      }),
    });
    try {
      const failure = await request('http://inward.test:9/', { dispatcher: agent }).catch(
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(TargetRefusedError);
      expect((failure as Error).message).toContain('inward.test resolves to 127.0.0.1');
    } finally {
      await agent.destroy();
    }
  });
});
