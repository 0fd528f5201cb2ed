/**
 * Writes docs/configuration.md from the services' own configuration schemas, so the document
 * cannot drift from the code:
 *
 *   node --import tsx scripts/docs/configuration.ts           # (re)write docs/configuration.md
 *   node --import tsx scripts/docs/configuration.ts --check   # exit 1 if it is out of date
 *
 * Every `services/<name>/src/config.ts` that exports a zod object (`configSchema`) gets one
 * section with a table Variable | Default | Meaning:
 * - Variable: the schema's keys, in the schema's order (kit's shared groups included).
 * - Default: read from the schema itself (the `.default()` a key carries, before any transform,
 *   i.e. as it would be written in the environment); "unset" for an optional key without one,
 *   "(required)" when the service does not start without it. A default computed from the
 *   machine or the process (a function, `tmpdir()`, `hostname()`, `process.pid`) is shown as its
 *   source expression, so the document is the same on every machine.
 * - Meaning: the JSDoc comment right above `KEY:` in the service's config.ts or, for keys of
 *   kit's shared groups, in services/kit/src/**\/config.ts; then the comment above the constant
 *   the key is set to (`PLANS_JSON: plansJson`), the notes below, the range or length the schema
 *   enforces, and the cross-field rules of `.refine(…, { message, path })`.
 * The local stack's variables are not in any schema: their table is part of the template below.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { compareGeneratedFile, type GeneratedFileCheck, runGenerator } from './generated-file';

export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DOC_FILE = 'docs/configuration.md';
export const GENERATE_COMMAND = 'node --import tsx scripts/docs/configuration.ts';

const LOCAL_STACK_SECTION = `## The local stack (\`npm start\`)

Not part of any service's schema: the local stack (\`npm start\`) also honours:

| Variable | Meaning |
|---|---|
| \`PORT\`, \`ADMIN_PORT\` | Public and admin ports (8080, 8081) |
| \`TAMP_DATA_DIR\` | Where data, logs and \`stack.json\` live (\`.data\`) |
| \`TAMP_REPLICAS\` | Processes per service (1); with more, the gateway's listen behind a round-robin proxy on the two ports |
| \`TAMP_PROCESSES\` | \`per-service\` (default): a Node process per service, as the chart deploys them. \`single\`: every service in one process, their request/reply calls to one another in memory (see [One process or one per service](service-layout.md#one-process-or-one-per-service)); with \`TAMP_REPLICAS\`, that many such processes |
| \`TAMP_NATS_NODES\` | NATS servers (1); 3 or more start a JetStream cluster on loopback, and streams get three replicas |
| \`NATS_URL\`, \`MONGO_URL\`, \`S3_ENDPOINT\` (+ \`S3_ACCESS_KEY\`, \`S3_SECRET_KEY\`) | Use that external server instead of launching one |
| \`JOB_RETRY_BASE_MS\`, \`WEBHOOK_RETRY_SCHEDULE_MS\` | Passed to the services (retry timing for tests and demos) |
`;

const TRACING_NOTE = `Tracing is configured by the OpenTelemetry SDK's standard variables as well
(\`OTEL_TRACES_SAMPLER\`, \`OTEL_EXPORTER_OTLP_HEADERS\`, …): see [Tracing](tracing.md). On
Kubernetes the chart sets these variables from its values: see
[Deploying on Kubernetes](kubernetes.md).`;

// ---------------------------------------------------------------------------------------------
// Reading zod schemas (zod 4): only the parts of the internal definition used here.

type Check = {
  _zod: {
    def: {
      check: string;
      value?: number;
      inclusive?: boolean;
      minimum?: number;
      maximum?: number;
      length?: number;
      format?: string;
    };
  };
};
type Definition = {
  type: string;
  innerType?: Schema;
  in?: Schema;
  defaultValue?: unknown;
  checks?: Check[];
  format?: string;
  entries?: Record<string, string | number>;
};
type Schema = {
  _zod: { def: Definition };
  safeParse: (value: unknown) => { success: boolean; data?: unknown };
};
type ObjectSchema = Schema & { shape: Record<string, Schema> };

function isSchema(value: unknown): value is Schema {
  return (
    typeof value === 'object' &&
    value !== null &&
    '_zod' in value &&
    typeof (value as { safeParse?: unknown }).safeParse === 'function'
  );
}

function isObjectSchema(value: unknown): value is ObjectSchema {
  return (
    isSchema(value) &&
    typeof (value as { shape?: unknown }).shape === 'object' &&
    (value as { shape?: unknown }).shape !== null
  );
}

type Presence =
  | { kind: 'default'; value: unknown }
  | { kind: 'optional' }
  | { kind: 'required' }
  | { kind: 'parsed'; value: unknown };

/** Whether a key has a default, and the innermost schema (where its checks are). */
function inspect(schema: Schema): { presence: Presence; base: Schema } {
  let current = schema;
  let presence: Presence | undefined;
  for (let depth = 0; depth < 20; depth++) {
    const def = current._zod.def;
    if (def.type === 'pipe' && def.in) {
      current = def.in; // the environment's side of a transform
    } else if ((def.type === 'default' || def.type === 'prefault') && def.innerType) {
      presence ??= { kind: 'default', value: def.defaultValue };
      current = def.innerType;
    } else if ((def.type === 'optional' || def.type === 'nullable') && def.innerType) {
      presence ??= { kind: 'optional' };
      current = def.innerType;
    } else {
      break;
    }
  }
  if (presence === undefined) {
    // A shape not unwrapped above: let the schema say what an unset variable becomes.
    const result = schema.safeParse(undefined);
    presence =
      result.success && result.data !== undefined
        ? { kind: 'parsed', value: result.data }
        : result.success
          ? { kind: 'optional' }
          : { kind: 'required' };
  }
  return { presence, base: current };
}

