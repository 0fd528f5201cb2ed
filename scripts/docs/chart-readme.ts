/**
 * Writes charts/tamp/README.md from the chart's values.yaml and its comments, so the table of
 * values cannot drift from the values themselves:
 *
 *   node --import tsx scripts/docs/chart-readme.ts           # (re)write charts/tamp/README.md
 *   node --import tsx scripts/docs/chart-readme.ts --check   # exit 1 if it is out of date
 *
 * How values.yaml is read (its comments are written for people; these rules only find them):
 * - A key's description is the block of comment lines right above it, at its indentation, with
 *   no blank line in between. Comment lines at its indentation right after its value (before a
 *   blank line or the end of its map) are examples and are added to it.
 * - Comment blocks further up, separated from the key by a blank line, are notes of the part of
 *   the file that follows; a note `--- Title ---` starts a section of the README.
 * - Every leaf (a scalar, a list, a map written `{ … }`, an empty map, or a map of labels whose
 *   keys hold dots or slashes) is a row with its default; a map written as a block is a row only
 *   when it has a description, then its keys follow.
 * - In the service blocks (the top-level maps with a replicaCount), a key without a comment takes
 *   the description of the same key in an earlier service block (values.yaml says it once), but
 *   not an example ("e.g. …"), which is that service's own.
 * - In a description, comment lines indented by two spaces or more, and the examples after a
 *   value, stay as code.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  isMap,
  isScalar,
  isSeq,
  type Node,
  type Pair,
  parse,
  parseDocument,
  type Scalar,
  type YAMLMap,
} from 'yaml';
import { compareGeneratedFile, type GeneratedFileCheck, runGenerator } from './generated-file';

export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CHART_DIR = 'charts/tamp';
export const README_FILE = `${CHART_DIR}/README.md`;
export const GENERATE_COMMAND = 'node --import tsx scripts/docs/chart-readme.ts';

/** One comment line (text after `#` and one space), or null for a blank line. */
type SourceLine = { indent: number; comment: string | null; blank: boolean };

interface Row {
  key: string;
  default: string;
  description: string[];
}

/** What the README is made of, in the order of values.yaml. */
type Part = { kind: 'section'; title: string } | { kind: 'note'; lines: string[] } | Row;

function classify(line: string): SourceLine {
  if (line.trim() === '') return { indent: 0, comment: null, blank: true };
  const match = /^(\s*)#(.*)$/.exec(line);
  if (match === null)
    return { indent: line.length - line.trimStart().length, comment: null, blank: false };
  const text = match[2]!;
  return {
    indent: match[1]!.length,
    comment: text.startsWith(' ') ? text.slice(1) : text,
    blank: false,
  };
}

/** The line number (0-based) of a character offset, for a text's offsets of line starts. */
function lineOf(lineStarts: number[], offset: number): number {
  let low = 0;
  let high = lineStarts.length - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (lineStarts[middle]! <= offset) low = middle;
    else high = middle - 1;
  }
  return low;
}

function isCommentAt(line: SourceLine | undefined, indent: number): boolean {
  return line !== undefined && line.comment !== null && line.indent === indent;
}

/**
 * The comments above the key on line `at`, at its indentation: its description (the group right
 * above it) and the notes further up (groups after a blank line), in file order. A group that
 * hangs right under the line above it is that line's (an example after a value), not a note.
 */
function commentsAbove(
  lines: SourceLine[],
  at: number,
  indent: number,
): { description: string[]; notes: string[][] } {
  let index = at - 1;
  const description: string[] = [];
  while (isCommentAt(lines[index], indent)) description.unshift(lines[index--]!.comment!);
  const notes: string[][] = [];
  while (index >= 0) {
    if (lines[index]!.blank) {
      index--;
      continue;
    }
    if (!isCommentAt(lines[index], indent)) break;
    const group: string[] = [];
    while (isCommentAt(lines[index], indent)) group.unshift(lines[index--]!.comment!);
    const above = lines[index];
    if (above !== undefined && !above.blank && above.comment === null) break;
    notes.unshift(group);
  }
  return { description, notes };
}

