import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Command, Option } from 'commander';
import type { AuditEntry, AuditQuery } from '../../client/index.js';
import type { Cli } from '../context.js';
import { n, safeCell, tableWriter } from '../format.js';
import { count } from '../options.js';
import { type PagingOptions, printPages } from '../paging.js';

/** How often `wfa audit --follow` asks for new entries. */
const FOLLOW_MS = 2000;

interface FilterOptions {
  actor?: string;
  action?: string;
  target?: string;
  from?: string;
  to?: string;
  tenant?: string;
}

const withFilters = (c: Command) =>
  c
    .option('--actor <idOrName>', "an actor's id or name")
    .option('--action <action>', 'an action (plan.approve) or a family of them (plan.*)')
    .option('--target <id>', "the target's id (a plan's, a user's …)")
    .option('--from <time>', 'entries at or after this ISO 8601 time')
    .option('--to <time>', 'entries before this ISO 8601 time')
    .option('--tenant <tenantId>', "another tenant's trail (the operator only)");

const queryOf = (o: FilterOptions): AuditQuery => ({
  actor: o.actor,
  action: o.action,
  targetId: o.target,
  from: o.from,
  to: o.to,
  tenantId: o.tenant,
});

const COLUMNS = ['seq', 'at', 'actor', 'action', 'target', 'outcome'];
const row = (e: AuditEntry) => ({
  seq: n(e.seq),
  at: e.at,
  actor: e.actor.name ?? e.actor.id ?? e.actor.kind,
  action: e.action,
  target: e.target.id ? `${e.target.kind ?? ''} ${e.target.id}`.trim() : (e.target.kind ?? ''),
  outcome: String(e.outcome),
});

/**
 * `wfa audit`: the tenant's trail (newest first; `--follow` prints new entries as they come), `wfa audit verify`
 * (the hash chain recomputed) and `wfa audit export` (every entry of a selection as NDJSON).
 */
export function registerAudit(program: Command, cli: Cli): void {
  const audit = program.command('audit').description('who did what, provably: the audit trail');
  withFilters(audit.command('list', { isDefault: true }).description('entries, newest first'))
    .option('--limit <n>', 'entries per page (1 to 1000)', count, 50)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .option('--follow', 'then print new entries as they are written, until interrupted')
    .action(async (o: FilterOptions & PagingOptions & { limit: number; follow?: boolean }) => {
      const c = await cli.client();
      const query = { ...queryOf(o), limit: o.limit };
      if (!o.follow) {
        await printPages((after) => c.audit.list({ ...query, ...(after ? { after } : {}) }), o, cli.paging(), {
          columns: COLUMNS,
          row,
          more: cli.more,
        });
        return;
      }
      await follow(cli, query);
    });
  audit
    .command('verify')
    .description("recompute the tenant's hash chain from its oldest kept entry")
    .option('--tenant <tenantId>', "another tenant's trail (the operator only)")
    .action(async (o: { tenant?: string }) => {
      const r = await (await cli.client()).audit.verify(o.tenant);
      cli.print(
        () =>
          r.ok
            ? `The chain holds: ${n(r.checked)} entries checked`
            : `The chain is broken at entry ${r.firstBrokenSeq} (${n(r.checked)} entries before it hold)`,
        r,
      );
      if (!r.ok) cli.exitCode = 1;
    });
  withFilters(audit.command('export').description('every entry of the selection as NDJSON, newest first'))
    .option('--output <file>', 'write to this file (default: standard output)')
    .action(async (o: FilterOptions & { output?: string }) => {
      const c = await cli.client();
      await writeOut(cli, c.audit.export(queryOf(o)), o.output);
    });
}

/** `wfa plans export <planId>`: every job of a plan as NDJSON or CSV. */
export function addPlanExport(plans: Command, cli: Cli): void {
  plans
    .command('export <planId>')
    .description('every job of a plan as NDJSON or CSV (a record to keep before the retention purges it)')
    .addOption(new Option('--format <format>', 'ndjson or csv').choices(['ndjson', 'csv']).default('ndjson'))
    .option('--status <status>', 'only the jobs of this status (Pending, Completed, Failed …)')
    .option('--output <file>', 'write to this file (default: standard output)')
    .action(async (planId: string, o: { format: 'ndjson' | 'csv'; status?: string; output?: string }) => {
      const c = await cli.client();
      await writeOut(cli, c.plans.exportJobs(planId, o.format, o.status ? { status: o.status } : {}), o.output);
    });
}

/** Streams an export to a file or standard output, a chunk at a time (never the whole of it in memory). */
async function writeOut(cli: Cli, chunks: AsyncIterable<Uint8Array>, file: string | undefined): Promise<void> {
  const out = file ? createWriteStream(file) : process.stdout;
  let bytes = 0;
  for await (const chunk of chunks) {
    bytes += chunk.byteLength;
    if (!out.write(chunk)) await once(out, 'drain');
  }
  if (file) {
    await new Promise<void>((resolve, reject) =>
      (out as ReturnType<typeof createWriteStream>).end((err?: Error | null) => (err ? reject(err) : resolve())),
    );
    cli.print(() => safeCell(`Wrote ${n(bytes)} bytes to ${file}`), { file, bytes });
  }
}

/** Prints the newest entries, then every new one as it is written (oldest first), until interrupted. */
async function follow(cli: Cli, query: AuditQuery): Promise<void> {
  const c = await cli.client();
  const table = tableWriter(COLUMNS, cli.io.out);
  const show = (entries: AuditEntry[]) => {
    if (cli.options.json) for (const e of entries) cli.io.out(JSON.stringify(e));
    else table.add(entries.map(row));
  };
  const first = await c.audit.list(query);
  show([...first.items].reverse());
  let last = first.items[0]?.seq ?? 0;
  const stop = new AbortController();
  const interrupted = () => stop.abort();
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    while (!stop.signal.aborted) {
      await sleep(FOLLOW_MS, undefined, { signal: stop.signal }).catch(() => undefined);
      if (stop.signal.aborted) break;
      // Newest first, down to what was printed: a burst larger than a page is read page by page.
      const fresh: AuditEntry[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await c.audit.list({ ...query, limit: 1000, ...(after ? { after } : {}) });
        const newer = page.items.filter((e) => e.seq > last);
        fresh.push(...newer);
        if (newer.length < page.items.length || !page.nextCursor) break;
        after = page.nextCursor;
      }
      if (fresh.length) {
        show(fresh.reverse());
        last = fresh[fresh.length - 1]!.seq;
      }
    }
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    if (!cli.options.json) table.end();
  }
}
