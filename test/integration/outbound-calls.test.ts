import { createServer as createHttpServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendThroughConnection, targetUrl } from '../../src/connections/http.js';
import { createHarness, type Harness } from '../support/harness.js';
import { chain, lit } from '../support/workflows.js';

/**
 * The outbound-call rules of contract section 8, against real sockets: `timeoutMs` bounds the whole call,
 * a body cut short is a failure, a protocol switch or a refused method never hangs, framing and hop-by-hop
 * headers and non-ASCII values are refused at create, and paths and addresses some receivers would read
 * differently are refused.
 */
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
const LOOPBACK = { allowNetworks: ['127.0.0.0/8'] };

/** A raw TCP server answering each request with `answer(socket)`, so a test can misbehave at will. */
async function rawServer(answer: (socket: net.Socket) => void): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.once('data', () => answer(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const call = (url: string, timeoutMs: number, method = 'GET', path = 'x') =>
  sendThroughConnection({ baseUrl: url, headers: {}, timeoutMs }, { method, path }, LOOPBACK);

describe('an outbound call', () => {
  it('ends at timeoutMs however the server stalls: silent, dripping a body, or after the headers', async () => {
    const timers: NodeJS.Timeout[] = [];
    const silent = await rawServer(() => undefined);
    const dripping = await rawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n');
      timers.push(setInterval(() => socket.write('x'), 100));
    });
    const headersOnly = await rawServer((socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'));
    try {
      for (const server of [silent, dripping, headersOnly]) {
        const started = performance.now();
        const outcome = await call(server.url, 800);
        const took = performance.now() - started;
        expect(outcome).toEqual({ ok: false, error: 'no complete response within 800 ms' });
        expect(took).toBeGreaterThanOrEqual(790);
        expect(took).toBeLessThan(3_000);
      }
    } finally {
      for (const t of timers) clearInterval(t);
      await Promise.all([silent.close(), dripping.close(), headersOnly.close()]);
    }
  });

  it('fails when the body is cut short, by Content-Length or by chunks, and succeeds when it is whole', async () => {
    const short = await rawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..');
      setTimeout(() => socket.destroy(), 50);
    });
    const chunked = await rawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
      setTimeout(() => socket.destroy(), 50);
    });
    const whole = await rawServer((socket) => socket.end('HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok'));
    try {
      for (const server of [short, chunked]) {
        const outcome = await call(server.url, 5_000);
        expect(outcome.ok).toBe(false);
        expect((outcome as { error: string }).error).toMatch(/cut short/);
      }
      expect(await call(whole.url, 5_000)).toEqual({ ok: true, status: 201 });
    } finally {
      await Promise.all([short.close(), chunked.close(), whole.close()]);
    }
  });

  it('never hangs on a protocol switch (101), and refuses CONNECT and other methods before connecting', async () => {
    let requests = 0;
    const switching = await rawServer((socket) => {
      requests++;
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
    try {
      const started = performance.now();
      const outcome = await call(switching.url, 60_000);
      expect(outcome.ok).toBe(false);
      expect((outcome as { error: string }).error).toMatch(/switched protocols/);
      expect(performance.now() - started).toBeLessThan(5_000);
      requests = 0;
      for (const method of ['CONNECT', 'TRACE', 'PROPFIND', 'GET\r\nX: 1']) {
        const refused = await call(switching.url, 60_000, method);
        expect(refused.ok, method).toBe(false);
        expect((refused as { error: string }).error).toMatch(
          /is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS/,
        );
      }
      expect(requests).toBe(0);
    } finally {
      await switching.close();
    }
  });

  it('refuses paths some receivers read as dot segments or double escapes', () => {
    const base = 'http://api.example/base/';
    for (const path of [
      '..;/outside',
      'x/..;jsessionid=1/y',
      '.;/x',
      '%252e%252e/outside',
      '%c0%ae%c0%ae/',
      '..%00/x',
      'a%0d%0ab',
    ]) {
      expect(typeof targetUrl(base, path), path).toBe('string');
    }
    for (const path of ['orders/42', 'a/../b', 'q?x=%25', 'caf%C3%A9', 'x;v=1']) {
      expect(targetUrl(base, path), path).toBeInstanceOf(URL);
    }
  });

  it('refuses NAT64, IPv4-compatible, 6to4 and Teredo addresses, which can reach IPv4 hosts', async () => {
    for (const host of [
      '[64:ff9b::7f00:1]',
      '[64:ff9b:1::a9fe:a9fe]',
      '[::7f00:1]',
      '[2002:7f00:1::1]',
      '[2001:0::1]',
    ]) {
      const outcome = await sendThroughConnection(
        { baseUrl: `http://${host}:9/`, headers: {}, timeoutMs: 1_000 },
        { method: 'GET', path: 'x' },
      );
      expect(outcome.ok, host).toBe(false);
      expect((outcome as { error: string }).error, host).toContain('OUTBOUND_HTTP_ALLOW_NETWORKS');
    }
  });
});

