import { z } from '@hono/zod-openapi';
import { Timestamp } from '../vocabulary/input.js';

/**
 * Maintenance windows (CONTRACT section 10): the schema of a submitted plan's `schedule` and the pure
 * arithmetic that says whether the plan may run at a given instant. No I/O, no clock of its own: the caller
 * passes `now` (the plan workflow's clock, so the answer replays).
 *
 * Decisions, stated once here and again where they apply:
 * - A window occurrence is one continuous period, from inclusive, to exclusive. `days` names the day it
 *   begins; a `to` not after `from` runs past midnight, and `from === to` is a full day (24 h of wall clock).
 * - Wall-clock times are read in the window's zone with the platform's time-zone data (Intl), so a period
 *   is an hour shorter or longer across a daylight-saving change.
 * - A wall time that does not exist (a spring-forward gap) means the first instant after the gap, the moment
 *   the clock jumps: "02:30" on 2026-03-29 in Europe/Berlin is 03:00 CEST = 01:00Z. A window entirely inside
 *   the gap is empty that day.
 * - A wall time that occurs twice (a fall-back overlap) means its first occurrence as a window's `from` and
 *   its second as a window's `to`: a period runs from the first moment the clock shows `from` to the last
 *   moment it shows `to`, so it keeps every instant whose clock reading lies between the two. "02:00 to
 *   03:00" on 2026-10-25 in Europe/Berlin is 00:00Z–02:00Z: both passes of the repeated hour.
 */

/** The days of a window, as the contract spells them (ISO order, Monday first). */
export const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** At most this many windows in one schedule (CONTRACT section 10). */
export const MAX_WINDOWS = 20;

const TIME_OF_DAY = /^([01]\d|2[0-3]):([0-5]\d)$/;
/** An IANA zone name: `Area/Location[/…]`, `UTC`, `Etc/GMT+5`, `EST5EDT`; never an offset like `+05:30`. */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;
const MAX_ZONE_NAME = 64;

const quote = (value: unknown): string => JSON.stringify(value) ?? String(value);

/**
 * `HH:MM` on a 24-hour clock, 00:00–23:59, two digits each. "24:00" is refused: a window ending at midnight
 * says `to: "00:00"` (a `to` not after `from` runs into the next day).
 */
const TimeOfDaySchema = z
  .string()
  .refine((value) => TIME_OF_DAY.test(value), {
    error: (issue) =>
      `Invalid time ${quote(issue.input)}: expected "HH:MM" on a 24-hour clock, 00:00 to 23:59 (midnight as an end is "00:00")`,
  })
  .openapi({ description: 'Wall-clock time "HH:MM", 00:00–23:59', example: '22:00', pattern: TIME_OF_DAY.source });

/** The tz database names the platform accepts without asking it (a Set lookup instead of a formatter). */
let supportedZones: Set<string> | undefined;

/**
 * Whether `name` is a time zone this service accepts: a name in `Intl.supportedValuesOf('timeZone')`, or one
 * `Intl.DateTimeFormat` accepts that is spelled like an IANA name. The second half is needed: Node 20's list
 * holds only canonical names and lacks "UTC", "Etc/GMT+5" and even "Asia/Kolkata" (it lists
 * "Asia/Calcutta"). The platform matches names case-insensitively and accepts aliases ("US/Eastern"); so
 * does this. Offsets ("+05:30"), which newer platforms accept as zones, are refused: the contract asks for
 * an IANA zone, and a fixed offset is spelled "Etc/GMT-5" (sic: POSIX signs) or "UTC".
 */
export function isTimeZone(name: string): boolean {
  supportedZones ??= new Set(Intl.supportedValuesOf('timeZone'));
  if (supportedZones.has(name)) return true;
  if (name.length > MAX_ZONE_NAME || !ZONE_NAME.test(name)) return false;
  try {
    zoneFormatter(name);
    return true;
  } catch {
    return false;
  }
}

const TimeZoneSchema = z
  .string()
  .refine(isTimeZone, {
    error: (issue) =>
      `Unknown time zone ${quote(issue.input)}: expected an IANA time zone name such as "Europe/Berlin", "America/New_York" or "UTC"`,
  })
  .openapi({ description: 'IANA time zone name', example: 'Europe/Berlin' });

/**
 * One maintenance window: on each of `days`, from `from` (inclusive) to `to` (exclusive), wall-clock time in
 * `timeZone`. `to` not after `from` runs past midnight into the next day; `days` names the day it begins;
 * `from === to` is a full day. A day named twice is refused (naming the repeat): `days` reads as a set of
 * at most 7, and a repeated day is most likely a slip for another one, which the author should see rather
 * than have the plan silently run on fewer days.
 */
