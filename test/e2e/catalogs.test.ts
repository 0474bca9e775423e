import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { chain, writeLine } from '../support/workflows.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(() => h?.close());

describe('catalogs', () => {
  it('lists the installed features', async () => {
    const r = await h.request('GET', '/features/installed', { key: await h.keyWith([]) });
    expect(r.status).toBe(200);
    expect(r.body.totalCount).toBe(r.body.items.length);
    expect(r.body.items.map((f: { name: string }) => f.name)).toEqual(
      expect.arrayContaining(['Elsa.Alterations', 'Elsa.Connections', 'Elsa.Identity']),
    );
    for (const f of r.body.items)
      expect(f).toEqual({ name: expect.any(String), displayName: expect.any(String), description: expect.any(String) });
  });

  it("describes the built-in activities and the tenant's workflows usable as activities", async () => {
    await h.request('POST', '/workflow-definitions', {
      body: chain('approve-order', [writeLine('w', 'x')], {
        name: 'Approve order',
        description: 'Approves an order',
        options: { usableAsActivity: true },
        variables: [
          { id: 'orderId', name: 'Order id', typeName: 'String' },
          { id: 'amount', typeName: 'Int32', value: 5 },
        ],
      }),
    });
    await h.request('POST', '/workflow-definitions', { body: chain('plain', [writeLine('w', 'x')]) });
    const other = await h.keyWith(['*'], 'tenant-b');
    await h.request('POST', '/workflow-definitions', {
      key: other,
      body: chain('b-activity', [writeLine('w', 'x')], { options: { usableAsActivity: true } }),
    });

    const r = await h.request('GET', '/descriptors/activities', { key: await h.keyWith([]) });
    expect(r.status).toBe(200);
    const byType = new Map(r.body.items.map((a: { typeName: string }) => [a.typeName, a]));
    expect(r.body.totalCount).toBe(r.body.items.length);
    for (const t of [
      'Elsa.WriteLine',
      'Elsa.SetVariable',
      'Elsa.Event',
      'Elsa.Fault',
      'Elsa.Finish',
      'Elsa.Http.SendHttpRequest',
    ])
      expect(byType.has(t), t).toBe(true);
    const send = byType.get('Elsa.Http.SendHttpRequest') as { inputs: Record<string, unknown>[]; outcomes: string[] };
    expect(send.inputs[0]).toEqual({
      name: 'connection',
      typeName: 'ConnectionProperties<Elsa.Connections.Http.HttpConnectionConfiguration>',
      displayName: 'Connection',
      description: expect.any(String),
      uiHint: 'dropdown',
      isRequired: true,
      isSensitive: false,
      defaultValue: null,
      order: 0,
    });
    expect(send.outcomes).toEqual(['Done']);
    expect(byType.get('approve-order')).toEqual({
      typeName: 'approve-order',
      namespace: 'Workflows',
      displayName: 'Approve order',
      description: 'Approves an order',
      inputs: [
        {
          name: 'orderId',
          typeName: 'String',
          displayName: 'Order id',
          description: '',
          uiHint: 'singleline',
          isRequired: false,
          isSensitive: false,
          defaultValue: null,
          order: 0,
        },
        {
          name: 'amount',
          typeName: 'Int32',
          displayName: 'amount',
          description: '',
          uiHint: 'singleline',
          isRequired: false,
          isSensitive: false,
          defaultValue: 5,
          order: 1,
        },
      ],
      outcomes: ['Done'],
    });
    expect(byType.has('plain')).toBe(false);
    expect(byType.has('b-activity')).toBe(false);
  });
});
