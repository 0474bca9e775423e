import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_ACTIONS, READ_METHODS } from '../../src/audit/actions.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * The audit trail (contract section 13) on real Postgres: one entry per state-changing request (every operation
 * of the OpenAPI document), no secret in any, refusals and failed sign-ins recorded, a hash chain per tenant that
 * verifies and breaks exactly where a row was edited, one chain from two API nodes writing at once, and a trail
 * that the service's own connections cannot update or delete.
 */
let h: Harness;
let other: Harness;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  // A second API node on the same database.
  other = await createHarness({ worker: false, database: h.database });
});
afterAll(async () => {
  await other?.close();
  await h?.close();
});

interface Entry {
  seq: number;
  tenantId: string | null;
  actor: { kind: string; id: string | null; name: string | null };
  action: string;
  target: { kind: string | null; id: string | null };
  outcome: number;
  detail: Record<string, unknown>;
  hash: string;
  prevHash: string;
}

/** The default tenant's entries after `seq`, oldest first (read as the superuser, not through the API). */
async function entriesAfter(seq: number, tenant = ''): Promise<Entry[]> {
  const { rows } = await h.pool.query<{
    seq: string;
    action: string;
    outcome: number;
    detail: unknown;
    target_id: string;
  }>('SELECT * FROM audit_entries WHERE tenant_id = $1 AND seq > $2 ORDER BY seq', [tenant, seq]);
  return rows.map((r: any) => ({
    seq: Number(r.seq),
    tenantId: r.tenant_id,
    actor: { kind: r.actor_kind, id: r.actor_id, name: r.actor_name },
    action: r.action,
    target: { kind: r.target_kind, id: r.target_id },
    outcome: r.outcome,
    detail: r.detail,
    hash: r.hash,
    prevHash: r.prev_hash,
  }));
}
async function lastSeq(tenant = ''): Promise<number> {
  const { rows } = await h.pool.query<{ seq: string }>(
    'SELECT max(seq) AS seq FROM audit_entries WHERE tenant_id = $1',
    [tenant],
  );
  return Number(rows[0]?.seq ?? 0);
}

