import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type RequestListener, type Server as HttpServer } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { runWfa } from '../support/wfa.js';

/**
 * `wfa` given a wrong URL, as a spawned process: each way a URL can be wrong gives one sentence that names
 * the URL, what is wrong and what to check, a non-zero exit, and with --json the same as a problem document
 * on standard error; never a stack or a TypeError. The servers that answer wrongly are fakes (a boundary).
 */

let work: string;
const servers: (HttpServer | TcpServer)[] = [];
const sockets = new Set<Socket>();
const at: Record<string, string> = {};

async function listen(server: HttpServer | TcpServer): Promise<string> {
  servers.push(server);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

const http = (handler: RequestListener) => listen(createHttpServer(handler));
const answer =
  (status: number, type: string, body: string): RequestListener =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  };

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-urls-'));
  at.html = await http(answer(200, 'text/html; charset=utf-8', '<!doctype html><html><body>Welcome</body></html>'));
  at.html404 = await http(answer(404, 'text/html', '<html><body>Not Found</body></html>'));
  at.otherJson = await http(answer(200, 'application/json', '{"data": [], "page": 1}'));
  at.notJson = await http(answer(200, 'application/json', 'Hello, world'));
  at.otherJsonError = await http(answer(401, 'application/json', '{"message": "Unauthorized"}'));
  at.silent = await http(() => undefined);
  at.problem = await http(
    answer(
      404,
      'application/problem+json',
      JSON.stringify({
        type: '/problems/not-found',
        title: 'Not Found',
        status: 404,
        detail: 'Plan p1 not found',
        traceId: 'trace-1',
      }),
    ),
  );
  at.closes = await listen(createTcpServer((s) => s.once('data', () => s.destroy())));
  at.notHttp = await listen(createTcpServer((s) => s.end('SSH-2.0-OpenSSH_9.6\r\n')));
  at.nothing = `127.0.0.1:${await freePort()}`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  await rm(work, { recursive: true, force: true });
});

const wfa = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runWfa(args, work, { WFA_API_KEY: 'wfa_anything', ...env });

/** Never a stack, a JS TypeError or the bare `fetch failed` of Node. */
function expectNoInternals(text: string) {
  expect(text).not.toMatch(/TypeError|Cannot read properties|fetch failed|\n\s+at /);
}

