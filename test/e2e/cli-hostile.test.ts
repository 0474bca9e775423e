import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWfa } from '../support/wfa.js';

/**
 * The `wfa` CLI, as a spawned process, against a server that is broken or hostile: what it prints is shown,
 * never obeyed by the terminal; answers are bounded in size and time; a refused event stream falls back to
 * reading the plan; credentials stay private.
 */
const ESC = '\u001b';
const HOSTILE = `${ESC}]0;PWNED-TITLE\u0007${ESC}[2J${ESC}[31mFAKE: all good${ESC}[0m${ESC}]52;c;ZXZpbA==\u0007`;

let server: Server;
let url: string;
let work: string;
let route: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
const open = new Set<ServerResponse>();

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-hostile-'));
  server = createServer((req, res) => {
    open.add(res);
    res.on('close', () => open.delete(res));
    route(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const res of open) res.destroy();
  await new Promise((resolve) => server?.close(resolve));
  await rm(work, { recursive: true, force: true });
});

const wfa = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runWfa(args, work, { WFA_URL: url, WFA_API_KEY: 'wfa_anything', ...env });

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' });
  res.end(JSON.stringify(body));
};

const plan = (overrides: Record<string, unknown> = {}) => ({
  id: `plan-${HOSTILE}`,
  alterations: [{ type: 'ModifyVariable', variableId: 'x', value: 1 }],
  workflowInstanceFilter: {},
  status: 5,
  createdAt: '2026-11-23T00:00:00.000Z',
  startedAt: null,
  completedAt: '2026-11-23T00:00:01.000Z',
  jobCounts: { total: 2, pending: 0, running: 0, completed: 1, failed: 1, cancelled: 0 },
  failureReason: `broken ${HOSTILE}\nforged line`,
  rollout: { rate: null, canary: null, stopOnFailureRatio: null },
  pauseReason: null,
  revertOf: null,
  ...overrides,
});

describe('wfa against a hostile server', () => {
  it('escapes control sequences in what it prints, and keeps them in --json', async () => {
    route = (req, res) => {
      if (req.url?.startsWith('/alterations/p1/jobs'))
        return json(res, 200, {
          items: [
            {
              id: 'j',
              planId: 'p1',
              workflowInstanceId: `i-${HOSTILE}`,
              status: 3,
              log: [{ message: `Variable with ID ${HOSTILE} not found`, logLevel: 4, timestamp: 'x', eventName: 'e' }],
              createdAt: 'x',
              startedAt: null,
              completedAt: null,
            },
          ],
          nextCursor: null,
        });
      if (req.url === '/alterations/p1') return json(res, 200, { plan: plan(), jobs: [] });
      return json(res, 404, { type: 't', title: 'Not Found', status: 404, detail: `nothing here ${HOSTILE}` });
    };
    for (const args of [
      ['plans', 'show', 'p1'],
      ['plans', 'jobs', 'p1', '--failed'],
      ['plans', 'show', 'nope'],
    ]) {
      const r = await wfa(args);
      const printed = r.out + r.err;
      expect(printed, args.join(' ')).not.toContain(ESC);
      expect(printed, args.join(' ')).not.toContain('\u0007');
      expect(printed, args.join(' ')).toContain('\\u001b]0;PWNED-TITLE');
    }
    // A newline in served text does not make a line of its own.
    const shown = await wfa(['plans', 'show', 'p1']);
    expect(shown.out.split('\n').some((l) => l.startsWith('forged line'))).toBe(false);
    // --json is data: the text as the server sent it.
    const data = await wfa(['--json', 'plans', 'show', 'p1']);
    expect(JSON.parse(data.out).failureReason).toBe(`broken ${HOSTILE}\nforged line`);
  });

  it('escapes what a watch prints from the stream: an unknown status and the final line', async () => {
    route = (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const progress = {
        status: HOSTILE,
        jobCounts: { total: 2, pending: 1, running: 0, completed: 1, failed: 0, cancelled: 0 },
        instancesPerSecond: 1,
        pauseReason: null,
      };
      res.write(`event: progress\ndata: ${JSON.stringify(progress)}\n\n`);
      res.end(`event: done\ndata: ${JSON.stringify(plan({ status: 4 }))}\n\n`);
    };
    const r = await wfa(['plans', 'watch', 'p3']);
    expect(r.out + r.err).not.toContain(ESC);
    expect(r.out).toContain('\\u001b[2J');
  });

  it('refuses an answer larger than it reads, without reading it all', async () => {
    route = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      let sent = 0;
      const more = () => {
        while (sent < 2048 && res.write(chunk)) sent++;
        if (sent < 2048) res.once('drain', more);
        else res.end();
      };
      more();
    };
    const r = await wfa(['plans', 'list']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/larger than the 67108864 bytes/);
  });

  it('gives up on a server that does not answer, after --timeout', async () => {
    route = () => undefined;
    const r = await wfa(['--timeout', '1', 'plans', 'list']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('did not answer GET /alterations within 1000 ms (--timeout)');
    expect(r.ms).toBeLessThan(10_000);
  });

  it('ends a watch on an event line that never ends, instead of growing without bound', async () => {
    route = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = 'data: ' + 'x'.repeat(1024 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < 100 && res.write(chunk)) sent++;
        if (sent < 100) res.once('drain', more);
      };
      more();
    };
    const r = await wfa(['plans', 'watch', 'p1']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/event larger than/);
  });

  it('follows a plan by reading it when its event stream is refused (429)', async () => {
    let reads = 0;
    route = (req, res) => {
      if (req.url?.endsWith('/events'))
        return json(res, 429, { type: 't', title: 'Too Many Requests', status: 429, detail: 'share full' });
      reads++;
      const done = reads >= 2;
      return json(res, 200, {
        plan: plan({
          id: 'p2',
          status: done ? 4 : 3,
          failureReason: null,
          jobCounts: { total: 2, pending: done ? 0 : 1, running: 0, completed: done ? 2 : 1, failed: 0, cancelled: 0 },
        }),
        jobs: [],
      });
    };
    const r = await wfa(['plans', 'watch', 'p2']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('following it by reading it every 2 s');
    expect(r.out.trim().split('\n').at(-1)).toBe('Completed: 2 completed, 0 failed, 0 cancelled of 2');
  });

  it('keeps credentials private: a wider folder is narrowed and the file is written 0600', async () => {
    const dir = path.join(work, 'config', 'wfa');
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await writeFile(path.join(dir, 'credentials.json'), '{}', { mode: 0o644 });
    route = (req, res) =>
      req.url === '/identity/permissions'
        ? json(res, 200, { structured: [], legacy: [], wildcards: [] })
        : json(res, 404, {});
    const r = await wfa(['login', '--api-key', 'wfa_stored_key'], { WFA_API_KEY: '' });
    expect(r.code, r.err).toBe(0);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    expect((await stat(path.join(dir, 'credentials.json'))).mode & 0o777).toBe(0o600);
  });
});
