import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * The console's static files, each from a registry package or this repository, read once at start and
 * served at `/console/assets/{name}.{hash}.{ext}`: the hash is of the bytes, so a URL names one content
 * forever and browsers may keep it a year (`immutable`); a new release's files have new URLs. Nothing is
 * fetched from the web, and there is no build step: the files are served as they are.
 */
export interface Asset {
  /** The URL path the pages link to. */
  path: string;
  body: Uint8Array;
  contentType: string;
}

const require = createRequire(import.meta.url);

const SOURCES = {
  /** Pico's classless stylesheet: semantic HTML styled as it is, no classes, no inline style, no script. */
  pico: { file: require.resolve('@picocss/pico/css/pico.classless.min.css'), ext: 'css' },
  /** The console's own few rules (tables that scroll inside their box, the phone width). */
  console: { file: fileURLToPath(new URL('./assets/console.css', import.meta.url)), ext: 'css' },
  /** The one script: live updates, and forms that post without leaving the page (they work without it). */
  script: { file: fileURLToPath(new URL('./assets/console.js', import.meta.url)), ext: 'js' },
} as const;

export type AssetName = keyof typeof SOURCES;

const TYPES: Record<string, string> = {
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
};

export const IMMUTABLE = 'public, max-age=31536000, immutable';

/** Reads and hashes every asset; call once per app. */
export function loadAssets(): { byName: Record<AssetName, Asset>; byPath: Map<string, Asset> } {
  const byName = {} as Record<AssetName, Asset>;
  const byPath = new Map<string, Asset>();
  for (const [name, source] of Object.entries(SOURCES) as [AssetName, (typeof SOURCES)[AssetName]][]) {
    const body = readFileSync(source.file);
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 16);
    const asset = { path: `/console/assets/${name}.${hash}.${source.ext}`, body, contentType: TYPES[source.ext]! };
    byName[name] = asset;
    byPath.set(asset.path, asset);
  }
  return { byName, byPath };
}
