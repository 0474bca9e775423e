import { Hono } from 'hono';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import { exportAudit } from '../../api/routes/audit.js';
import { type AuditEntry, type AuditQuery, listAuditEntries } from '../../audit/trail.js';
import { AUDIT_VIEW } from '../../auth/route-permissions.js';
import { Pager, Table, Time } from '../components.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage } from '../layout.js';
import type { ShellOf } from '../shell.js';
import { ValidationError } from '../../errors.js';

/**
 * Audit (contract section 13): the tenant's trail, newest first, filtered by actor, action and time, paged, and
 * exported as NDJSON (`GET /audit`'s code and permission). A plan's page shows the entries about it
 * (`AuditEntries`).
 */
const AUDIT: PageAccess = { title: 'Audit', nav: 'audit', what: 'read the audit trail', permission: AUDIT_VIEW };
const PAGE = 50;
const FIELDS = ['actor', 'action', 'from', 'to'] as const;
type Fields = Record<(typeof FIELDS)[number], string>;

/** A `datetime-local` value read as UTC; undefined when empty, null when not a time. */
function utc(value: string): string | undefined | null {
  if (!value) return undefined;
  const t = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`);
  return Number.isNaN(t.getTime()) ? null : t.toISOString();
}

const actorText = (e: AuditEntry) => e.actor.name ?? e.actor.id ?? e.actor.kind;
const targetText = (e: AuditEntry) =>
  e.target.id ? `${e.target.kind ?? ''} ${e.target.id}`.trim() : (e.target.kind ?? '');

/** A list of entries: when, who, what, on what, and how it ended. */
export function AuditEntries(props: { entries: readonly AuditEntry[]; label: string; empty: string }) {
  return (
    <Table
      label={props.label}
      columns={['When', 'Actor', 'Action', 'Target', 'Outcome']}
      rows={props.entries}
      empty={<p class="muted">{props.empty}</p>}
      head={(e) => <Time iso={e.at} />}
      cells={(e) => (
        <>
          <td>{actorText(e)}</td>
          <td>
            <code>{e.action}</code>
          </td>
          <td>{targetText(e)}</td>
          <td>{String(e.outcome)}</td>
        </>
      )}
    />
  );
}

export function auditRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/audit', gate(shell, AUDIT), async (c) => {
    const { pool, tokens } = c.get('deps');
    const f = Object.fromEntries(FIELDS.map((k) => [k, (c.req.query(k) ?? '').trim()])) as Fields;
    const from = utc(f.from);
    const to = utc(f.to);
    const wrong = [from === null ? 'From' : '', to === null ? 'To' : ''].filter(Boolean);
    const query: AuditQuery = {
      actor: f.actor || undefined,
      action: f.action || undefined,
      from: from ?? undefined,
      to: to ?? undefined,
      limit: PAGE,
    };
    const raw = c.req.query('after');
    const page = await listAuditEntries(pool, callerTenant(c), {
      ...query,
      after: raw ? openCursor(tokens.key, raw) : undefined,
    });
    const next = sealCursor(tokens.key, page.nextCursor);
    const kept = new URLSearchParams(Object.entries(f).filter(([, v]) => v));
    const link = (after?: string) => {
      const q = new URLSearchParams(kept);
      if (after) q.set('after', after);
      return `/console/audit${q.size ? `?${q}` : ''}`;
    };
    return renderPage(
      c,
      <Layout shell={shell(c)} title="Audit" nav="audit">
        <h1>Audit</h1>
        <p>
          Every change made through the API or the console, every sign-in and every refusal, newest first. Each tenant's
          entries form a hash chain: <code>wfa audit verify</code> checks it.
        </p>
        <form method="get" action="/console/audit" aria-label="Filter the audit trail">
          <div class="inline-fields">
            <div>
              <label for="actor">Actor</label>
              <input id="actor" name="actor" value={f.actor} />
            </div>
            <div>
              <label for="action">Action</label>
              <input id="action" name="action" value={f.action} placeholder="plan.*" />
            </div>
            <div>
              <label for="from">From (UTC)</label>
              <input id="from" name="from" type="datetime-local" value={f.from} />
            </div>
            <div>
              <label for="to">To (UTC)</label>
              <input id="to" name="to" type="datetime-local" value={f.to} />
            </div>
          </div>
          <button type="submit">Show</button>
        </form>
        {wrong.length ? <p role="alert">{`${wrong.join(' and ')}: not a time, so not applied.`}</p> : null}
        <p>
          <a href={`/console/audit/export${kept.size ? `?${kept}` : ''}`} download="audit.ndjson">
            Export these (NDJSON)
          </a>
        </p>
        <AuditEntries entries={page.items} label="Audit entries" empty="No entry matches." />
        <Pager
          of={{ noun: 'audit entries', first: 'Newest entries', next: 'Older entries' }}
          link={link}
          after={raw}
          next={next}
        />
      </Layout>,
    );
  });
  app.get('/audit/export', gate(shell, AUDIT), async (c) => {
    const f = Object.fromEntries(FIELDS.map((k) => [k, (c.req.query(k) ?? '').trim()])) as Fields;
    const from = utc(f.from);
    const to = utc(f.to);
    // A time that is not one never widens the export to the whole trail.
    const wrong = [from === null ? 'from' : '', to === null ? 'to' : ''].filter(Boolean);
    if (wrong.length)
      throw new ValidationError(
        'Not a date and time',
        wrong.map((k) => ({ path: `/query/${k}`, message: 'Expected a date and time, such as 2026-11-30T09:00' })),
      );
    return exportAudit(c, callerTenant(c), {
      actor: f.actor || undefined,
      action: f.action || undefined,
      from: from ?? undefined,
      to: to ?? undefined,
      limit: 1000,
    });
  });
  return app;
}