function constraints(base: Schema): string | undefined {
  const def = base._zod.def;
  const checks = (def.checks ?? []).map((check) => check._zod.def);
  if (def.type === 'enum' && def.entries) {
    const values = Object.values(def.entries).map((value) =>
      value === '' ? 'empty' : code(String(value)),
    );
    return `One of ${values.join(', ')}.`;
  }
  if (def.type === 'number') {
    const integer = checks.some((check) => check.format === 'safeint' || check.format === 'int32');
    let min: string | undefined;
    let max: string | undefined;
    let minInclusive = true;
    let maxInclusive = true;
    for (const check of checks) {
      if (check.value === undefined) continue;
      const exclusive = check.inclusive === false;
      if (check.check === 'greater_than') {
        // An integer above n is at least n + 1; a number above n is only "greater than n".
        min = String(exclusive && integer ? check.value + 1 : check.value);
        minInclusive = !exclusive || integer;
      }
      if (check.check === 'less_than') {
        max = String(exclusive && integer ? check.value - 1 : check.value);
        maxInclusive = !exclusive || integer;
      }
    }
    const kind = integer ? 'An integer' : 'A number';
    const bounds: string[] = [];
    if (min !== undefined && max !== undefined && minInclusive && maxInclusive) {
      bounds.push(`${min} to ${max}`);
    } else {
      if (min !== undefined) bounds.push(minInclusive ? `at least ${min}` : `greater than ${min}`);
      if (max !== undefined) bounds.push(maxInclusive ? `at most ${max}` : `less than ${max}`);
    }
    return bounds.length > 0 ? `${kind}, ${bounds.join(', ')}.` : `${kind}.`;
  }
  if (def.type === 'string') {
    const parts: string[] = [];
    if (def.format === 'url') parts.push('A URL.');
    for (const check of checks) {
      if (check.check === 'min_length' && (check.minimum ?? 0) > 1) {
        parts.push(`At least ${check.minimum} characters.`);
      }
      if (check.check === 'max_length' && check.maximum !== undefined) {
        parts.push(`At most ${check.maximum} characters.`);
      }
      if (check.check === 'length_equals' && check.length !== undefined) {
        parts.push(`Exactly ${check.length} characters.`);
      }
    }
    return parts.length > 0 ? parts.join(' ') : undefined;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Reading the schema's source text.

function cleanComment(body: string): string {
  return body
    .split('\n')
    .map((line) => line.replace(/^\s*\*\s?/, '').trim())
    .filter((line) => line !== '')
    .join(' ')
    .trim();
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The `/** … *\/` comment directly above `name` (only whitespace between them). */
function commentAbove(source: string, namePattern: string): string | undefined {
  const match = new RegExp(String.raw`/\*\*((?:(?!\*/)[\s\S])*)\*/\s*${namePattern}`).exec(source);
  return match?.[1] === undefined ? undefined : cleanComment(match[1]);
}

function keyPattern(key: string): string {
  return String.raw`${escapeRegExp(key)}\s*:`;
}

/** Index just past `KEY:` where the key is a property (not part of a longer name). */
function keyValueStart(source: string, key: string): number | undefined {
  const match = new RegExp(String.raw`(^|[\s,{])${keyPattern(key)}`, 'm').exec(source);
  return match ? match.index + match[0].length : undefined;
}

/** From `start`, the text up to the next comma or closing bracket at the same depth. */
function expressionFrom(source: string, start: number): string {
  let depth = 0;
  let index = start;
  while (index < source.length) {
    const char = source[index];
    if (char === "'" || char === '"' || char === '`') {
      const end = source.indexOf(char, index + 1);
      index = end < 0 ? source.length : end + 1;
      continue;
    }
    if (char === '/' && source[index + 1] === '/') {
      const end = source.indexOf('\n', index);
      index = end < 0 ? source.length : end;
      continue;
    }
    if (char === '/' && source[index + 1] === '*') {
      const end = source.indexOf('*/', index + 2);
      index = end < 0 ? source.length : end + 2;
      continue;
    }
    if (char === '(' || char === '[' || char === '{') depth++;
    if (char === ')' || char === ']' || char === '}') {
      if (depth === 0) break;
      depth--;
    }
    if (char === ',' && depth === 0) break;
    index++;
  }
  return source.slice(start, index).trim();
}

/** The argument of `.default(…)` in a key's expression, if it has one. */
function defaultArgument(expression: string): string | undefined {
  const at = expression.lastIndexOf('.default(');
  if (at < 0) return undefined;
  const start = at + '.default('.length;
  const argument = expressionFrom(expression, start);
  return argument === '' ? undefined : argument;
}

/** Names a source file imports from Node's own modules (their values differ per machine). */
function nodeImports(source: string): string[] {
  const names: string[] = [];
  for (const match of source.matchAll(/import\s*\{([^}]*)\}\s*from\s*['"]node:[^'"]+['"]/g)) {
    for (const part of (match[1] ?? '').split(',')) {
      const name = part
        .replace(/^\s*type\s+/, '')
        .split(/\s+as\s+/)
        .pop()
        ?.trim();
      if (name) names.push(name);
    }
  }
  for (const match of source.matchAll(
    /import\s+(?:\*\s+as\s+)?(\w+)\s+from\s*['"]node:[^'"]+['"]/g,
  )) {
    if (match[1]) names.push(match[1]);
  }
  return names;
}

function isComputed(argument: string, source: string): boolean {
  if (/=>|\bfunction\b|\bprocess\.|Math\.random|Date\.now/.test(argument)) return true;
  return nodeImports(source).some((name) => new RegExp(String.raw`\b${name}\b`).test(argument));
}

type SourceFile = { path: string; text: string };

/** What the sources say about one key: its comment(s) and a machine-dependent default. */
function keySource(key: string, files: SourceFile[]) {
  for (const file of files) {
    const start = keyValueStart(file.text, key);
    if (start === undefined) continue;
    const expression = expressionFrom(file.text, start);
    const comments: string[] = [];
    const own = commentAbove(file.text, keyPattern(key));
    if (own) comments.push(own);
    if (/^\w+$/.test(expression)) {
      const onConstant = commentAbove(
        file.text,
        String.raw`(?:export\s+)?const\s+${escapeRegExp(expression)}\b`,
      );
      if (onConstant) comments.push(onConstant);
    }
    const argument = defaultArgument(expression);
    const computed =
      argument !== undefined && isComputed(argument, file.text)
        ? argument.replace(/^\(\s*\)\s*=>\s*/, '')
        : undefined;
    return { comments, computed };
  }
  return { comments: [], computed: undefined };
}

/** `.refine(…, { message: '…', path: ['KEY'] })` rules, by key. */
function refinements(source: string): Map<string, string> {
  const rules = new Map<string, string>();
  for (const match of source.matchAll(
    /message:\s*(['"])((?:(?!\1).)*)\1,\s*path:\s*\[\s*['"](\w+)['"]\s*\]/g,
  )) {
    const [, , message, key] = match;
    if (message && key) rules.set(key, `${key} ${message}.`);
  }
  return rules;
}

/** Spread groups (`...serviceEnv`) of the schema, each with the comment above it, if any. */
function spreadGroups(source: string): { name: string; comment: string | undefined }[] {
  const groups: { name: string; comment: string | undefined }[] = [];
  for (const match of source.matchAll(/\.\.\.(\w+)/g)) {
    const name = match[1];
    if (!name || groups.some((group) => group.name === name)) continue;
    groups.push({ name, comment: commentAbove(source, String.raw`\.\.\.${escapeRegExp(name)}\b`) });
  }
  return groups;
}

// ---------------------------------------------------------------------------------------------
// Rendering.

function code(text: string): string {
  const fence = text.includes('`') ? '``' : '`';
  const pad = fence.length > 1 ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

function cell(text: string): string {
  return text.replace(/\r?\n/g, ' ').replace(/\|/g, '\\|');
}

function duration(milliseconds: number): string | undefined {
  if (!Number.isFinite(milliseconds) || milliseconds <= 0) return undefined;
  for (const [size, unit] of [
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1_000, 's'],
  ] as const) {
    if (milliseconds % size === 0) return `${milliseconds / size} ${unit}`;
  }
  return `${milliseconds} ms`;
}

function unitOf(key: string): number | undefined {
  if (/_MS$/.test(key)) return 1;
  if (/_(SECONDS|SEC)$/.test(key)) return 1_000;
  return undefined;
}

function renderValue(key: string, value: unknown): string {
  if (value === '') return 'empty';
  if (value === undefined || value === null) return 'unset';
  const unit = unitOf(key);
  if (typeof value === 'number') {
    const human = unit === undefined ? undefined : duration(value * unit);
    return human === undefined ? code(String(value)) : `${code(String(value))} (${human})`;
  }
  if (typeof value === 'string') {
    if (unit !== undefined && /^\d+(,\d+)+$/.test(value)) {
      const humans = value.split(',').map((part) => duration(Number(part) * unit) ?? part);
      return `${code(value)} (${humans.join(', ')})`;
    }
    return code(value);
  }
  if (typeof value === 'boolean' || typeof value === 'bigint') return code(String(value));
  return code(JSON.stringify(value));
}

function renderDefault(key: string, presence: Presence, computed: string | undefined): string {
  if (computed !== undefined) return `computed at start-up: ${code(computed)}`;
  switch (presence.kind) {
    case 'default':
    case 'parsed':
      return renderValue(key, presence.value);
    case 'optional':
      return 'unset';
    case 'required':
      return '(required)';
  }
}

type ServiceSection = {
  name: string;
  configFile: string;
  exportName: string;
  groups: { name: string; comment: string | undefined; file: string | undefined }[];
  rows: { key: string; default: string; meaning: string }[];
};

function kitConfigFiles(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name === 'config.ts') found.push(path);
    }
  };
  const kit = join(root, 'services', 'kit', 'src');
  if (existsSync(kit)) walk(kit);
  return found;
}

