import { describe, expect, it } from 'vitest';
import { html } from './html';

describe('html', () => {
  it('renders interpolated strings as inert text', () => {
    const name = `<script>alert(1)</script>"onmouseover="x'&`;
    expect(html`<p title="${name}">${name}</p>`.markup).toBe(
      '<p title="&lt;script&gt;alert(1)&lt;/script&gt;&quot;onmouseover=&quot;x&#39;&amp;">&lt;script&gt;alert(1)&lt;/script&gt;&quot;onmouseover=&quot;x&#39;&amp;</p>',
    );
  });

  it('keeps nested templates and lists as markup, and drops null and undefined', () => {
    const items = ['a<b', 'c'].map((item) => html`<li>${item}</li>`);
    expect(html`<ul>${items}</ul>${null}${undefined}${html`<br>`}`.markup).toBe(
      '<ul><li>a&lt;b</li><li>c</li></ul><br>',
    );
  });
});
