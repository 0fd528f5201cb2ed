import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import sharp, { type Sharp } from 'sharp';
import { seededRandom } from '../../../../test/support/seeded-random';

/**
 * Deterministic test images, generated at test time into a temp folder (no committed
 * binaries). The same options and seed always give the same pixels; encoded bytes are stable
 * for a given sharp/libvips version.
 *
 * "Photo-like" matters: flat synthetic images compress to almost nothing and hide how quality
 * and effort behave on real uploads. These have a sky gradient, hills, soft shaded shapes,
 * low-frequency texture and sensor-like per-pixel noise.
 */

export type FixtureFormat = 'jpeg' | 'png' | 'webp';

export interface PhotoOptions {
  width: number;
  height: number;
  /** Default jpeg. */
  format?: FixtureFormat;
  /** Default 1. */
  seed?: number;
  /** Encoder quality for jpeg/webp (default 92). */
  quality?: number;
  /** Adds an alpha channel with transparent corners (png/webp only). */
  alpha?: boolean;
  /** EXIF Orientation tag (1–8) written as-is: the pixels are not turned. */
  orientation?: number;
  /** Embedded colour profile; `cmyk` also makes a CMYK JPEG. */
  iccProfile?: 'srgb' | 'p3' | 'cmyk';
  /** Writes EXIF IFD0 tags (camera make, artist, copyright) and an XMP packet. */
  withExifAndXmp?: boolean;
  /** File name inside the fixture folder; default derived from the options. */
  name?: string;
}

export interface SubjectBox {
  left: number;
  top: number;
  width: number;
  height: number;
}

export interface SalientSubjectOptions {
  width: number;
  height: number;
  /** Where the subject sits horizontally, 0 (left edge) to 1 (right edge). Default 0.85. */
  subjectCentreX?: number;
  seed?: number;
  name?: string;
}

export interface AnimatedWebpOptions {
  width: number;
  height: number;
  frames: number;
  /** Milliseconds per frame, default 100. */
  delay?: number;
  /** Times to play, 0 (default) for ever. */
  loop?: number;
  /** EXIF Orientation tag (1–8) written as-is. */
  orientation?: number;
  seed?: number;
  name?: string;
}

export interface PixelBombOptions {
  /** Declared dimensions; default 30000 × 30000. */
  width?: number;
  height?: number;
  /**
   * false cuts the pixel data off after its first bytes: the header is intact but the image
   * cannot be decoded, so a test that gets a limit error (not a decode error) from it proves
   * the check runs before decoding. Default true.
   */
  complete?: boolean;
  name?: string;
}

export const EXIF_ARTIST = 'Tamp Fixture Artist';
export const XMP_CREATOR = 'Tamp Fixture Creator';

function clampByte(value: number): number {
  return value < 0 ? 0 : value > 255 ? 255 : Math.round(value);
}

/** Smooth 2-D noise in [-1, 1]: random values on a coarse grid, interpolated bilinearly. */
class ValueNoise {
  private readonly columns: number;
  private readonly grid: Float32Array;

  constructor(
    width: number,
    height: number,
    private readonly cell: number,
    random: () => number,
  ) {
    this.columns = Math.ceil(width / cell) + 2;
    const rows = Math.ceil(height / cell) + 2;
    this.grid = new Float32Array(this.columns * rows).map(() => random() * 2 - 1);
  }

  // Hot loop (once per pixel): no closures or allocations in here.
  at(x: number, y: number): number {
    const gx = x / this.cell;
    const gy = y / this.cell;
    const x0 = Math.floor(gx);
    const y0 = Math.floor(gy);
    // Smoothstep weights hide the grid that plain bilinear weights leave visible.
    const tx = gx - x0;
    const ty = gy - y0;
    const fx = tx * tx * (3 - 2 * tx);
    const fy = ty * ty * (3 - 2 * ty);
    const row0 = y0 * this.columns + x0;
    const row1 = row0 + this.columns;
    const grid = this.grid;
    const top = (grid[row0] ?? 0) * (1 - fx) + (grid[row0 + 1] ?? 0) * fx;
    const bottom = (grid[row1] ?? 0) * (1 - fx) + (grid[row1 + 1] ?? 0) * fx;
    return top * (1 - fy) + bottom * fy;
  }
}

