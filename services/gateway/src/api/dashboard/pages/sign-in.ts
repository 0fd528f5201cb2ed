import { html } from '../html';
import { DASHBOARD_PATH } from '../session';
import { page } from './layout';

/** Sign-in with an API key: the key is posted once and never kept by the browser. */
export function signInPage(problem: string | null = null): string {
  return page(
    { title: 'Sign in', problem },
    html`<p>Sign in with one of your account's API keys, or open a sign-in link from your operator.</p>
<form method="post" action="${DASHBOARD_PATH}/sign-in" class="stack">
<label for="api-key">API key</label>
<input id="api-key" name="apiKey" type="password" autocomplete="off" required
  pattern="sk_live_[A-Za-z0-9]+" aria-describedby="api-key-help">
<p id="api-key-help" class="help">Starts with <code>sk_live_</code>. It is used once to open a session and is not stored in this browser.</p>
<button type="submit">Sign in</button>
</form>`,
  );
}

/**
 * A sign-in link asks before it signs in: link scanners and previews that fetch it do not use
 * it up, only the person pressing the button does.
 */
export function signInLinkPage(token: string): string {
  return page(
    { title: 'Sign in' },
    html`<p>Continue to open a dashboard session with this one-time link.</p>
<form method="post" action="${DASHBOARD_PATH}/sign-in/link" class="stack">
<input type="hidden" name="token" value="${token}">
<button type="submit">Continue</button>
</form>`,
  );
}
