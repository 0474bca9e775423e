/**
 * Records plan workflow histories of the code that runs now, for the replay tests of a later change to
 * the plan workflow: `node --import tsx test/support/record-plan-histories.ts <prefix>` against a running
 * service (WFA_URL, WFA_API_KEY of the default tenant, DATABASE_URL of its database, TEMPORAL_ADDRESS,
 * TEMPORAL_NAMESPACE), writing test/fixtures/<prefix>-{running,paused,throttled}.bin: a plan caught while its
 * batches run, one paused by its canary, and one waiting on its rate's timer, each still open.
 */
import { writeFile } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import pg from 'pg';

const prefix = process.argv[2] ?? 'plan-history';
const url = process.env.WFA_URL ?? 'http://127.0.0.1:3000';
const key = process.env.WFA_API_KEY!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

const run = Date.now().toString(36);
const definitionId = `recorded-${run}`;
await call('POST', '/workflow-definitions', {
  definitionId,
  variables: [{ id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 }],
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    activities: [
      {
        id: 'wait',
        type: 'Elsa.Event',
        version: 1,
        eventName: { typeName: 'String', expression: { type: 'Literal', value: 'go' } },
      },
    ],
    connections: [],
  },
});
// 20,000 suspended instances in SQL, with no workflow each (the outbox off).
const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
await db.connect();
await db.query('BEGIN');
await db.query("SET LOCAL wfa.outbox = 'off'");
await db.query(
  `INSERT INTO workflow_instances
     (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
      variables, scheduled, bookmarks, created_at, updated_at)
   SELECT gen_random_uuid()::text, '', d.definition_id, d.id, d.version, 'r-' || n, 'r-' || n, 'Running', 'Suspended',
          '{"amount":0}'::jsonb, '[]'::jsonb, '[{"activityId":"wait","eventName":"go"}]'::jsonb,
          now() + n * interval '1 microsecond', now()
     FROM workflow_definitions d, generate_series(1, 20000) AS n
    WHERE d.tenant_id = '' AND d.definition_id = $1`,
  [definitionId],
);
await db.query('COMMIT');
await db.end();

const filter = { definitionIds: [definitionId] };
const alterations = [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }];
const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });

async function record(name: string, planId: string) {
  const history = await client.workflow.getHandle(`alteration-plan-${planId}`).fetchHistory();
  const bytes = proto.temporal.api.history.v1.History.encode(
    history as proto.temporal.api.history.v1.IHistory,
  ).finish();
  const file = new URL(`../fixtures/${prefix}-${name}.bin`, import.meta.url);
  await writeFile(file, bytes);
  process.stdout.write(`${name}: ${history.events?.length} events → ${file.pathname}\n`);
}

// Running: 20,000 jobs at 2,000 a second, caught mid-way (its batches in flight).
await call('POST', '/alterations/submit', { id: `running-${run}`, alterations, filter, rollout: { rate: 2000 } });
// Paused: a canary of 10, then the pause until resumed.
await call('POST', '/alterations/submit', { id: `paused-${run}`, alterations, filter, rollout: { canary: 10 } });
// Throttled: 5 a second, waiting on its timer between batches.
await call('POST', '/alterations/submit', { id: `throttled-${run}`, alterations, filter, rollout: { rate: 5 } });
await sleep(4_000);
await record('running', `running-${run}`);
await record('paused', `paused-${run}`);
await record('throttled', `throttled-${run}`);
for (const id of [`running-${run}`, `paused-${run}`, `throttled-${run}`])
  await call('POST', `/alterations/${id}/cancel`);
await connection.close();
