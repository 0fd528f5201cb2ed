import { execFile } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PRODUCTION_POLICY } from '@tamp/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness } from './harness';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const TOKEN = 'test-admin-token-0123456789';
const harness = new Harness();
let adminUrl: string;

beforeAll(async () => {
  await harness.start();
  adminUrl = await harness.gateways[0]!.adminApp.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => harness.stop());

const admin = () => harness.gateways[0]!.adminApp;

/** The CLI as operators run it (async: the admin API answers from this same process). */
async function cli(args: string[], env: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'scripts/admin/cli.ts', ...args],
      {
        cwd: ROOT,
        env: { ...process.env, TAMP_ADMIN_URL: adminUrl, ADMIN_TOKEN: TOKEN, ...env },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('admin API', () => {
  it.each([
    ['no token', {}],
    ['a wrong token', { authorization: 'Bearer wrong-token' }],
  ])('%s → 401', async (_name, headers) => {
    const response = await admin().inject({
      method: 'GET',
      url: '/admin/accounts/acct_x/keys',
      headers,
    });
    expect(response.statusCode).toBe(401);
    expect(response.json().error.code).toBe('UNAUTHORIZED');
  });

  it('refuses everything when ADMIN_TOKEN is unset', async () => {
    const { buildAdminApp } = await import('../src/api/app');
    const app = await buildAdminApp({
      logger: harness.logger,
      // Never reached: the token check refuses first.
      rpc: {} as never,
      adminToken: undefined,
      httpLimits: harness.defaults.httpLimits,
      webhookTargets: PRODUCTION_POLICY,
    });
    const response = await app.inject({
      method: 'GET',
      url: '/admin/accounts/a/keys',
      headers: { authorization: 'Bearer ' },
    });
    expect(response.statusCode).toBe(401);
    await app.close();
  });

  it('maps onto billing and validates bodies', async () => {
    const headers = { authorization: `Bearer ${TOKEN}` };
    const created = await admin().inject({
      method: 'POST',
      url: '/admin/accounts',
      headers,
      payload: { plan: 'pro', credits: 7 },
    });
    expect(created.statusCode).toBe(201);
    expect(created.json().data.apiKey).toMatch(/^sk_live_/);
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'createAccount',
      request: { plan: 'pro', credits: 7 },
    });
    const bad = await admin().inject({
      method: 'POST',
      url: '/admin/accounts',
      headers,
      payload: { plan: 'gold' },
    });
    expect(bad.json().error.code).toBe('VALIDATION_ERROR');
  });

  it('refuses an account webhook URL the deployment would never deliver to, calling nothing', async () => {
    const headers = { authorization: `Bearer ${TOKEN}` };
    const calls = harness.adminCalls.length;
    for (const webhookUrl of [
      'https://169.254.169.254/latest/meta-data/',
      'https://10.0.0.7/hook',
      'http://hooks.example.com/tamp',
      'https://hooks.example.com/\u0000',
    ]) {
      for (const [method, url] of [
        ['POST', '/admin/accounts'],
        ['PATCH', '/admin/accounts/acct_1'],
      ] as const) {
        const response = await admin().inject({ method, url, headers, payload: { webhookUrl } });
        expect(response.statusCode, `${method} ${webhookUrl}`).toBe(400);
        expect(response.json().error).toMatchObject({
          code: 'VALIDATION_ERROR',
          details: [{ path: 'body.webhookUrl' }],
        });
      }
    }
    expect(harness.adminCalls.length).toBe(calls);
    const allowed = await admin().inject({
      method: 'PATCH',
      url: '/admin/accounts/acct_1',
      headers,
      payload: { webhookUrl: 'https://hooks.example.com/tamp' },
    });
    expect(allowed.statusCode).toBe(200);
  });
});

