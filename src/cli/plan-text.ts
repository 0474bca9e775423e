import type { Client, PlanSummaryView, PlanView } from '../client/index.js';
import { EMPTY_FILTER_SELECTS_NOTHING } from './filters.js';
import { ALTERATION_TYPES } from '../alterations/types/index.js';
import { n, planStatusText, safeCell, stackedBar } from './format.js';

/** How `wfa` shows plans, their dry-runs and previews to people (--json prints the API's answer instead). */

type DryRun = Awaited<ReturnType<Client['plans']['dryRun']>>;
type Preview = Awaited<ReturnType<Client['plans']['preview']>>;

/** How many instances match (and why none, when the filter is empty), and the first 20 of them. */
export function dryRunText(r: DryRun, emptyFilter: boolean): string {
  const count = r.workflowInstanceIds.length;
  return [
    `${n(count)} instances match${count === 0 && emptyFilter ? `: ${EMPTY_FILTER_SELECTS_NOTHING}` : ''}`,
    ...r.workflowInstanceIds.slice(0, 20),
    ...(r.workflowInstanceIds.length > 20 ? ['…'] : []),
  ].join('\n');
}

/**
 * How many instances match (and why none, when the filter is empty), and for each previewed one its
 * outcome and the changes it would get: `ok: no change` when it would succeed and change nothing.
 */
export function previewText(r: Preview, emptyFilter: boolean): string {
  if (r.matchedCount === 0 && emptyFilter) return `0 instances match: ${EMPTY_FILTER_SELECTS_NOTHING}`;
  return [
    `${n(r.matchedCount)} instances match; the first ${r.items.length}:`,
    ...r.items.flatMap((i) => [
      `  ${safeCell(i.workflowInstanceId)}  ${outcome(i)}`,
      ...i.changes.map((ch) =>
        'before' in ch
          ? `    ${safeCell(ch.path)}: ${safeCell(JSON.stringify(ch.before))} → ${safeCell(JSON.stringify(ch.after))}`
          : `    ${safeCell(ch.path)}: changes (values shown to those who may read instances: workflows/instances:view)`,
      ),
    ]),
  ].join('\n');
}

function outcome(i: Preview['items'][number]): string {
  if (!i.isSuccessful) return `fails: ${safeCell(i.log.map((l) => l.message).join('; '))}`;
  return i.changes.length ? 'ok' : 'ok: no change';
}

/** A plan's row in `plans list`. */
export function planRow(p: PlanSummaryView) {
  const c = p.jobCounts;
  return {
    id: p.id,
    status: planStatusText(p.status, c, p.verification),
    // The summary names its alterations' types, not the alterations (`plans show` reads the plan).
    alterations: p.revertOf ? `reverts ${p.revertOf}` : `${n(p.alterationCount)}: ${p.alterationTypes.join(', ')}`,
    done: n(c.completed),
    failed: n(c.failed),
    total: n(c.total),
    created: p.createdAt,
  };
}

/** A plan: its status, what it does, its rollout, a bar of its jobs by status, and when it ran. */
export function showPlan(p: PlanView): string {
  const c = p.jobCounts;
  const bar = stackedBar(
    [
      { value: c.completed, char: '█' },
      { value: c.failed, char: '▓' },
      { value: c.cancelled, char: '▒' },
      { value: c.skipped, char: '·' },
    ],
    c.total,
  );
  const rollout = rolloutWords(p.rollout);
  return [
    `${safeCell(p.id)}  ${planStatusText(p.status, c, p.verification)}${p.pauseReason ? ` (${safeCell(p.pauseReason)})` : ''}${p.failureReason ? `: ${safeCell(p.failureReason)}` : ''}`,
    `  ${p.revertOf ? `reverts plan ${safeCell(p.revertOf)}` : p.alterations.map((a) => safeCell(alterationText(a))).join(', ')}`,
    ...(p.retryOf ? [`  retries what plan ${safeCell(p.retryOf)} did not get done`] : []),
    ...(rollout.length ? [`  rollout: ${rollout.join(', ')}`] : []),
    ...approvalLines(p),
    ...(p.resumesAt ? [`  paused by its schedule; goes on by itself at ${p.resumesAt}`] : []),
    `  ${bar}  ${n(c.completed + c.failed + c.cancelled + c.skipped)}/${n(c.total)}`,
    `  █ completed ${n(c.completed)}   ▓ failed ${n(c.failed)}   ▒ cancelled ${n(c.cancelled)}${c.skipped ? `   · skipped ${n(c.skipped)}` : ''}   ░ pending ${n(c.pending)}`,
    ...(p.verification ? [`  ${verificationText(p.verification)}`] : []),
    ...(p.drift ? [`  ${driftText(p.drift)}`] : []),
    `  created ${p.createdAt}${p.completedAt ? `, finished ${p.completedAt}` : ''}`,
  ].join('\n');
}

/** `set fixed for approval: 2 skipped (no longer matched), 1 joined (matches now, not added)` */
export function driftText(d: NonNullable<PlanView['drift']>): string {
  const joined = d.joined === null ? '' : `, ${n(d.joined)} joined (match now, not added)`;
  return `set fixed for approval: ${n(d.skipped)} skipped (no longer matched)${joined}`;
}

/** `verify within 5 s: 2 verified, 2 not verified, 0 pending` */
export function verificationText(v: NonNullable<PlanView['verification']>): string {
  return `verify within ${n(v.withinSeconds)} s: ${n(v.verified)} verified, ${n(v.unverified)} not verified, ${n(v.pending)} pending`;
}

/** Who asked for approval, and who decided or until when it stands (section "Change management"). */
function approvalLines(p: PlanView): string[] {
  const a = p.approval;
  if (!a) return [];
  const who = (r: { kind: string; name: string }) => `${safeCell(r.name)} (${r.kind === 'user' ? 'user' : 'API key'})`;
  const asked = `approval ${a.state}: asked by ${who(a.requestedBy)} for ${n(a.matchedCount)} instances`;
  if (a.state === 'Pending')
    return [`  ${asked}, until ${a.expiresAt}`, `  approve: wfa plans approve ${safeCell(p.id)} (by someone else)`];
  const decided = a.decidedBy ? `, decided by ${who(a.decidedBy)} at ${a.decidedAt}` : '';
  return [`  ${asked}${decided}${a.comment ? `: ${safeCell(a.comment)}` : ''}`];
}

function rolloutWords(r: PlanView['rollout']): string[] {
  if (!r) return [];
  return [
    r.rate != null ? `rate ${n(r.rate)}/s` : '',
    r.canary != null ? `canary ${n(r.canary)}` : '',
    r.stopOnFailureRatio != null ? `stop on failures above ${r.stopOnFailureRatio}` : '',
  ].filter(Boolean);
}

/** An alteration in its type's own words (the spec's `summary`), or its type where this CLI does not know it. */
export function alterationText(a: { type: string }): string {
  const spec = (ALTERATION_TYPES as Record<string, { summary(a: unknown): string } | undefined>)[a.type];
  return spec ? spec.summary(a) : a.type;
}