/** Comment lines right after a value, at the key's indentation, ending its block. */
function commentsAfter(lines: SourceLine[], after: number, indent: number): string[] {
  const found: string[] = [];
  let index = after;
  for (; index < lines.length; index++) {
    const line = lines[index]!;
    if (line.comment === null || line.blank || line.indent !== indent) break;
    found.push(line.comment);
  }
  if (found.length === 0) return [];
  const next = lines.slice(index).find((line) => !line.blank);
  const endsBlock =
    index >= lines.length || lines[index]!.blank || (next !== undefined && next.indent < indent);
  return endsBlock ? found : [];
}

function isLeaf(node: unknown): boolean {
  if (isScalar(node) || isSeq(node) || node === null || node === undefined) return true;
  if (isMap(node)) {
    if (node.flow === true || node.items.length === 0) return true;
    // Labels and annotations: their keys are names, not settings.
    return node.items.some((pair) => /[./]/.test(String((pair.key as Scalar).value)));
  }
  return true;
}

function defaultOf(node: unknown, source: string): string {
  if (node === null || node === undefined) return 'null';
  const value = node as Node;
  if (isSeq(value) || isMap(value)) {
    if (value.flow && value.range) return source.slice(value.range[0], value.range[1]).trim();
    return JSON.stringify(value.toJSON());
  }
  if (isScalar(value) && value.range) {
    return source.slice(value.range[0], value.range[1]).trim();
  }
  return JSON.stringify((value as Scalar).toJSON());
}

function keyText(pair: Pair): string {
  return String((pair.key as Scalar).value);
}

/** Reads values.yaml into the README's parts. */
export function valuesParts(source: string): Part[] {
  const document = parseDocument(source, { keepSourceTokens: false });
  if (document.errors.length > 0) throw document.errors[0];
  const lines = source.split('\n').map(classify);
  const lineStarts = [0];
  for (let index = 0; index < source.length; index++) {
    if (source.charCodeAt(index) === 10) lineStarts.push(index + 1);
  }
  const parts: Part[] = [];
  const shared = new Map<string, string[]>();
  const serviceBlocks = new Set(
    (document.contents as YAMLMap).items
      .filter((pair) => isMap(pair.value) && (pair.value as YAMLMap).has('replicaCount'))
      .map(keyText),
  );

  const visit = (map: YAMLMap, path: string[], indent: number) => {
    for (const pair of map.items) {
      const key = pair.key as Scalar;
      const keyLine = lineOf(lineStarts, key.range![0]);
      const { description, notes } = commentsAbove(lines, keyLine, indent);
      for (const note of notes) {
        if (note.length === 0) continue;
        const heading = /^-{3}\s*(.*?)\s*-*$/.exec(note[0]!.trim());
        if (heading !== null) {
          parts.push({ kind: 'section', title: heading[1]! });
          const rest = note.slice(1).filter((line, index) => index > 0 || line.trim() !== '');
          if (rest.length > 0) parts.push({ kind: 'note', lines: rest });
        } else {
          parts.push({ kind: 'note', lines: note });
        }
      }
      const keyPath = [...path, keyText(pair)];
      const dotted = keyPath.join('.');
      const value = pair.value as Node | null;
      const valueEnd = value?.range ? lineOf(lineStarts, value.range[2]) : keyLine + 1;
      const trailing = isLeaf(value)
        ? commentsAfter(lines, Math.max(valueEnd, keyLine + 1), indent)
        : [];
      let text = [...description, ...trailing.map((line) => `  ${line.trim()}`)];
      const relative = keyPath.slice(1).join('.');
      if (path.length > 0 && serviceBlocks.has(keyPath[0]!)) {
        if (text.length > 0) {
          if (!shared.has(relative) && !/^e\.g\./.test(text[0]!.trim())) shared.set(relative, text);
        } else {
          text = shared.get(relative) ?? [];
        }
      }
      if (isLeaf(value)) {
        parts.push({ key: dotted, default: defaultOf(value, source), description: text });
      } else {
        if (text.length > 0) parts.push({ key: dotted, default: '', description: text });
        const child = value as YAMLMap;
        const firstKey = child.items[0]?.key as Scalar | undefined;
        const childIndent = firstKey?.range
          ? lines[lineOf(lineStarts, firstKey.range[0])]!.indent
          : indent + 2;
        visit(child, keyPath, childIndent);
      }
    }
  };
  visit(document.contents as YAMLMap, [], 0);
  return parts;
}

/** Prose: `<name>` would be taken for an HTML tag. */
function escapeProse(text: string): string {
  return text.replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|');
}

