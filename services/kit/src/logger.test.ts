import { describe, expect, it } from 'vitest';
import { createLogger } from './logger';

describe('createLogger', () => {
  it('redacts API keys and current and previous webhook secrets wherever accounts are logged', () => {
    const lines: string[] = [];
    const logger = createLogger('test', 'info', { write: (line: string) => lines.push(line) });
    const current = 'whsec_Y3VycmVudC1zZWNyZXQtY3VycmVudC1zZWNyZXQ=';
    const previous = 'whsec_cHJldmlvdXMtc2VjcmV0LXByZXZpb3VzLXNlY3JldA==';
    const account = {
      accountId: 'acct_1',
      webhookSecret: current,
      previousWebhookSecret: { secret: previous, validUntil: '2025-01-16T00:00:00.000Z' },
    };
    logger.info(account, 'an account view');
    logger.info({ account, created: { apiKey: 'sk_live_abc', webhookSecret: current } }, 'nested');
    logger.info({ req: { headers: { authorization: 'Bearer sk_live_abc' } } }, 'a request');
    const output = lines.join('');
    expect(lines).toHaveLength(3);
    for (const secret of [current, previous, 'sk_live_abc']) expect(output).not.toContain(secret);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      accountId: 'acct_1',
      webhookSecret: '[redacted]',
      previousWebhookSecret: '[redacted]',
    });
  });

  it('redacts dashboard session tokens, cookies and sign-in link tokens', () => {
    const lines: string[] = [];
    const logger = createLogger('test', 'info', { write: (line: string) => lines.push(line) });
    const session = 'tss_c2Vzc2lvbi10b2tlbi1zZXNzaW9uLXRva2Vu';
    const link = 'tsl_bGluay10b2tlbi1saW5rLXRva2VuLWxpbmstdG9r';
    logger.info({ sessionToken: session, request: { token: link } }, 'a session');
    logger.info({ req: { headers: { cookie: `tamp_session=${session}` } } }, 'a request');
    const output = lines.join('');
    for (const secret of [session, link]) expect(output).not.toContain(secret);
    expect(lines).toHaveLength(2);
  });
});