async function serviceSection(
  root: string,
  name: string,
  kitFiles: SourceFile[],
): Promise<ServiceSection | undefined> {
  const configPath = join(root, 'services', name, 'src', 'config.ts');
  if (!existsSync(configPath)) return undefined;
  const module = (await import(pathToFileURL(configPath).href)) as Record<string, unknown>;
  const exportName =
    'configSchema' in module && isObjectSchema(module.configSchema)
      ? 'configSchema'
      : Object.keys(module)
          .sort()
          .find((key) => isObjectSchema(module[key]));
  if (exportName === undefined) return undefined;
  const schema = module[exportName] as ObjectSchema;
  const text = readFileSync(configPath, 'utf8');
  const files: SourceFile[] = [{ path: configPath, text }, ...kitFiles];
  const rules = refinements(text);
  const rows = Object.entries(schema.shape).map(([key, field]) => {
    const { presence, base } = inspect(field);
    const source = keySource(key, files);
    const meaning = [...source.comments, constraints(base), rules.get(key)]
      .filter((part): part is string => part !== undefined && part !== '')
      .map((part) => (/[.!?:)]$/.test(part) ? part : `${part}.`))
      .join(' ');
    return { key, default: renderDefault(key, presence, source.computed), meaning };
  });
  const groups = spreadGroups(text).map((group) => {
    const file = kitFiles.find((candidate) =>
      new RegExp(String.raw`export\s+(?:const|function)\s+${escapeRegExp(group.name)}\b`).test(
        candidate.text,
      ),
    );
    return { ...group, file: file && relative(root, file.path) };
  });
  return { name, configFile: relative(root, configPath), exportName, groups, rows };
}

