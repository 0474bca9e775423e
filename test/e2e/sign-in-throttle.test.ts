import http from 'node:http';
import type { AddressInfo, Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../src/api/server.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * Sign-in guessing over real sockets from several client addresses (127.0.0.x on loopback): counted per
 * (user name, address) and per address, atomically under a parallel burst; a burst from one address never
 * locks the user out elsewhere; X-Forwarded-For counts only from TRUSTED_PROXIES (contract section 8).
 */
interface Answer {
  status: number;
  retryAfter: string | undefined;
}

function post(port: number, from: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        localAddress: from,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

function get(port: number, from: string, path: string, headers: Record<string, string>) {
  return new Promise<Answer>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, localAddress: from, agent: false, headers }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string }));
      })
      .on('error', reject);
  });
}

const count = (answers: Answer[], status: number) => answers.filter((a) => a.status === status).length;

async function serve(h: Harness): Promise<{ port: number; server: Server }> {
  const server = serveApi(h.app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  return { port: (server.address() as AddressInfo).port, server };
}

describe('sign-in guessing', () => {
  let h: Harness;
  let port: number;
  let server: Server;
  beforeAll(async () => {
    h = await createHarness({ worker: false });
    ({ port, server } = await serve(h));
    for (const name of ['victim', 'bystander']) {
      const r = await h.request('POST', '/identity/users', {
        body: { name, password: 'correct horse battery', permissions: [] },
      });
      expect(r.status).toBe(201);
    }
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await h?.close();
  });

  const login = (from: string, username: string, password: string) =>
    post(port, from, '/identity/login', { username, password });

  it('lets a parallel burst check exactly 5 passwords, blocks for a minute, and never locks the user out elsewhere', async () => {
    const burst = await Promise.all(
      Array.from({ length: 40 }, (_, i) => login('127.0.0.2', i % 2 ? 'victim' : ' VICTIM ', `wrong ${i}`)),
    );
    expect(count(burst, 401)).toBe(5);
    expect(count(burst, 429)).toBe(35);
    // One burst is one block of a minute, not the 15-minute maximum.
    for (const a of burst.filter((x) => x.status === 429)) expect(Number(a.retryAfter)).toBeLessThanOrEqual(60);
    // The right password from the attacker's address waits; from any other address it works at once.
    expect((await login('127.0.0.2', 'victim', 'correct horse battery')).status).toBe(429);
    expect((await login('127.0.0.3', 'victim', 'correct horse battery')).status).toBe(200);
    expect((await login('127.0.0.3', 'VICTIM', 'correct horse battery')).status).toBe(200);
  });

  it('counts 20 failures per address across user names and unknown API keys, atomically', async () => {
    const names = await Promise.all(
      Array.from({ length: 12 }, (_, i) => login('127.0.0.4', `nobody-${i}`, 'whatever password')),
    );
    const keys = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        get(port, '127.0.0.4', '/alterations', { authorization: `ApiKey wfa_unknown_${i}` }),
      ),
    );
    expect(count(names, 401) + count(keys, 401)).toBe(20);
    expect(count(keys, 429)).toBeGreaterThan(0);
    // A valid key from that address still works; another address is not affected.
    expect((await get(port, '127.0.0.4', '/alterations', { authorization: `ApiKey ${h.adminKey}` })).status).toBe(200);
    expect((await login('127.0.0.5', 'bystander', 'correct horse battery')).status).toBe(200);
  });

  it('gives a successful sign-in its attempt back, so a user signing in often is never blocked', async () => {
    for (let i = 0; i < 30; i++)
      expect((await login('127.0.0.6', 'bystander', 'correct horse battery')).status).toBe(200);
  });

  it('ignores X-Forwarded-For from a client that is not a trusted proxy', async () => {
    const spoofed = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post(
          port,
          '127.0.0.7',
          '/identity/login',
          { username: 'victim', password: `wrong ${i}` },
          { 'x-forwarded-for': `203.0.113.${i}` },
        ),
      ),
    );
    expect(count(spoofed, 401)).toBe(5);
  });
});