export const MaintenanceWindowSchema = z
  .strictObject({
    days: z
      .array(z.enum(WEEKDAYS))
      .min(1, 'days must name at least one day: "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" or "Sun"')
      .max(7, 'days names each day at most once: at most 7 days')
      .superRefine((days, ctx) => {
        // More than 7 is already refused (and repeats necessarily): one issue, not one per extra day.
        if (days.length > 7) return;
        const seen = new Set<string>();
        days.forEach((day, i) => {
          if (seen.has(day))
            ctx.addIssue({ code: 'custom', path: [i], message: `${quote(day)} is named twice in days` });
          seen.add(day);
        });
      })
      .openapi({ description: 'The days a window begins on (a window past midnight ends the next day)' }),
    from: TimeOfDaySchema,
    to: TimeOfDaySchema,
    timeZone: TimeZoneSchema,
  })
  .openapi('MaintenanceWindow', {
    description:
      'On each of days, from `from` (inclusive) to `to` (exclusive), wall-clock time in timeZone; `to` not after `from` runs past midnight, `from` equal to `to` is 24 hours',
  });
export type MaintenanceWindow = z.infer<typeof MaintenanceWindowSchema>;

/**
 * A plan's schedule (the submit body's `schedule`): it runs from `notBefore` on, and only inside one of its
 * `windows`. Absent and null fields mean no constraint (as in the rollout); `windows`, when given, holds 1 to
 * 20 windows; `{}` is a schedule that never holds the plan back.
 */
export const ScheduleSchema = z
  .strictObject({
    notBefore: Timestamp.nullish().openapi({
      description: 'The plan generates and dispatches nothing before this instant (ISO 8601 with offset)',
    }),
    windows: z
      .array(MaintenanceWindowSchema)
      .min(1, 'windows must hold at least one window (leave it out for no windows)')
      .max(MAX_WINDOWS, `windows holds at most ${MAX_WINDOWS} windows`)
      .nullish()
      .openapi({ description: 'No batch starts outside every window; a batch that started inside one finishes' }),
  })
  .openapi('Schedule');
export type Schedule = z.infer<typeof ScheduleSchema>;

