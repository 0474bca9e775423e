/**
 * The word an instance's workflow is told (workflows/instance-execution.ts `InstanceTidings`): where the
 * instance stands in Postgres, and its story (workflows/instance-story.ts), read in one statement. The outbox
 * relay tells it after a change commits; a step tells it itself when the instance ended by an earlier attempt
 * of the workflow's own step, whose end no word follows (migration 020): the worker gives the engine this read
 * (`EngineDeps.tidings`, src/temporal/worker.ts), as the engine is below the workflows' layer.
 */
import type { InstanceTidings } from '../../workflows/instance-execution.js';
import { clip, type InstanceStory, PLAN_CAUSE, STORY_LIMITS } from '../../workflows/instance-story.js';
import type { Queryable } from '../db/pool.js';
import { workflowWorkSql } from '../engine/instance-state.js';

/** Where an instance stands, as the relay tells it, and its story (workflows/instance-story.ts). */
export interface Standing {
  definition_id: string | null;
  version: number | null;
  status: string | null;
  sub_status: string | null;
  revision: string | null;
  has_work: boolean | null;
  /** The first STORY_LIMITS.waitingOn bookmarks; `bookmark_count` counts them all. */
  bookmarks: { activityId: string; eventName: string }[] | null;
  bookmark_count?: number | null;
  /** Activity records, counted up to STORY_LIMITS.countedActivities + 1. */
  activity_count?: string | number | null;
  /** The last STORY_LIMITS.lastActivities records, oldest first: [activity id, status]. */
  last_activities?: [string, string][] | null;
  incident_count?: number | null;
  last_incident?: { activityId?: string; message?: string } | null;
}

export const absent: Standing = {
  definition_id: null,
  version: null,
  status: null,
  sub_status: null,
  revision: null,
  has_work: null,
  bookmarks: null,
};

/**
 * The story's columns of the workflow_instances row aliased `i`, read with where it stands: a few bookmarks
 * and their count, the incidents' count and the last one, and its activity records through their
 * (instance_id, id) index: the last few, and a count that stops past STORY_LIMITS.countedActivities.
 */
const storySql = (i: string) => `
       (SELECT coalesce(jsonb_agg(b), '[]') FROM (
          SELECT b FROM jsonb_array_elements(${i}.bookmarks) b LIMIT ${STORY_LIMITS.waitingOn}) f) AS bookmarks,
       jsonb_array_length(${i}.bookmarks) AS bookmark_count,
       ${i}.incident_count, ${i}.incidents -> -1 AS last_incident,
       (SELECT count(*) FROM (SELECT FROM activity_records r WHERE r.instance_id = ${i}.id
                               LIMIT ${STORY_LIMITS.countedActivities + 1}) c) AS activity_count,
       ARRAY(SELECT ARRAY[l.activity_id, l.status] FROM (
               SELECT r.id, r.activity_id, r.status FROM activity_records r WHERE r.instance_id = ${i}.id
                ORDER BY r.id DESC LIMIT ${STORY_LIMITS.lastActivities}) l ORDER BY l.id) AS last_activities`;

/** Where these instances stand now, with their story (an instance deleted since is absent). */
export async function readStandings(db: Queryable, ids: string[]): Promise<Map<string, Standing>> {
  const { rows } = await db.query<Standing & { id: string }>(
    `SELECT i.id, i.definition_id, i.version, i.status, i.sub_status, i.revision,
            ${workflowWorkSql('i')} AS has_work, ${storySql('i')}
       FROM workflow_instances i WHERE i.id = ANY($1::text[])`,
    [ids],
  );
  return new Map(rows.map(({ id, ...s }) => [id, s]));
}

/** The word for one instance as the relay would tell it now; undefined when it no longer exists. */
export async function readTidings(db: Queryable, instanceId: string): Promise<InstanceTidings | undefined> {
  const row = (await readStandings(db, [instanceId])).get(instanceId);
  return row?.status ? tidingsOf(row) : undefined;
}

/** A name as a word carries it (an activity id, an event name, a definition id): at most STORY_LIMITS.name long. */
const name = (text: string | null | undefined) => clip(text ?? '', STORY_LIMITS.name);

/** The word a workflow is told: where its instance stands, and its story. */
export function tidingsOf(row: Standing & { cause?: string | null }): InstanceTidings {
  const bookmarks = (row.bookmarks ?? []).slice(0, STORY_LIMITS.waitingOn);
  return {
    revision: Number(row.revision),
    status: row.status ?? '',
    subStatus: row.sub_status ?? '',
    version: row.version ?? 0,
    hasWork: row.has_work === true,
    waitingOn: bookmarks.map((b) => `${name(b.eventName)} (${name(b.activityId)})`),
    story: storyOf(row),
  };
}

/** The story of a row read with `storySql`: bounded, names only (workflows/instance-story.ts). */
function storyOf(row: Standing & { cause?: string | null }): InstanceStory {
  const counted = Number(row.activity_count ?? 0);
  const incident = row.last_incident;
  return {
    definitionId: name(row.definition_id),
    activities: Math.min(counted, STORY_LIMITS.countedActivities),
    ...(counted > STORY_LIMITS.countedActivities ? { moreActivities: true } : {}),
    lastActivities: (row.last_activities ?? []).map(([id, status]) => ({
      id: name(id),
      ...(status !== 'Completed' ? { status } : {}),
    })),
    bookmarks: row.bookmark_count ?? row.bookmarks?.length ?? 0,
    incidents: row.incident_count ?? 0,
    ...(incident
      ? { lastIncident: clip(`${name(incident.activityId)}: ${incident.message ?? ''}`, STORY_LIMITS.incident) }
      : {}),
    ...(row.cause ? { cause: clip(row.cause, STORY_LIMITS.cause) } : {}),
    // Whole (a plan id has at most 100 characters): the workflow lists it in AlterationPlanIds.
    ...(row.cause?.startsWith(PLAN_CAUSE) ? { planId: row.cause.slice(PLAN_CAUSE.length) } : {}),
  };
}
