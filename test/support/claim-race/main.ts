/**
 * One of two starts racing for a data folder (test/integration/data-dir-claim.test.ts). Says `ready` once
 * loaded; on `go <ms>` waits until that moment (epoch ms), claims the folder as the service's start does, and
 * says `claimed <woke at>` or `refused <woke at>`. One that claimed stays alive, as a service would, until its
 * standard input ends, so that the other start finds it running. Named main.ts because a claim counts only a
 * live process whose command line looks like the service's.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { claimDataDir, DataDirInUseError } from '../../../src/embedded/leftovers.js';

const dataDir = process.argv[2]!;
const lines = createInterface({ input: process.stdin });
const ended = once(lines, 'close');
process.stdout.write('ready\n');
const [go] = (await once(lines, 'line')) as [string];
await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(go.split(' ')[1]) - Date.now())));
const wokeAt = Date.now();
try {
  await claimDataDir(dataDir, { postgres: false, devServer: false }, { info: () => undefined });
  process.stdout.write(`claimed ${wokeAt}\n`);
  await ended;
} catch (err) {
  if (!(err instanceof DataDirInUseError)) throw err;
  process.stdout.write(`refused ${wokeAt}\n`);
  lines.close();
}
