import type pg from 'pg';
import { type Client, isGrpcServiceError, WorkflowIdReusePolicy } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/common';
import { instanceExecution, workAvailable } from '../../workflows/index.js';
import {
  DEFINITION_ATTRIBUTE,
  INSTANCE_STATUS_ATTRIBUTE,
  PLAN_TENANT_ATTRIBUTE,
} from '../../workflows/search-attributes.js';
import { PATCH_LEVEL } from '../../workflows/instance-execution.js';
import { absent, readStandings, type Standing, tidingsOf } from './instance-tidings.js';
import type { Logger } from '../logger.js';
import { tenantOut } from '../auth/principal.js';
import { tenantPriority } from './fairness.js';
import { Poller } from '../vocabulary/poller.js';
import { plansInFullFlight } from '../alterations/plan-store/index.js';
import { instanceWorkflowId } from './names.js';

/** How long a relay holds the rows it claimed; a relay that died is replaced after this. */
const CLAIM_SECONDS = 60;
/**
 * Rows one pass claims at most, over every tenant. A row written meanwhile waits for the pass in flight to
 * end, so this bounds how long another tenant's change waits behind a flood: with 512, a tenant's new instance
 * waited 8-15 s behind another's 1,600 cancellations on a loaded machine; a few rounds of requests per pass
 * cost one claim and one delete statement each.
 */
const PASS_SIZE = 64;
/**
 * While a plan runs flat out (`plansInFullFlight`), a pass tells the rows a plan wrote as usual, but of the other
 * rows only this many, this many at a time: the dev server's CPU (each start costs it about 10 ms) and the node's
 * go to the plan's round trips, and the instances still to be told wait their turn behind the plan's effect.
 */
const YIELD_PASS_SIZE = 8;
const YIELD_CONCURRENCY = 2;
/** … and such a pass lasts at least this long: the others are told at about 20 a second while a plan runs. */
const YIELD_PASS_MS = 400;
/** How long a reading of whether a plan runs flat out stands. */
const PLANS_READ_MS = 100;
/** gRPC's status code NOT_FOUND. */
const GRPC_NOT_FOUND = 5;
/** Longest wait before telling a workflow again after Temporal refused. */
const MAX_BACKOFF_SECONDS = 30;

export interface OutboxRelayOptions {
  pool: pg.Pool;
  client: Client;
  taskQueue: string;
  logger: Logger;
  /** The search attributes are registered: workflows start with theirs and keep them current. */
  searchAttributes: boolean;
  /** Requests to Temporal in flight at once from this relay. */
  concurrency?: number;
  /** Requests of one tenant in flight at once (TENANT_TEMPORAL_REQUESTS): tenants are told in turn. */
  perTenant?: number;
  /**
   * Ask for eager workflow starts: the client is on the NativeConnection of a worker of `taskQueue` in this
   * process, so a new instance's first workflow task comes back with the start.
   */
  eager?: boolean;
}

/** An outbox row as a relay claimed it, with where its instance stood. */
export interface ClaimedRow extends Standing {
  instance_id: string;
  seq: string;
  /** The instance has had no workflow yet (migration 012): started with `workflow.start`. */
  created: boolean;
  tenant_id: string;
  /** What committed the change, when it said so (migration 019's `wfa.cause`): `plan {planId}`. */
  cause?: string | null;
}

/**
 * Tells instances' workflows what committed in Postgres (migration 011's outbox): on the worker, one pass
 * after another, each claims up to PASS_SIZE rows (an even part of them per tenant with rows waiting, and
 * at most `perTenant` requests of one tenant in flight, so a tenant's hundred thousand changes never hold
 * another tenant's one behind them), sends each instance's workflow where the
 * instance stands (a new instance's workflow is started with it; an open one is signalled; a running
 * instance whose workflow closed gets a new run by signal-with-start, with its search attributes and memo), requests the cancellation of a cancelled instance's workflow, and deletes
 * the rows told, unless the instance changed again meanwhile (then it is told again next pass). Several
 * relays (one per worker) share the outbox: a claimed row is skipped by the others.
 */
