import { describe, expect, it } from 'vitest';
import {
  checkTargetUrl,
  classifyAddress,
  classifyResolvedAddresses,
  isAddressAllowed,
  isCidr,
  LOCAL_DEVELOPMENT_POLICY,
  PRODUCTION_POLICY,
  type TargetPolicy,
} from './webhook-targets';

// Addresses are only classified here, never contacted.
const PUBLIC_ADDRESSES = [
  '93.184.215.14',
  '8.8.8.8',
  '1.1.1.1',
  '2606:4700:4700::1111',
  '2a00:1450:4001:82a::200e',
  // NAT64 / SIIT / 6to4 forms of a public IPv4 reach that public IPv4.
  '64:ff9b::808:808',
  '2002:808:808::1',
  '::ffff:8.8.8.8',
];

const REFUSED_ADDRESSES: Record<string, string> = {
  '127.0.0.1': 'loopback',
  '127.255.255.254': 'loopback',
  '::1': 'loopback',
  '10.0.0.1': 'private',
  '172.16.0.1': 'private',
  '172.31.255.254': 'private',
  '192.168.1.1': 'private',
  '100.64.0.1': 'carrier-grade NAT',
  '100.127.255.254': 'carrier-grade NAT',
  '169.254.0.1': 'link-local',
  'fe80::1': 'link-local',
  'fc00::1': 'unique-local',
  'fd00::1': 'unique-local',
  '0.0.0.0': 'unspecified',
  '0.1.2.3': 'unspecified',
  '::': 'unspecified',
  '224.0.0.1': 'multicast',
  '239.255.255.250': 'multicast',
  'ff02::1': 'multicast',
  '255.255.255.255': 'broadcast',
  '240.0.0.1': 'reserved',
  '192.0.2.1': 'reserved',
  '198.18.0.1': 'reserved',
  '2001:db8::1': 'reserved',
  '169.254.169.254': 'cloud metadata',
  '169.254.170.2': 'cloud metadata',
  'fd00:ec2::254': 'cloud metadata',
  '100.100.100.200': 'cloud metadata',
  '168.63.129.16': 'cloud metadata',
  // IPv4-mapped, in dotted and hex notation.
  '::ffff:127.0.0.1': 'loopback',
  '::ffff:7f00:1': 'loopback',
  '::ffff:10.0.0.1': 'private',
  '::ffff:a9fe:a9fe': 'cloud metadata',
  '::FFFF:192.168.0.1': 'private',
  // IPv4-compatible (deprecated) forms.
  '::127.0.0.1': 'loopback',
  '::7f00:1': 'loopback',
  '::8.8.8.8': 'IPv4-compatible',
  // SIIT (RFC 6145).
  '::ffff:0:7f00:1': 'loopback',
  // NAT64 embedding non-public IPv4.
  '64:ff9b::127.0.0.1': 'loopback',
  '64:ff9b::a00:1': 'private',
  '64:ff9b::a9fe:a9fe': 'cloud metadata',
  '64:ff9b:1::808:808': 'local-use NAT64',
  // 6to4 embedding non-public IPv4.
  '2002:7f00:1::1': 'loopback',
  '2002:c0a8:101::1': 'private',
  '2001::1': 'Teredo',
  '4000::1': 'global unicast',
  // Non-canonical IPv4 spellings of loopback.
  '127.1': 'loopback',
  '2130706433': 'loopback',
  '0x7f.0.0.1': 'loopback',
  '[::1]': 'loopback',
  'fe80::1%eth0': 'scoped',
};

