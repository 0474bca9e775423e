import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { chain, connect, lit, orderApproval, writeLine } from '../support/workflows.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(async () => {
  await h?.close();
});

async function rejected(body: unknown) {
  const res = await h.request('POST', '/workflow-definitions', { body });
  expect(res.status).toBe(400);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
  return res.body.errors as { path: string; message: string }[];
}

describe('publishing workflow definitions', () => {
  it('publishes version 1, then 2, each becoming the latest', async () => {
    const v1 = await h.request('POST', '/workflow-definitions', { body: orderApproval() });
    expect(v1.status).toBe(201);
    expect(v1.body).toMatchObject({
      definitionId: 'order-approval',
      version: 1,
      isLatest: true,
      isPublished: true,
      name: 'Order approval',
    });
    expect(v1.headers.get('location')).toBe('/workflow-definitions/order-approval?version=1');
    const v2 = await h.request('POST', '/workflow-definitions', {
      body: { ...orderApproval(), name: 'Order approval v2' },
    });
    expect(v2.body).toMatchObject({ version: 2, isLatest: true });
    expect(v2.body.id).not.toBe(v1.body.id);

    const latest = await h.request('GET', '/workflow-definitions/order-approval');
    expect(latest.body).toMatchObject({ version: 2, name: 'Order approval v2', isLatest: true });
    const first = await h.request('GET', '/workflow-definitions/order-approval?version=1');
    expect(first.body).toMatchObject({ version: 1, isLatest: false });
    expect((await h.request('GET', '/workflow-definitions/order-approval?version=3')).status).toBe(404);
    expect((await h.request('GET', '/workflow-definitions/unknown')).status).toBe(404);
    const list = await h.request('GET', '/workflow-definitions');
    expect(list.body.items.map((d: any) => [d.definitionId, d.version])).toEqual([['order-approval', 2]]);
  });

  it('concurrent publishes of one definition get distinct versions', async () => {
    const results = await Promise.all(
      Array.from({ length: 5 }, () => h.request('POST', '/workflow-definitions', { body: orderApproval('racy') })),
    );
    expect(results.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(results.map((r) => r.body.version).sort()).toEqual([1, 2, 3, 4, 5]);
    const { rows } = await h.pool.query(
      "SELECT count(*)::int AS n FROM workflow_definitions WHERE definition_id = 'racy' AND is_latest",
    );
    expect(rows[0].n).toBe(1);
  });

  it('another tenant does not see the definition', async () => {
    await h.request('POST', '/workflow-definitions', { body: orderApproval('mine') });
    const other = await h.keyWith(['*'], 'tenant-x');
    expect((await h.request('GET', '/workflow-definitions/mine', { key: other })).status).toBe(404);
    // The same definition id in the other tenant is its own version 1.
    const theirs = await h.request('POST', '/workflow-definitions', { key: other, body: orderApproval('mine') });
    expect(theirs.body.version).toBe(1);
  });
});

describe('definitions that are refused, with the offending field named', () => {
  it('an unknown activity type', async () => {
    expect(await rejected(chain('d', [writeLine('a', 'x'), { id: 'b', type: 'Elsa.Teleport' }]))).toEqual([
      { path: '/root/activities/1/type', message: 'Unknown activity type "Elsa.Teleport"' },
    ]);
  });

  it('a duplicate activity id', async () => {
    const def = chain('d', [writeLine('a', 'x'), writeLine('b', 'y')]);
    def.root.activities.push(writeLine('b', 'z'));
    expect(await rejected(def)).toContainEqual({ path: '/root/activities/2/id', message: 'Duplicate activity id "b"' });
  });

  it('a connection naming an unknown activity', async () => {
    const def = chain('d', [writeLine('a', 'x')]);
    def.root.connections.push(connect('a', 'ghost'));
    expect(await rejected(def)).toEqual([
      { path: '/root/connections/0/target/activity', message: 'Connection target names unknown activity "ghost"' },
    ]);
  });

  it('a connection naming an unknown port', async () => {
    const def = chain('d', [writeLine('a', 'x'), writeLine('b', 'y')]);
    def.root.connections[0]!.source.port = 'Failed';
    const errors = await rejected(def);
    expect(errors.map((e) => e.path)).toContain('/root/connections/0/source/port');
  });

  it('a missing required input', async () => {
    expect(await rejected(chain('d', [{ id: 'a', type: 'Elsa.Event', version: 1 }]))).toEqual([
      {
        path: '/root/activities/0/eventName',
        message: 'Missing required input "eventName" for activity type Elsa.Event',
      },
    ]);
  });

  it('an unknown variable typeName', async () => {
    const errors = await rejected(chain('d', [writeLine('a', 'x')], { variables: [{ id: 'v', typeName: 'Money' }] }));
    expect(errors).toEqual([
      { path: '/variables/0/typeName', message: expect.stringContaining('Unknown variable type "Money"') },
    ]);
  });

  it('no unique start activity', async () => {
    const def = {
      definitionId: 'd',
      root: {
        type: 'Elsa.Flowchart',
        id: 'f',
        activities: [writeLine('a', 'x'), writeLine('b', 'y')],
        connections: [],
      },
    };
    expect((await rejected(def)).map((e) => e.path)).toEqual(['/root/start']);
  });

  it('a schema violation: wrong root type, malformed input, missing root', async () => {
    expect(
      (await rejected({ definitionId: 'd', root: { type: 'Elsa.Sequence', id: 'x', activities: [] } })).map(
        (e) => e.path,
      ),
    ).toContain('/root/type');
    const badInput = chain('d', [{ id: 'a', type: 'Elsa.WriteLine', text: 'plain string' }]);
    expect((await rejected(badInput)).map((e) => e.path)).toEqual(['/root/activities/0/text']);
    expect((await rejected({ definitionId: 'd' })).map((e) => e.path)).toEqual(['/root']);
    expect(
      (
        await rejected({
          ...chain('d', [writeLine('a', 'x')]),
          variables: [{ id: 'v', typeName: 'Int32', value: 'abc' }],
        })
      ).map((e) => e.path),
    ).toEqual(['/variables/0/value']);
    expect(
      (await rejected(chain('d', [{ id: 'a', type: 'Elsa.WriteLine', text: lit('x'), extra: lit('y') }]))).map(
        (e) => e.path,
      ),
    ).toEqual(['/root/activities/0/extra']);
  });

  it('nothing is written for a refused definition', async () => {
    await rejected(chain('never-stored', [{ id: 'a', type: 'Elsa.Nope' }]));
    const { rows } = await h.pool.query(
      "SELECT count(*)::int AS n FROM workflow_definitions WHERE definition_id = 'never-stored'",
    );
    expect(rows[0].n).toBe(0);
  });
});
