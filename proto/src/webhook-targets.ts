import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { withoutNul } from './storable-strings';

/**
 * Where webhooks may be sent, one rule for the two places that apply it: the gateway, when a
 * `webhookUrl` is given (a job's, or an account default set through the admin API), with
 * {@link checkTargetUrl} alone, which needs no DNS; and the webhook service at delivery, with
 * it and then {@link classifyResolvedAddresses} over what the host name resolves to then (DNS
 * can change between the two). Free of Node built-ins: the client bundles proto for browsers.
 */

/**
 * Webhook targets: absolute http(s) URLs only, IPv6 literals included, and storable (a URL
 * parser would percent-encode a U+0000 in the path, but the string itself is what is stored).
 * Whether a target may be reached is the deployment's target policy (`webhook-targets.ts`):
 * checked by the gateway when the URL is given and by the webhook service at delivery time.
 */
export const httpUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .check(withoutNul());

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Where webhooks may be sent. Decided per deployment (docs/decisions.md#webhooks). */
export interface TargetPolicy {
  /** Plain `http:` targets are accepted (local development only). */
  readonly allowHttp: boolean;
  /** CIDRs exempt from the address refusals, e.g. `127.0.0.0/8`. Cloud metadata stays refused. */
  readonly allowCidrs: readonly string[];
}

/** `npm start`: a developer receives webhooks on their own machine over http. */
export const LOCAL_DEVELOPMENT_POLICY: TargetPolicy = Object.freeze({
  allowHttp: true,
  allowCidrs: Object.freeze(['127.0.0.0/8', '::1/128']),
});

/** The Helm chart: https only, only public addresses. */
export const PRODUCTION_POLICY: TargetPolicy = Object.freeze({
  allowHttp: false,
  allowCidrs: Object.freeze([]),
});

/** When allowed, `address` is the canonical text of the address to connect to. */
export type AddressVerdict =
  | { allowed: true; address: string }
  | { allowed: false; reason: string };

export type TargetUrlVerdict = { allowed: true; url: URL } | { allowed: false; reason: string };

/**
 * Instance-metadata services hand out cloud credentials, so they are refused even when an
 * allow-listed CIDR covers them (AWS/GCP/Azure/OpenStack, AWS ECS task metadata, AWS IPv6,
 * Alibaba, Azure WireServer).
 */
const CLOUD_METADATA_ADDRESSES: ReadonlySet<string> = new Set([
  '169.254.169.254',
  '169.254.170.2',
  '100.100.100.200',
  '168.63.129.16',
  'fd00:ec2::254',
]);

const IPV4_RANGE_NAMES: Readonly<Record<string, string>> = {
  unspecified: 'unspecified (0.0.0.0/8)',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local (169.254.0.0/16)',
  loopback: 'loopback (127.0.0.0/8)',
  carrierGradeNat: 'carrier-grade NAT (100.64.0.0/10)',
  private: 'private (RFC 1918)',
  reserved: 'reserved or documentation-only',
};

const IPV6_RANGE_NAMES: Readonly<Record<string, string>> = {
  unspecified: 'unspecified (::)',
  linkLocal: 'link-local (fe80::/10)',
  multicast: 'multicast (ff00::/8)',
  loopback: 'loopback (::1)',
  uniqueLocal: 'unique-local (fc00::/7)',
  teredo: 'Teredo tunnelling (2001::/32)',
  reserved: 'reserved or documentation-only',
};

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
const IPV4_COMPATIBLE_V6 = ipaddr.parseCIDR('::/96');
const NAT64_WELL_KNOWN_PREFIX = ipaddr.parseCIDR('64:ff9b::/96');

/**
 * Decides whether a webhook may connect to `ip`. Refuses everything that is not plainly
 * public unicast — loopback, private, CGNAT, link-local, unique-local, unspecified, multicast,
 * broadcast, reserved, cloud metadata — including the same targets written as IPv4-mapped,
 * IPv4-compatible, SIIT, NAT64 or 6to4 IPv6, unless `policy.allowCidrs` covers the address.
 */
export function classifyAddress(ip: string, policy: TargetPolicy): AddressVerdict {
  const text = stripBrackets(ip.trim());
  // A zone id pins the packet to a local interface; no public target needs one.
  if (text.includes('%')) return refuse(`${ip} is a scoped IPv6 address`);
  if (!ipaddr.isValid(text)) return refuse(`"${ip}" is not an IP address`);
  let address: Address = parseStrictly(text);
  // The kernel sends ::ffff:a.b.c.d to a.b.c.d, so it is judged — and connected to — as IPv4.
  if (address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress()) {
    address = address.toIPv4Address();
  }
  const canonical = address.toString();
  const shown = canonical === text ? canonical : `${ip} (${canonical})`;
  if (CLOUD_METADATA_ADDRESSES.has(canonical)) {
    return refuse(`${shown} is a cloud metadata endpoint`);
  }
  if (isAllowListed(address, policy.allowCidrs)) return { allowed: true, address: canonical };
  const problem = address instanceof ipaddr.IPv4 ? ipv4Problem(address) : ipv6Problem(address);
  return problem === null ? { allowed: true, address: canonical } : refuse(`${shown} ${problem}`);
}

/** Boolean form of {@link classifyAddress}. */
export function isAddressAllowed(ip: string, policy: TargetPolicy): boolean {
  return classifyAddress(ip, policy).allowed;
}

/**
 * Every address a name resolves to must pass: if any is refused the whole target is, since the
 * connection could otherwise be steered to the bad one (round-robin, rebinding, fallback).
 * On success the canonical addresses, deduplicated, in resolver order.
 */
export function classifyResolvedAddresses(
  hostname: string,
  addresses: readonly string[],
  policy: TargetPolicy,
): { allowed: true; addresses: string[] } | { allowed: false; reason: string } {
  if (addresses.length === 0) return refuse(`${hostname} resolved to no address`);
  const allowed = new Set<string>();
  for (const address of addresses) {
    const verdict = classifyAddress(address, policy);
    if (!verdict.allowed) return refuse(`${hostname} resolves to ${verdict.reason}`);
    allowed.add(verdict.address);
  }
  return { allowed: true, addresses: [...allowed] };
}

/**
 * The checks that need no DNS: scheme (https, or http when the policy allows it), no
 * credentials in the URL, and — when the host is an IP literal — the address policy.
 * Host names are checked against their resolved addresses at connect time.
 */
export function checkTargetUrl(url: string | URL, policy: TargetPolicy): TargetUrlVerdict {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return refuse('the webhook URL is not a valid absolute URL');
  }
  if (parsed.protocol === 'http:') {
    if (!policy.allowHttp) return refuse('plain http is not allowed; use an https URL');
  } else if (parsed.protocol !== 'https:') {
    return refuse(`the ${parsed.protocol} scheme is not allowed; use an https URL`);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    return refuse('credentials in the webhook URL are not allowed');
  }
  if (parsed.hostname === '') return refuse('the webhook URL has no host');
  const host = stripBrackets(parsed.hostname);
  if (isIpLiteral(host)) {
    const verdict = classifyAddress(host, policy);
    if (!verdict.allowed) return refuse(verdict.reason);
  }
  return { allowed: true, url: parsed };
}

