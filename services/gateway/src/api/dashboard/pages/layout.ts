import { html, type SafeHtml } from '../html';
import { DASHBOARD_PATH } from '../session';

export interface PageFrame {
  title: string;
  /** The navigation entry to mark as the current page. */
  current?: 'overview' | 'jobs' | 'try' | 'keys' | 'webhooks';
  /** Absent on the signed-out pages: no navigation, no sign-out. */
  csrfToken?: string;
  /** A one-line outcome of the last action (shown in a live region for screen readers). */
  notice?: string | null;
  /** A problem with the last action. */
  problem?: string | null;
}

const NAVIGATION = [
  { id: 'overview', label: 'Usage', path: '' },
  { id: 'jobs', label: 'Jobs', path: '/jobs' },
  { id: 'try', label: 'Try it', path: '/try' },
  { id: 'keys', label: 'API keys', path: '/keys' },
  { id: 'webhooks', label: 'Webhooks', path: '/webhooks' },
] as const;

/** The page around every view: landmarks, navigation, messages; no inline script or style. */
export function page(frame: PageFrame, content: SafeHtml): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${frame.title} · Tamp</title>
<link rel="icon" href="${DASHBOARD_PATH}/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${DASHBOARD_PATH}/assets/dashboard.css">
<script src="${DASHBOARD_PATH}/assets/dashboard.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<span class="brand">Tamp</span>
${frame.csrfToken === undefined ? '' : navigation(frame)}
</header>
<main id="main" tabindex="-1">
<h1>${frame.title}</h1>
<div role="status" aria-live="polite">${frame.notice ? html`<p class="notice">${frame.notice}</p>` : ''}</div>
<div role="alert">${frame.problem ? html`<p class="problem">${frame.problem}</p>` : ''}</div>
${content}
</main>
</body>
</html>
`.markup;
}

function navigation(frame: PageFrame): SafeHtml {
  return html`<nav aria-label="Dashboard">
<ul>
${NAVIGATION.map(
  (entry) =>
    html`<li><a href="${DASHBOARD_PATH}${entry.path}"${
      frame.current === entry.id ? html` aria-current="page"` : ''
    }>${entry.label}</a></li>`,
)}
</ul>
</nav>
<form method="post" action="${DASHBOARD_PATH}/sign-out" class="sign-out">
${csrfField(frame.csrfToken!)}
<button type="submit">Sign out</button>
</form>`;
}

/** The hidden field every state-changing form carries (session.ts). */
export function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

/** Dates as people read them, in UTC so every viewer sees the same. */
export function when(iso: string | null): string {
  if (iso === null) return 'never';
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`;
}
