/**
 * One of two starts racing for a data folder (test/integration/data-dir-claim.test.ts): waits until the
 * moment given, claims the folder as the service's start does, and says `claimed` (then stays alive a while,
 * as a service would, so that the other start finds it running) or `refused`. Named main.ts because a claim
 * counts only a live process whose command line looks like the service's.
 */
import { claimDataDir, DataDirInUseError } from '../../../src/embedded/leftovers.js';

const [dataDir, startAt] = process.argv.slice(2);
await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())));
try {
  await claimDataDir(dataDir!, { postgres: false, devServer: false }, { info: () => undefined });
  process.stdout.write('claimed\n');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
} catch (err) {
  if (!(err instanceof DataDirInUseError)) throw err;
  process.stdout.write('refused\n');
}
