import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../src/api/server.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * No client holds a share by being slow (contract section 8): clients that send a sign-in body one byte at a
 * time take no anonymous place, so a real sign-in, the console's sign-in page and the liveness probe answer
 * while any number of them trickle; a body (or headers) slower than REQUEST_BODY_TIMEOUT_MS ends with a 408 and
 * the connection closed. The API behind a real Node HTTP server, driven by raw sockets and fetch.
 */
const TIMEOUT_MS = 3_000;
let h: Harness;
let server: Server;
let port: number;
let base: string;

beforeAll(async () => {
  // Behind a trusted proxy (this test), X-Forwarded-For names the client: two clients from one machine.
  h = await createHarness({
    worker: false,
    config: { requestBodyTimeoutMs: TIMEOUT_MS, trustedProxies: ['127.0.0.1/32'] },
  });
  server = serveApi(h.app, { port: 0, hostname: '127.0.0.1', requestBodyTimeoutMs: TIMEOUT_MS });
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  const user = await h.request('POST', '/identity/users', {
    body: { name: 'slow-clients-user', password: 'pass-word-123', permissions: ['alterations:view'] },
  });
  expect(user.status).toBe(201);
});
afterAll(async () => {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await h?.close();
});

/** A raw connection that sends `head`, then `body` one byte every `everyMs`; what came back, when it closes. */
function trickle(head: string, body: string, everyMs: number) {
  const socket = net.connect(port, '127.0.0.1');
  let answer = '';
  let sent = 0;
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (answer += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.write(head);
  const timer = setInterval(() => {
    if (sent < body.length && !socket.destroyed) socket.write(body[sent++]!);
  }, everyMs);
  return {
    closed,
    answer: () => answer,
    end() {
      clearInterval(timer);
      socket.destroy();
    },
    stopTimer: () => clearInterval(timer),
  };
}

const loginHead = (path: string, type: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\n\r\n`;

async function timed(url: string, init?: RequestInit) {
  const started = performance.now();
  const res = await fetch(url, init);
  await res.arrayBuffer();
  return { status: res.status, ms: performance.now() - started };
}

describe('slow clients', () => {
  it('take no anonymous place: liveness, a real sign-in and the console sign-in page answer while 12 trickle', async () => {
    const apiBody = '{"username":"nobody","password":"x"}';
    const formBody = 'username=nobody&password=xxxxxxxxxx';
    const tricklers = [
      ...Array.from({ length: 8 }, () =>
        trickle(loginHead('/identity/login', 'application/json', apiBody.length), apiBody, 1_000),
      ),
      ...Array.from({ length: 4 }, () =>
        trickle(loginHead('/console/sign-in', 'application/x-www-form-urlencoded', formBody.length), formBody, 1_000),
      ),
    ];
    try {
      // The trickling connections have each sent their headers and a byte or two.
      await new Promise((r) => setTimeout(r, 1_200));
      for (let round = 0; round < 3; round++) {
        const live = await timed(`${base}/health/live`);
        expect(live.status).toBe(200);
        expect(live.ms).toBeLessThan(1_000);
        const signIn = await timed(`${base}/identity/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: 'slow-clients-user', password: 'pass-word-123' }),
        });
        expect(signIn.status).toBe(200);
        expect(signIn.ms).toBeLessThan(2_000);
        const page = await timed(`${base}/console/sign-in`);
        expect(page.status).toBe(200);
        expect(page.ms).toBeLessThan(2_000);
      }
    } finally {
      for (const t of tricklers) t.end();
    }
  });

  it("a client's flood of probes waits behind itself: another client's /health/live answers within a second", async () => {
    const FLOOD_MS = 3_000;
    const flooder = { 'x-forwarded-for': '203.0.113.7' };
    const answers: Record<number, number> = {};
    const until = Date.now() + FLOOD_MS;
    const started = performance.now();
    const flood = Promise.all(
      Array.from({ length: 64 }, async () => {
        while (Date.now() < until) {
          const res = await fetch(`${base}/health/live`, { headers: flooder });
          await res.arrayBuffer();
          answers[res.status] = (answers[res.status] ?? 0) + 1;
        }
      }),
    );
    const probes: { status: number; ms: number }[] = [];
    await new Promise((r) => setTimeout(r, 300));
    while (Date.now() < until - 200) {
      probes.push(await timed(`${base}/health/live`, { headers: { 'x-forwarded-for': '198.51.100.9' } }));
      await new Promise((r) => setTimeout(r, 100));
    }
    await flood;
    const floodSeconds = (performance.now() - started) / 1000;
    expect(probes.length).toBeGreaterThan(5);
    expect(probes.filter((p) => p.status !== 200 || p.ms >= 1_000)).toEqual([]);
    // The flood itself is answered (its share is 2 places held 20 ms each: at most 100 a second), never faster.
    expect(answers[200] ?? 0).toBeGreaterThan(0);
    expect(answers[200] ?? 0).toBeLessThanOrEqual(100 * floodSeconds + 64);
  });

  it('a body slower than REQUEST_BODY_TIMEOUT_MS ends with a 408 problem and the connection closed', async () => {
    const body = '{"username":"nobody","password":"x"}';
    const started = performance.now();
    const t = trickle(loginHead('/identity/login', 'application/json', body.length), body, 500);
    await t.closed;
    t.stopTimer();
    const elapsed = performance.now() - started;
    const answer = t.answer();
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer).toContain('application/problem+json');
    expect(answer).toContain('REQUEST_BODY_TIMEOUT_MS');
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + 3_000);
  });

  it('headers slower than REQUEST_BODY_TIMEOUT_MS end with a 408 problem', async () => {
    const head = `GET /health/live HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `;
    const started = performance.now();
    const t = trickle(head, 'a'.repeat(100), 500);
    await t.closed;
    t.stopTimer();
    const answer = t.answer();
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('application/problem+json');
    // Node looks for late headers every second.
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 3_000);
  });

  it('an authenticated body that trickles holds none of its tenant’s places either', async () => {
    // TENANT_API_REQUESTS is 8: ten of the tenant's trickling requests, and its quick one still goes through.
    const body = JSON.stringify({ workflowInstanceIds: ['x'] });
    const head = `POST /alterations/dry-run HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ApiKey ${h.adminKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const tricklers = Array.from({ length: 10 }, () => trickle(head, body, 1_000));
    try {
      await new Promise((r) => setTimeout(r, 1_200));
      const quick = await timed(`${base}/alterations/dry-run?countOnly=true`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.adminKey}` },
        body,
      });
      expect(quick.status).toBe(200);
      expect(quick.ms).toBeLessThan(2_000);
    } finally {
      for (const t of tricklers) t.end();
    }
  });
});
