import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { SERVICE_NAMES } from '@tamp/scripts/stack/services';
import { describe, expect, it } from 'vitest';
import { recommendedImageWorkerEnv } from '../../services/worker-image/src/adapters/sharp-runtime';

/**
 * What each Dockerfile must contain for the services to run: the base image, every workspace
 * manifest for `npm ci`, the bundle, a numeric non-root user, and the system packages (ffmpeg
 * only for audio, jemalloc with the worker's recommended environment only for images). These
 * read the Dockerfiles in milliseconds; test/kubernetes/tamp-on-cluster.test.ts builds them
 * (buildah, scripts/infra/images) and runs every image on a real cluster.
 */

const DOCKER_DIR = join(PROJECT_ROOT, 'docker');

/** `${NAME}` as written in a Dockerfile (built so it is not mistaken for a template literal). */
const ref = (name: string) => ['$', `{${name}}`].join('');
const SERVICE = ref('SERVICE');
const FILES = {
  generic: 'Dockerfile',
  'worker-image': 'worker-image.Dockerfile',
  'worker-audio': 'worker-audio.Dockerfile',
} as const;

async function dockerfile(name: keyof typeof FILES): Promise<string> {
  return readFile(join(DOCKER_DIR, FILES[name]), 'utf8');
}

/** Instructions with continuation lines joined, comments dropped. */
function instructions(text: string): string[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** Every stage the final one derives from (FROM <stage>), in order, final included. */
function runtimeStages(text: string): string[] {
  const all = instructions(text);
  const stages = new Map<string, string[]>();
  let current: string[] = [];
  const bases: Array<[string, string]> = [];
  for (const line of all) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) {
      current = [line];
      const name = from[2] ?? `#${stages.size}`;
      stages.set(name, current);
      bases.push([name, from[1]!]);
    } else {
      current.push(line);
    }
  }
  const lines: string[] = [];
  let [name, base] = bases[bases.length - 1]!;
  for (;;) {
    lines.unshift(...stages.get(name)!);
    // runtime-${TARGETARCH}: any of the per-architecture stages leads to the same base.
    const next = base.replace(ref('TARGETARCH'), 'amd64');
    const parent = bases.find(([candidate]) => candidate === next);
    if (parent === undefined) break;
    [name, base] = parent;
  }
  return lines;
}

async function workspaceManifests(): Promise<string[]> {
  const pkg = JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
    workspaces: string[];
  };
  const manifests: string[] = [];
  for (const pattern of pkg.workspaces) {
    if (pattern.endsWith('/*')) {
      const dir = pattern.slice(0, -2);
      const entries = await readdir(join(PROJECT_ROOT, dir), { withFileTypes: true });
      for (const entry of entries) {
        if (entry.isDirectory()) manifests.push(`${dir}/${entry.name}/package.json`);
      }
    } else {
      manifests.push(`${pattern}/package.json`);
    }
  }
  return manifests.sort();
}

