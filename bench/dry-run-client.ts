/**
 * The dry-run as a client in a process of its own sees it: `runs` streamed dry-runs, then `runs` countOnly
 * requests, over HTTP to the service's port, each timed from the request to the body's last byte. The ids
 * are counted as they arrive (the quotes, found by memchr in the bytes), and the body's end checked, so a
 * cut or short answer is a failure and not a fast run.
 *
 * Run by bench/size.ts: `node --import tsx bench/dry-run-client.ts '{"url":…,"key":…,"filter":…,"runs":5}'`;
 * prints one line of JSON: `{ "runsMs": […], "counts": […], "countOnlyMs": […], "countOnly": […] }`.
 */
interface Options {
  url: string;
  key: string;
  filter: unknown;
  runs: number;
}

const o = JSON.parse(process.argv[2]!) as Options;
const headers = { authorization: `ApiKey ${o.key}`, 'content-type': 'application/json' };
const body = JSON.stringify(o.filter);

async function streamed(): Promise<{ ms: number; count: number }> {
  const t0 = performance.now();
  const res = await fetch(`${o.url}/alterations/dry-run`, { method: 'POST', headers, body });
  if (res.status !== 200) throw new Error(`dry-run: HTTP ${res.status} ${await res.text()}`);
  let quotes = 0;
  let tail = '';
  for await (const chunk of res.body!) {
    const u8 = chunk as Uint8Array;
    const bytes = Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength); // a view, not a copy
    for (let k = bytes.indexOf(34); k !== -1; k = bytes.indexOf(34, k + 1)) quotes++;
    tail = (tail + bytes.subarray(-4).toString('latin1')).slice(-4);
  }
  const ms = performance.now() - t0;
  // {"workflowInstanceIds":["a","b",…]}: two quotes around the key, two around each id.
  return { ms, count: tail.trimEnd().endsWith(']}') ? (quotes - 2) / 2 : -1 };
}

async function countOnly(): Promise<{ ms: number; count: number }> {
  const t0 = performance.now();
  const res = await fetch(`${o.url}/alterations/dry-run?countOnly=true`, { method: 'POST', headers, body });
  if (res.status !== 200) throw new Error(`countOnly: HTTP ${res.status} ${await res.text()}`);
  const answer = (await res.json()) as { count?: number };
  return { ms: performance.now() - t0, count: answer.count ?? -1 };
}

const out = { runsMs: [] as number[], counts: [] as number[], countOnlyMs: [] as number[], countOnly: [] as number[] };
for (let i = 0; i < o.runs; i++) {
  const r = await streamed();
  out.runsMs.push(Math.round(r.ms * 10) / 10);
  out.counts.push(r.count);
}
for (let i = 0; i < o.runs; i++) {
  const r = await countOnly();
  out.countOnlyMs.push(Math.round(r.ms * 10) / 10);
  out.countOnly.push(r.count);
}
process.stdout.write(`${JSON.stringify(out)}\n`);