describe('behind a trusted proxy', () => {
  let h: Harness;
  let port: number;
  let server: Server;
  beforeAll(async () => {
    h = await createHarness({ worker: false, trustedProxies: ['127.0.0.9/32'] });
    ({ port, server } = await serve(h));
    const r = await h.request('POST', '/identity/users', {
      body: { name: 'proxied', password: 'correct horse battery', permissions: [] },
    });
    expect(r.status).toBe(201);
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await h?.close();
  });

  const viaProxy = (forwardedFor: string, password: string) =>
    post(port, '127.0.0.9', '/identity/login', { username: 'proxied', password }, { 'x-forwarded-for': forwardedFor });

  it('reads the forms proxies write, and counts an IPv6 client by its /64', async () => {
    const r = await h.request('POST', '/identity/users', {
      body: { name: 'proxied-v6', password: 'correct horse battery', permissions: [] },
    });
    expect(r.status).toBe(201);
    const login = (forwardedFor: string, password: string) =>
      post(
        port,
        '127.0.0.9',
        '/identity/login',
        { username: 'proxied-v6', password },
        { 'x-forwarded-for': forwardedFor },
      );
    // Twelve addresses of one /64, in the bracketed-with-port form: one client, 5 attempts.
    const guesses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => login(`[2001:db8:0:7::${(i + 1).toString(16)}]:443`, `wrong ${i}`)),
    );
    expect(count(guesses, 401)).toBe(5);
    // Another /64, and an IPv4 client with a port, are other clients.
    expect((await login('2001:db8:0:8::1', 'correct horse battery')).status).toBe(200);
    expect((await login('198.51.100.20:51234', 'correct horse battery')).status).toBe(200);
  });

  it('puts a ceiling on guessing one account from many /64s, and still lets its user in from a known address', async () => {
    const r = await h.request('POST', '/identity/users', {
      body: { name: 'targeted', password: 'correct horse battery', permissions: [] },
    });
    expect(r.status).toBe(201);
    const login = (forwardedFor: string, password: string) =>
      post(
        port,
        '127.0.0.9',
        '/identity/login',
        { username: 'targeted', password },
        { 'x-forwarded-for': forwardedFor },
      );
    // The user signs in from home: that address is known for them from now on.
    expect((await login('2001:db8:ffff:1::10', 'correct horse battery')).status).toBe(200);
    // 30 /64s guess 5 passwords each (every one within its own per-address limits): the account's ceiling
    // lets 100 be checked in 15 minutes, then refuses the rest.
    const guesses: Answer[] = [];
    for (let net = 0; net < 30; net++)
      guesses.push(
        ...(await Promise.all(
          Array.from({ length: 5 }, (_, i) => login(`2001:db8:a:${net.toString(16)}::${i + 1}`, `wrong ${net}-${i}`)),
        )),
      );
    expect(count(guesses, 401)).toBe(100);
    expect(count(guesses, 429)).toBe(50);
    for (const a of guesses.filter((x) => x.status === 429)) expect(Number(a.retryAfter)).toBeGreaterThan(0);
    // A new /64 gets 429 even with the right password while the ceiling stands (the attack keeps the user
    // from signing in from a new address, never from their own)...
    expect((await login('2001:db8:b:1::1', 'correct horse battery')).status).toBe(429);
    // ...and from home, another address of the same /64, the user signs in.
    expect((await login('2001:db8:ffff:1::99', 'correct horse battery')).status).toBe(200);
    // Another account is not affected.
    expect((await viaProxy('2001:db8:b:2::1', 'correct horse battery')).status).toBe(200);
  }, 120_000);

  it('counts each forwarded client address on its own', async () => {
    const attacker = await Promise.all(Array.from({ length: 12 }, (_, i) => viaProxy('198.51.100.7', `wrong ${i}`)));
    expect(count(attacker, 401)).toBe(5);
    // The real user behind the same proxy, from another address (a client-written hop in front is skipped).
    expect((await viaProxy('10.9.9.9, 198.51.100.8', 'correct horse battery')).status).toBe(200);
    // The proxy's own address is not the client: a request without the header counts as the proxy's.
    expect((await viaProxy('not-an-address', 'correct horse battery')).status).toBe(200);
  });
});
