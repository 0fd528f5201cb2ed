import type { UsageReport } from '@tamp/proto';
import { html, type SafeHtml } from '../html';
import { page, when } from './layout';

export interface UsageView {
  csrfToken: string;
  credits: { allowanceRemaining: number; grantedRemaining: number; available: number };
  plan: string;
  report: UsageReport;
}

const number = new Intl.NumberFormat('en');

export function usagePage(view: UsageView): string {
  const { report } = view;
  return page(
    { title: 'Usage', current: 'overview', csrfToken: view.csrfToken },
    html`<p>Plan <strong>${view.plan}</strong>; billing period ${when(report.period.start)} to ${when(report.period.end)}.</p>
<section aria-labelledby="credits">
<h2 id="credits">Credits left</h2>
<p class="figure">${number.format(view.credits.available)}</p>
<p>${number.format(view.credits.allowanceRemaining)} from the plan's allowance, ${number.format(view.credits.grantedRemaining)} granted.</p>
</section>
<section aria-labelledby="by-pipeline">
<h2 id="by-pipeline">This period by pipeline</h2>
${pipelineTable(report)}
</section>
<section aria-labelledby="by-day">
<h2 id="by-day">Jobs per day</h2>
${dailyChart(report.days)}
</section>`,
  );
}

function pipelineTable(report: UsageReport): SafeHtml {
  if (report.pipelines.length === 0) return html`<p>No job completed in this period yet.</p>`;
  return html`<table>
<thead><tr><th scope="col">Pipeline</th><th scope="col">Jobs</th><th scope="col">Input</th><th scope="col">Audio minutes</th><th scope="col">Megapixels</th><th scope="col">Characters</th><th scope="col">Credits</th></tr></thead>
<tbody>
${report.pipelines.map(
  (row) =>
    html`<tr><th scope="row">${row.pipeline}</th><td>${number.format(row.jobs)}</td><td>${bytes(row.inputBytes)}</td><td>${(row.audioSeconds / 60).toFixed(1)}</td><td>${row.megapixels.toFixed(1)}</td><td>${number.format(row.characters)}</td><td>${number.format(row.credits)}</td></tr>`,
)}
</tbody>
</table>`;
}

const CHART = { width: 640, height: 160, gap: 2 } as const;

/**
 * Bars drawn on the server as SVG (no chart library, no script); the same figures follow as a
 * table for screen readers and for anyone who wants the numbers.
 */
function dailyChart(days: UsageReport['days']): SafeHtml {
  const most = Math.max(1, ...days.map((day) => day.jobs));
  const slot = CHART.width / Math.max(1, days.length);
  const total = days.reduce((sum, day) => sum + day.jobs, 0);
  const bars = days.map((day, index) => {
    const height = Math.round((day.jobs / most) * (CHART.height - 20));
    return html`<rect class="bar" x="${(index * slot + CHART.gap / 2).toFixed(1)}" y="${CHART.height - height}" width="${Math.max(1, slot - CHART.gap).toFixed(1)}" height="${height}"><title>${day.day}: ${day.jobs} jobs</title></rect>`;
  });
  return html`<svg class="chart" viewBox="0 0 ${CHART.width} ${CHART.height}" role="img" aria-labelledby="chart-title">
<title id="chart-title">${total} jobs over ${days.length} days, at most ${most === 1 && total === 0 ? 0 : most} in a day</title>
${bars}
</svg>
<details>
<summary>Figures per day</summary>
<table>
<thead><tr><th scope="col">Day (UTC)</th><th scope="col">Jobs</th><th scope="col">Credits</th></tr></thead>
<tbody>
${days.map((day) => html`<tr><th scope="row">${day.day}</th><td>${day.jobs}</td><td>${day.credits}</td></tr>`)}
</tbody>
</table>
</details>`;
}

function bytes(count: number): string {
  if (count < 1024) return `${count} B`;
  if (count < 1024 ** 2) return `${(count / 1024).toFixed(1)} KiB`;
  if (count < 1024 ** 3) return `${(count / 1024 ** 2).toFixed(1)} MiB`;
  return `${(count / 1024 ** 3).toFixed(2)} GiB`;
}