describe('admin API: webhook secret rotation and billing cycle anchor', () => {
  const headers = { authorization: `Bearer ${TOKEN}` };

  it('rotates with the default or a given grace period; unknown accounts are 404 NOT_FOUND', async () => {
    const rotated = await admin().inject({
      method: 'POST',
      url: '/admin/accounts/acct_1/webhook-secret/rotate',
      headers,
    });
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json()).toEqual({
      success: true,
      data: {
        webhookSecret: expect.stringMatching(/^whsec_/),
        previousValidUntil: expect.any(String),
      },
    });
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'rotateWebhookSecret',
      request: { accountId: 'acct_1' },
    });
    const immediate = await admin().inject({
      method: 'POST',
      url: '/admin/accounts/acct_1/webhook-secret/rotate',
      headers,
      payload: { gracePeriodSeconds: 0 },
    });
    expect(immediate.statusCode).toBe(200);
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'rotateWebhookSecret',
      request: { accountId: 'acct_1', gracePeriodSeconds: 0 },
    });
    for (const payload of [{ gracePeriodSeconds: -1 }, { gracePeriodSeconds: 604_801 }, { x: 1 }]) {
      const bad = await admin().inject({
        method: 'POST',
        url: '/admin/accounts/acct_1/webhook-secret/rotate',
        headers,
        payload,
      });
      expect(bad.statusCode, JSON.stringify(payload)).toBe(400);
      expect(bad.json().error.code).toBe('VALIDATION_ERROR');
    }
    const unknown = await admin().inject({
      method: 'POST',
      url: `/admin/accounts/${Harness.UNKNOWN_ACCOUNT}/webhook-secret/rotate`,
      headers,
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('NOT_FOUND');
  });

  it('sets and clears billingCycleAnchor; malformed anchors are 400 VALIDATION_ERROR', async () => {
    const set = await admin().inject({
      method: 'PATCH',
      url: '/admin/accounts/acct_1',
      headers,
      payload: { billingCycleAnchor: '2025-01-10T08:00:00+02:00' },
    });
    expect(set.statusCode).toBe(200);
    expect(set.json().data.billingCycleAnchor).toBe('2025-01-10T06:00:00.000Z');
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'updateAccount',
      request: { accountId: 'acct_1', billingCycleAnchor: '2025-01-10T08:00:00+02:00' },
    });
    const cleared = await admin().inject({
      method: 'PATCH',
      url: '/admin/accounts/acct_1',
      headers,
      payload: { billingCycleAnchor: null },
    });
    expect(cleared.json().data.billingCycleAnchor).toBeNull();
    const calls = harness.adminCalls.length;
    for (const billingCycleAnchor of ['2025-01-10', '2025-02-30T00:00:00Z', 'soon', 1736496000]) {
      for (const [method, url] of [
        ['PATCH', '/admin/accounts/acct_1'],
        ['POST', '/admin/accounts'],
      ] as const) {
        const bad = await admin().inject({ method, url, headers, payload: { billingCycleAnchor } });
        expect(bad.statusCode, `${method} ${billingCycleAnchor}`).toBe(400);
        expect(bad.json().error).toMatchObject({
          code: 'VALIDATION_ERROR',
          details: [expect.objectContaining({ path: 'body.billingCycleAnchor' })],
        });
      }
    }
    expect(harness.adminCalls).toHaveLength(calls);
  });
});

