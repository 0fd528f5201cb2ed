import {
  JOB_STATUSES,
  JOB_TYPES,
  type JobRead,
  type PublicJobSummary,
  type webhookEndpoints,
} from '@tamp/proto';
import type { z } from 'zod';
import { html, type SafeHtml } from '../html';
import { DASHBOARD_PATH } from '../session';
import { csrfField, page, when } from './layout';

type Delivery = z.infer<typeof webhookEndpoints.listDeliveries.response>['deliveries'][number];

export interface JobListView {
  csrfToken: string;
  items: PublicJobSummary[];
  filters: { type?: string | undefined; status?: string | undefined };
  nextCursor: string | null;
}

export function jobListPage(view: JobListView): string {
  return page(
    { title: 'Jobs', current: 'jobs', csrfToken: view.csrfToken },
    html`<form method="get" action="${DASHBOARD_PATH}/jobs" class="filters">
<label for="type">Type</label>
${choice('type', JOB_TYPES, view.filters.type)}
<label for="status">Status</label>
${choice('status', JOB_STATUSES, view.filters.status)}
<button type="submit">Filter</button>
</form>
${view.items.length === 0 ? html`<p>No job matches.</p>` : jobTable(view.items)}
${
  view.nextCursor === null
    ? ''
    : html`<p><a href="${DASHBOARD_PATH}/jobs?${new URLSearchParams({
        ...definedOnly(view.filters),
        cursor: view.nextCursor,
      }).toString()}">Older jobs</a></p>`
}`,
  );
}

function choice(name: string, values: readonly string[], selected: string | undefined) {
  return html`<select id="${name}" name="${name}">
<option value="">Any</option>
${values.map((value) => html`<option value="${value}"${value === selected ? html` selected` : ''}>${value}</option>`)}
</select>`;
}

function jobTable(items: PublicJobSummary[]): SafeHtml {
  return html`<table>
<thead><tr><th scope="col">Job</th><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Ratio</th></tr></thead>
<tbody>
${items.map(
  (job) => html`<tr>
<td><a href="${DASHBOARD_PATH}/jobs/${encodeURIComponent(job.id)}"><code>${job.id}</code></a></td>
<td>${job.name ?? ''}</td>
<td>${job.type}</td>
<td>${job.status}</td>
<td>${when(job.createdAt)}</td>
<td>${job.metrics ? job.metrics.compressionRatio.toFixed(2) : ''}</td>
</tr>`,
)}
</tbody>
</table>`;
}

export interface JobView {
  csrfToken: string;
  job: JobRead;
  deliveries: Delivery[];
  notice?: string | null;
  problem?: string | null;
}

/** A job with its result and webhook deliveries; refreshes itself while it runs (dashboard.js). */
export function jobPage(view: JobView): string {
  const { job } = view;
  const running = job.status !== 'completed' && job.status !== 'failed';
  return page(
    { title: `Job ${job.id}`, current: 'jobs', ...view },
    html`<dl class="facts"${running ? html` data-refresh-while-running="5"` : ''}>
<dt>Status</dt><dd id="job-status">${job.status}</dd>
${job.error ? html`<dt>Error</dt><dd>${job.error}</dd>` : ''}
</dl>
${job.result ? result(job.id, job.result) : ''}
<section aria-labelledby="deliveries">
<h2 id="deliveries">Webhook deliveries</h2>
${view.deliveries.length === 0 ? html`<p>No delivery attempt.</p>` : deliveryTable(view.deliveries)}
${
  running
    ? ''
    : html`<form method="post" action="${DASHBOARD_PATH}/jobs/${encodeURIComponent(job.id)}/redeliver">
${csrfField(view.csrfToken)}
<button type="submit">Deliver the webhook again</button>
</form>`
}
</section>`,
  );
}

function result(jobId: string, jobResult: NonNullable<JobRead['result']>): SafeHtml {
  const metrics = Object.entries(jobResult.metrics).filter(
    ([, value]) => typeof value === 'number' || typeof value === 'string',
  );
  return html`<section aria-labelledby="result">
<h2 id="result">Result</h2>
${
  jobResult.expired
    ? html`<p>The output has expired; its metrics remain.</p>`
    : jobResult.outputUrl
      ? html`<p><a href="${jobResult.outputUrl}">Download the result</a></p>`
      : ''
}
${jobResult.outputText !== undefined ? html`<label for="output-text">Output text</label><textarea id="output-text" readonly rows="8">${jobResult.outputText}</textarea>` : ''}
${jobResult.outputTextKey !== undefined ? html`<p>The output text is too long to show here: <code>GET /v1/jobs/${jobId}</code> returns it.</p>` : ''}
<dl class="facts">
${metrics.map(([name, value]) => html`<dt>${name}</dt><dd>${String(value)}</dd>`)}
</dl>
</section>`;
}

function deliveryTable(deliveries: Delivery[]): SafeHtml {
  return html`<table>
<thead><tr><th scope="col">Attempt</th><th scope="col">Event</th><th scope="col">When</th><th scope="col">Target</th><th scope="col">Status code</th><th scope="col">Outcome</th></tr></thead>
<tbody>
${deliveries.map(
  (delivery) => html`<tr>
<td>${delivery.attempt}</td>
<td>${delivery.event}</td>
<td>${when(delivery.attemptedAt)}</td>
<td><code>${delivery.target}</code></td>
<td>${delivery.statusCode ?? '—'}</td>
<td>${delivery.outcome}${delivery.error ? html` (${delivery.error})` : ''}</td>
</tr>`,
)}
</tbody>
</table>`;
}

function definedOnly(filters: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(filters).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}