export class OutboxRelay {
  private readonly poller: Poller;
  private readonly concurrency: number;
  private readonly perTenant: number;

  constructor(private readonly o: OutboxRelayOptions) {
    this.concurrency = o.concurrency ?? 32;
    this.perTenant = Math.max(1, o.perTenant ?? 16);
    this.poller = new Poller({
      pass: () => this.pass(),
      log: o.logger,
      failed: 'could not tell an instance workflow; retrying',
      recovered: 'instance workflows are told again',
      passFailed: 'instance outbox relay could not read the outbox; retrying',
    });
  }

  start(): void {
    this.poller.start();
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }

  /** When a plan last was, or was not, running flat out; and whether it was. */
  private plansRead = { at: 0, busy: false };

  private plansReading: Promise<void> | undefined;

  /** Whether a plan runs flat out now (read at most every PLANS_READ_MS). */
  private async plansBusy(): Promise<boolean> {
    if (performance.now() - this.plansRead.at > PLANS_READ_MS) await this.readPlans();
    return this.plansRead.busy;
  }

  private readPlans(): Promise<void> {
    this.plansReading ??= plansInFullFlight(this.o.pool)
      .then((busy) => {
        this.plansRead = { at: performance.now(), busy };
      })
      .catch(() => undefined)
      .finally(() => (this.plansReading = undefined));
    return this.plansReading;
  }

  /**
   * During a pass: whether a plan has begun to run flat out since it began (the last reading, a new one asked for
   * when it is stale). The pass then tells no more of the rows it claimed that no plan wrote.
   */
  private plansBusyNow(): boolean {
    if (performance.now() - this.plansRead.at > PLANS_READ_MS) void this.readPlans();
    return this.plansRead.busy;
  }

  /** One pass: the number of rows it told (tests and benches drain with it). */
  async pass(): Promise<number> {
    // While a plan runs flat out, its own rows go first at full speed, and the others a few at a time.
    const busy = await this.plansBusy();
    let claimed = await this.claim(PASS_SIZE, busy);
    let concurrency = this.concurrency;
    let lasts = 0;
    if (claimed.length === 0 && busy) {
      claimed = await this.claim(YIELD_PASS_SIZE, false);
      concurrency = Math.min(concurrency, YIELD_CONCURRENCY);
      lasts = performance.now() + YIELD_PASS_MS;
    }
    if (claimed.length === 0) return 0;
    const told = await this.tellAll(claimed, concurrency, busy ? undefined : () => this.plansBusyNow());
    const rest = lasts - performance.now();
    if (rest > 0) await new Promise((r) => setTimeout(r, rest));
    return told;
  }

