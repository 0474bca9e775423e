/**
 * A flood of HTTP requests from a process of its own (so that the measuring process is not the one
 * flooding): `node --import tsx test/support/flood.ts <json options>`. Keep-alive connections, each in a
 * loop of one request after another, for `ms`; prints the answers' counts by status as one JSON line.
 * `authorization: "random-key"` sends a new unknown API key each time.
 */
import http from 'node:http';

interface FloodOptions {
  url: string;
  method?: string;
  connections: number;
  ms: number;
  authorization?: string;
}

const o = JSON.parse(process.argv[2] ?? '{}') as FloodOptions;
const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
const counts: Record<string, number> = {};

function once(): Promise<void> {
  return new Promise((resolve) => {
    const authorization =
      o.authorization === 'random-key' ? `ApiKey unknown-${Math.random().toString(36).slice(2)}` : o.authorization;
    const req = http.request(
      o.url,
      { method: o.method ?? 'GET', agent, headers: authorization ? { authorization } : {} },
      (res) => {
        res.resume();
        res.on('end', () => {
          counts[res.statusCode ?? 0] = (counts[res.statusCode ?? 0] ?? 0) + 1;
          resolve();
        });
        res.on('error', () => resolve());
      },
    );
    req.on('error', () => {
      counts.error = (counts.error ?? 0) + 1;
      setTimeout(resolve, 10);
    });
    req.end();
  });
}

const until = Date.now() + o.ms;
await Promise.all(
  Array.from({ length: o.connections }, async () => {
    while (Date.now() < until) await once();
  }),
);
agent.destroy();
process.stdout.write(`${JSON.stringify(counts)}\n`);
