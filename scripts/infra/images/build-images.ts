import { execFile as execFileCallback, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  realpath,
  rename,
  rm,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { SERVICE_NAMES, type ServiceName } from '../../stack/service-names';
import {
  PROJECT_ROOT,
  provisionTools,
  TOOLS_DIR,
  toolPath,
  WHEEL_BINARIES_DIR,
} from '../provision';

const execFile = promisify(execFileCallback);
type Log = (message: string) => void;

/**
 * Container images built on this machine without a Docker engine: buildah builds the very
 * Dockerfiles of docker/ (BuildKit syntax included) on a base image made here, so what runs in
 * the local cluster is what `docker/build.sh` produces elsewhere.
 *
 * - `tamp.local/debian:bookworm-slim`: a Debian bookworm minbase root made by mmdebstrap.
 * - `tamp.local/node:24-bookworm-slim`: that plus Node.js 24 and npm from the npm registry
 *   (the official node image's layout: /usr/local/bin/node, npm in /usr/local/lib), passed to
 *   the Dockerfiles as NODE_IMAGE.
 * - one image per service, `tamp.local/tamp-<service>:<tag>`;
 * - NATS, MinIO and FerretDB (`tamp.local/<name>:<version>`) from the binaries in .tools/bin,
 *   and the pause image of the pods (catatonit).
 *
 * Each image is exported as an OCI archive under `.images/` for `ctr images import`.
 */
export const IMAGE_REPOSITORY = 'tamp.local/tamp';
export const IMAGE_ARCHIVE_DIR = join(PROJECT_ROOT, '.images');
const STORAGE_DIR = join(TOOLS_DIR, 'images');
/**
 * The containers/storage every image lives in: buildah builds into it, and podman
 * (scripts/infra/container-engine.ts) runs containers from it with the same two folders.
 */
export const IMAGE_STORAGE = {
  driver: 'overlay',
  root: join(STORAGE_DIR, 'storage'),
  runroot: join(STORAGE_DIR, 'run'),
} as const;

const imageTools = z.object({
  debian: z.object({ suite: z.string(), mirror: z.string(), securityMirror: z.string() }),
  node: z.object({ package: z.string(), version: z.string() }),
  npm: z.object({ version: z.string() }),
});
export type ImageTools = z.infer<typeof imageTools>;

export async function readImageTools(): Promise<ImageTools> {
  const tools = JSON.parse(
    await readFile(join(PROJECT_ROOT, 'scripts/infra/tools.json'), 'utf8'),
  ) as { images: unknown };
  return imageTools.parse(tools.images);
}

export interface BuiltImage {
  name: string;
  archive: string;
}

/** buildah with its storage in .tools/images (shared by worktrees; buildah locks it). */
export async function buildah(args: string[], log?: Log): Promise<string> {
  const full = [
    '--root',
    IMAGE_STORAGE.root,
    '--runroot',
    IMAGE_STORAGE.runroot,
    '--storage-driver',
    IMAGE_STORAGE.driver,
    ...args,
  ];
  if (log === undefined) {
    const { stdout } = await execFile(toolPath('buildah'), full, {
      maxBuffer: 64 * 1024 * 1024,
      env: buildEnv(),
    });
    return stdout.trim();
  }
  return new Promise((resolve, reject) => {
    const child = spawn('nice', ['-n', '10', toolPath('buildah'), ...full], {
      env: buildEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.length > 200_000) output = output.slice(-100_000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve(output.trim())
        : reject(
            new Error(`buildah ${args.slice(0, 3).join(' ')} failed:\n${output.slice(-6000)}`),
          ),
    );
  });
}

/**
 * One image built in a working container: `from` (buildah from's arguments) starts it, `fill`
 * adds to it, then it is committed as `name`. A failure removes the container.
 */
async function commitContainer(
  from: string[],
  name: string,
  fill: (container: string) => Promise<void>,
): Promise<void> {
  const container = await buildah(['from', ...from]);
  try {
    await fill(container);
    await buildah(['commit', '--quiet', '--rm', container, name]);
  } catch (error) {
    await buildah(['rm', container]).catch(() => {});
    throw error;
  }
}

function buildEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
    BUILDAH_ISOLATION: 'chroot',
  };
}