  /**
   * Tells the claimed rows' workflows, `concurrency` at a time, tenants in turn; deletes or releases the rows. Once
   * `yields` says so, the rows no plan wrote that are still to tell are released untold, for a later pass.
   */
  private async tellAll(claimed: ClaimedRow[], concurrency: number, yields?: () => boolean): Promise<number> {
    const told: ClaimedRow[] = [];
    const failed: ClaimedRow[] = [];
    const untold: ClaimedRow[] = [];
    // Rows come tenants in turn; a sender takes the first whose tenant is under its share of requests in
    // flight, so another tenant's row never waits behind a flooding tenant's requests.
    const queue = [...claimed];
    const inFlight = new Map<string, number>();
    let released: (() => void) | undefined;
    const nextRow = () => {
      const i = queue.findIndex((r) => (inFlight.get(r.tenant_id) ?? 0) < this.perTenant);
      return i < 0 ? undefined : queue.splice(i, 1)[0];
    };
    const senders = Array.from({ length: Math.min(concurrency, queue.length) }, async () => {
      while (queue.length > 0) {
        const row = nextRow();
        if (row && yields?.() && !row.cause?.startsWith('plan ')) {
          untold.push(row);
          continue;
        }
        if (!row) {
          await new Promise<void>((resolve) => {
            const before = released;
            released = () => {
              before?.();
              resolve();
            };
          });
          continue;
        }
        inFlight.set(row.tenant_id, (inFlight.get(row.tenant_id) ?? 0) + 1);
        try {
          await this.tell(row);
          told.push(row);
        } catch (err) {
          failed.push(row);
          this.poller.fail(err, { instanceId: row.instance_id });
        } finally {
          inFlight.set(row.tenant_id, (inFlight.get(row.tenant_id) ?? 1) - 1);
          const wake = released;
          released = undefined;
          wake?.();
        }
      }
    });
    await Promise.all(senders);
    if (told.length > 0 && failed.length === 0) this.poller.recover();
    // Rows told are deleted unless the instance changed meanwhile (a new seq): those are released for the
    // next pass, as are the ones Temporal refused (after a backoff). Two statements, not one: a change that
    // commits while the delete waits for its row makes the delete skip the row (its seq is new), and a release
    // in the same statement, reading the statement's snapshot, would see the old seq and skip it too, leaving
    // the row claimed and the change untold until the claim ran out (60 s). Run after the delete, the release
    // sees the change.
    const toldIds = told.map((r) => r.instance_id);
    const toldSeqs = told.map((r) => r.seq);
    await this.o.pool.query(
      `DELETE FROM instance_outbox o USING unnest($1::text[], $2::bigint[]) AS t(instance_id, seq)
        WHERE o.instance_id = t.instance_id AND o.seq = t.seq`,
      [toldIds, toldSeqs],
    );
    await this.o.pool.query(
      `UPDATE instance_outbox o SET claimed_until = NULL, created = false
         FROM unnest($1::text[], $2::bigint[]) AS t(instance_id, seq)
        WHERE o.instance_id = t.instance_id AND o.seq <> t.seq`,
      [toldIds, toldSeqs],
    );
    if (untold.length > 0) {
      await this.o.pool.query('UPDATE instance_outbox SET claimed_until = NULL WHERE instance_id = ANY($1::text[])', [
        untold.map((r) => r.instance_id),
      ]);
    }
    if (failed.length > 0) {
      await this.o.pool.query(
        `UPDATE instance_outbox SET attempts = attempts + 1,
                claimed_until = now() + make_interval(secs => least($2::int, power(2, attempts)::int))
          WHERE instance_id = ANY($1::text[])`,
        [failed.map((r) => r.instance_id), MAX_BACKOFF_SECONDS],
      );
    }
    return told.length;
  }

