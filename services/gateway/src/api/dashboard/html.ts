import escapeHtml from 'escape-html';

/**
 * Markup that is already safe: built by the `html` tag, never from a customer's string. Every
 * value interpolated into `html` is escaped unless it is one of these, so a file name, job id or
 * URL a customer chose always renders as inert text.
 */
export class SafeHtml {
  constructor(readonly markup: string) {}
  toString(): string {
    return this.markup;
  }
}

type Interpolated = SafeHtml | string | number | null | undefined | readonly Interpolated[];

function render(value: Interpolated): string {
  if (value === null || value === undefined) return '';
  if (value instanceof SafeHtml) return value.markup;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** A template of trusted markup with escaped holes: html`<p>${name}</p>`. */
export function html(strings: TemplateStringsArray, ...values: Interpolated[]): SafeHtml {
  let markup = strings[0]!;
  for (let index = 0; index < values.length; index++) {
    markup += render(values[index]!) + strings[index + 1]!;
  }
  return new SafeHtml(markup);
}