async function imageExists(name: string): Promise<boolean> {
  try {
    await buildah(['inspect', '--type', 'image', '--format', '{{.FromImageID}}', name]);
    return true;
  } catch {
    return false;
  }
}

/** A Debian root made by mmdebstrap, cached by its recipe. */
async function debianBase(tools: ImageTools, log: Log): Promise<string> {
  const { suite, mirror, securityMirror } = tools.debian;
  const sources = [
    `deb ${mirror} ${suite} main`,
    `deb ${mirror} ${suite}-updates main`,
    `deb ${securityMirror} ${suite}-security main`,
  ];
  const recipe = ['--variant=minbase', '--include=passwd,ca-certificates', suite, ...sources];
  const name = `tamp.local/debian:${suite}-slim-${hash(recipe.join('\n'))}`;
  if (await imageExists(name)) return name;
  log(`Making a Debian ${suite} root with mmdebstrap…`);
  const work = await mkdtemp(join(tmpdir(), 'tamp-rootfs-'));
  try {
    const tarball = join(work, 'rootfs.tar');
    await execFile(
      toolPath('mmdebstrap'),
      ['--quiet', '--mode=root', '--format=tar', ...recipe.slice(0, 2), suite, tarball, ...sources],
      { maxBuffer: 64 * 1024 * 1024, timeout: 600_000 },
    );
    await commitContainer(['scratch'], name, async (container) => {
      await buildah(['add', container, tarball, '/']);
      await buildah(['config', '--cmd', '["bash"]', '--env', 'LANG=C.UTF-8', container]);
    });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await buildah(['tag', name, `tamp.local/debian:${suite}-slim`]);
  return name;
}

/** The official node image's layout on our Debian root: node and npm from the npm registry. */
async function nodeBase(tools: ImageTools, log: Log): Promise<string> {
  const debian = await debianBase(tools, log);
  const major = tools.node.version.split('.')[0];
  const name = `tamp.local/node:${major}-${tools.debian.suite}-slim`;
  const pinned = `${name}-${hash([debian, tools.node.version, tools.npm.version].join('\n'))}`;
  if (await imageExists(pinned)) {
    await buildah(['tag', pinned, name]);
    return name;
  }
  log(`Adding Node.js ${tools.node.version} and npm ${tools.npm.version}…`);
  const work = await mkdtemp(join(tmpdir(), 'tamp-node-'));
  try {
    const npmPack = async (spec: string) => {
      const { stdout } = await execFile('npm', ['pack', '--silent', spec], { cwd: work });
      return join(work, stdout.trim().split('\n').at(-1)!);
    };
    const nodeTarball = await npmPack(`${tools.node.package}@${tools.node.version}`);
    const npmTarball = await npmPack(`npm@${tools.npm.version}`);
    for (const [tarball, target] of [
      [nodeTarball, 'node'],
      [npmTarball, 'npm'],
    ] as const) {
      await mkdir(join(work, target), { recursive: true });
      await execFile('tar', ['-xzf', tarball, '-C', join(work, target), '--strip-components=1']);
    }
    await commitContainer(['--pull=never', debian], pinned, async (container) => {
      await buildah([
        'copy',
        '--chmod',
        '0755',
        container,
        join(work, 'node/bin/node'),
        '/usr/local/bin/node',
      ]);
      await buildah(['copy', container, join(work, 'npm'), '/usr/local/lib/node_modules/npm']);
      await buildah([
        'run',
        container,
        '--',
        'sh',
        '-c',
        'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version && npm --version',
      ]);
      await buildah([
        'config',
        '--env',
        `NODE_VERSION=${tools.node.version}`,
        '--cmd',
        '["node"]',
        container,
      ]);
    });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await buildah(['tag', pinned, name]);
  return name;
}

/**
 * The npm registry is reached through the machine's TLS setup: the host's CA bundle and a
 * global npmrc naming it are mounted into every RUN step (never into a layer of the image).
 */
async function hostTrustMounts(): Promise<string[]> {
  const bundle = '/etc/ssl/certs/ca-certificates.crt';
  if (!existsSync(bundle)) return [];
  await mkdir(STORAGE_DIR, { recursive: true });
  const npmrc = join(STORAGE_DIR, 'host-npmrc');
  await writeFile(npmrc, `cafile=/run/host-ca/ca-certificates.crt\n`);
  return [
    '--volume',
    `${bundle}:/run/host-ca/ca-certificates.crt:ro`,
    '--volume',
    `${npmrc}:/usr/local/etc/npmrc:ro`,
  ];
}

const DOCKERFILES: Record<ServiceName, string> = Object.fromEntries(
  SERVICE_NAMES.map((service) => [
    service,
    service === 'worker-image' || service === 'worker-audio'
      ? `docker/${service}.Dockerfile`
      : 'docker/Dockerfile',
  ]),
) as Record<ServiceName, string>;

export function serviceImage(service: ServiceName, tag: string): string {
  return `${IMAGE_REPOSITORY}-${service}:${tag}`;
}

/** The worker-audio image's build context `audio-tools` (docker/worker-audio.Dockerfile). */
const AUDIO_TOOLS = ['ffmpeg', 'ffprobe'];

/** Builds the Dockerfile of each service with buildah and exports it as an OCI archive. */
export async function buildServiceImages(options: {
  tag: string;
  services?: readonly ServiceName[];
  log?: Log;
}): Promise<BuiltImage[]> {
  const log = options.log ?? ((message: string) => console.error(message));
  const services = options.services ?? SERVICE_NAMES;
  await provisionTools(['images', ...(services.includes('worker-audio') ? AUDIO_TOOLS : [])], log);
  const tools = await readImageTools();
  const node = await nodeBase(tools, log);
  const mounts = await hostTrustMounts();
  const built: BuiltImage[] = [];
  for (const service of services) {
    const name = serviceImage(service, options.tag);
    const started = Date.now();
    await buildah(
      [
        'build',
        '--layers',
        '--pull=never',
        '--network=host',
        '--isolation=chroot',
        ...mounts,
        '--build-arg',
        `NODE_IMAGE=${node}`,
        '--build-arg',
        `SERVICE=${service}`,
        '--build-arg',
        'TARGETARCH=amd64',
        ...(service === 'worker-audio'
          ? ['--build-context', `audio-tools=${WHEEL_BINARIES_DIR}`]
          : []),
        '--file',
        DOCKERFILES[service],
        '--tag',
        name,
        '.',
      ].map((arg) => arg),
      log,
    ).catch((error: Error) => {
      throw new Error(`building ${name}: ${error.message}`);
    });
    await removeLeftoverContainers(name);
    built.push({ name, archive: await exportArchive(name, true) });
    log(`Built ${name} in ${Math.round((Date.now() - started) / 1000)} s`);
  }
  await releaseStorageMount();
  return built;
}

/**
 * buildah 1.28 leaves a working container behind for a multi-stage build that selects a stage
 * by an argument (worker-image.Dockerfile's runtime-${TARGETARCH}); remove those of this image.
 */
async function removeLeftoverContainers(image: string): Promise<void> {
  const listed = await buildah([
    'containers',
    '--noheading',
    '--format',
    '{{.ContainerID}} {{.ImageName}}',
  ]);
  for (const line of listed.split('\n').filter(Boolean)) {
    const [id, imageName] = line.trim().split(/\s+/);
    if (imageName === image) await buildah(['rm', id!]).catch(() => {});
  }
}

/**
 * containers/storage keeps its overlay folder bind-mounted (private) after buildah or podman
 * exits. Unmounted once no build or engine is running and no working container is left, so no
 * mount outlives the build or the test run; the next buildah or podman mounts it again.
 */
export async function releaseStorageMount(): Promise<void> {
  const running = async (name: string) =>
    execFile('pgrep', ['-x', name]).then(
      ({ stdout }) => stdout.trim() !== '',
      () => false,
    );
  if ((await running('buildah')) || (await running('podman'))) return;
  if ((await buildah(['containers', '--all', '--noheading', '--quiet'])) !== '') return;
  const overlay = await realpath(join(IMAGE_STORAGE.root, 'overlay')).catch(() => undefined);
  if (overlay === undefined) return;
  const mounts = await readFile('/proc/self/mountinfo', 'utf8');
  if (mounts.split('\n').some((line) => line.split(' ')[4] === overlay)) {
    await execFile('umount', [overlay]).catch(() => {});
  }
}

/** Images of the servers Tamp depends on, from the binaries the project builds or installs. */
export async function buildDependencyImages(options: { log?: Log } = {}): Promise<BuiltImage[]> {
  const log = options.log ?? ((message: string) => console.error(message));
  await provisionTools('images', log);
  await provisionTools('stack', log);
  const tools = await readImageTools();
  const debian = await debianBase(tools, log);
  const versions = JSON.parse(
    await readFile(join(PROJECT_ROOT, 'scripts/infra/tools.json'), 'utf8'),
  ) as {
    go: Record<string, { version: string }>;
  };
  const nats = (await execFile(toolPath('nats-server'), ['--version'])).stdout
    .trim()
    .split(/\s+/)
    .at(-1)!;
  // Each binary sits where the official image has it, so k8s/dependencies runs either image.
  const specs = [
    {
      name: `tamp.local/nats:${nats.replace(/^v/, '')}`,
      binary: 'nats-server',
      path: '/usr/local/bin/nats-server',
      base: debian,
      args: ['--jetstream', '--store_dir', '/data'],
    },
    {
      name: `tamp.local/minio:${short(versions.go.minio!.version)}`,
      binary: 'minio',
      path: '/usr/bin/minio',
      base: 'scratch',
      args: ['server', '/data'],
    },
    {
      name: `tamp.local/ferretdb:${versions.go.ferretdb!.version.replace(/^v/, '')}`,
      binary: 'ferretdb',
      path: '/ferretdb',
      base: 'scratch',
      args: [],
    },
    {
      name: 'tamp.local/pause:catatonit',
      binary: 'catatonit',
      path: '/catatonit',
      base: 'scratch',
      args: ['-P'],
    },
  ];
  const built: BuiltImage[] = [];
  for (const spec of specs) {
    const binary = await readFile(toolPath(spec.binary));
    const fingerprint = hash(
      [
        spec.base,
        spec.path,
        spec.args.join(' '),
        createHash('sha256').update(binary).digest('hex'),
      ].join('\n'),
    );
    const archive = archivePath(spec.name);
    if (
      existsSync(archive) &&
      (await readFile(`${archive}.recipe`, 'utf8').catch(() => '')) === fingerprint
    ) {
      built.push({ name: spec.name, archive });
      continue;
    }
    await commitContainer(['--pull=never', spec.base], spec.name, async (container) => {
      const staged = await mkdtemp(join(tmpdir(), 'tamp-dep-'));
      await copyFile(toolPath(spec.binary), join(staged, spec.binary));
      await buildah(['copy', '--chmod', '0755', container, join(staged, spec.binary), spec.path]);
      await rm(staged, { recursive: true, force: true });
      await buildah([
        'config',
        '--entrypoint',
        JSON.stringify([spec.path]),
        '--cmd',
        JSON.stringify(spec.args),
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--user',
        '10001:10001',
        container,
      ]);
    });
    await exportArchive(spec.name);
    await writeFile(`${archive}.recipe`, fingerprint);
    built.push({ name: spec.name, archive });
    log(`Built ${spec.name}`);
  }
  await releaseStorageMount();
  return built;
}

function archivePath(name: string): string {
  return join(IMAGE_ARCHIVE_DIR, `${name.replace(/[/:]/g, '_')}.oci.tar`);
}

/**
 * Writes the image as an OCI archive. With `skipUnchanged`, an archive already written for the
 * same image id (buildah's layer cache rebuilt nothing) is kept as it is.
 */
async function exportArchive(name: string, skipUnchanged = false): Promise<string> {
  await mkdir(IMAGE_ARCHIVE_DIR, { recursive: true });
  const archive = archivePath(name);
  const id = await buildah(['images', '--noheading', '--no-trunc', '--format', '{{.ID}}', name]);
  const idFile = `${archive}.id`;
  if (
    skipUnchanged &&
    existsSync(archive) &&
    (await readFile(idFile, 'utf8').catch(() => '')) === id
  ) {
    return archive;
  }
  const temporary = `${archive}.${process.pid}.tmp`;
  await rm(temporary, { force: true });
  await buildah(['push', '--quiet', name, `oci-archive:${temporary}:${name}`]);
  await rename(temporary, archive);
  await writeFile(idFile, id);
  return archive;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}

function short(version: string): string {
  return version.replace(/^v0\.0\.0-(\d{8})\d+-([0-9a-f]{7}).*$/, '$1-$2').replace(/^v/, '');
}