function renderSection(section: ServiceSection, hasReadme: boolean): string {
  const lines = [`## ${section.name}`, ''];
  const readme = join('services', section.name, 'README.md');
  let from = `\`${section.configFile}\` (\`${section.exportName}\`)`;
  if (section.groups.length > 0) {
    const groups = section.groups.map((group) =>
      group.file ? `\`${group.name}\` (\`${group.file}\`)` : `\`${group.name}\``,
    );
    from += `, with the shared groups ${groups.join(', ')}`;
  }
  lines.push(`From ${from}.`, '');
  if (hasReadme) lines.push(`What the service does: [${readme}](../${readme}).`, '');
  const commented = section.groups.filter((group) => group.comment);
  for (const group of commented) lines.push(`- \`${group.name}\`: ${group.comment}`);
  if (commented.length > 0) lines.push('');
  lines.push('| Variable | Default | Meaning |', '|---|---|---|');
  for (const row of section.rows) {
    lines.push(`| \`${row.key}\` | ${cell(row.default)} | ${cell(row.meaning)} |`);
  }
  return lines.join('\n');
}

function renderSharedTable(sections: ServiceSection[]): string {
  const users = new Map<string, string[]>();
  for (const section of sections) {
    for (const row of section.rows)
      users.set(row.key, [...(users.get(row.key) ?? []), section.name]);
  }
  const lines = ['| Variable | Read by |', '|---|---|'];
  for (const [key, names] of users) {
    if (names.length < 2) continue;
    const readBy = names.length === sections.length ? 'every service' : names.join(', ');
    lines.push(`| \`${key}\` | ${readBy} |`);
  }
  return lines.join('\n');
}

