import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { planWorkflowId } from '../../src/temporal/names.js';
import { ignoredWorkflowSpans } from '../../src/tracing.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

// Contract section 9, traces: the API, the client's starts, the workflows and the activities make spans,
// one trace from a request to the activities it caused; the log lines carry its traceId. The spans go to an
// in-memory exporter; the workflow's arrive from the sandbox through the `exporter` sink.
const exporter = new InMemorySpanExporter();
const processor = new SimpleSpanProcessor(exporter);
let h: Harness;
const run = Math.random().toString(36).slice(2, 8);

beforeAll(async () => {
  // One batch per run: plans continue as new, and stay one trace across their runs.
  h = await createHarness({ spanProcessor: processor, alterations: { batchSize: 100, window: 2, batchesPerRun: 1 } });
}, 60_000);

afterAll(() => h?.close());

const spans = () => exporter.getFinishedSpans();
const named = (name: string) => spans().filter((s) => s.name === name);
const one = (name: string, where: (s: ReadableSpan) => boolean = () => true) => {
  const found = named(name).filter(where);
  expect(found, name).toHaveLength(1);
  return found[0]!;
};
const childOf = (parent: ReadableSpan) => (s: ReadableSpan) =>
  s.parentSpanId === parent.spanContext().spanId && s.spanContext().traceId === parent.spanContext().traceId;

/** A ModifyVariable plan over 250 seeded instances of a definition of its own, submitted and run to the end. */
async function submitPlan(name: string, headers: Record<string, string>) {
  const definitionId = `${name}-${run}`;
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote(definitionId) });
  await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 250, variables: { amount: 0 } });
  const planId = `${name}-plan-${run}`;
  const submitted = await h.request('POST', '/alterations/submit', {
    headers,
    body: {
      id: planId,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
      filter: { definitionIds: [definitionId] },
    },
  });
  expect(submitted.status).toBe(202);
  await eventually(
    async () => ((await h.request('GET', `/alterations/${planId}`)).body.plan?.status === 4 ? true : undefined),
    'the plan to complete',
  );
  return planId;
}

