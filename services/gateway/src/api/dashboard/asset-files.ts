import { readFileSync } from 'node:fs';

/**
 * A file of the gateway's `assets/` folder: the dashboard's stylesheet, script and icon, and the
 * API reference page's. Next to this file in the sources, next to main.mjs in the bundle
 * (scripts/build/bundle.ts copies the folder there), so this module stays beside it.
 */
export function readAsset(name: string): string {
  return readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');
}