/** Approximately normal noise (sum of uniforms), mean 0, standard deviation about 1. */
function gaussianish(random: () => number): number {
  return (random() + random() + random() + random() - 2) * 1.73;
}

/**
 * Raw interleaved RGB pixels (width × height × 3) of a photo-like scene. Exposed for
 * benchmarks that want pixels rather than a file.
 */
export function renderPhotoPixels(width: number, height: number, seed = 1): Uint8ClampedArray {
  const random = seededRandom(seed);
  // Clamped: stores round and saturate to 0..255 by themselves, which keeps the loops lean.
  const pixels = new Uint8ClampedArray(width * height * 3);
  const texture = new ValueNoise(width, height, Math.max(8, Math.round(width / 40)), random);
  const clouds = new ValueNoise(width, height, Math.max(16, Math.round(width / 8)), random);
  const hillPhase = random() * Math.PI * 2;
  const horizon = new Float32Array(width);
  for (let x = 0; x < width; x++) {
    horizon[x] =
      height *
      (0.55 + 0.08 * Math.sin((x / width) * Math.PI * 3 + hillPhase) + 0.03 * Math.sin(x / 37));
  }

  // Sky above the hills, ground below, both with texture.
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const offset = (y * width + x) * 3;
      const grain = texture.at(x, y) * 18;
      const horizonY = horizon[x] ?? height;
      if (y < horizonY) {
        const t = y / height;
        const cloud = Math.max(0, clouds.at(x, y)) * 90;
        pixels[offset] = 70 + 120 * t + cloud + grain * 0.3;
        pixels[offset + 1] = 120 + 90 * t + cloud + grain * 0.3;
        pixels[offset + 2] = 200 + 40 * t + cloud * 0.6 + grain * 0.3;
      } else {
        const depth = (y - horizonY) / height;
        pixels[offset] = 60 + 80 * depth + grain * 1.5;
        pixels[offset + 1] = 110 - 30 * depth + grain * 1.8;
        pixels[offset + 2] = 40 + 20 * depth + grain;
      }
    }
  }

  // Shaded discs (lit from the top left) and boxes with windows, like objects and buildings.
  const shapes = 6 + Math.floor(random() * 6);
  for (let shape = 0; shape < shapes; shape++) {
    const cx = random() * width;
    const cy = height * (0.3 + random() * 0.6);
    const size = Math.min(width, height) * (0.05 + random() * 0.15);
    const colour = [random() * 255, random() * 255, random() * 255] as const;
    const isDisc = random() < 0.5;
    const left = Math.max(0, Math.floor(cx - size));
    const right = Math.min(width - 1, Math.ceil(cx + size));
    const top = Math.max(0, Math.floor(cy - size));
    const bottom = Math.min(height - 1, Math.ceil(cy + size));
    for (let y = top; y <= bottom; y++) {
      for (let x = left; x <= right; x++) {
        const dx = (x - cx) / size;
        const dy = (y - cy) / size;
        let shade: number;
        if (isDisc) {
          const distance = Math.hypot(dx, dy);
          if (distance > 1) continue;
          shade = 1.15 - 0.5 * Math.hypot(dx + 0.4, dy + 0.4);
        } else {
          if (Math.abs(dx) > 0.6) continue;
          const windowLit =
            Math.floor((x - left) / 9) % 2 === 0 && Math.floor((y - top) / 13) % 2 === 0;
          shade = windowLit ? 1.25 : 0.8;
        }
        const offset = (y * width + x) * 3;
        pixels[offset] = colour[0] * shade;
        pixels[offset + 1] = colour[1] * shade;
        pixels[offset + 2] = colour[2] * shade;
      }
    }
  }

  // Sensor noise over everything.
  for (let index = 0; index < pixels.length; index++) {
    // Triangular distribution (two uniforms): close enough to sensor noise, half the cost.
    pixels[index] = pixels[index]! + (random() + random() - 1) * 12;
  }
  return pixels;
}

