/**
 * Records governed plan workflow histories of the code that runs now, for the replay tests of a later change to
 * the plan workflow: `node --import tsx test/support/record-governed-plan-histories.ts <prefix>` against a running
 * service (WFA_URL, WFA_API_KEY of the default tenant, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE), writing
 * test/fixtures/<prefix>-{awaiting-approval,paused-by-schedule,running}.bin: a plan waiting for its approval, one
 * paused by its schedule (not before an hour from now), and one running at 2 instances a second, each still open.
 */
import { writeFile } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';

const prefix = process.argv[2] ?? 'plan-history-governed';
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
const definitionId = `governed-${run}`;
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
for (let i = 0; i < 40; i++) await call('POST', '/workflow-instances', { definitionId });
await sleep(3_000);

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

// Awaiting approval: the submitter asks for it.
await call('POST', '/alterations/submit', { id: `awaiting-${run}`, alterations, filter, approval: { required: true } });
// Paused by its schedule: not before an hour from now.
const notBefore = new Date(Date.now() + 3_600_000).toISOString();
await call('POST', '/alterations/submit', { id: `scheduled-${run}`, alterations, filter, schedule: { notBefore } });
// Running: 2 a second, waiting on its throttle between batches.
await call('POST', '/alterations/submit', { id: `running-${run}`, alterations, filter, rollout: { rate: 2 } });
await sleep(4_000);
await record('awaiting-approval', `awaiting-${run}`);
await record('paused-by-schedule', `scheduled-${run}`);
await record('running', `running-${run}`);
for (const id of [`awaiting-${run}`, `scheduled-${run}`, `running-${run}`])
  await call('POST', `/alterations/${id}/cancel`);
await connection.close();