/** The text docs/configuration.md should hold, from the schemas under `root`. */
export async function renderConfigurationDoc(root: string = PROJECT_ROOT): Promise<string> {
  const kitFiles = kitConfigFiles(root).map((path) => ({ path, text: readFileSync(path, 'utf8') }));
  const names = readdirSync(join(root, 'services'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  const sections: ServiceSection[] = [];
  for (const name of names) {
    const section = await serviceSection(root, name, kitFiles);
    if (section) sections.push(section);
  }
  const parts = [
    '# Configuration',
    '',
    `Generated by \`${GENERATE_COMMAND}\`; do not edit (\`--check\` tells whether it is up to`,
    "date). It is read from each service's `src/config.ts`: change a variable's comment or default",
    'there, then run the command again.',
    '',
    'Every service reads its environment through one zod schema; a missing or bad variable stops the',
    'process with a message naming every problem. **Default** is what an unset variable becomes',
    '(as written in the environment): "unset" means optional without a value, "(required)" that',
    'the service does not start without it. **Meaning** is the comment on the variable in its schema.',
    '',
    TRACING_NOTE,
    '',
    `Services: ${sections.map((section) => `[${section.name}](#${section.name})`).join(', ')};`,
    'then [the local stack](#the-local-stack-npm-start).',
    '',
    '## Variables read by several services',
    '',
    renderSharedTable(sections),
    '',
    ...sections.flatMap((section) => [
      renderSection(section, existsSync(join(root, 'services', section.name, 'README.md'))),
      '',
    ]),
    LOCAL_STACK_SECTION,
  ];
  return `${parts.join('\n').trimEnd()}\n`;
}

/** Whether docs/configuration.md holds what the schemas under `root` generate. */
export async function checkConfigurationDoc(
  root: string = PROJECT_ROOT,
): Promise<GeneratedFileCheck> {
  return compareGeneratedFile(root, DOC_FILE, await renderConfigurationDoc(root));
}

export function main(argv: string[] = process.argv.slice(2)): Promise<number> {
  return runGenerator({
    argv,
    root: PROJECT_ROOT,
    file: DOC_FILE,
    command: GENERATE_COMMAND,
    render: () => renderConfigurationDoc(),
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main();
}
