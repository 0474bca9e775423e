/**
 * An instance's story as its workflow shows it in the Temporal UI (current details, and its result when it
 * closes): what Postgres holds beyond its status, read by the outbox relay in the statement that reads where
 * the instance stands (src/temporal/outbox-relay.ts), small and bounded. Names only: activity ids, event
 * names, the definition, the incident's message as the API shows it; never a variable's value, an input or a
 * connection's configuration. Pure and deterministic: the workflow bundle and the relay both use it.
 */

/** Bounds of what a word carries and the details show: a few hundred bytes, never more than about 1 KB. */
export const STORY_LIMITS = {
  /** Activity records named (the last ones). */
  lastActivities: 5,
  /** Bookmarks named (the first ones). */
  waitingOn: 5,
  /** Activity records counted at most (an instance that loops may have many): more reads "over 1,000". */
  countedActivities: 1000,
  /** Characters of an activity id, an event name, a definition id. */
  name: 40,
  /** Characters of the last incident's message. */
  incident: 120,
  /** Characters of what made the change. */
  cause: 80,
} as const;

/** One activity record: its activity id, and its status when not Completed (Running, Faulted, Canceled). */
export interface StoryActivity {
  id: string;
  status?: string;
}

/** What the relay reads of an instance besides its status, and tells its workflow with it. */
export interface InstanceStory {
  definitionId: string;
  /** Activity records in Postgres, counted up to STORY_LIMITS.countedActivities (then `moreActivities`). */
  activities: number;
  moreActivities?: boolean;
  /** The last few activity records, oldest first. */
  lastActivities: StoryActivity[];
  /** Bookmarks in all (the word's `waitingOn` names the first few). */
  bookmarks: number;
  incidents: number;
  /** The last incident: `activityId: message`. */
  lastIncident?: string;
  /** What committed the change the word tells, when known: `plan {planId}`. */
  cause?: string;
  /** The plan that committed it, when a plan did (its id whole, where `cause` may be clipped). */
  planId?: string;
}

/** How `cause` names a plan (migration 019's `wfa.cause`, set by a plan's batch): `plan {planId}`. */
export const PLAN_CAUSE = 'plan ';

/** What the workflow knows of where its instance stands: the relay's word (InstanceTidings), or a step's. */
export interface StoryStanding {
  status: string;
  subStatus: string;
  version: number;
  waitingOn?: string[];
  story?: InstanceStory;
}

/** Where the instance stands and what ran, as the workflow's result says it once the workflow closes. */
export interface StoryResult {
  instance: string;
  summary: string;
  /** The instance's last activity records (its activity ids, oldest first): what ran, wherever it ran. */
  executedActivityIds: string[];
  definitionId: string;
  version: number;
  /** Activity records in all (at least this many when `moreActivities`). */
  activityCount: number;
  moreActivities?: boolean;
  waitingOn: string[];
  incidentCount: number;
  lastIncident?: string;
  cancelledBy?: string;
}

export const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** 1234567 as "1,234,567" (no Intl: the same text on every worker). */
const thousands = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** Steps this workflow ran since the word it last took: how many, and the last few activity ids. */
export interface StepsSince {
  count: number;
  last: string[];
}

export const noSteps = (): StepsSince => ({ count: 0, last: [] });

/** One more step in `since` (kept bounded). */
export function stepRan(since: StepsSince, activityId: string): void {
  since.count++;
  since.last.push(clip(activityId, STORY_LIMITS.name));
  if (since.last.length > STORY_LIMITS.lastActivities) since.last.shift();
}

/**
 * The story with the steps this workflow ran since the word that carried it (each step is one activity
 * record, committed after the relay read the word): counted and named until the next word says it again.
 */
export function withSteps(story: InstanceStory, since: StepsSince = noSteps()): InstanceStory {
  if (since.count === 0) return story;
  const counted = story.activities + since.count;
  const cap = STORY_LIMITS.countedActivities;
  return {
    ...story,
    activities: Math.min(counted, cap),
    ...(story.moreActivities || counted > cap ? { moreActivities: true } : {}),
    lastActivities: [...story.lastActivities, ...since.last.map((id) => ({ id }))].slice(-STORY_LIMITS.lastActivities),
  };
}

const named = (a: StoryActivity) => (a.status ? `${a.id} (${a.status})` : a.id);

function ran(story: InstanceStory): string {
  const shown = story.lastActivities;
  if (story.activities === 0) return 'ran nothing yet';
  if (!story.moreActivities && story.activities <= shown.length) return `ran ${shown.map(named).join(', ')}`;
  const count = story.moreActivities
    ? `over ${thousands(STORY_LIMITS.countedActivities)}`
    : thousands(story.activities);
  return `ran ${count} activities, the last: ${shown.map(named).join(', ')}`;
}

function waiting(t: StoryStanding): string {
  const names = t.waitingOn ?? [];
  const all = Math.max(t.story?.bookmarks ?? 0, names.length);
  if (names.length === 0) return 'an event';
  const more = all > names.length ? ` and ${thousands(all - names.length)} more` : '';
  return `${names.join(', ')}${more}`;
}

/** Where the instance stands, in words: "suspended, waiting on approve (wait)", "faulted: charge: card declined". */
function where(t: StoryStanding): string {
  const s = t.story;
  if (t.status === 'Finished') {
    if (t.subStatus === 'Finished') return 'finished';
    if (t.subStatus === 'Cancelled') return s?.cause ? `cancelled by ${s.cause}` : 'cancelled';
    return `ended ${t.subStatus}`;
  }
  if (t.subStatus === 'Suspended') return `suspended, waiting on ${waiting(t)}`;
  if (t.subStatus === 'Faulted') {
    if (!s?.lastIncident) return 'faulted (see its incidents)';
    return `faulted: ${s.lastIncident}${s.incidents > 1 ? ` (${s.incidents} incidents)` : ''}`;
  }
  return `${t.status}/${t.subStatus}`;
}

/**
 * The line the workflow's summary and current details say after the status: where the instance stands, its
 * definition and version, what ran, and its incidents when it is not faulted on them.
 */
export function storyLine(t: StoryStanding, since: StepsSince = noSteps()): string {
  const parts = [where(t)];
  const s = t.story;
  if (!s) return parts[0]!;
  parts.push(`${s.definitionId} v${t.version}`, ran(withSteps(s, since)));
  if (t.subStatus !== 'Faulted' && s.incidents > 0 && s.lastIncident)
    parts.push(`${s.incidents} incident${s.incidents > 1 ? 's' : ''}, the last: ${s.lastIncident}`);
  return parts.join(' · ');
}

/** The workflow's result told from the story: what the UI's Result panel shows of a closed instance. */
export function storyResult(t: StoryStanding & { story: InstanceStory }, since: StepsSince = noSteps()): StoryResult {
  const s = withSteps(t.story, since);
  return {
    instance: `${t.status}/${t.subStatus}`,
    summary: storyLine(t, since),
    executedActivityIds: s.lastActivities.map((a) => a.id),
    definitionId: s.definitionId,
    version: t.version,
    activityCount: s.activities,
    ...(s.moreActivities ? { moreActivities: true } : {}),
    waitingOn: t.waitingOn ?? [],
    incidentCount: s.incidents,
    ...(s.lastIncident ? { lastIncident: s.lastIncident } : {}),
    ...(t.subStatus === 'Cancelled' && s.cause ? { cancelledBy: s.cause } : {}),
  };
}