describe('connections and definitions', () => {
  let h: Harness;
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createHttpServer((req, res) => {
      req.resume();
      res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    h = await createHarness();
  });
  afterAll(async () => {
    await h?.close();
    await new Promise((resolve) => server?.close(resolve));
  });

  const create = (name: string, configuration: Record<string, unknown>) =>
    h.request('POST', '/connection-configuration', {
      body: {
        name,
        connectionType: HTTP,
        connectionConfiguration: { baseUrl: `http://127.0.0.1:${port}/`, ...configuration },
      },
    });

  it('refuses framing and hop-by-hop headers, and values or tokens that are not visible ASCII, at create and update', async () => {
    for (const header of [
      'Host',
      'content-length',
      'Transfer-Encoding',
      'TE',
      'Trailer',
      'Connection',
      'Upgrade',
      'Keep-Alive',
      'Proxy-Authorization',
    ]) {
      const r = await create(`h-${header}`, { headers: { [header]: 'x' } });
      expect(r.status, header).toBe(400);
      expect(r.body.errors[0].path, header).toBe(`/connectionConfiguration/headers/${header}`);
    }
    for (const value of ['café', 'snow☃', 'a\u0007b']) {
      const r = await create('bad-value', { headers: { 'x-v': value } });
      expect(r.status, value).toBe(400);
      expect(r.body.errors[0].path).toBe('/connectionConfiguration/headers/x-v');
    }
    const token = await create('bad-token', { bearerToken: 'tok\r\nX-Injected: 1' });
    expect(token.status).toBe(400);
    expect(token.body.errors[0].path).toBe('/connectionConfiguration/bearerToken');
    const ok = await create('fine', {
      headers: { 'x-api-version': '2024-01-01', accept: 'application/json' },
      bearerToken: 'abc def\t1',
    });
    expect(ok.status).toBe(201);
    const put = await h.request('PUT', `/connection-configuration/${ok.body.id}`, {
      body: {
        name: 'fine',
        connectionType: HTTP,
        connectionConfiguration: { baseUrl: `http://127.0.0.1:${port}/`, headers: { Host: 'evil.example' } },
      },
    });
    expect(put.status).toBe(400);
    const { rowCount } = await h.pool.query(
      "SELECT 1 FROM connection_configurations WHERE name LIKE 'h-%' OR name LIKE 'bad-%'",
    );
    expect(rowCount).toBe(0);
  });

  it('refuses a literal method outside the list at publish, and faults a computed one at run time', async () => {
    expect((await create('calls', {})).status).toBe(201);
    const send = (method: Record<string, unknown>) => ({
      id: 'call',
      type: 'Elsa.Http.SendHttpRequest',
      version: 1,
      connection: {
        typeName: `ConnectionProperties<${HTTP}>`,
        expression: { type: 'Literal', value: { connectionName: 'calls' } },
      },
      method,
      path: lit('x'),
    });
    const literal = await h.request('POST', '/workflow-definitions', {
      body: chain('connect-literal', [send(lit('CONNECT'))]),
    });
    expect(literal.status).toBe(400);
    expect(literal.body.errors[0].path).toBe('/root/activities/0/method/expression/value');
    expect(literal.body.errors[0].message).toContain('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
    expect(
      (await h.request('POST', '/workflow-definitions', { body: chain('lower-get', [send(lit('get'))]) })).status,
    ).toBe(201);

    const computed = chain(
      'connect-computed',
      [send({ typeName: 'String', expression: { type: 'Variable', value: 'm' } })],
      {
        variables: [{ id: 'm', name: 'Method', typeName: 'String', value: 'GET' }],
      },
    );
    expect((await h.request('POST', '/workflow-definitions', { body: computed })).status).toBe(201);
    const started = await h.request('POST', '/workflow-instances', {
      body: { definitionId: 'connect-computed', variables: { m: 'CONNECT' } },
    });
    const id = started.body.workflowInstanceId as string;
    const deadline = Date.now() + 20_000;
    let instance;
    do {
      await new Promise((r) => setTimeout(r, 100));
      instance = (await h.request('GET', `/workflow-instances/${id}`)).body;
    } while (instance.subStatus !== 'Faulted' && Date.now() < deadline);
    expect(instance.subStatus).toBe('Faulted');
    expect(instance.incidents[0].message).toBe(
      'Method "CONNECT" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS',
    );
  });
});
