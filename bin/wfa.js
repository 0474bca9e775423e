#!/usr/bin/env node
// The `wfa` CLI: the built code when there is one (npm run build, or an installed package), else the
// TypeScript sources through tsx (a clone with dev dependencies installed).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = new URL('../dist/src/cli/main.js', import.meta.url);
const { runCli } = existsSync(fileURLToPath(built))
  ? await import(built.href)
  : await (await import('tsx/esm/api')).tsImport('../src/cli/main.ts', import.meta.url);
process.exitCode = await runCli(process.argv.slice(2));
