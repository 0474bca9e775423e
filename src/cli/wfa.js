#!/usr/bin/env node
// The `wfa` CLI. In a clone with its dev dependencies, the TypeScript sources run through tsx (always
// current); an installed package, or a production image, runs the build (npm run build).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = new URL('./main.ts', import.meta.url);
const built = new URL('../../dist/src/cli/main.js', import.meta.url);
const tsx = await import('tsx/esm/api').catch(() => undefined);
const { runCli } =
  tsx && existsSync(fileURLToPath(source))
    ? await tsx.tsImport(source.href, import.meta.url)
    : await import(built.href);
process.exitCode = await runCli(process.argv.slice(2));
