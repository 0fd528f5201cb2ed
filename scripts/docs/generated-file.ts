import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The one rule of every generated document (docs/configuration.md, the chart's README): the
 * generator writes it, `--check` and a test compare what is committed with what it makes now.
 */
export interface GeneratedFileCheck {
  upToDate: boolean;
  expected: string;
  actual: string | undefined;
}

export function compareGeneratedFile(root: string, file: string, expected: string) {
  const path = join(root, file);
  const actual = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
  return { upToDate: actual === expected, expected, actual } satisfies GeneratedFileCheck;
}

/** Writes `file`, or with `--check` says whether it is current and where it first differs. */
export async function runGenerator(options: {
  argv: string[];
  root: string;
  file: string;
  command: string;
  render: () => string | Promise<string>;
}): Promise<number> {
  const { root, file, command } = options;
  const expected = await options.render();
  if (!options.argv.includes('--check')) {
    writeFileSync(join(root, file), expected);
    console.log(`wrote ${file}`);
    return 0;
  }
  const { upToDate, actual } = compareGeneratedFile(root, file, expected);
  if (upToDate) {
    console.log(`${file} is up to date`);
    return 0;
  }
  console.error(
    actual === undefined
      ? `${file} is missing: run \`${command}\``
      : `${file} is out of date (${firstDifference(expected, actual)})\nrun \`${command}\``,
  );
  return 1;
}

function firstDifference(expected: string, actual: string): string {
  const want = expected.split('\n');
  const have = actual.split('\n');
  for (let line = 0; line < Math.max(want.length, have.length); line++) {
    if (want[line] !== have[line]) {
      return `line ${line + 1}:\n  expected: ${want[line] ?? '(end of file)'}\n  found:    ${have[line] ?? '(end of file)'}`;
    }
  }
  return '';
}