describe('container images (docker/)', () => {
  it('copy every workspace manifest, so npm ci sees the whole lockfile', async () => {
    const manifests = await workspaceManifests();
    expect(manifests).toContain('services/kit/package.json');
    for (const name of Object.keys(FILES) as Array<keyof typeof FILES>) {
      const copied = instructions(await dockerfile(name))
        .map((line) => /^COPY\s+(\S+\/package\.json)\s/.exec(line)?.[1])
        .filter((path): path is string => path !== undefined)
        .sort();
      expect(copied, FILES[name]).toEqual(manifests);
    }
  });

  it('build on Node 24 bookworm-slim, bundle, and run the bundle as a numeric non-root user', async () => {
    for (const name of Object.keys(FILES) as Array<keyof typeof FILES>) {
      const text = await dockerfile(name);
      expect(text).toContain('ARG NODE_IMAGE=node:24-bookworm-slim');
      const all = instructions(text);
      for (const from of all.filter((line) => line.startsWith('FROM '))) {
        expect(from, FILES[name]).toMatch(/^FROM (\$\{NODE_IMAGE\}|manifests|runtime-)/);
      }
      expect(all).toContain('RUN node --import tsx scripts/build/bundle.ts');
      const runtime = runtimeStages(text);
      const users = runtime.filter((line) => line.startsWith('USER '));
      expect(users, FILES[name]).toEqual(['USER 10001:10001']);
      const cmd = runtime.filter((line) => line.startsWith('CMD '));
      expect(cmd, FILES[name]).toHaveLength(1);
      expect(cmd[0]).toContain(
        `exec node --enable-source-maps \\"dist/${ref('TAMP_SERVICE')}/main.mjs\\"`,
      );
      expect(runtime).toContain(`COPY --from=build /app/dist/${SERVICE}/ dist/${SERVICE}/`);
      // Production dependencies only, of this one service's workspace.
      expect(instructions(text).join('\n')).toMatch(
        /npm ci --omit=dev --no-audit --no-fund --workspace "services\/\$\{SERVICE\}"/,
      );
    }
  });

  it('give ffmpeg only to the audio worker and jemalloc only to the image worker', async () => {
    const packagesOf = (text: string) =>
      runtimeStages(text)
        .filter((line) => line.includes('apt-get install'))
        .flatMap(
          (line) => /--no-install-recommends\s+([^&]+)/.exec(line)?.[1]?.trim().split(/\s+/) ?? [],
        );
    expect(packagesOf(await dockerfile('generic'))).toEqual([]);
    expect(packagesOf(await dockerfile('worker-image'))).toEqual(['libjemalloc2']);
    expect(await dockerfile('generic')).toMatch(/worker-image\|worker-audio\)/);
    // amd64: the static builds the tests run, from the build context docker/build.sh passes.
    const audio = await dockerfile('worker-audio');
    expect(packagesOf(audio)).toEqual([]);
    expect(runtimeStages(audio)).toContain(
      'COPY --from=audio-tools ffmpeg ffprobe /usr/local/bin/',
    );
    const build = await readFile(join(DOCKER_DIR, 'build.sh'), 'utf8');
    expect(build).toContain('--build-context audio-tools=.tools/wheel-binaries');
    expect(build).toContain('npm run --silent tools -- ffmpeg ffprobe');
    // arm64: Debian's.
    const arm64 = instructions(audio);
    const start = arm64.indexOf(`FROM ${ref('NODE_IMAGE')} AS runtime-arm64`);
    expect(packagesOf(arm64.slice(start, start + 2).join('\n'))).toEqual(['ffmpeg']);
  });

  it("give the image worker sharp-runtime's recommended allocator environment per architecture", async () => {
    const text = await dockerfile('worker-image');
    const stage = (arch: string) => {
      const all = instructions(text);
      const start = all.indexOf(`FROM runtime-base AS runtime-${arch}`);
      expect(start, arch).toBeGreaterThan(0);
      return all.slice(start, start + 2).join('\n');
    };
    const env = runtimeStages(text)
      .filter((line) => line.startsWith('ENV '))
      .join('\n');
    for (const [arch, node] of [
      ['amd64', 'x64'],
      ['arm64', 'arm64'],
    ] as const) {
      const recommended = recommendedImageWorkerEnv(node);
      expect(stage(arch)).toContain(`ENV LD_PRELOAD=${recommended.LD_PRELOAD}`);
      expect(env).toContain(`MALLOC_CONF=${recommended.MALLOC_CONF}`);
      expect(env).toContain(`MALLOC_ARENA_MAX=${recommended.MALLOC_ARENA_MAX}`);
    }
    expect(instructions(text).at(-1)).toBe(`FROM runtime-${ref('TARGETARCH')} AS runtime`);
  });

  it('cover every service, with the bundle entry the build emits', async () => {
    const build = await readFile(join(DOCKER_DIR, 'build.sh'), 'utf8');
    for (const service of SERVICE_NAMES) {
      expect(build, service).toMatch(new RegExp(`\\b${service}\\b`));
    }
    expect(await dockerfile('worker-image')).toContain('ARG SERVICE=worker-image');
    expect(await dockerfile('worker-audio')).toContain('ARG SERVICE=worker-audio');
  });

  it('keep kit and proto dependencies hoisted, where every bundle resolves them', async () => {
    // A bundle in dist/<service>/ resolves packages from its own node_modules (the service's
    // nested ones are copied there) and then /app/node_modules; kit's or proto's nested
    // packages would be found by no bundle.
    const lock = JSON.parse(await readFile(join(PROJECT_ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, unknown>;
    };
    const nested = Object.keys(lock.packages).filter(
      (path) =>
        path.startsWith('services/kit/node_modules/') || path.startsWith('proto/node_modules/'),
    );
    expect(nested).toEqual([]);
  });

  it('keep modules, builds and local data out of the build context', async () => {
    const ignored = (await readFile(join(PROJECT_ROOT, '.dockerignore'), 'utf8'))
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const entry of ['**/node_modules', 'dist', '.tools', '.data', '.git']) {
      expect(ignored).toContain(entry);
    }
    // What the build stage copies must stay in the context.
    for (const needed of ['proto', 'services', 'scripts', 'package.json', 'package-lock.json']) {
      expect(ignored).not.toContain(needed);
    }
  });
});
