import { execFile as execFileCallback, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { z } from 'zod';

const execFile = promisify(execFileCallback);

export const PROJECT_ROOT = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
/** Git-ignored; everything Tamp installs for itself lives here. */
export const TOOLS_DIR = join(PROJECT_ROOT, '.tools');
export const TOOLS_BIN = join(TOOLS_DIR, 'bin');

const toolsFile = z.object({
  debian: z.record(
    z.string(),
    z.object({ package: z.string(), expectVersion: z.string(), path: z.string().optional() }),
  ),
  libraries: z.record(z.string(), z.object({ package: z.string() })),
  go: z.record(
    z.string(),
    z.object({
      module: z.string(),
      version: z.string(),
      package: z.string(),
      files: z.record(z.string(), z.string()).optional(),
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

type Log = (message: string) => void;

/**
 * Installs the tools of a profile into `.tools/bin`, idempotently: Debian packages through apt
 * (linked into the folder), Go tools built from source at their pinned module version. A tool
 * already present at its pinned version is left alone, so a warm run costs milliseconds.
 */
export async function provisionTools(
  profile: string,
  log: Log = (message) => console.error(message),
): Promise<void> {
  const tools = await readToolsFile();
  const names = tools.profiles[profile];
  if (names === undefined) throw new Error(`unknown tools profile ${profile}`);
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

  for (const name of names.filter((candidate) => tools.go[candidate] !== undefined)) {
    await buildGoTool(name, tools.go[name]!, log);
  }
}

/** Links the package's binary into `.tools/bin`: found on PATH, or at the path the package uses. */
async function linkSystemBinary(name: string, path: string | undefined): Promise<boolean> {
  const found = path === undefined ? await which(name) : existsSync(path) ? path : undefined;
  if (found === undefined) return false;
  if (found === toolPath(name)) return true;
  await rm(toolPath(name), { force: true });
  await symlink(found, toolPath(name));
  return true;
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

async function which(name: string): Promise<string | undefined> {
  const path = (process.env.PATH ?? '')
    .split(':')
    .filter((entry) => entry !== '' && entry !== TOOLS_BIN);
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
 * Builds a Go tool inside a writable copy of its module at the pinned version. Not `go install
 * module@version`: that also asks the module proxy for the module's version list (to report
 * deprecations), which the proxy refuses for some modules, and FerretDB must have its
 * version file written before it is built.
 */
async function buildGoTool(name: string, tool: ToolsFile['go'][string], log: Log): Promise<void> {
  const stamp = `${tool.module}@${tool.version}`;
  const stampFile = `${toolPath(name)}.version`;
  if (
    existsSync(toolPath(name)) &&
    existsSync(stampFile) &&
    (await readFile(stampFile, 'utf8')) === stamp
  ) {
    return;
  }
  if ((await which('go')) === undefined)
    throw new Error(`building ${name} needs the Go toolchain on PATH`);
  log(`Building ${name} ${tool.version} from source (first run only; takes minutes)…`);
  const started = Date.now();
  const env = {
    ...process.env,
    GOFLAGS: '-buildvcs=false',
    GOTOOLCHAIN: 'local',
    CGO_ENABLED: '0',
  };
  const { stdout } = await execFile('go', ['mod', 'download', '-json', stamp], {
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
  log(`Built ${name} in ${Math.round((Date.now() - started) / 1000)} s`);
}

function run(
  command: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<void> {
  const [file, ...args] = command;
  return new Promise((resolve, reject) => {
    const child = spawn(file!, args, { ...options, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${command.join(' ')} exited with ${code}`)),
    );
  });
}
