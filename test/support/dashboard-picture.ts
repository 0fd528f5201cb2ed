import sharp from 'sharp';

/** Four panels of the chart's dashboard, as docs/operating.md shows them (docs/operating-dashboard.png). */
const PANELS: Array<{ title: string; series: Array<{ label: string; promql: string }> }> = [
  {
    title: 'Jobs created and finished (total)',
    series: [
      { label: 'created', promql: 'sum(tamp_jobs_created_total{NS})' },
      { label: 'completed', promql: 'sum(tamp_jobs_finished_total{NS, status="completed"})' },
      { label: 'failed', promql: 'sum(tamp_jobs_finished_total{NS, status="failed"})' },
    ],
  },
  {
    title: 'Queue backlog, worker-audio (messages)',
    series: [
      {
        label: 'pending',
        promql: 'max(tamp_queue_messages{NS, consumer="worker-audio", state="pending"})',
      },
      {
        label: 'unacknowledged',
        promql: 'max(tamp_queue_messages{NS, consumer="worker-audio", state="unacknowledged"})',
      },
    ],
  },
  {
    title: 'Credits reserved vs refunded (total)',
    series: [
      { label: 'reserved', promql: 'sum(tamp_credits_reserved_total{NS})' },
      { label: 'refunded', promql: 'sum(tamp_credits_refunded_total{NS})' },
    ],
  },
  {
    title: 'Webhooks: attempts by outcome, retries pending',
    series: [
      { label: 'delivered', promql: 'sum(tamp_webhook_deliveries_total{NS, outcome="delivered"})' },
      { label: 'failed', promql: 'sum(tamp_webhook_deliveries_total{NS, outcome="failed"})' },
      { label: 'retries pending', promql: 'sum(tamp_webhook_retries_pending{NS})' },
    ],
  },
];

const COLORS = ['#73bf69', '#5794f2', '#f2495c', '#ff9830'];
const WIDTH = 1200;
const PANEL_W = 580;
const PANEL_H = 260;

type Points = Array<[number, number]>;

async function range(url: string, promql: string, start: number, end: number): Promise<Points> {
  const params = new URLSearchParams({
    query: promql,
    start: String(start),
    end: String(end),
    step: '1',
  });
  const body = (await (await fetch(`${url}/api/v1/query_range?${params}`)).json()) as {
    data: { result: Array<{ values: Array<[number, string]> }> };
  };
  return (body.data.result[0]?.values ?? []).map(([time, value]) => [time, Number(value)]);
}

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;');
}

/**
 * Draws the panels from a live Prometheus since `since` (an SVG, rasterized by sharp)
 * into `file`: docs/operating.md's picture of the dashboard is real data from the Prometheus test.
 */
export async function renderDashboardPicture(
  prometheusUrl: string,
  namespace: string,
  file: string,
  since: Date,
): Promise<void> {
  const end = Math.ceil(Date.now() / 1000);
  const start = Math.floor(since.getTime() / 1000);
  const parts: string[] = [];
  for (const [index, panel] of PANELS.entries()) {
    const x0 = 20 + (index % 2) * (PANEL_W + 20);
    const y0 = 60 + Math.floor(index / 2) * (PANEL_H + 20);
    const series = await Promise.all(
      panel.series.map(async (entry) => ({
        label: entry.label,
        points: await range(
          prometheusUrl,
          entry.promql.replaceAll('NS', `namespace="${namespace}"`),
          start,
          end,
        ),
      })),
    );
    const max = Math.max(1, ...series.flatMap((entry) => entry.points.map(([, value]) => value)));
    const plot = { x: x0 + 50, y: y0 + 40, w: PANEL_W - 70, h: PANEL_H - 80 };
    parts.push(
      `<rect x="${x0}" y="${y0}" width="${PANEL_W}" height="${PANEL_H}" rx="4" fill="#181b1f" stroke="#2c3235"/>`,
      `<text x="${x0 + 12}" y="${y0 + 24}" fill="#d8d9da" font-size="15" font-family="sans-serif">${escapeXml(panel.title)}</text>`,
    );
    for (const fraction of [0, 0.5, 1]) {
      const y = plot.y + plot.h - fraction * plot.h;
      parts.push(
        `<line x1="${plot.x}" x2="${plot.x + plot.w}" y1="${y}" y2="${y}" stroke="#2c3235"/>`,
        `<text x="${plot.x - 8}" y="${y + 4}" fill="#8e8e8e" font-size="11" text-anchor="end" font-family="sans-serif">${+(max * fraction).toFixed(1)}</text>`,
      );
    }
    for (const [seriesIndex, entry] of series.entries()) {
      const color = COLORS[seriesIndex % COLORS.length];
      const path = entry.points
        .map(([time, value], pointIndex) => {
          const x = plot.x + ((time - start) / (end - start)) * plot.w;
          const y = plot.y + plot.h - (value / max) * plot.h;
          return `${pointIndex === 0 ? 'M' : 'L'}${x.toFixed(1)},${y.toFixed(1)}`;
        })
        .join(' ');
      parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="2"/>`);
      const legendX = x0 + 60 + seriesIndex * 150;
      parts.push(
        `<rect x="${legendX}" y="${y0 + PANEL_H - 26}" width="12" height="4" fill="${color}"/>`,
        `<text x="${legendX + 18}" y="${y0 + PANEL_H - 20}" fill="#d8d9da" font-size="12" font-family="sans-serif">${escapeXml(entry.label)}</text>`,
      );
    }
  }
  const height = 60 + 2 * (PANEL_H + 20);
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}">
<rect width="100%" height="100%" fill="#111217"/>
<text x="20" y="36" fill="#d8d9da" font-size="20" font-family="sans-serif">Tamp: ${end - start} s of the Prometheus test (test/e2e/prometheus.test.ts), 1 s scrapes</text>
${parts.join('\n')}
</svg>`;
  await sharp(Buffer.from(svg)).png().toFile(file);
}