/** Transparent corners: alpha falls off with distance from the centre. */
function addAlpha(rgb: Uint8ClampedArray, width: number, height: number): Uint8Array {
  const rgba = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const source = (y * width + x) * 3;
      const target = (y * width + x) * 4;
      rgba[target] = rgb[source] ?? 0;
      rgba[target + 1] = rgb[source + 1] ?? 0;
      rgba[target + 2] = rgb[source + 2] ?? 0;
      const distance = Math.hypot((x / width - 0.5) * 2, (y / height - 0.5) * 2);
      rgba[target + 3] = clampByte(255 * Math.min(1, Math.max(0, (1.3 - distance) * 3)));
    }
  }
  return rgba;
}

function encodeFixture(image: Sharp, format: FixtureFormat, quality: number): Sharp {
  switch (format) {
    case 'jpeg':
      return image.jpeg({ quality });
    case 'png':
      return image.png();
    case 'webp':
      return image.webp({ quality });
  }
}

const EXTENSIONS: Record<FixtureFormat, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };

const XMP_PACKET = `<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator><rdf:Seq><rdf:li>${XMP_CREATOR}</rdf:li></rdf:Seq></dc:creator></rdf:Description>
</rdf:RDF></x:xmpmeta><?xpacket end="w"?>`;

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const typeAndData = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32BE(crc32(typeAndData));
  return Buffer.concat([length, typeAndData, checksum]);
}

/** A temp folder of generated images; call cleanup() when done. */
export class ImageFixtures {
  readonly dir: string;

  private constructor(dir: string) {
    this.dir = dir;
  }

