import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * Ports handed out below the kernel's ephemeral range. A port the OS picks for `listen(0)` comes from the
 * ephemeral range, which every outgoing connection draws from too: between the probe closing it and the
 * server it was meant for binding it, a connection of a test running beside this one could take it (CI
 * saw the dev server of the Temporal UI test fail with "bind: address already in use"). Below that range
 * only listeners take ports, and each test process draws from its own slice of it, so two processes never
 * race for one port.
 */
function ephemeralStart(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const n = Number(low);
    return Number.isInteger(n) && n > 12_000 ? n : 32_768;
  } catch {
    return 32_768;
  }
}

const TOP = ephemeralStart();
const BOTTOM = 10_000;
const SLICES = 16;
const SLICE = Math.floor((TOP - BOTTOM) / SLICES);
// Vitest numbers its worker processes (1, 2, …): each takes a slice of its own; the process without a number
// (vitest's own, with the suite's shared dev server; the cluster test; a bench) takes the first.
const pool = Number(process.env.VITEST_POOL_ID);
const slot = Number.isInteger(pool) && pool > 0 ? 1 + ((pool - 1) % (SLICES - 1)) : 0;
const sliceStart = BOTTOM + slot * SLICE;
const handedOut = new Set<number>();
let next = Math.floor(Math.random() * SLICE);

function probe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that nothing listens on right now, never handed out twice by this process. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < SLICE; tries++) {
    const port = sliceStart + (next++ % SLICE);
    if (handedOut.has(port)) continue;
    if (await probe(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${sliceStart}–${sliceStart + SLICE - 1}`);
}
