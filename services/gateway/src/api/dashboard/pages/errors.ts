import { html } from '../html';
import { DASHBOARD_PATH } from '../session';
import { page } from './layout';

export function errorPage(status: number, message: string): string {
  return page(
    { title: status === 404 ? 'Not found' : 'Something went wrong', problem: message },
    html`<p><a href="${DASHBOARD_PATH}">Back to the dashboard</a></p>`,
  );
}