  static async create(prefix = 'tamp-image-fixtures-'): Promise<ImageFixtures> {
    return new ImageFixtures(await mkdtemp(join(tmpdir(), prefix)));
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  async photo(options: PhotoOptions): Promise<string> {
    const { width, height, format = 'jpeg', seed = 1, quality = 92 } = options;
    if (options.alpha && format === 'jpeg') throw new Error('JPEG cannot carry alpha');
    if (options.iccProfile === 'cmyk' && format !== 'jpeg') throw new Error('only JPEG is CMYK');
    const rgb = renderPhotoPixels(width, height, seed);
    const channels = options.alpha ? 4 : 3;
    const pixels = options.alpha ? addAlpha(rgb, width, height) : rgb;
    let image = sharp(pixels, { raw: { width, height, channels } });
    if (options.iccProfile === 'cmyk') image = image.toColourspace('cmyk');
    if (options.iccProfile) image = image.withIccProfile(options.iccProfile);
    if (options.withExifAndXmp) {
      image = image
        .withExif({
          IFD0: { Make: 'Tamp', Model: 'Fixture', Artist: EXIF_ARTIST, Copyright: 'Tamp tests' },
        })
        .withXmp(XMP_PACKET);
    }
    if (options.orientation !== undefined) {
      image = image.withMetadata({ orientation: options.orientation });
    }
    const name =
      options.name ??
      `photo-${width}x${height}-s${seed}${options.alpha ? '-alpha' : ''}${options.orientation ? `-o${options.orientation}` : ''}${options.iccProfile ? `-${options.iccProfile}` : ''}.${EXTENSIONS[format]}`;
    const path = this.path(name);
    await encodeFixture(image, format, quality).toFile(path);
    return path;
  }

  /**
   * A muted, nearly flat scene with one vivid, detailed subject away from the centre, so a
   * centre crop misses it and a smart crop finds it.
   */
  async salientSubject(
    options: SalientSubjectOptions,
  ): Promise<{ path: string; subject: SubjectBox }> {
    const { width, height, subjectCentreX = 0.85, seed = 7 } = options;
    const random = seededRandom(seed);
    const pixels = new Uint8Array(width * height * 3);
    for (let index = 0; index < pixels.length; index += 3) {
      const grey = 150 + gaussianish(random) * 2;
      pixels[index] = clampByte(grey);
      pixels[index + 1] = clampByte(grey);
      pixels[index + 2] = clampByte(grey + 4);
    }
    const radius = Math.round(Math.min(width, height) * 0.18);
    const cx = Math.round(width * subjectCentreX);
    const cy = Math.round(height / 2);
    for (let y = cy - radius; y <= cy + radius; y++) {
      for (let x = cx - radius; x <= cx + radius; x++) {
        if (x < 0 || y < 0 || x >= width || y >= height) continue;
        if (Math.hypot(x - cx, y - cy) > radius) continue;
        const offset = (y * width + x) * 3;
        // Saturated warm tones with stripes: high saturation and edges both attract attention.
        const stripe = Math.floor((x + y) / 6) % 2 === 0;
        pixels[offset] = stripe ? 235 : 200;
        pixels[offset + 1] = stripe ? 60 : 150;
        pixels[offset + 2] = stripe ? 40 : 90;
      }
    }
    const path = this.path(options.name ?? `salient-${width}x${height}-x${subjectCentreX}.png`);
    await sharp(pixels, { raw: { width, height, channels: 3 } })
      .png()
      .toFile(path);
    const subject = {
      left: Math.max(0, cx - radius),
      top: Math.max(0, cy - radius),
      width: Math.min(width, cx + radius + 1) - Math.max(0, cx - radius),
      height: Math.min(height, cy + radius + 1) - Math.max(0, cy - radius),
    };
    return { path, subject };
  }

  async animatedWebp(options: AnimatedWebpOptions): Promise<string> {
    const { width, height, frames, delay = 100, loop = 0, seed = 3 } = options;
    const frameImages = await Promise.all(
      Array.from({ length: frames }, (_, frame) =>
        sharp(renderPhotoPixels(width, height, seed + frame), {
          raw: { width, height, channels: 3 },
        })
          .png({ compressionLevel: 1 })
          .toBuffer(),
      ),
    );
    const path = this.path(
      options.name ??
        `animated-${width}x${height}-${frames}f-s${seed}${options.orientation ? `-o${options.orientation}` : ''}.webp`,
    );
    let animation = sharp(frameImages, { join: { animated: true } });
    if (options.orientation !== undefined) {
      animation = animation.withMetadata({ orientation: options.orientation });
    }
    // One delay per frame: given a single number, sharp only applies it to the first frame.
    const delays = Array.from({ length: frames }, () => delay);
    await animation.webp({ quality: 80, delay: delays, loop }).toFile(path);
    return path;
  }

  /**
   * A valid greyscale PNG declaring width × height pixels of one colour. 1-bit rows of zeros
   * deflate about 1000:1, so 30000 × 30000 (900 megapixels) is about 110 KB on disk.
   */
  async pixelBombPng(options: PixelBombOptions = {}): Promise<string> {
    const { width = 30000, height = 30000, complete = true } = options;
    const header = Buffer.alloc(13);
    header.writeUInt32BE(width, 0);
    header.writeUInt32BE(height, 4);
    header[8] = 1; // bit depth
    header[9] = 0; // greyscale; bytes 10–12: deflate, adaptive filters, no interlace
    const rowBytes = 1 + Math.ceil(width / 8); // filter byte + packed pixels
    const data = deflateSync(Buffer.alloc(rowBytes * height), { level: 9 });
    // Cut off: only the first bytes of the pixel stream, and no end chunk. Decoders read the
    // header fine and then run out of data.
    const chunks = complete
      ? [pngChunk('IDAT', data), pngChunk('IEND', Buffer.alloc(0))]
      : [pngChunk('IDAT', data.subarray(0, 64))];
    const png = Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      pngChunk('IHDR', header),
      ...chunks,
    ]);
    const path = this.path(
      options.name ?? `bomb-${width}x${height}${complete ? '' : '-cut-off'}.png`,
    );
    await writeFile(path, png);
    return path;
  }

  /** A copy of `sourcePath` cut to the first `keepFraction` of its bytes. */
  async truncated(sourcePath: string, keepFraction = 0.5, name?: string): Promise<string> {
    const bytes = await readFile(sourcePath);
    const path = this.path(
      name ?? `truncated-${Math.round(keepFraction * 100)}-${sourcePath.split('/').pop()}`,
    );
    await writeFile(path, bytes.subarray(0, Math.floor(bytes.length * keepFraction)));
    return path;
  }

  async file(name: string, contents: string | Uint8Array): Promise<string> {
    const path = this.path(name);
    await writeFile(path, contents);
    return path;
  }

  async cleanup(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