describe('traces', () => {
  it('one trace runs from the submit request through the plan workflow, all its runs, to its batch activities', async () => {
    const planId = await submitPlan('traced', { 'x-request-id': `submit-${run}` });
    // A run's span ends with the run, and crosses from the sandbox after its last task: the last run's once
    // it completed the plan.
    await eventually(async () => {
      await processor.forceFlush();
      const completing = named('StartActivity:completePlan');
      return named('RunWorkflow:alterationPlan').some((r) => completing.some(childOf(r))) ? true : undefined;
    }, "the plan workflow's last span");

    const request = one('POST /alterations/submit');
    expect(request.kind).toBe(SpanKind.SERVER);
    expect(request.attributes).toMatchObject({ 'http.route': '/alterations/submit', 'http.response.status_code': 202 });
    const traceId = request.spanContext().traceId;
    const start = one('StartWorkflow:alterationPlan', childOf(request));
    expect(start.attributes.temporalWorkflowId).toBe(planWorkflowId(planId));
    // The first run is the start's child; each run that continued as new is the parent of the next.
    const runs = [one('RunWorkflow:alterationPlan', childOf(start))];
    for (;;) {
      const continued = named('ContinueAsNew:alterationPlan').filter(childOf(runs.at(-1)!));
      if (continued.length === 0) break;
      runs.push(one('RunWorkflow:alterationPlan', childOf(continued[0]!)));
    }
    expect(runs.length).toBeGreaterThanOrEqual(2);
    for (const r of runs) expect(r.attributes.workflowId).toBe(planWorkflowId(planId));
    const ofARun = (s: ReadableSpan) => runs.some((r) => childOf(r)(s));

    // Batches: scheduled by the runs (StartActivity), run by the batches worker (RunActivity).
    const scheduled = named('StartActivity:runJobBatch').filter(ofARun);
    expect(scheduled.length).toBeGreaterThanOrEqual(2);
    const batches = named('RunActivity:runJobBatch').filter((s) => scheduled.some((p) => childOf(p)(s)));
    expect(batches).toHaveLength(scheduled.length);
    // Generation and completion are local activities of the plan's runs.
    for (const local of ['generateJobs', 'completePlan']) {
      const scheduledLocal = one(`StartActivity:${local}`, ofARun);
      one(`RunActivity:${local}`, childOf(scheduledLocal));
    }
    for (const s of [start, ...runs, ...scheduled, ...batches]) {
      expect(s.spanContext().traceId).toBe(traceId);
      expect(s.resource.attributes['service.name']).toBe('workflow-alterations');
    }

    // The request's log line carries the request span's trace.
    const line = h.logs.find((l) => l.msg === 'request' && l.requestId === `submit-${run}`);
    expect(line).toMatchObject({ traceId, spanId: request.spanContext().spanId });

    // The traced run replays on the same bundle (its interceptors make the same choices from its history).
    const history = await h.client.workflow.getHandle(planWorkflowId(planId)).fetchHistory();
    // A replay needs the workflows' span sink (here the one a worker without tracing has): a traced run calls it.
    await expect(
      Worker.runReplayHistory(
        { workflowBundle: { codePath: inject('workflowBundlePath') }, sinks: ignoredWorkflowSpans },
        history,
      ),
    ).resolves.toBeUndefined();
  });

  it('makes no span of a plan whose caller sampled its trace out, down to its batches', async () => {
    const callerTrace = '0af7651916cd43dd8448eb211c80319c';
    // Flags 00: the caller's sampler left this trace out; the parent-based sampler follows it.
    const planId = await submitPlan('unsampled', { traceparent: `00-${callerTrace}-b7ad6b7169203331-00` });
    await new Promise((r) => setTimeout(r, 500));
    await processor.forceFlush();
    // Neither the run nor its activities: an activity that lost the context would start a trace of its own.
    const ofPlan = (s: ReadableSpan) =>
      s.attributes.temporalWorkflowId === planWorkflowId(planId) || s.attributes.workflowId === planWorkflowId(planId);
    expect(spans().filter(ofPlan)).toEqual([]);
    expect(spans().filter((s) => s.spanContext().traceId === callerTrace)).toEqual([]);
  });

  it("continues a caller's traceparent, names the span by its route template, and problems quote the trace", async () => {
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const res = await h.request('GET', `/alterations/no-such-plan-${run}`, {
      headers: { traceparent: `00-${callerTrace}-${callerSpan}-01`, 'x-request-id': `missing-${run}` },
    });
    expect(res.status).toBe(404);
    const span = one('GET /alterations/:planId', (s) => s.spanContext().traceId === callerTrace);
    expect(span.parentSpanId).toBe(callerSpan);
    expect(span.attributes['http.response.status_code']).toBe(404);
    expect(span.name).not.toContain('no-such-plan');
    // The problem's traceId is the one the request's log line carries: the trace's, not the request id.
    expect(res.body.traceId).toBe(callerTrace);
    const line = h.logs.find((l) => l.msg === 'request' && l.requestId === `missing-${run}`);
    expect(line).toMatchObject({ traceId: callerTrace });
  });

  it('names a request no route matched by its method alone', async () => {
    const res = await h.request('GET', `/nowhere-${run}`, { headers: { 'x-request-id': `nowhere-${run}` } });
    expect(res.status).toBe(404);
    const line = h.logs.find((l) => l.msg === 'request' && l.requestId === `nowhere-${run}`);
    const span = one('GET', (s) => s.spanContext().traceId === line?.traceId);
    expect(span.attributes['url.path']).toBe(`/nowhere-${run}`);
    expect(span.attributes['http.route']).toBeUndefined();
  });
});