describe('the audit trail', () => {
  it("writes exactly one entry for each state-changing operation of the OpenAPI document, named by the routes' table", async () => {
    const doc = (await h.request('GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops)
        .map((m) => m.toUpperCase())
        .filter((m) => !READ_METHODS.has(m))
        .map((method) => ({ method, path })),
    );
    expect(operations.length).toBeGreaterThan(20);
    // A new route without its action fails here.
    expect(operations.filter((o) => !AUDIT_ACTIONS[`${o.method} ${o.path}`])).toEqual([]);
    for (const { method, path } of operations) {
      const before = await lastSeq();
      // Each with a body the route refuses or a target it does not find: recorded whatever its outcome.
      const r = await h.request(method, path.replace(/\{(\w+)\}/g, 'audit-walk-$1'), { body: { audit: 'walk' } });
      const written = await entriesAfter(before);
      expect(
        written.map((e) => [e.action, e.outcome]),
        `${method} ${path}`,
      ).toEqual([[AUDIT_ACTIONS[`${method} ${path}`]!.action.replace(/^signIn$/, 'signIn.fail'), r.status]]);
    }
  });

  it('records a change in the transaction that made it, with its target and the status it answered', async () => {
    const before = await lastSeq();
    const r = await h.request('POST', '/alterations/submit', {
      body: {
        alterations: [{ type: 'Cancel' }],
        filter: { workflowInstanceIds: ['nothing-here'] },
        schedule: { notBefore: '2099-01-01T00:00:00Z' },
      },
    });
    expect(r.status).toBe(202);
    const [entry, ...rest] = await entriesAfter(before);
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({
      action: 'plan.submit',
      outcome: 202,
      actor: { kind: 'apiKey' },
      target: { kind: 'plan', id: r.body.planId },
      detail: { alterations: [{ type: 'Cancel' }] },
    });
    const cancelled = await h.request('POST', `/alterations/${r.body.planId}/cancel`);
    expect(cancelled.status).toBe(202);
    const [cancel] = await entriesAfter(entry!.seq);
    expect(cancel).toMatchObject({ action: 'plan.cancel', outcome: 202, target: { kind: 'plan', id: r.body.planId } });
    // The API reads it the same, newest first, filtered.
    const page = await h.request('GET', `/audit?targetId=${r.body.planId}`);
    expect(page.status).toBe(200);
    expect(page.body.items.map((e: Entry) => e.action)).toEqual(['plan.cancel', 'plan.submit']);
    const family = await h.request('GET', `/audit?action=plan.*&targetId=${r.body.planId}&limit=1`);
    expect(family.body.items).toHaveLength(1);
    const next = await h.request(
      'GET',
      `/audit?action=plan.*&targetId=${r.body.planId}&limit=1&after=${family.body.nextCursor}`,
    );
    expect(next.body.items[0].action).toBe('plan.submit');
  });

  it("counts the entries it writes in /metrics, and reports the trail table's size", async () => {
    const written = async () => {
      const res = await h.app.request('/metrics', { headers: { authorization: `ApiKey ${h.adminKey}` } });
      const text = await res.text();
      expect(text).toMatch(/^wfa_table_bytes\{table="audit_entries"\} [1-9]\d*$/m);
      return Number(/^wfa_audit_entries_total (\d+)$/m.exec(text)![1]);
    };
    const before = await written();
    expect(before).toBeGreaterThan(0);
    expect(
      (
        await h.request('PUT', '/alterations/policy', {
          body: { approval: 'never', approvalThreshold: null, approvalTtlSeconds: 3600 },
        })
      ).status,
    ).toBe(200);
    expect(await written()).toBe(before + 1);
    // A small table's rows are counted, not the planner's 0 before its first ANALYZE.
    const text = await (await h.app.request('/metrics', { headers: { authorization: `ApiKey ${h.adminKey}` } })).text();
    for (const table of ['alteration_plans', 'audit_entries']) {
      const { rows } = await h.pool.query(`SELECT count(*)::int AS n FROM ${table}`);
      expect(rows[0].n).toBeGreaterThan(0);
      expect(text).toMatch(new RegExp(`^wfa_table_rows\\{table="${table}"\\} ${rows[0].n}$`, 'm'));
    }
  });

  it('keeps every secret out of every entry', async () => {
    const secret = 'Sekr1t-audit-9f3c1d';
    const before = await lastSeq();
    const user = await h.request('POST', '/identity/users', {
      body: { name: `audited-${Date.now()}`, password: `${secret}-password`, permissions: ['alterations:view'] },
    });
    expect(user.status).toBe(201);
    expect(
      (
        await h.request('POST', '/identity/login', {
          key: null,
          body: { username: user.body.name, password: `${secret}-password` },
        })
      ).status,
    ).toBe(200);
    const login = await h.request('POST', '/identity/login', {
      key: null,
      body: { username: user.body.name, password: `${secret}-wrong` },
    });
    expect(login.status).toBe(401);
    const key = await h.request('POST', '/identity/api-keys', {
      body: { name: 'audited key', permissions: ['alterations:view'] },
    });
    expect(key.status).toBe(201);
    await h.request('POST', '/identity/secrets/hash', { body: { secret: `${secret}-hash` } });
    await h.request('POST', '/connection-configuration', {
      body: {
        name: 'audited',
        connectionType: 'Http',
        connectionConfiguration: { password: `${secret}-conn`, token: `${secret}-token` },
      },
    });
    // A variable named as a secret is one: its new value is masked, in a preview as in a plan.
    for (const [variableId, path] of [
      ['dbPassword', '/alterations/preview'],
      ['api_key', '/alterations/dry-run'],
    ] as const)
      await h.request('POST', path, {
        body: {
          alterations: [{ type: 'ModifyVariable', variableId, value: `${secret}-${variableId}` }],
          filter: { correlationIds: ['none'] },
        },
      });
    const written = await entriesAfter(before);
    expect(written.map((e) => e.action)).toEqual(
      expect.arrayContaining([
        'user.create',
        'signIn',
        'signIn.fail',
        'apiKey.create',
        'secret.hash',
        'connection.create',
        'plan.preview',
      ]),
    );
    const text = JSON.stringify(written);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(key.body.key);
    // The failed sign-in names the user tried, in that user's tenant, as no one.
    expect(written.find((e) => e.action === 'signIn.fail')).toMatchObject({
      actor: { kind: 'anonymous', name: user.body.name },
      outcome: 401,
      target: { kind: 'user', id: user.body.id },
    });
    expect(written.find((e) => e.action === 'signIn')).toMatchObject({ actor: { kind: 'user', id: user.body.id } });
  });

  it('records refusals: a change and a read the principal may not make', async () => {
    const viewer = await h.keyWith(['alterations:view']);
    const before = await lastSeq();
    const refused = await h.request('POST', '/alterations/submit', {
      key: viewer,
      body: { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: ['x'] } },
    });
    expect(refused.status).toBe(403);
    expect((await h.request('GET', '/audit', { key: viewer })).status).toBe(403);
    // Unknown credentials name no one: not recorded.
    expect((await h.request('POST', '/alterations/submit', { key: 'wfa_unknown', body: {} })).status).toBe(401);
    const written = await entriesAfter(before);
    expect(written.map((e) => [e.action, e.outcome, e.actor.kind])).toEqual([
      ['plan.submit', 403, 'apiKey'],
      ['permission.refuse', 403, 'apiKey'],
    ]);
    expect(written[1]!.detail).toMatchObject({ method: 'GET', route: '/audit' });
  });

  it('verifies, and breaks at the exact entry an UPDATE as the superuser touched', async () => {
    const ok = await h.request('GET', '/audit/verify');
    expect(ok.body).toMatchObject({ ok: true, firstBrokenSeq: null });
    expect(ok.body.checked).toBeGreaterThan(30);
    const target = (await lastSeq()) - 5;
    const { rows } = await h.pool.query<{ outcome: number }>(
      "SELECT outcome FROM audit_entries WHERE tenant_id = '' AND seq = $1",
      [target],
    );
    // Triggers do not fire in a replica session: what a superuser can do by hand.
    const edit = async (outcome: number) => {
      const client = await h.pool.connect();
      try {
        await client.query('BEGIN');
        await client.query("SET LOCAL session_replication_role = 'replica'");
        await client.query("UPDATE audit_entries SET outcome = $2 WHERE tenant_id = '' AND seq = $1", [
          target,
          outcome,
        ]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    await edit(rows[0]!.outcome === 200 ? 201 : 200);
    expect((await h.request('GET', '/audit/verify')).body).toEqual({
      ok: false,
      checked: target - 1,
      firstBrokenSeq: target,
    });
    // Put back, the chain holds again.
    await edit(rows[0]!.outcome);
    expect((await h.request('GET', '/audit/verify')).body).toMatchObject({ ok: true, firstBrokenSeq: null });
  });

  it("refuses the service's own UPDATE, DELETE and TRUNCATE of the trail", async () => {
    await expect(h.pool.query("UPDATE audit_entries SET action = 'x'")).rejects.toThrow(/append-only: UPDATE refused/);
    await expect(h.pool.query('DELETE FROM audit_entries')).rejects.toThrow(/append-only: DELETE refused/);
    await expect(h.pool.query('TRUNCATE audit_entries')).rejects.toThrow(/append-only: TRUNCATE refused/);
  });

  it('keeps one chain per tenant while two API nodes write at once', async () => {
    const tenantKey = await h.keyWith(['alterations:*'], `audit-${Date.now()}`);
    const tenant = (await h.request('GET', '/audit', { key: tenantKey })).status;
    expect(tenant).toBe(403); // alterations:* does not read the trail: a refusal, the tenant's first entry
    const node = (i: number) => (i % 2 ? other : h);
    const rs = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        node(i).request('POST', '/alterations/submit', {
          key: tenantKey,
          body: {
            alterations: [{ type: 'Cancel' }],
            filter: { workflowInstanceIds: [`n${i}`] },
            schedule: { notBefore: '2099-01-01T00:00:00Z' },
          },
        }),
      ),
    );
    expect(rs.map((r) => r.status)).toEqual(Array(40).fill(202));
    const { rows } = await h.pool.query<{ tenant_id: string }>(
      "SELECT tenant_id FROM audit_entries WHERE action = 'plan.submit' AND target_id = $1",
      [rs[0]!.body.planId],
    );
    const tenantId = rows[0]!.tenant_id;
    const chain = await entriesAfter(0, tenantId);
    expect(chain.map((e) => e.seq)).toEqual(Array.from({ length: 41 }, (_, i) => i + 1));
    for (let i = 1; i < chain.length; i++) expect(chain[i]!.prevHash).toBe(chain[i - 1]!.hash);
    const admin = await h.request('GET', `/audit/verify?tenantId=${tenantId}`);
    expect(admin.body).toEqual({ ok: true, checked: 41, firstBrokenSeq: null });
  });
});