describe('admin CLI', () => {
  it('account create --json prints exactly accountId, apiKey, webhookSecret', async () => {
    const result = await cli([
      'account',
      'create',
      '--plan',
      'pro',
      '--credits',
      '5',
      '--webhook-url',
      'https://example.com/h',
      '--json',
    ]);
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout);
    expect(Object.keys(output).sort()).toEqual(['accountId', 'apiKey', 'webhookSecret']);
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'createAccount',
      request: { plan: 'pro', credits: 5, webhookUrl: 'https://example.com/h' },
    });
  });

  it('account update, credits add, key create/list/revoke, deliveries, redeliver', async () => {
    expect((await cli(['account', 'update', 'acct_1', '--no-webhook-url'])).code).toBe(0);
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'updateAccount',
      request: { accountId: 'acct_1', webhookUrl: null },
    });
    expect((await cli(['credits', 'add', 'acct_1', '40'])).stdout).toContain('40');
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'addCredits',
      request: { accountId: 'acct_1', credits: 40 },
    });
    const key = JSON.parse((await cli(['key', 'create', 'acct_1', '--json'])).stdout);
    expect(Object.keys(key).sort()).toEqual(['apiKey', 'keyId']);
    const [list, revoke, deliveries, redeliver] = await Promise.all([
      cli(['key', 'list', 'acct_1']),
      cli(['key', 'revoke', 'key_1']),
      cli(['deliveries', 'job_1']),
      cli(['redeliver', 'job_1']),
    ]);
    expect(list.stdout).toContain('active');
    expect(revoke.stdout).toContain('revoked');
    expect(deliveries.stdout).toContain('failed 500');
    expect(redeliver.stdout).toContain('scheduled');
  });

  it('account rotate-webhook-secret --json prints exactly webhookSecret, previousValidUntil', async () => {
    const result = await cli(['account', 'rotate-webhook-secret', 'acct_1', '--json']);
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout);
    expect(Object.keys(output).sort()).toEqual(['previousValidUntil', 'webhookSecret']);
    expect(output.webhookSecret).toMatch(/^whsec_/);
    expect(Date.parse(output.previousValidUntil)).toBeGreaterThan(Date.now());
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'rotateWebhookSecret',
      request: { accountId: 'acct_1' },
    });
    const text = await cli([
      'account',
      'rotate-webhook-secret',
      'acct_1',
      '--grace-period-seconds',
      '0',
    ]);
    expect(text.stdout).toMatch(/^webhook secret whsec_\S+\n.*previous secret also signs/);
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'rotateWebhookSecret',
      request: { accountId: 'acct_1', gracePeriodSeconds: 0 },
    });
    const unknown = await cli(['account', 'rotate-webhook-secret', Harness.UNKNOWN_ACCOUNT]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('NOT_FOUND');
    expect((await cli(['account', 'rotate-webhook-secret'])).code).toBe(2);
  });

  it('account update --billing-cycle-anchor / --no-billing-cycle-anchor', async () => {
    const set = await cli([
      'account',
      'update',
      'acct_1',
      '--billing-cycle-anchor',
      '2025-01-10T00:00:00Z',
    ]);
    expect(set.code).toBe(0);
    expect(set.stdout).toContain('30-day cycles from 2025-01-10T00:00:00.000Z');
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'updateAccount',
      request: { accountId: 'acct_1', billingCycleAnchor: '2025-01-10T00:00:00Z' },
    });
    expect((await cli(['account', 'update', 'acct_1', '--no-billing-cycle-anchor'])).code).toBe(0);
    expect(harness.adminCalls.at(-1)).toEqual({
      endpoint: 'updateAccount',
      request: { accountId: 'acct_1', billingCycleAnchor: null },
    });
    const both = await cli([
      'account',
      'update',
      'acct_1',
      '--billing-cycle-anchor',
      '2025-01-10T00:00:00Z',
      '--no-billing-cycle-anchor',
    ]);
    expect(both.code).toBe(2);
    const invalid = await cli(['account', 'update', 'acct_1', '--billing-cycle-anchor', 'monday']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain('VALIDATION_ERROR');
    expect(invalid.stderr).toContain('billingCycleAnchor');
  });

  it('usage errors exit 2; API errors exit 1 with the code', async () => {
    const usage = await cli(['credits', 'add', 'acct_1', 'ten']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('positive integer');
    expect((await cli(['frobnicate'])).code).toBe(2);
    const denied = await cli(['key', 'list', 'acct_1'], { ADMIN_TOKEN: 'wrong' });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('UNAUTHORIZED');
  });
});
