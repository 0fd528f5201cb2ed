import { lookup } from 'node:dns/promises';

/** Every address a host name resolves to, in resolver order. Injectable so tests can fake DNS. */
export type HostnameResolver = (hostname: string) => Promise<readonly string[]>;

/** The system resolver (getaddrinfo, /etc/hosts included), as used for ordinary connections. */
export const resolveWithSystemDns: HostnameResolver = async (hostname) => {
  const entries = await lookup(hostname, { all: true });
  return entries.map((entry) => entry.address);
};
