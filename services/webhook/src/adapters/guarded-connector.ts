import { isIP } from 'node:net';
import { classifyAddress, classifyResolvedAddresses, type TargetPolicy } from '@tamp/proto';
import { buildConnector } from 'undici';
import type { HostnameResolver } from './hostname-resolver';

/** The target's address is not allowed by the policy; no socket was opened. */
export class TargetRefusedError extends Error {
  override readonly name = 'TargetRefusedError';
}

/** The target's host name did not resolve; a later attempt may succeed. */
export class TargetResolutionError extends Error {
  override readonly name = 'TargetResolutionError';
}

export interface GuardedConnectorOptions {
  policy: TargetPolicy;
  resolveHostname: HostnameResolver;
  connectTimeoutMs: number;
  /** Replaces the default CA bundle; for receivers behind a private CA (and TLS tests). */
  trustedCa?: string | Buffer;
  /** Once aborted, a lookup that finishes late does not go on to connect. */
  abandonSignal?: AbortSignal;
}

// Failures that say "this address is unreachable", where trying the name's next address helps.
const TRY_NEXT_ADDRESS = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * An undici connector whose DNS step is ours: it resolves the host once, checks every
 * address against the policy, and hands the socket layer a checked IP literal, so the kernel
 * never resolves the name again. Check and connect therefore use the same address and a
 * rebinding DNS answer cannot slip in between. TLS still verifies the certificate against
 * (and sends SNI for) the original host name.
 */
export function createGuardedConnector(options: GuardedConnectorOptions): buildConnector.connector {
  const connectToAddress = buildConnector({
    timeout: options.connectTimeoutMs,
    ...(options.trustedCa === undefined ? {} : { ca: options.trustedCa }),
  });
  return (target, callback) => {
    checkedAddresses(target.hostname, options).then(
      (addresses) => {
        if (options.abandonSignal?.aborted) {
          callback(new Error(`connection to ${target.hostname} abandoned at the deadline`), null);
          return;
        }
        // SNI must not be an IP literal; for a literal host TLS checks the IP itself.
        const servername =
          target.servername ?? (isIP(target.hostname) === 0 ? target.hostname : undefined);
        connectInOrder(addresses, 0, { ...target, servername }, connectToAddress, callback);
      },
      (error: Error) => callback(error, null),
    );
  };
}

async function checkedAddresses(
  hostname: string,
  { policy, resolveHostname }: GuardedConnectorOptions,
): Promise<string[]> {
  if (isIP(hostname) !== 0) {
    const verdict = classifyAddress(hostname, policy);
    if (!verdict.allowed) throw new TargetRefusedError(verdict.reason);
    return [verdict.address];
  }
  let resolved: readonly string[];
  try {
    resolved = await resolveHostname(hostname);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TargetResolutionError(`DNS lookup of ${hostname} failed${code ? ` (${code})` : ''}`, {
      cause: error,
    });
  }
  if (resolved.length === 0) throw new TargetResolutionError(`${hostname} has no address`);
  const verdict = classifyResolvedAddresses(hostname, resolved, policy);
  if (!verdict.allowed) throw new TargetRefusedError(verdict.reason);
  return verdict.addresses;
}

function connectInOrder(
  addresses: readonly string[],
  index: number,
  target: buildConnector.Options,
  connectToAddress: buildConnector.connector,
  callback: buildConnector.Callback,
): void {
  const address = addresses[index];
  if (address === undefined) {
    callback(new TargetResolutionError(`${target.hostname} has no reachable address`), null);
    return;
  }
  connectToAddress({ ...target, hostname: address }, (...result) => {
    const [error] = result;
    const code = (error as NodeJS.ErrnoException | null)?.code;
    if (error && code && TRY_NEXT_ADDRESS.has(code) && index + 1 < addresses.length) {
      connectInOrder(addresses, index + 1, target, connectToAddress, callback);
      return;
    }
    callback(...result);
  });
}
