import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../src/api/server.js';
import { createHarness, type Harness } from '../support/harness.js';

/** The API behind a real Node HTTP server, driven by Node's fetch (keep-alive) and raw sockets. */
let h: Harness;
let server: Server;
let base: string;
let connections = 0;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  server = serveApi(h.app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  server.on('connection', () => connections++);
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await h?.close();
});

/** A JSON body of about `kb` kilobytes. */
const bigBody = (kb: number) =>
  JSON.stringify({ names: Array.from({ length: kb }, (_, i) => `${i}`.padEnd(1000, 'x')) });

describe('bodies handled once', () => {
  it('keeps a keep-alive connection usable after 401, 404 and 413 answered to large bodies', async () => {
    const auth = { authorization: `ApiKey ${h.adminKey}` };
    const json = { 'content-type': 'application/json' };
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    const send = async (path: string, init: RequestInit, expected: number) => {
      try {
        const res = await fetch(`${base}${path}`, init);
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status !== expected)
          failures.push(`${init.method ?? 'GET'} ${path}: ${res.status}, expected ${expected}`);
      } catch (err) {
        failures.push(`${init.method ?? 'GET'} ${path}: ${String((err as Error).cause ?? err)}`);
      }
    };
    const before = connections;
    for (let round = 0; round < 100; round++) {
      const body = bigBody(200 + (round % 5) * 50); // 200–400 KB, over the harness's 64 KiB limit
      const kind = round % 3;
      if (kind === 0) await send('/alterations/dry-run', { method: 'POST', headers: json, body }, 401);
      else if (kind === 1) await send('/no-such-route', { method: 'POST', headers: { ...json, ...auth }, body }, 404);
      else await send('/alterations/dry-run', { method: 'POST', headers: { ...json, ...auth }, body }, 413);
      await send('/features/installed', { headers: auth }, 200);
    }
    expect(failures).toEqual([]);
    expect(statuses.get(200)).toBe(100);
    expect((statuses.get(401) ?? 0) + (statuses.get(404) ?? 0) + (statuses.get(413) ?? 0)).toBe(100);
    // The connection was reused, not replaced after each early answer.
    expect(connections - before).toBeLessThanOrEqual(3);
  });

  it('says Connection: close after a body too large to discard, and the next request still succeeds', async () => {
    const auth = { authorization: `ApiKey ${h.adminKey}` };
    for (let round = 0; round < 3; round++) {
      const res = await fetch(`${base}/alterations/dry-run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: `{"searchTerm":"${'x'.repeat(12 * 1024 * 1024)}"}`,
      });
      expect(res.status).toBe(413);
      expect(res.headers.get('connection')).toBe('close');
      await res.arrayBuffer();
      expect((await fetch(`${base}/features/installed`, { headers: auth })).status).toBe(200);
    }
  });

  it('reads a body the route reads within the limit, once', async () => {
    const res = await fetch(`${base}/alterations/dry-run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.adminKey}` },
      body: bigBody(40),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ workflowInstanceIds: [] });
  });
});

describe('HTTP details', () => {
  it('sends a 204 without a content type', async () => {
    const created = await h.request('POST', '/connection-configuration', {
      body: {
        name: 'to-delete',
        connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
        connectionConfiguration: { baseUrl: 'http://example.test' },
      },
    });
    expect(created.status).toBe(201);
    const res = await fetch(`${base}/connection-configuration/${created.body.id}`, {
      method: 'DELETE',
      headers: { authorization: `ApiKey ${h.adminKey}` },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('content-type')).toBeNull();
  });

  it('answers 405 with Allow over HTTP', async () => {
    const res = await fetch(`${base}/alterations/submit`, {
      method: 'GET',
      headers: { authorization: `ApiKey ${h.adminKey}` },
    });
    // GET /alterations/submit would read a plan named "submit", which no plan may be: 404. The path is a
    // route of its own, so its Allow is that route's method only.
    expect(res.status).toBe(404);
    const patch = await fetch(`${base}/alterations/submit`, {
      method: 'PATCH',
      headers: { authorization: `ApiKey ${h.adminKey}` },
    });
    expect(patch.status).toBe(405);
    expect(patch.headers.get('allow')).toBe('POST');
  });

  /** Sends raw bytes and returns what the server wrote until it closed the socket. */
  const raw = (text: string) =>
    new Promise<string>((resolve, reject) => {
      const { port } = server.address() as AddressInfo;
      const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
      let out = '';
      socket.on('data', (d) => (out += d.toString('utf8')));
      socket.on('end', () => resolve(out));
      socket.on('close', () => resolve(out));
      socket.on('error', reject);
    });

  it("answers Node's own rejections with problem+json: headers too large (431), malformed requests (400)", async () => {
    const huge = await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(huge).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(huge.slice(huge.indexOf('\r\n\r\n') + 4))).toMatchObject({
      status: 431,
      title: 'Request Header Fields Too Large',
    });

    const malformed = await raw('GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    expect(malformed).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(malformed.slice(malformed.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 400 });
  });

  it('answers an HTTP/1.0 request without a Host header with problem+json, and one with a Host normally', async () => {
    const hostless = await raw('GET /health HTTP/1.0\r\n\r\n');
    expect(hostless).toMatch(/^HTTP\/1\.1 400 /);
    expect(hostless).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(hostless.slice(hostless.indexOf('\r\n\r\n') + 4))).toMatchObject({
      status: 400,
      title: 'Bad Request',
      detail: expect.stringContaining('Host'),
    });

    const hosted = await raw('GET /health HTTP/1.0\r\nHost: x\r\n\r\n');
    expect(hosted).toMatch(/^HTTP\/1\.1 200 /);
  });
});