function ipv4Problem(address: ipaddr.IPv4): string | null {
  const range: string = address.range();
  if (range === 'unicast') return null;
  return `is ${IPV4_RANGE_NAMES[range] ?? `special-purpose (${range})`}`;
}

function ipv6Problem(address: ipaddr.IPv6): string | null {
  const range: string = address.range();
  switch (range) {
    case 'rfc6052':
      // Only the well-known /96 carries a routable IPv4 (DNS64); 64:ff9b:1::/48 is local-use.
      return address.match(NAT64_WELL_KNOWN_PREFIX)
        ? embeddedIpv4Problem(lastFourBytes(address))
        : 'is a local-use NAT64 prefix (64:ff9b:1::/48)';
    case 'rfc6145':
      return embeddedIpv4Problem(lastFourBytes(address));
    case '6to4':
      return embeddedIpv4Problem(sixToFourIpv4(address));
    case 'unicast':
      if (address.match(IPV4_COMPATIBLE_V6)) {
        const embedded = lastFourBytes(address);
        const detail = embeddedIpv4Problem(embedded) ?? `embeds ${embedded.toString()}`;
        return `is a deprecated IPv4-compatible address and ${detail}`;
      }
      return address.match(GLOBAL_UNICAST_V6) ? null : 'is outside global unicast (2000::/3)';
    default:
      return `is ${IPV6_RANGE_NAMES[range] ?? `special-purpose (${range})`}`;
  }
}

// Translation prefixes reach whatever IPv4 they embed, so that IPv4 decides; the allow-list
// is deliberately not consulted for it.
function embeddedIpv4Problem(embedded: ipaddr.IPv4): string | null {
  const text = embedded.toString();
  if (CLOUD_METADATA_ADDRESSES.has(text)) return `embeds ${text}, a cloud metadata endpoint`;
  const problem = ipv4Problem(embedded);
  return problem === null ? null : `embeds ${text}, which ${problem}`;
}

// ipaddr.js reads the deprecated IPv4-compatible spelling `::a.b.c.d` as IPv4-mapped
// `::ffff:a.b.c.d`; they are different addresses, so that spelling is parsed by hand.
function parseStrictly(text: string): Address {
  const compatible = /^::(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (compatible?.[1] && ipaddr.IPv4.isValidFourPartDecimal(compatible[1])) {
    const [a = 0, b = 0, c = 0, d = 0] = ipaddr.IPv4.parse(compatible[1]).octets;
    return new ipaddr.IPv6([0, 0, 0, 0, 0, 0, (a << 8) | b, (c << 8) | d]);
  }
  return ipaddr.parse(text);
}

function lastFourBytes(address: ipaddr.IPv6): ipaddr.IPv4 {
  return new ipaddr.IPv4(address.toByteArray().slice(12, 16));
}

function sixToFourIpv4(address: ipaddr.IPv6): ipaddr.IPv4 {
  return new ipaddr.IPv4(address.toByteArray().slice(2, 6));
}

function isAllowListed(address: Address, allowCidrs: readonly string[]): boolean {
  return allowCidrs.some((cidr) => {
    const range = parseCidr(cidr);
    return range[0].kind() === address.kind() && address.match(range);
  });
}

function parseCidr(cidr: string): [Address, number] {
  try {
    return ipaddr.parseCIDR(cidr.trim());
  } catch {
    throw new TypeError(`target policy allow-list entry "${cidr}" is not a CIDR`);
  }
}

/**
 * A URL's host is an address rather than a name. The URL parser has already rewritten every
 * IPv4 spelling (`0x7f.1`, `2130706433`) as four decimal parts and kept IPv6 in brackets.
 */
function isIpLiteral(host: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(host) || ipaddr.IPv6.isValid(host);
}

/** A CIDR such as `10.0.0.0/8` or `fd00::/8`, as a policy's allow-list takes it. */
export function isCidr(text: string): boolean {
  try {
    ipaddr.parseCIDR(text.trim());
    return true;
  } catch {
    return false;
  }
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function refuse(reason: string): { allowed: false; reason: string } {
  return { allowed: false, reason };
}
