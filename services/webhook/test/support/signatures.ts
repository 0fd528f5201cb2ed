import type { IncomingHttpHeaders } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import { verifyTampDelivery } from '../../examples/verify-delivery';
import type { RecordedRequest } from './loopback-receiver';

/** Test-only: what a customer's receiver checks of a delivery, with both verifiers. */

/** Both verifiers a customer may use must accept the delivery, over the raw bytes. */
export function expectVerified(request: RecordedRequest, secret: string) {
  const tamp = verifyTampDelivery(request.body, request.headers, secret);
  expect(tamp).toMatchObject({ ok: true });
  const standard = new Webhook(secret).verify(request.body, stringHeaders(request.headers));
  expect(standard).toEqual(JSON.parse(request.body.toString('utf8')));
}

/** Neither verifier accepts the delivery with this secret. */
export function expectRejected(request: RecordedRequest, secret: string) {
  expect(verifyTampDelivery(request.body, request.headers, secret)).toMatchObject({ ok: false });
  expect(() => new Webhook(secret).verify(request.body, stringHeaders(request.headers))).toThrow();
}

export function stringHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).flatMap(([name, value]) =>
      typeof value === 'string' ? [[name, value]] : [],
    ),
  );
}
