import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvCell } from '../../src/alterations/job-export.js';
import { createHarness, type Harness } from '../support/harness.js';
import { runCompletedPlan } from '../support/plans.js';

/**
 * A plan's jobs exported whole (contract section 13, "Keeping data for a time"): NDJSON and CSV over HTTP, every
 * job once in creation order, a page at a time.
 */
let h: Harness;
const RUN = Date.now().toString(36);
const PLAN = `export-${RUN}`;
const COUNT = 2_345;

/** The answer as it comes (text), through the app in process. */
async function raw(path: string, key = h.adminKey) {
  const res = await h.app.request(path, { headers: { authorization: `ApiKey ${key}` } });
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    disposition: res.headers.get('content-disposition'),
    text: await res.text(),
  };
}

beforeAll(async () => {
  h = await createHarness();
  await runCompletedPlan(h, { planId: PLAN, definitionId: `export-${RUN}`, count: COUNT, value: 3 });
}, 120_000);
afterAll(async () => {
  await h?.close();
});

describe("a plan's jobs, exported", () => {
  it('as NDJSON: every job once, in creation order, each as the jobs endpoint shows it', async () => {
    const r = await raw(`/alterations/${PLAN}/jobs?format=ndjson`);
    expect(r.status).toBe(200);
    expect(r.type).toBe('application/x-ndjson');
    expect(r.disposition).toBe(`attachment; filename="plan-${PLAN}-jobs.ndjson"`);
    const lines = r.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(COUNT);
    expect(new Set(lines.map((j) => j.workflowInstanceId)).size).toBe(COUNT);
    const first = await h.request('GET', `/alterations/${PLAN}/jobs?limit=3`);
    expect(lines.slice(0, 3)).toEqual(first.body.items);
    expect(lines.every((j) => j.status === 2 && j.planId === PLAN)).toBe(true);
  });

  it('as CSV with a header row, filtered by status like the page', async () => {
    const r = await raw(`/alterations/${PLAN}/jobs?format=csv`);
    expect(r.status).toBe(200);
    expect(r.type).toBe('text/csv; charset=utf-8');
    const rows = r.text.trimEnd().split('\r\n');
    expect(rows[0]).toBe('id,planId,workflowInstanceId,status,verification,createdAt,startedAt,completedAt,log');
    expect(rows).toHaveLength(COUNT + 1);
    expect(rows[1]!.split(',').slice(1, 5)).toEqual([PLAN, expect.any(String), 'Completed', '']);
    expect(rows[1]).toMatch(/,ModifyVariable succeeded$/);
    const failed = await raw(`/alterations/${PLAN}/jobs?format=csv&status=Failed`);
    expect(failed.text).toBe(
      'id,planId,workflowInstanceId,status,verification,createdAt,startedAt,completedAt,log\r\n',
    );
  });

  it("answers 404 for an unknown plan or another tenant's, and 400 for an unknown format, before it streams", async () => {
    expect((await raw('/alterations/no-such-plan/jobs?format=csv')).status).toBe(404);
    const other = await h.keyWith(['alterations:view'], `export-other-${RUN}`);
    expect((await raw(`/alterations/${PLAN}/jobs?format=ndjson`, other)).status).toBe(404);
    const bad = await h.request('GET', `/alterations/${PLAN}/jobs?format=xml`);
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0].path).toBe('/query/format');
  });

  it('writes CSV cells a spreadsheet reads as text', () => {
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvCell('-1')).toBe("'-1");
    expect(csvCell(null)).toBe('');
  });
});
