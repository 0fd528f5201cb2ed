import { html } from '../html';
import { DASHBOARD_PATH } from '../session';
import { csrfField, page, when } from './layout';

export interface WebhooksView {
  csrfToken: string;
  webhookUrl: string | null;
  /** The signing secret, only when the customer asked to see it. */
  revealedSecret?: string | null;
  previousSecretValidUntil: string | null;
  notice?: string | null;
  problem?: string | null;
}

/** How long a rotated-out secret may keep signing; the API's own bounds (up to 7 days). */
const GRACE_PERIODS = [
  { seconds: 0, label: 'Stop at once (a leaked secret)' },
  { seconds: 3_600, label: '1 hour' },
  { seconds: 86_400, label: '24 hours' },
  { seconds: 604_800, label: '7 days' },
] as const;

export function webhooksPage(view: WebhooksView): string {
  const token = view.csrfToken;
  return page(
    { title: 'Webhooks', current: 'webhooks', ...view },
    html`<section aria-labelledby="default-url">
<h2 id="default-url">Default webhook URL</h2>
<p>Jobs created without their own <code>webhookUrl</code> report here.</p>
<form method="post" action="${DASHBOARD_PATH}/webhooks/url" class="stack">
${csrfField(token)}
<label for="webhook-url">URL</label>
<input id="webhook-url" name="webhookUrl" type="url" maxlength="2048" value="${view.webhookUrl ?? ''}"
  aria-describedby="webhook-url-help">
<p id="webhook-url-help" class="help">Leave empty to send no webhook by default.</p>
<button type="submit">Save URL</button>
</form>
${
  view.webhookUrl === null
    ? ''
    : html`<form method="post" action="${DASHBOARD_PATH}/webhooks/test">
${csrfField(token)}
<button type="submit" aria-describedby="test-help">Send a test delivery</button>
<p id="test-help" class="help">Sends your latest finished job's event to this URL once, signed as every delivery is.</p>
</form>`
}
</section>
<section aria-labelledby="signing-secret">
<h2 id="signing-secret">Signing secret</h2>
${secretBlock(view)}
<form method="post" action="${DASHBOARD_PATH}/webhooks/secret/rotate" class="stack">
${csrfField(token)}
<label for="grace">Keep the current secret signing for</label>
<select id="grace" name="gracePeriodSeconds">
${GRACE_PERIODS.map(
  (period) =>
    html`<option value="${period.seconds}"${period.seconds === 86_400 ? html` selected` : ''}>${period.label}</option>`,
)}
</select>
<button type="submit">Rotate the secret</button>
</form>
</section>`,
  );
}

function secretBlock(view: WebhooksView) {
  const previous =
    view.previousSecretValidUntil === null
      ? ''
      : html`<p>The previous secret also signs deliveries until ${when(view.previousSecretValidUntil)}.</p>`;
  if (view.revealedSecret) {
    return html`<p><label for="secret-value">Current secret</label>
<input id="secret-value" class="secret" type="text" readonly value="${view.revealedSecret}">
<button type="button" data-copy="secret-value">Copy</button></p>${previous}`;
  }
  return html`<form method="post" action="${DASHBOARD_PATH}/webhooks/secret/reveal">
${csrfField(view.csrfToken)}
<button type="submit">Reveal the secret</button>
</form>${previous}`;
}