describe('classifyAddress under the production policy', () => {
  it.each(Object.entries(REFUSED_ADDRESSES))('refuses %s (%s)', (address, why) => {
    const verdict = classifyAddress(address, PRODUCTION_POLICY);
    expect(verdict.allowed).toBe(false);
    expect(verdict.allowed ? '' : verdict.reason).toContain(why);
    expect(isAddressAllowed(address, PRODUCTION_POLICY)).toBe(false);
  });

  it.each(PUBLIC_ADDRESSES)('allows public %s', (address) => {
    expect(isAddressAllowed(address, PRODUCTION_POLICY)).toBe(true);
  });

  it('refuses things that are not addresses', () => {
    for (const junk of ['', 'example.com', '1.2.3.4.5', '::g', '256.1.1.1']) {
      expect(isAddressAllowed(junk, PRODUCTION_POLICY), junk).toBe(false);
    }
  });

  it('returns the canonical address to connect to, IPv4-mapped collapsed to IPv4', () => {
    expect(classifyAddress('::ffff:8.8.8.8', PRODUCTION_POLICY)).toEqual({
      allowed: true,
      address: '8.8.8.8',
    });
    expect(classifyAddress('2606:4700:4700:0:0:0:0:1111', PRODUCTION_POLICY)).toEqual({
      allowed: true,
      address: '2606:4700:4700::1111',
    });
  });
});

describe('allow-listed CIDRs', () => {
  it('the local development policy allows loopback, v4 and v6, and nothing else private', () => {
    for (const address of ['127.0.0.1', '127.0.0.2', '::1', '::ffff:127.0.0.1', '[::1]']) {
      expect(isAddressAllowed(address, LOCAL_DEVELOPMENT_POLICY), address).toBe(true);
    }
    for (const address of ['10.0.0.1', '192.168.1.1', '169.254.169.254', 'fd00::1', '0.0.0.0']) {
      expect(isAddressAllowed(address, LOCAL_DEVELOPMENT_POLICY), address).toBe(false);
    }
  });

  it('exempts exactly the listed ranges', () => {
    const policy: TargetPolicy = { allowHttp: false, allowCidrs: ['10.1.0.0/16', 'fd12::/16'] };
    expect(isAddressAllowed('10.1.2.3', policy)).toBe(true);
    expect(isAddressAllowed('10.2.0.1', policy)).toBe(false);
    expect(isAddressAllowed('fd12::5', policy)).toBe(true);
    expect(isAddressAllowed('fd13::5', policy)).toBe(false);
  });

  it('never exempts cloud metadata, even inside a listed range', () => {
    const policy: TargetPolicy = {
      allowHttp: true,
      allowCidrs: ['169.254.0.0/16', '100.64.0.0/10', 'fd00::/8'],
    };
    expect(isAddressAllowed('169.254.1.1', policy)).toBe(true);
    for (const metadata of ['169.254.169.254', '100.100.100.200', 'fd00:ec2::254']) {
      expect(isAddressAllowed(metadata, policy), metadata).toBe(false);
    }
  });

  it('does not extend a listed IPv4 range to NAT64 or 6to4 forms of it', () => {
    expect(isAddressAllowed('64:ff9b::7f00:1', LOCAL_DEVELOPMENT_POLICY)).toBe(false);
    expect(isAddressAllowed('2002:7f00:1::1', LOCAL_DEVELOPMENT_POLICY)).toBe(false);
  });

  it('reports a malformed allow-list entry instead of ignoring it', () => {
    const policy: TargetPolicy = { allowHttp: false, allowCidrs: ['10.0.0.0/33'] };
    expect(() => isAddressAllowed('10.0.0.1', policy)).toThrow(/not a CIDR/);
  });

  it('the exported policies cannot be modified at run time', () => {
    expect(Object.isFrozen(PRODUCTION_POLICY)).toBe(true);
    expect(Object.isFrozen(LOCAL_DEVELOPMENT_POLICY.allowCidrs)).toBe(true);
  });
});

describe('classifyResolvedAddresses', () => {
  it('refuses the name when ANY resolved address is refused, wherever it appears', () => {
    const publicFirst = classifyResolvedAddresses(
      'evil.example',
      ['93.184.215.14', '127.0.0.1'],
      PRODUCTION_POLICY,
    );
    expect(publicFirst).toEqual({
      allowed: false,
      reason: expect.stringContaining('evil.example resolves to 127.0.0.1'),
    });
    const publicLast = classifyResolvedAddresses(
      'evil.example',
      ['::ffff:a9fe:a9fe', '8.8.8.8'],
      PRODUCTION_POLICY,
    );
    expect(publicLast.allowed).toBe(false);
  });

  it('returns the canonical, deduplicated addresses when all pass', () => {
    expect(
      classifyResolvedAddresses(
        'ok.example',
        ['8.8.8.8', '::ffff:8.8.8.8', '1.1.1.1'],
        PRODUCTION_POLICY,
      ),
    ).toEqual({ allowed: true, addresses: ['8.8.8.8', '1.1.1.1'] });
  });

  it('refuses an empty answer', () => {
    expect(classifyResolvedAddresses('none.example', [], PRODUCTION_POLICY).allowed).toBe(false);
  });
});