/** What a schedule says at an instant (see `scheduleState`). */
export interface ScheduleState {
  /** The plan may start batches now. */
  open: boolean;
  /** When not open: the instant the plan may go on. Null when open. */
  resumesAt: Date | null;
  /** When open under windows: the instant the open period ends (or a time to look again). Else null. */
  closesAt: Date | null;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** How far ahead an open period is followed through touching and overlapping windows. */
const HORIZON_DAYS = 8;

/**
 * Whether a plan with this schedule may start batches at `now`, and until or from when.
 *
 * - Before `notBefore`: not open; `resumesAt` is `notBefore` itself when it falls inside a window (or there
 *   are no windows), else the first window opening after it.
 * - With windows, from `notBefore` on: open iff `now` lies inside an occurrence of some window (`from`
 *   inclusive, `to` exclusive). When open, `closesAt` is the end of the open period, followed through
 *   windows that overlap or touch (Mon 22:00–02:00 and Tue 00:00–06:00 are open until Tue 06:00); when the
 *   period runs on past 8 days (windows covering the whole week) `closesAt` is now + 8 days, which is not a
 *   close but a time to call again. When closed, `resumesAt` is the next instant a window opens.
 * - No windows (and past `notBefore`, or none): open, both instants null.
 *
 * Occurrences follow the module's decisions: `to` not after `from` runs past midnight, `from === to` is 24 h,
 * a wall time in a spring-forward gap is the end of the gap, a wall time in a fall-back overlap is its first
 * occurrence as `from` and its second as `to`.
 *
 * Cost: arithmetic over at most 12 days × 20 windows (no loop over minutes), plus, once per zone and four
 * weeks, the zone's offsets (a formatter call per 2 days, a bisection per transition): ~0.1 ms a call for a
 * schedule in one zone, a few ms the first time for 20 windows in 20 zones.
 *
 * `schedule` must have passed `ScheduleSchema`: a time that is not "HH:MM", an unknown zone or an
 * unreadable `notBefore` (or an invalid `now`) throws a RangeError.
 */
export function scheduleState(schedule: Schedule | null | undefined, now: Date): ScheduleState {
  const t = now.getTime();
  const notBefore = schedule?.notBefore ? Date.parse(schedule.notBefore) : -Infinity;
  // NaN would compare false everywhere and read as "open": refuse it instead.
  if (Number.isNaN(t)) throw new RangeError('scheduleState needs a valid date as now');
  if (Number.isNaN(notBefore))
    throw new RangeError(`Invalid notBefore ${quote(schedule?.notBefore)}: expected an ISO 8601 date-time`);
  const windows = schedule?.windows ?? [];
  if (windows.length === 0)
    return t < notBefore
      ? { open: false, resumesAt: new Date(notBefore), closesAt: null }
      : { open: true, resumesAt: null, closesAt: null };

  // The first instant the plan could run: from here on only the windows matter.
  const at = Math.max(t, notBefore);
  const horizon = at + HORIZON_DAYS * DAY;
  // Every occurrence that begins two days before `at` (one that began earlier has ended: an occurrence lasts
  // at most 25 h) up to one that begins after the horizon.
  const periods = occurrences(windows, at, -2, HORIZON_DAYS + 1);

  let end = -Infinity;
  for (const p of periods) if (p.start <= at && at < p.end) end = Math.max(end, p.end);
  if (end > -Infinity) {
    if (t < notBefore) return { open: false, resumesAt: new Date(notBefore), closesAt: null };
    // Sorted by start: one pass follows the period through every occurrence that overlaps or touches it.
    for (const p of periods) {
      if (p.start > end) break;
      if (p.end > end) end = p.end;
    }
    return { open: true, resumesAt: null, closesAt: new Date(Math.min(end, horizon)) };
  }

  let next = firstStartAfter(periods, at);
  // An occurrence is empty only when a whole window falls in a spring-forward gap; the same window a week
  // later is not, so the following week always has an opening.
  next ??= firstStartAfter(occurrences(windows, at, HORIZON_DAYS + 2, 2 * HORIZON_DAYS + 2), at);
  // (Were there none, the end of what was searched: a time to look again, never a wrong opening.)
  return { open: false, resumesAt: new Date(next ?? at + (2 * HORIZON_DAYS + 3) * DAY), closesAt: null };
}

interface Period {
  start: number;
  end: number;
}

function firstStartAfter(periods: readonly Period[], at: number): number | undefined {
  for (const p of periods) if (p.start > at) return p.start;
  return undefined;
}

/**
 * The non-empty occurrences of `windows` that begin on the days `firstDay`…`lastDay` after the day of `at`
 * (each in its window's zone), sorted by start.
 */
function occurrences(windows: readonly MaintenanceWindow[], at: number, firstDay: number, lastDay: number): Period[] {
  const out: Period[] = [];
  for (const w of windows) {
    // Wide enough for every wall time these days can name, whatever the zone's offset (within ±18 h).
    const zone = zoneTimeline(w.timeZone, at + (firstDay - 3) * DAY, at + (lastDay + 4) * DAY);
    const from = minutesOf(w.from);
    const to = minutesOf(w.to);
    // The wall-clock length: to not after from runs past midnight, to === from is 24 h.
    const length = (to > from ? to - from : to - from + 24 * 60) * MINUTE;
    let mask = 0;
    for (const day of w.days) mask |= 1 << WEEKDAYS.indexOf(day);
    // Wall-clock times are counted as if UTC: midnight of the local day of `at`.
    const today = Math.floor(zone.wallClock(at) / DAY) * DAY;
    for (let k = firstDay; k <= lastDay; k++) {
      const midnight = today + k * DAY;
      if (!(mask & (1 << weekdayIndex(midnight)))) continue;
      const wallStart = midnight + from * MINUTE;
      const start = zone.instant(wallStart, 'first');
      const end = zone.instant(wallStart + length, 'last');
      if (end > start) out.push({ start, end });
    }
  }
  return out.sort((a, b) => a.start - b.start || a.end - b.end);
}

/** Minutes after midnight of a validated "HH:MM". */
function minutesOf(time: string): number {
  const m = TIME_OF_DAY.exec(time);
  if (!m) throw new RangeError(`Invalid time ${quote(time)}: expected "HH:MM", 00:00 to 23:59`);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** Monday 0 … Sunday 6 of a wall-clock midnight counted as if UTC (1970-01-01 was a Thursday, 3). */
function weekdayIndex(midnight: number): number {
  return (((Math.floor(midnight / DAY) + 3) % 7) + 7) % 7;
}

/**
 * One formatter per zone: constructing one costs 0.1–0.3 ms, formatting ~15 µs. Keyed by the lower-cased
 * name, as the platform matches names, and only names the platform accepted are kept: the map holds at most
 * one entry per zone name the platform knows (~600), however the names are spelled in requests.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();

function zoneFormatter(zone: string): Intl.DateTimeFormat {
  const key = zone.toLowerCase();
  let f = formatters.get(key);
  if (!f) {
    // Throws a RangeError for a zone the platform does not know.
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(key, f);
  }
  return f;
}

/** Milliseconds since the epoch of a UTC date-time, also for years 0–99 (which `Date.UTC` reads as 19xx). */
function utc(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  // 400 Gregorian years are exactly 146,097 days.
  if (year >= 0 && year < 100) return Date.UTC(year + 400, month - 1, day, hour, minute, second) - 146_097 * DAY;
  return Date.UTC(year, month - 1, day, hour, minute, second);
}

/** The zone's offset east of UTC, in ms, at an instant: its wall clock there, counted as if UTC, minus it. */
function offsetAt(formatter: Intl.DateTimeFormat, instant: number): number {
  // Offsets are whole seconds; the formatter shows none finer.
  const second = instant - (((instant % 1000) + 1000) % 1000);
  const wall: Partial<Record<Intl.DateTimeFormatPartTypes, number>> = {};
  for (const part of formatter.formatToParts(second)) wall[part.type] = Number(part.value);
  const { year = 0, month = 1, day = 1, hour = 0, minute = 0, second: s = 0 } = wall;
  return utc(year, month, day, hour, minute, s) - second;
}

/**
 * The last timeline built for each zone (keyed as the formatters are, so at most one per zone the platform
 * knows). A running plan asks again per batch with `now` a little later: built four weeks further than
 * asked, the timeline answers those calls with arithmetic alone. Zone data does not change while the
 * process runs, so what is cached never changes an answer.
 */
const timelines = new Map<string, ZoneTimeline>();
const TIMELINE_AHEAD = 28 * DAY;

function zoneTimeline(zone: string, from: number, to: number): ZoneTimeline {
  const key = zone.toLowerCase();
  const known = timelines.get(key);
  if (known && known.from <= from && to <= known.to) return known;
  const built = new ZoneTimeline(zone, from, to + TIMELINE_AHEAD);
  timelines.set(key, built);
  return built;
}

/**
 * Offsets are sampled this far apart. Transitions between two samples are found by bisection, however many;
 * only a pair less than 2 days apart that returns to the same offset would go unseen (no current rule
 * changes the clock twice within days; DST suspended for Ramadan lasts weeks).
 */
const SAMPLE_STEP = 2 * DAY;

/**
 * A zone's offsets over a range of instants: the transitions in it and the offset after each, found by
 * sampling and bisection with `Intl.DateTimeFormat` (hourCycle h23). Converts an instant to its wall clock
 * (counted as if UTC) and back, deciding gaps and overlaps as the module says.
 */
class ZoneTimeline {
  /** Transition instants, ascending; `offsets[i]` holds before `transitions[i]` (and after the one before). */
  private readonly transitions: number[] = [];
  private readonly offsets: number[];

  /**
   * Covers the instants `from`…`to` (transitions outside it are not known: before `from` the first offset
   * is assumed, after `to` the last).
   */
  constructor(
    zone: string,
    readonly from: number,
    readonly to: number,
  ) {
    const f = zoneFormatter(zone);
    let a = from - (((from % 1000) + 1000) % 1000);
    let offset = offsetAt(f, a);
    this.offsets = [offset];
    while (a < to) {
      const b = a + SAMPLE_STEP;
      const later = offsetAt(f, b);
      // Each bisection finds the first second at which the offset differs from the one at `a`; repeated in
      // case the step holds more than one transition.
      while (later !== offset) {
        let lo = a;
        let hi = b;
        while (hi - lo > 1000) {
          const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
          if (offsetAt(f, mid) === offset) lo = mid;
          else hi = mid;
        }
        offset = offsetAt(f, hi);
        this.transitions.push(hi);
        this.offsets.push(offset);
        a = hi;
      }
      a = b;
    }
  }

  /** The offset in force at an instant. */
  private offsetAt(instant: number): number {
    let i = 0;
    while (i < this.transitions.length && this.transitions[i]! <= instant) i++;
    return this.offsets[i]!;
  }

  /** The wall clock at an instant, counted as if UTC. */
  wallClock(instant: number): number {
    return instant + this.offsetAt(instant);
  }

  /**
   * The instant at which the zone's clock shows `wall` (counted as if UTC): in a fall-back overlap the
   * `first` or the `last` time it does; in a spring-forward gap, the moment the clock jumps over it.
   */
  instant(wall: number, which: 'first' | 'last'): number {
    let found: number | undefined;
    for (let i = 0; i < this.offsets.length; i++) {
      // The instant this offset would give, if the offset is in force then.
      const candidate = wall - this.offsets[i]!;
      const after = i === 0 ? -Infinity : this.transitions[i - 1]!;
      const before = i === this.transitions.length ? Infinity : this.transitions[i]!;
      if (candidate < after || candidate >= before) continue;
      if (which === 'first') return candidate;
      found = candidate;
    }
    if (found !== undefined) return found;
    // No instant shows it: the clock jumped over `wall` at the transition whose gap holds it.
    for (let i = 0; i < this.transitions.length; i++) {
      const jump = this.transitions[i]!;
      if (jump + this.offsets[i]! <= wall && wall < jump + this.offsets[i + 1]!) return jump;
    }
    // Unreachable for a wall time inside the range the timeline was built for.
    return wall - this.offsets[this.offsets.length - 1]!;
  }
}