/** Comment lines as one table cell: prose joined, lines indented further kept as code. */
function cell(lines: string[]): string {
  const out: string[] = [];
  let prose: string[] = [];
  const flush = () => {
    if (prose.length > 0) out.push(escapeCell(escapeProse(prose.join(' '))));
    prose = [];
  };
  for (const line of lines) {
    if (/^\s{2,}\S/.test(line)) {
      flush();
      out.push(`\`${escapeCell(line.trim())}\``);
    } else if (line.trim() === '') {
      flush();
    } else {
      prose.push(line.trim());
    }
  }
  flush();
  return out.join('<br>');
}

function code(text: string): string {
  if (text === '') return '';
  const fence = text.includes('`') ? '`` ' : '`';
  return `${fence}${escapeCell(text)}${fence === '`` ' ? ' ``' : '`'}`;
}

/** Note lines as Markdown: prose as a paragraph, indented lines as a code block. */
function noteMarkdown(lines: string[]): string {
  const blocks: string[] = [];
  let prose: string[] = [];
  let codeLines: string[] = [];
  const flush = () => {
    if (prose.length > 0) blocks.push(escapeProse(prose.join('\n')));
    if (codeLines.length > 0) blocks.push(['```', ...codeLines, '```'].join('\n'));
    prose = [];
    codeLines = [];
  };
  for (const line of lines) {
    if (/^\s{2,}\S/.test(line)) {
      if (prose.length > 0) {
        blocks.push(escapeProse(prose.join('\n')));
        prose = [];
      }
      codeLines.push(line);
    } else if (line.trim() === '') {
      flush();
    } else {
      if (codeLines.length > 0) {
        blocks.push(['```', ...codeLines, '```'].join('\n'));
        codeLines = [];
      }
      prose.push(line.trim());
    }
  }
  flush();
  return blocks.join('\n\n');
}

export function renderChartReadme(root: string = PROJECT_ROOT): string {
  const chart = parse(readFileSync(join(root, CHART_DIR, 'Chart.yaml'), 'utf8')) as {
    version: string;
    appVersion: string;
    kubeVersion: string;
    description: string;
  };
  const parts = valuesParts(readFileSync(join(root, CHART_DIR, 'values.yaml'), 'utf8'));
  const out: string[] = [
    '# The Tamp Helm chart',
    '',
    `Generated by \`${GENERATE_COMMAND}\` from [values.yaml](values.yaml) and its comments; do not`,
    'edit (`--check` tells whether it is up to date). Change a comment or a default in values.yaml,',
    'then run the command again.',
    '',
    `Chart ${chart.version}, Tamp ${chart.appVersion}, Kubernetes \`${chart.kubeVersion}\`. ${chart.description.trim()}`,
    '',
    'Installing it step by step, and what every object it renders is for:',
    '[Deploying on Kubernetes](../../docs/kubernetes.md). In short:',
    '',
    '```sh',
    'helm install tamp charts/tamp -n tamp --create-namespace -f my-values.yaml',
    '```',
    '',
    '`values.schema.json` checks the values: an unknown key, a wrong type or a variable the chart',
    'manages is refused before anything is installed, with the path of the value at fault.',
  ];
  let inTable = false;
  const openTable = () => {
    if (!inTable) out.push('', '| Key | Default | Description |', '|---|---|---|');
    inTable = true;
  };
  for (const part of parts) {
    if ('kind' in part) {
      inTable = false;
      if (part.kind === 'section') out.push('', `## ${part.title}`);
      else out.push('', noteMarkdown(part.lines));
      continue;
    }
    openTable();
    out.push(`| \`${part.key}\` | ${code(part.default)} | ${cell(part.description)} |`);
  }
  return `${out.join('\n')}\n`;
}

/** Whether charts/tamp/README.md holds what values.yaml generates. */
export function checkChartReadme(root: string = PROJECT_ROOT): GeneratedFileCheck {
  return compareGeneratedFile(root, README_FILE, renderChartReadme(root));
}

export function main(argv: string[] = process.argv.slice(2)): Promise<number> {
  return runGenerator({
    argv,
    root: PROJECT_ROOT,
    file: README_FILE,
    command: GENERATE_COMMAND,
    render: () => renderChartReadme(),
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main();
}
