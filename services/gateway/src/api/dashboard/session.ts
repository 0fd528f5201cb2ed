import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** The cookie holding the session token; only the dashboard's paths ever receive it. */
export const SESSION_COOKIE = 'tamp_session';
export const DASHBOARD_PATH = '/dashboard';

/** Session tokens as billing mints them (`tss_` + base64url), bounded before any lookup. */
const SESSION_TOKEN = /^tss_[A-Za-z0-9_-]{20,100}$/;

export interface DashboardSession {
  accountId: string;
  sessionId: string;
  /** The token every form of this session carries (see csrfTokenOf). */
  csrfToken: string;
}

/** The session token from the request's cookie, when it has the shape of one. */
export function sessionTokenOf(request: FastifyRequest): string | null {
  const token = request.cookies[SESSION_COOKIE];
  return token !== undefined && SESSION_TOKEN.test(token) ? token : null;
}

/**
 * The anti-forgery token of a session: derived from the session token, which only this browser
 * holds (HttpOnly), so a page of another site can neither read nor compute it. Nothing extra is
 * stored, and it changes with every session.
 */
export function csrfTokenOf(sessionToken: string): string {
  return createHash('sha256').update(`csrf:${sessionToken}`).digest('base64url');
}

/** Constant-time check of a submitted form's token against the session's. */
export function isCsrfTokenValid(sessionToken: string, submitted: unknown): boolean {
  if (typeof submitted !== 'string') return false;
  const expected = Buffer.from(csrfTokenOf(sessionToken));
  const given = Buffer.from(submitted);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** A change without this session's form token, or sent from another origin: answered 403. */
export class RefusedChange extends Error {
  constructor() {
    super(
      'This form is out of date or did not come from the dashboard; reload the page and try again',
    );
  }
}

/**
 * Every change is a POST carrying the session's form token, from a page of this origin.
 * SameSite=Strict already keeps the cookie off other sites' requests; this holds even where a
 * browser does not honour it.
 */
export function checkFormToken(request: FastifyRequest, submitted: unknown): void {
  const token = sessionTokenOf(request);
  const origin = request.headers.origin;
  const sameOrigin = origin === undefined || origin === `${request.protocol}://${request.host}`;
  if (token === null || !sameOrigin || !isCsrfTokenValid(token, submitted)) {
    throw new RefusedChange();
  }
}

/**
 * Secure everywhere but plain HTTP on a loopback address (the local stack, where a browser would
 * otherwise drop the cookie); HttpOnly so no script reads it; SameSite=Strict so no other site's
 * page sends it; scoped to the dashboard's paths so the API never sees it.
 */
export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  expiresAt: Date,
): void {
  reply.setCookie(SESSION_COOKIE, token, {
    path: DASHBOARD_PATH,
    httpOnly: true,
    sameSite: 'strict',
    secure: !isPlainLocalHttp(request),
    expires: expiresAt,
  });
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, {
    path: DASHBOARD_PATH,
    httpOnly: true,
    sameSite: 'strict',
    secure: !isPlainLocalHttp(request),
  });
}

function isPlainLocalHttp(request: FastifyRequest): boolean {
  if (request.protocol !== 'http') return false;
  const host = request.hostname;
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]' || host === '::1';
}