describe('checkTargetUrl', () => {
  const httpNoLoopback: TargetPolicy = { allowHttp: true, allowCidrs: [] };

  it('refuses plain http under the production policy and allows https', () => {
    expect(checkTargetUrl('http://hooks.example.com/tamp', PRODUCTION_POLICY)).toEqual({
      allowed: false,
      reason: expect.stringContaining('plain http'),
    });
    const verdict = checkTargetUrl('https://hooks.example.com/tamp?x=1', PRODUCTION_POLICY);
    expect(verdict.allowed && verdict.url.href).toBe('https://hooks.example.com/tamp?x=1');
  });

  it('allows http when the deployment does', () => {
    expect(checkTargetUrl('http://localhost:3000/hook', LOCAL_DEVELOPMENT_POLICY).allowed).toBe(
      true,
    );
    expect(checkTargetUrl('http://127.0.0.1:3000/hook', LOCAL_DEVELOPMENT_POLICY).allowed).toBe(
      true,
    );
    expect(checkTargetUrl('http://[::1]:3000/hook', LOCAL_DEVELOPMENT_POLICY).allowed).toBe(true);
  });

  it('refuses other schemes, credentials and unparseable URLs whatever the policy', () => {
    for (const url of [
      'ftp://hooks.example.com/',
      'file:///etc/passwd',
      'gopher://127.0.0.1:6379/_INFO',
      'ws://hooks.example.com/',
      'https://user:pass@hooks.example.com/',
      'https://user@hooks.example.com/',
      'https://:pass@hooks.example.com/',
      'not a url',
      '/relative/path',
    ]) {
      expect(checkTargetUrl(url, LOCAL_DEVELOPMENT_POLICY).allowed, url).toBe(false);
    }
  });

  it.each([
    ['http://127.0.0.1/', 'loopback'],
    ['http://[::1]/', 'loopback'],
    ['https://10.0.0.1/', 'private'],
    ['http://169.254.169.254/latest/meta-data/', 'cloud metadata'],
    ['http://[fd00::1]/', 'unique-local'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://[::ffff:7f00:1]/', 'loopback'],
    ['http://[fd00:ec2::254]/', 'cloud metadata'],
    ['http://[64:ff9b::a9fe:a9fe]/', 'cloud metadata'],
    ['http://0.0.0.0:8080/', 'unspecified'],
    // The URL parser turns these spellings into 127.0.0.1 before the check sees them.
    ['http://2130706433/', 'loopback'],
    ['http://0x7f000001/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
  ])('refuses the literal-address target %s (%s)', (url, why) => {
    const verdict = checkTargetUrl(url, httpNoLoopback);
    expect(verdict.allowed).toBe(false);
    expect(verdict.allowed ? '' : verdict.reason).toContain(why);
  });

  it('leaves host names to the connect-time address check', () => {
    // localhost resolves to loopback; that is refused when the name is resolved, not here.
    expect(checkTargetUrl('http://localhost/', httpNoLoopback).allowed).toBe(true);
  });
});

describe('isCidr', () => {
  it('accepts IPv4 and IPv6 CIDRs and nothing else', () => {
    for (const cidr of ['127.0.0.0/8', ' 10.0.0.0/8 ', '::1/128', 'fd00::/8']) {
      expect(isCidr(cidr), cidr).toBe(true);
    }
    for (const junk of ['', 'localhost', '10.0.0.1', '10.0.0.0/33', '::/129']) {
      expect(isCidr(junk), junk).toBe(false);
    }
  });
});
