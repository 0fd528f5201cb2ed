import {
  describePresets,
  EXTENSIONS_BY_PIPELINE,
  PIPELINE_DEFINITIONS,
  PIPELINES,
  type Pipeline,
} from '@tamp/proto';
import { html } from '../html';
import { DASHBOARD_PATH } from '../session';
import { csrfField, page } from './layout';

/** Every preset of every pipeline, as `<pipeline>:<preset>` choices (from proto's definitions). */
export const PRESET_CHOICES = PIPELINES.flatMap((pipeline) =>
  describePresets(PIPELINE_DEFINITIONS[pipeline]).presets.map((preset) => ({
    pipeline,
    preset: preset.name,
    value: `${pipeline}:${preset.name}`,
    label: `${preset.name}: ${preset.description}`,
  })),
);

const ACCEPTED = PIPELINES.flatMap((pipeline) => EXTENSIONS_BY_PIPELINE[pipeline]).join(',');

export interface TryView {
  csrfToken: string;
  maxBytes: number;
  problem?: string | null;
}

/**
 * One file, one preset. The form token comes first in the form, so the server checks it before
 * it reads the file that follows.
 */
export function tryPage(view: TryView): string {
  return page(
    { title: 'Try it', current: 'try', ...view },
    html`<p>Compress one file with a preset. The job is an ordinary job of your account: it is charged, listed and reported like any other.</p>
<form method="post" action="${DASHBOARD_PATH}/try" enctype="multipart/form-data" class="stack">
${csrfField(view.csrfToken)}
<label for="preset">Preset</label>
<select id="preset" name="preset" required>
${PIPELINES.map(
  (
    pipeline: Pipeline,
  ) => html`<optgroup label="${pipeline} (${EXTENSIONS_BY_PIPELINE[pipeline].join(', ')})">
${PRESET_CHOICES.filter((choice) => choice.pipeline === pipeline).map(
  (choice) => html`<option value="${choice.value}">${choice.label}</option>`,
)}
</optgroup>`,
)}
</select>
<label for="file">File</label>
<input id="file" name="file" type="file" required accept="${ACCEPTED}" aria-describedby="file-help">
<p id="file-help" class="help">Up to ${Math.floor(view.maxBytes / (1024 * 1024))} MiB here; larger files go through the API's presigned uploads.</p>
<button type="submit">Compress</button>
</form>`,
  );
}
