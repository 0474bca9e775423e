import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';

/**
 * The console says when Temporal is not reachable: the service in a process of its own, reaching Temporal through
 * a TCP relay this test closes and opens again (Temporal itself stays up for the other tests), and the console's
 * pages read over HTTP with a session made by its sign-in form.
 */
const PASSWORD = 'console-password-1';
const BANNER = /Temporal is not reachable: plans and the instances’ steps wait until it is back/;
let service: SpawnedService;
let work: string;
let relay: net.Server;
let relayPort: number;
const open = new Set<net.Socket>();

function listen(): Promise<void> {
  const [host, port] = inject('temporalAddress').split(':') as [string, string];
  relay = net.createServer((client) => {
    const upstream = net.connect(Number(port), host);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => s.destroy());
    }
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve) => relay.listen(relayPort, '127.0.0.1', resolve));
}

async function close(): Promise<void> {
  await new Promise((resolve) => {
    relay.close(resolve);
    for (const s of open) s.destroy();
  });
}

async function eventually<T>(check: () => Promise<T | undefined | false>, what: string, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`Timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

let cookie: string;
const page = async (p: string) =>
  (await fetch(`${service.url}${p}`, { headers: { cookie }, redirect: 'manual' })).text();

beforeAll(async () => {
  relayPort = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  await listen();
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-console-down-'));
  service = await spawnService('console-down', work, { TEMPORAL_ADDRESS: `127.0.0.1:${relayPort}` });
  const made = await fetch(`${service.url}/identity/users`, {
    method: 'POST',
    headers: { authorization: `ApiKey ${service.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'watcher', password: PASSWORD, permissions: ['*'] }),
  });
  expect(made.status).toBe(201);
  const signIn = await fetch(`${service.url}/console/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: service.url },
    body: new URLSearchParams({ username: 'watcher', password: PASSWORD }).toString(),
    redirect: 'manual',
  });
  expect(signIn.status).toBe(303);
  cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
}, 180_000);

afterAll(async () => {
  await service?.stop();
  await close().catch(() => undefined);
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the console while Temporal is away', () => {
  it('says so at the top of every page, and stops saying so once Temporal is back', async () => {
    expect(await page('/console/dashboard')).not.toMatch(BANNER);
    await close();
    const down = await eventually(async () => {
      const html = await page('/console/dashboard');
      return BANNER.test(html) ? html : undefined;
    }, 'the banner on the Dashboard');
    expect(down).toMatch(/<p class="banner" role="alert">/);
    expect(await page('/console/plans')).toMatch(BANNER);
    const ready = await fetch(`${service.url}/health/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: { temporal: string } }).checks.temporal).not.toBe('ok');

    await listen();
    await eventually(async () => !BANNER.test(await page('/console/dashboard')), 'the banner to go');
  }, 180_000);
});