  /**
   * Claims rows, tenants in turn, then reads where each instance stands now. Two statements, not one: a row
   * whose instance committed a change while the claim waited for its lock comes back with that change's `seq`
   * (the claim re-reads a row updated under it), but a join in the same statement would still read the
   * instance as its snapshot saw it, from before the change; told that older state under the newer `seq`, the
   * row would be deleted and the change never told. Read after the claim committed, the state is at least as
   * new as the `seq` claimed.
   */
  private async claim(passSize: number, plansOnly: boolean): Promise<ClaimedRow[]> {
    const { rows: claimed } = await this.o.pool.query<
      Pick<ClaimedRow, 'instance_id' | 'seq' | 'created' | 'tenant_id' | 'cause'>
    >(
      `WITH tenants AS (SELECT DISTINCT tenant_id FROM instance_outbox),
            share AS (SELECT greatest(1, ceil($1::numeric / (SELECT count(*) FROM tenants)))::int AS n),
            picked AS (
              SELECT p.instance_id FROM tenants t CROSS JOIN LATERAL (
                -- A plan's rows first (their own index), then the rest of the tenant's, each in order.
                SELECT a.instance_id FROM (
                  SELECT o.instance_id FROM instance_outbox o
                   WHERE o.tenant_id = t.tenant_id AND o.cause LIKE 'plan %'
                     AND (o.claimed_until IS NULL OR o.claimed_until < now())
                   ORDER BY o.seq LIMIT (SELECT n FROM share) FOR UPDATE SKIP LOCKED) a
                UNION ALL
                SELECT b.instance_id FROM (
                  SELECT o.instance_id FROM instance_outbox o
                   WHERE o.tenant_id = t.tenant_id AND (o.cause IS NULL OR o.cause NOT LIKE 'plan %')
                     AND (o.claimed_until IS NULL OR o.claimed_until < now()) AND NOT $3::boolean
                   ORDER BY o.seq LIMIT (SELECT n FROM share) FOR UPDATE SKIP LOCKED) b
                LIMIT (SELECT n FROM share)) p),
            claimed AS (
              UPDATE instance_outbox o SET claimed_until = now() + make_interval(secs => $2)
                FROM picked WHERE o.instance_id = picked.instance_id
              RETURNING o.instance_id, o.seq, o.tenant_id, o.created, o.cause)
       SELECT c.instance_id, c.seq, c.created, c.tenant_id, c.cause,
              row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.seq) AS turn
         FROM claimed c ORDER BY turn, c.seq`,
      [passSize, CLAIM_SECONDS, plansOnly],
    );
    if (claimed.length === 0) return [];
    const standing = await readStandings(
      this.o.pool,
      claimed.map((c) => c.instance_id),
    );
    return claimed.map((c) => ({ ...c, ...(standing.get(c.instance_id) ?? absent) }));
  }

