import { join } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

describe('the SDK in a browser', () => {
  it('bundles for the browser with no Node.js built-in', async () => {
    const result = await build({
      entryPoints: [join(import.meta.dirname, '..', '..', 'src', 'index.ts')],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((input) => input.endsWith('platform/browser.ts'))).toBe(true);
    expect(inputs.some((input) => input.endsWith('platform/node.ts'))).toBe(false);
    expect(result.outputFiles[0]!.text).not.toMatch(/from\s*["']node:/);
  });
});
