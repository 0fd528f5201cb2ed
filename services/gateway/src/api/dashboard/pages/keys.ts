import type { billingEndpoints } from '@tamp/proto';
import type { z } from 'zod';
import { html } from '../html';
import { DASHBOARD_PATH } from '../session';
import { csrfField, page, when } from './layout';

type KeyView = z.infer<typeof billingEndpoints.listKeys.response>['keys'][number];

export interface KeysView {
  csrfToken: string;
  keys: KeyView[];
  /** A key just created: shown this once, in full. */
  created?: { keyId: string; apiKey: string } | null;
  notice?: string | null;
  problem?: string | null;
}

export function keysPage(view: KeysView): string {
  const active = view.keys.filter((key) => key.revokedAt === null);
  const revoked = view.keys.filter((key) => key.revokedAt !== null);
  return page(
    { title: 'API keys', current: 'keys', ...view },
    html`${view.created ? createdKey(view.created) : ''}
<section aria-labelledby="active-keys">
<h2 id="active-keys">Active keys</h2>
${active.length === 0 ? html`<p>No active key.</p>` : keyTable(active, view.csrfToken, true)}
<form method="post" action="${DASHBOARD_PATH}/keys">
${csrfField(view.csrfToken)}
<button type="submit">Create a key</button>
</form>
</section>
${
  revoked.length === 0
    ? ''
    : html`<section aria-labelledby="revoked-keys">
<h2 id="revoked-keys">Revoked keys</h2>
${keyTable(revoked, view.csrfToken, false)}
</section>`
}
<section aria-labelledby="sessions">
<h2 id="sessions">Dashboard sessions</h2>
<p>Signs every browser out of this dashboard, this one included. API keys keep working.</p>
<form method="post" action="${DASHBOARD_PATH}/sessions/revoke">
${csrfField(view.csrfToken)}
<button type="submit">Sign out everywhere</button>
</form>
</section>`,
  );
}

function createdKey(created: { keyId: string; apiKey: string }) {
  return html`<section class="created" aria-labelledby="new-key">
<h2 id="new-key">Your new key</h2>
<p>Copy it now: it is shown once, and only its hash is stored.</p>
<p><label for="new-key-value">New API key</label>
<input id="new-key-value" class="secret" type="text" readonly value="${created.apiKey}">
<button type="button" data-copy="new-key-value">Copy</button></p>
</section>`;
}

function keyTable(keys: KeyView[], csrfToken: string, revocable: boolean) {
  return html`<table>
<caption class="visually-hidden">API keys</caption>
<thead><tr><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">${revocable ? 'Action' : 'Revoked'}</th></tr></thead>
<tbody>
${keys.map(
  (key) => html`<tr>
<td><code>${key.displayPrefix}…</code></td>
<td>${when(key.createdAt)}</td>
<td>${when(key.lastUsedAt)}</td>
<td>${
    revocable
      ? html`<form method="post" action="${DASHBOARD_PATH}/keys/${key.keyId}/revoke">
${csrfField(csrfToken)}
<button type="submit" aria-label="Revoke key ${key.displayPrefix}">Revoke</button>
</form>`
      : when(key.revokedAt)
  }</td>
</tr>`,
)}
</tbody>
</table>`;
}