  /**
   * Tells one instance's workflow where the instance stands (starting it if it has none running), the row as
   * claimed (a test tells a row claimed before the instance changed).
   */
  async tell(row: ClaimedRow): Promise<void> {
    // An instance deleted since (a purged tenant): nothing to tell.
    if (row.status === null || row.sub_status === null || row.definition_id === null) return;
    const open = row.created ? await this.startNew(row) : await this.signal(row);
    // A cancelled instance's workflow ends Canceled through Temporal's cancellation, after the word.
    if (open && row.status === 'Finished' && row.sub_status === 'Cancelled') {
      try {
        await this.o.client.workflow.getHandle(instanceWorkflowId(row.instance_id)).cancel();
      } catch (err) {
        // Already closed (cancelled before): nothing left to cancel.
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    }
  }

  /**
   * A new instance's workflow, started with where the instance stands as its input: one request, and with a
   * worker in this process (NativeConnection) the first workflow task comes back in the answer, skipping
   * Temporal's matching (eager workflow start). Started already (a relay that died after starting it, before
   * deleting its row): told by signal instead. An instance's first workflow never reuses its id.
   */
  private async startNew(row: ClaimedRow): Promise<boolean> {
    try {
      await this.o.client.workflow.start(instanceExecution, {
        ...this.startOptions(row, WorkflowIdReusePolicy.REJECT_DUPLICATE),
        args: [
          {
            instanceId: row.instance_id,
            searchAttributes: this.o.searchAttributes,
            told: tidingsOf(row),
            patchLevel: PATCH_LEVEL,
          },
        ],
        requestEagerStart: this.o.eager === true,
      });
      return true;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      return this.signal(row);
    }
  }

  /**
   * Tells the instance's workflow: an open run by signal; otherwise by signal-with-start, as a first run: an instance
   * that never had a workflow (bulk-loaded with the outbox off, or of the previous release) gets one. With a
   * closed run and none open, the instance's state read again decides, not the state claimed: its workflow
   * closes only after the instance's end committed (its own last step ran inside it, or the relay told it), so
   * a workflow closed while the claimed state still said Running ended with an instance that no longer is, and
   * starting it again would make a second run of a finished instance. A running instance whose run closed (a
   * run of the previous release, per dispatch; an instance a revert reopened; a workflow terminated by hand)
   * gets a new run, and that closed run is deleted first: it would go on saying, in Temporal's lists and counts,
   * that the instance is Finished (its search attributes cannot change once closed), and each instance is one
   * workflow in them. The instance's journal and activity records in Postgres keep what that run did.
   * False: no run open.
   */
  private async signal(row: ClaimedRow): Promise<boolean> {
    // The common case, an open run: a plain signal (about 2 ms of the dev server's CPU against 3 ms for a
    // signal-with-start, which also carries the start's options; bench/README.md). No run open (never
    // started, or closed): Temporal answers NOT_FOUND, and signal-with-start decides as below.
    try {
      await this.o.client.workflow.getHandle(instanceWorkflowId(row.instance_id)).signal(workAvailable, tidingsOf(row));
      return true;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    try {
      await this.signalWithStart(row, WorkflowIdReusePolicy.REJECT_DUPLICATE);
      return true;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    if (row.status === 'Finished') return false;
    const now = (await readStandings(this.o.pool, [row.instance_id])).get(row.instance_id);
    if (now?.status !== 'Running') return false;
    await this.deleteClosedRun(row.instance_id);
    await this.signalWithStart({ ...row, ...now }, WorkflowIdReusePolicy.ALLOW_DUPLICATE);
    return true;
  }

  /** Deletes the instance's latest run if it is closed (a run open meanwhile is kept, and signalled). */
  private async deleteClosedRun(instanceId: string): Promise<void> {
    const workflowId = instanceWorkflowId(instanceId);
    let latest;
    try {
      latest = await this.o.client.workflow.getHandle(workflowId).describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      throw err;
    }
    if (latest.status.name === 'RUNNING') return;
    try {
      await this.o.client.workflowService.deleteWorkflowExecution({
        namespace: this.o.client.options.namespace,
        workflowExecution: { workflowId, runId: latest.runId },
      });
    } catch (err) {
      // Deleted already (a relay that died after deleting it, before it started the new run).
      if (!isGrpcServiceError(err) || err.code !== GRPC_NOT_FOUND) throw err;
    }
    // Temporal carries the delete out once its queues have acknowledged the run's close (about 30 s on the dev
    // server, longer under load); until then the closed run is still listed. Nothing here waits for that.
    this.o.logger.info(
      { instanceId, runId: latest.runId, closedAs: latest.status.name },
      "an instance runs again: its workflow's closed run is deleted and a new run started",
    );
  }

  private signalWithStart(row: ClaimedRow, workflowIdReusePolicy: WorkflowIdReusePolicy) {
    return this.o.client.workflow.signalWithStart(instanceExecution, {
      ...this.startOptions(row, workflowIdReusePolicy),
      args: [{ instanceId: row.instance_id, searchAttributes: this.o.searchAttributes, patchLevel: PATCH_LEVEL }],
      signal: workAvailable,
      signalArgs: [tidingsOf(row)],
    });
  }

  private startOptions(row: ClaimedRow, workflowIdReusePolicy: WorkflowIdReusePolicy) {
    const tenant = tenantOut(row.tenant_id) ?? 'default';
    return {
      workflowId: instanceWorkflowId(row.instance_id),
      taskQueue: this.o.taskQueue,
      workflowIdReusePolicy,
      priority: tenantPriority(row.tenant_id),
      staticSummary: `Workflow instance ${row.instance_id} of ${row.definition_id}: its whole life, from its start to its end`,
      memo: { instanceId: row.instance_id, definitionId: row.definition_id, version: row.version, tenant },
      ...(this.o.searchAttributes
        ? {
            typedSearchAttributes: [
              { key: INSTANCE_STATUS_ATTRIBUTE, value: `${row.status}/${row.sub_status}` },
              { key: DEFINITION_ATTRIBUTE, value: row.definition_id ?? '' },
              { key: PLAN_TENANT_ATTRIBUTE, value: tenant },
            ],
          }
        : {}),
    };
  }
}