describe('wfa given a wrong URL', () => {
  const cases: { name: string; url: () => string; args?: string[]; code: number; error: () => string }[] = [
    {
      name: 'an unknown host',
      url: () => 'http://x.invalid:3000',
      code: 1,
      error: () => 'could not resolve host x.invalid in --url http://x.invalid:3000; check the host name',
    },
    {
      name: 'a URL without a scheme',
      url: () => 'localhost:3000',
      code: 2,
      error: () =>
        '--url localhost:3000 cannot be used: it does not start with http:// or https://; did you mean http://localhost:3000?',
    },
    {
      name: 'an address and port without a scheme',
      url: () => '127.0.0.1:3000',
      code: 2,
      error: () => '--url 127.0.0.1:3000 cannot be used: it is not a URL; did you mean http://127.0.0.1:3000?',
    },
    {
      name: 'a port that fetch refuses',
      url: () => 'http://127.0.0.1:6000',
      code: 1,
      error: () =>
        "--url http://127.0.0.1:6000 cannot be used: Node's fetch refuses port 6000 (a port browsers block); serve the service on another port",
    },
    {
      name: 'https to a plain HTTP port',
      url: () => `https://${at.html}`,
      code: 1,
      error: () =>
        `the server at --url https://${at.html} does not speak TLS (ERR_SSL_WRONG_VERSION_NUMBER); if it serves plain HTTP, use http://${at.html}`,
    },
    {
      name: 'a port where nothing listens',
      url: () => `http://${at.nothing}`,
      code: 1,
      error: () =>
        `nothing listens at ${at.nothing} in --url http://${at.nothing} (connection refused); is the service running, and on that port?`,
    },
    {
      name: 'a server that answers text that is not JSON',
      url: () => `http://${at.notJson}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.notJson} answered something that is not this service's API (HTTP 200 application/json: not JSON); check that the URL is the workflow-alterations service's`,
    },
    {
      name: 'a server that answers JSON of another shape',
      url: () => `http://${at.otherJson}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.otherJson} answered something that is not this service's API (HTTP 200 application/json: /items missing); check that the URL is the workflow-alterations service's`,
    },
    {
      name: 'a server that answers an error that is not a problem document',
      url: () => `http://${at.otherJsonError}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.otherJsonError} answered something that is not this service's API (HTTP 401 application/json: JSON that is not a problem document); check that the URL is the workflow-alterations service's`,
    },
    {
      name: 'another HTTP service that answers an HTML page with 200',
      url: () => `http://${at.html}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.html} answered something that is not this service's API (HTTP 200 text/html: an HTML page); check that the URL is the workflow-alterations service's`,
    },
    {
      name: 'another HTTP service that answers 404 with HTML',
      url: () => `http://${at.html404}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.html404} answered something that is not this service's API (HTTP 404 text/html: an HTML page); check that the URL is the workflow-alterations service's`,
    },
    {
      name: 'a server that accepts and never answers',
      url: () => `http://${at.silent}`,
      args: ['--timeout', '1'],
      code: 1,
      error: () =>
        `the server at --url http://${at.silent} did not answer GET /workflow-instances within 1000 ms (--timeout); check that the URL is the workflow-alterations service's and that it is not overloaded`,
    },
    {
      name: 'a server that closes the connection',
      url: () => `http://${at.closes}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.closes} closed the connection without a whole answer to GET /workflow-instances; check that the URL is the workflow-alterations service's, and its log`,
    },
    {
      name: 'a port that does not speak HTTP',
      url: () => `http://${at.notHttp}`,
      code: 1,
      error: () =>
        `the server at --url http://${at.notHttp} does not speak HTTP (HPE_INVALID_CONSTANT: Response does not match the HTTP/1.1 protocol (Expected HTTP/)); check the port (if it serves HTTPS, use https://${at.notHttp})`,
    },
  ];

  for (const c of cases) {
    it(`says so for ${c.name}, as text and with --json`, async () => {
      const args = [...(c.args ?? []), '--url', c.url(), 'instances', 'list'];
      const human = await wfa(args);
      expect(human.code).toBe(c.code);
      expect(human.out).toBe('');
      expect(human.err).toBe(`error: ${c.error()}\n`);
      expectNoInternals(human.err);

      const json = await wfa(['--json', ...args]);
      expect(json.code).toBe(c.code);
      expect(json.out).toBe('');
      const problem = JSON.parse(json.err) as { error: Record<string, unknown> };
      expect(problem.error).toMatchObject({ type: expect.stringMatching(/^\/problems\/cli\//), detail: c.error() });
      expect(Object.keys(problem.error)).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail']));
    });
  }

  it('names where the URL came from: WFA_URL, or the default', async () => {
    const fromEnv = await wfa(['plans', 'list'], { WFA_URL: `http://${at.nothing}` });
    expect(fromEnv.err).toContain(`in WFA_URL http://${at.nothing} (connection refused)`);
    const env = await wfa(['plans', 'list'], { WFA_URL: 'localhost:3000' });
    expect(env.code).toBe(2);
    expect(env.err).toBe(
      'error: WFA_URL localhost:3000 cannot be used: it does not start with http:// or https://; did you mean http://localhost:3000?\n',
    );
    const login = await wfa(['login', '--url', 'localhost:3000', '--password', 'x'], { WFA_API_KEY: '' });
    expect(login.code).toBe(2);
    expect(login.err).toContain('--url localhost:3000 cannot be used');
  });

  it('says the same of an event stream that is not this service: a watch of another server', async () => {
    const r = await wfa(['--url', `http://${at.html}`, 'plans', 'watch', 'p1']);
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      `error: the server at --url http://${at.html} answered something that is not this service's API (HTTP 200 text/html: not an event stream); check that the URL is the workflow-alterations service's\n`,
    );
    expect(r.ms).toBeLessThan(10_000); // no reconnects to a stream never heard from
  });
});

describe('wfa --json failures', () => {
  it("pass the service's problem document through: type, status, detail and traceId", async () => {
    const r = await wfa(['--json', '--url', `http://${at.problem}`, 'plans', 'show', 'p1']);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(JSON.parse(r.err)).toEqual({
      error: {
        type: '/problems/not-found',
        title: 'Not Found',
        status: 404,
        detail: 'Plan p1 not found',
        traceId: 'trace-1',
      },
    });
    const human = await wfa(['--url', `http://${at.problem}`, 'plans', 'show', 'p1']);
    expect(human.err).toBe('error: Plan p1 not found (HTTP 404)\n');
  });

  it('are JSON for a wrong argument too (exit 2), and for a file that is not JSON', async () => {
    const usage = await wfa(['--json', 'plans', 'list', '--bogus']);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.err)).toEqual({
      error: { type: '/problems/cli/usage', title: 'Usage error', status: null, detail: "unknown option '--bogus'" },
    });
    const limit = await wfa(['--json', 'instances', 'list', '--limit', 'many']);
    expect(limit.code).toBe(2);
    expect(JSON.parse(limit.err).error.detail).toMatch(/--limit.*Expected a whole number/);
    const file = await wfa(['--json', 'plans', 'submit', path.join(work, 'missing.json')]);
    expect(file.code).toBe(2);
    expect(JSON.parse(file.err).error).toMatchObject({ type: '/problems/cli/bad-file', status: null });
  });
});

describe('wfa --help', () => {
  /** Every command path, from the "Commands:" lists of the help pages. */
  async function commandPaths(prefix: string[] = []): Promise<string[][]> {
    const help = (await wfa([...prefix, '--help'])).out;
    const section = help.split('\nCommands:\n')[1] ?? '';
    const names = [...section.matchAll(/^ {2}(\S+)/gm)].map((m) => m[1]!).filter((name) => name !== 'help');
    const nested = await Promise.all(names.map((name) => commandPaths([...prefix, name])));
    return [prefix, ...nested.flat()];
  }

  it('shows each default once, on every command', async () => {
    const paths = await commandPaths();
    expect(paths.length).toBeGreaterThan(20);
    const pages = await Promise.all(
      paths.map(async (p) => ({ path: p.join(' '), help: (await wfa([...p, '--help'])).out })),
    );
    for (const { path: p, help } of pages) {
      for (const line of help.split('\n'))
        expect(line.match(/default:/g)?.length ?? 0, `${p}: ${line}`).toBeLessThan(2);
    }
    const login = pages.find((p) => p.path === 'login')!.help;
    expect(login).toMatch(/--username <name> +user name \(default: "admin"\)/);
    const list = pages.find((p) => p.path === 'instances list')!.help;
    expect(list).toMatch(/--limit <n> +page size \(1 to 1000\) \(default: 50\)/);
  }, 120_000);
});
