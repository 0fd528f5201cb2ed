/**
 * The image corpus of issue 24's benchmarks (scripts/bench/image-corpus.ts,
 * scripts/bench/preset-targets.ts): real photographs, renders and graphics from Debian packages,
 * some downscaled first and written as a real upload of that size would be. The project
 * provisions it (`npm run tools -- image-corpus`, profile image-corpus in scripts/infra/tools.json).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { provisionTools } from '../infra/provision';

export type Kind = 'photo' | 'render' | 'graphic';

export interface CorpusImage {
  name: string;
  kind: Kind;
  /** The Debian package that ships it (scripts/infra/tools.json, profile image-corpus). */
  debianPackage: string;
  path: string;
  /** Downscaled first to fit this box (and written as a real upload of it would be). */
  fit?: { width: number; height: number };
}

const MATE = '/usr/share/backgrounds/mate/nature';
const GNOME = '/usr/share/backgrounds/gnome';
const ADWAITA = '/usr/share/icons/Adwaita/512x512';

/**
 * 18 images, ~19 MP in all: photographs of several sizes (two of them as shipped, heavily
 * compressed JPEGs among them), smooth and flat renders, and graphics with transparency or a
 * few flat colours, where lossless candidates compete.
 */
export const CORPUS: CorpusImage[] = [
  { name: 'aqua', kind: 'photo', debianPackage: 'mate-backgrounds', path: `${MATE}/Aqua.jpg` },
  { name: 'storm', kind: 'photo', debianPackage: 'mate-backgrounds', path: `${MATE}/Storm.jpg` },
  {
    name: 'fresh-flower',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/FreshFlower.jpg`,
  },
  {
    name: 'green-meadow',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/GreenMeadow.jpg`,
  },
  {
    name: 'ladybird',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/LadyBird.jpg`,
    fit: { width: 1280, height: 1280 },
  },
  {
    name: 'rain-drops',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/RainDrops.jpg`,
    fit: { width: 1280, height: 1280 },
  },
  {
    name: 'two-wings',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/TwoWings.jpg`,
    fit: { width: 640, height: 640 },
  },
  {
    name: 'yellow-flower',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/YellowFlower.jpg`,
    fit: { width: 640, height: 640 },
  },
  {
    name: 'garden',
    kind: 'photo',
    debianPackage: 'mate-backgrounds',
    path: `${MATE}/Garden.jpg`,
    fit: { width: 320, height: 320 },
  },
  {
    name: 'adwaita',
    kind: 'render',
    debianPackage: 'gnome-backgrounds',
    path: `${GNOME}/adwaita-l.webp`,
    fit: { width: 1024, height: 1024 },
  },
  {
    name: 'wood',
    kind: 'render',
    debianPackage: 'gnome-backgrounds',
    path: `${GNOME}/wood-d.webp`,
    fit: { width: 1024, height: 1024 },
  },
  {
    name: 'truchet',
    kind: 'render',
    debianPackage: 'gnome-backgrounds',
    path: `${GNOME}/truchet-d.webp`,
    fit: { width: 800, height: 800 },
  },
  {
    name: 'pixels',
    kind: 'render',
    debianPackage: 'gnome-backgrounds',
    path: `${GNOME}/pixels-l.webp`,
    fit: { width: 640, height: 640 },
  },
  {
    name: 'grub-homeworld',
    kind: 'graphic',
    debianPackage: 'desktop-base',
    path: '/usr/share/desktop-base/homeworld-theme/grub/grub-16x9.png',
  },
  {
    name: 'grub-emerald',
    kind: 'graphic',
    debianPackage: 'desktop-base',
    path: '/usr/share/desktop-base/emerald-theme/grub/grub-4x3.png',
  },
  {
    name: 'debian-logo-text',
    kind: 'graphic',
    debianPackage: 'desktop-base',
    path: '/usr/share/desktop-base/debian-logos/logo-text-version-256.png',
  },
  {
    name: 'headphones-icon',
    kind: 'graphic',
    debianPackage: 'adwaita-icon-theme',
    path: `${ADWAITA}/devices/audio-headphones.png`,
  },
  {
    name: 'webcam-icon',
    kind: 'graphic',
    debianPackage: 'adwaita-icon-theme',
    path: `${ADWAITA}/devices/camera-web.png`,
  },
];

/**
 * The corpus images named by `only` (all without it), provisioned unless `provision` is false,
 * each checked to be there under `root`.
 */
export async function corpusImages(options: {
  only?: readonly string[] | undefined;
  root: string;
  provision: boolean;
}): Promise<CorpusImage[]> {
  const { only, root } = options;
  const images = CORPUS.filter((image) => !only || only.includes(image.name));
  if (options.provision) await provisionTools('image-corpus');
  for (const image of images) {
    if (!existsSync(join(root, image.path))) {
      throw new Error(`${image.path} is missing: npm run tools -- image-corpus`);
    }
  }
  return images;
}

/** The input as Tamp gets it: the shipped file, or its downscaled upload written in `scratch`. */
export async function corpusInput(
  image: CorpusImage,
  root: string,
  scratch: string,
): Promise<string> {
  const original = join(root, image.path);
  let input = original;
  if (image.fit) {
    const resized = sharp(original)
      .rotate()
      .resize({ ...image.fit, fit: 'inside' });
    const format = (await sharp(original).metadata()).format;
    // Written as an upload of that size would be: a camera-like JPEG, or without loss.
    if (format === 'jpeg') {
      input = join(scratch, 'input.jpg');
      await resized.jpeg({ quality: 92 }).toFile(input);
    } else if (format === 'webp') {
      input = join(scratch, 'input.webp');
      await resized.webp({ lossless: true }).toFile(input);
    } else {
      input = join(scratch, 'input.png');
      await resized.png().toFile(input);
    }
  }
  return input;
}

/** CPU time of this process (user + system, libvips' threads included), in milliseconds. */
export function ownCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

export function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
