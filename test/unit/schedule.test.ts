import { describe, expect, it } from 'vitest';
import {
  isTimeZone,
  type MaintenanceWindow,
  type Schedule,
  ScheduleSchema,
  scheduleState,
  type Weekday,
} from '../../src/alterations/schedule.js';
import { zodFieldErrors } from '../../src/errors.js';

// Every expected instant is worked out by hand in the comment beside it, from the zone's offset that day
// (CET +01:00, CEST +02:00, IST +05:30, NPT +05:45, EST -05:00, EDT -04:00, …). The code computes them with
// the platform's time-zone data; these comments do not.

const WEEKDAYS_ALL: Weekday[] = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
const WORKDAYS: Weekday[] = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri'];

const win = (days: Weekday[], from: string, to: string, timeZone: string): MaintenanceWindow => ({
  days,
  from,
  to,
  timeZone,
});
/** A schedule as the API would hand it over: through the schema, so every fixture is itself valid. */
const schedule = (value: unknown): Schedule => ScheduleSchema.parse(value);
const windows = (...ws: MaintenanceWindow[]): Schedule => schedule({ windows: ws });

/** The state at `now`, instants as ISO strings for readable failures. */
function stateAt(s: Schedule | null | undefined, now: string) {
  const r = scheduleState(s, new Date(now));
  return { open: r.open, resumesAt: r.resumesAt?.toISOString() ?? null, closesAt: r.closesAt?.toISOString() ?? null };
}
const openUntil = (closesAt: string) => ({ open: true, resumesAt: null, closesAt });
const closedUntil = (resumesAt: string) => ({ open: false, resumesAt, closesAt: null });
const OPEN = { open: true, resumesAt: null, closesAt: null };

describe('Europe/Berlin across daylight saving (2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET)', () => {
  describe('Sun 01:00–04:00, a window around the changed hour', () => {
    const s = windows(win(['Sun'], '01:00', '04:00', 'Europe/Berlin'));

    it('is two hours long on the spring-forward night: 01:00 CET = 00:00Z to 04:00 CEST = 02:00Z', () => {
      expect(stateAt(s, '2026-03-28T12:00:00.000Z')).toEqual(closedUntil('2026-03-29T00:00:00.000Z'));
      expect(stateAt(s, '2026-03-29T00:00:00.000Z')).toEqual(openUntil('2026-03-29T02:00:00.000Z'));
      // 03:59:59.999 CEST, the last moment inside.
      expect(stateAt(s, '2026-03-29T01:59:59.999Z')).toEqual(openUntil('2026-03-29T02:00:00.000Z'));
      // 04:00 CEST: closed; next Sunday 01:00 CEST = Sat 23:00Z.
      expect(stateAt(s, '2026-03-29T02:00:00.000Z')).toEqual(closedUntil('2026-04-04T23:00:00.000Z'));
    });

    it('is four hours long on the fall-back night: 01:00 CEST = 23:00Z (Sat) to 04:00 CET = 03:00Z', () => {
      expect(stateAt(s, '2026-10-24T12:00:00.000Z')).toEqual(closedUntil('2026-10-24T23:00:00.000Z'));
      expect(stateAt(s, '2026-10-24T23:00:00.000Z')).toEqual(openUntil('2026-10-25T03:00:00.000Z'));
      // 02:30 CET, the second pass of the repeated hour: still inside.
      expect(stateAt(s, '2026-10-25T01:30:00.000Z')).toEqual(openUntil('2026-10-25T03:00:00.000Z'));
      // 04:00 CET: closed; next Sunday 01:00 CET = 00:00Z.
      expect(stateAt(s, '2026-10-25T03:00:00.000Z')).toEqual(closedUntil('2026-11-01T00:00:00.000Z'));
    });
  });

  it('a window starting in the skipped hour opens when the clock jumps: Sun 02:30–05:00 opens at 03:00 CEST = 01:00Z', () => {
    const s = windows(win(['Sun'], '02:30', '05:00', 'Europe/Berlin'));
    // 01:30 CET.
    expect(stateAt(s, '2026-03-29T00:30:00.000Z')).toEqual(closedUntil('2026-03-29T01:00:00.000Z'));
    // 03:00 CEST to 05:00 CEST = 03:00Z.
    expect(stateAt(s, '2026-03-29T01:00:00.000Z')).toEqual(openUntil('2026-03-29T03:00:00.000Z'));
  });

  it('a window wholly inside the skipped hour is empty that night: Sun 02:00–03:00 next opens a week later', () => {
    const s = windows(win(['Sun'], '02:00', '03:00', 'Europe/Berlin'));
    // The Sunday before, 02:00 CET = 01:00Z to 03:00 CET = 02:00Z.
    expect(stateAt(s, '2026-03-22T01:30:00.000Z')).toEqual(openUntil('2026-03-22T02:00:00.000Z'));
    // 2026-03-29 has no 02:00–03:00; 2026-04-05 02:00 CEST = 00:00Z.
    expect(stateAt(s, '2026-03-28T12:00:00.000Z')).toEqual(closedUntil('2026-04-05T00:00:00.000Z'));
    expect(stateAt(s, '2026-03-29T01:00:00.000Z')).toEqual(closedUntil('2026-04-05T00:00:00.000Z'));
    // Asked on Thursday the 26th: the next opening is 10 days on, past the first 8 days searched.
    expect(stateAt(s, '2026-03-26T12:00:00.000Z')).toEqual(closedUntil('2026-04-05T00:00:00.000Z'));
  });

  it('a window starting in the repeated hour starts at its first pass: Sun 02:00–03:00 is 00:00Z–02:00Z', () => {
    const s = windows(win(['Sun'], '02:00', '03:00', 'Europe/Berlin'));
    // 02:00 CEST = 00:00Z; 03:00 (once, CET) = 02:00Z.
    expect(stateAt(s, '2026-10-24T23:59:59.999Z')).toEqual(closedUntil('2026-10-25T00:00:00.000Z'));
    expect(stateAt(s, '2026-10-25T00:00:00.000Z')).toEqual(openUntil('2026-10-25T02:00:00.000Z'));
    // 02:30 CET, the second pass: the same period.
    expect(stateAt(s, '2026-10-25T01:30:00.000Z')).toEqual(openUntil('2026-10-25T02:00:00.000Z'));
    // Next Sunday 02:00 CET = 01:00Z.
    expect(stateAt(s, '2026-10-25T02:00:00.000Z')).toEqual(closedUntil('2026-11-01T01:00:00.000Z'));
  });

  it('a window ending in the repeated hour ends at its second pass: Sun 01:00–02:30 closes at 02:30 CET = 01:30Z', () => {
    const s = windows(win(['Sun'], '01:00', '02:30', 'Europe/Berlin'));
    // 02:45 CEST: past 02:30 on the wall, but the period runs on to the last time the clock shows 02:30.
    expect(stateAt(s, '2026-10-25T00:45:00.000Z')).toEqual(openUntil('2026-10-25T01:30:00.000Z'));
    // Next Sunday 01:00 CET = 00:00Z.
    expect(stateAt(s, '2026-10-25T01:30:00.000Z')).toEqual(closedUntil('2026-11-01T00:00:00.000Z'));
  });

  it('a window away from the changed hour keeps its wall-clock time: Sun 09:00–17:00', () => {
    const s = windows(win(['Sun'], '09:00', '17:00', 'Europe/Berlin'));
    // 2026-03-22, CET: 08:00Z–16:00Z; 2026-03-29, CEST: 07:00Z–15:00Z.
    expect(stateAt(s, '2026-03-22T08:00:00.000Z')).toEqual(openUntil('2026-03-22T16:00:00.000Z'));
    expect(stateAt(s, '2026-03-22T16:00:00.000Z')).toEqual(closedUntil('2026-03-29T07:00:00.000Z'));
    expect(stateAt(s, '2026-03-29T07:00:00.000Z')).toEqual(openUntil('2026-03-29T15:00:00.000Z'));
    // 2026-10-18, CEST: 07:00Z–15:00Z; 2026-10-25, CET: 08:00Z–16:00Z (07:30Z is 08:30 CET: not yet).
    expect(stateAt(s, '2026-10-18T15:00:00.000Z')).toEqual(closedUntil('2026-10-25T08:00:00.000Z'));
    expect(stateAt(s, '2026-10-25T07:30:00.000Z')).toEqual(closedUntil('2026-10-25T08:00:00.000Z'));
    expect(stateAt(s, '2026-10-25T08:00:00.000Z')).toEqual(openUntil('2026-10-25T16:00:00.000Z'));
  });

  it('a full day (from === to) is 23 h on the spring-forward Sunday and 25 h on the fall-back one', () => {
    const s = windows(win(['Sun'], '00:00', '00:00', 'Europe/Berlin'));
    // Sun 00:00 CET = Sat 23:00Z to Mon 00:00 CEST = Sun 22:00Z.
    expect(stateAt(s, '2026-03-28T23:00:00.000Z')).toEqual(openUntil('2026-03-29T22:00:00.000Z'));
    // Sun 00:00 CEST = Sat 22:00Z to Mon 00:00 CET = Sun 23:00Z.
    expect(stateAt(s, '2026-10-24T22:00:00.000Z')).toEqual(openUntil('2026-10-25T23:00:00.000Z'));
  });
});

describe('windows past midnight', () => {
  it('Fri 22:00–02:00 is open on Saturday at 01:00, closed at 03:00, and opens again next Friday at 22:00', () => {
    // Winter, CET: Fri 2026-01-09 22:00 = 21:00Z to Sat 02:00 = 01:00Z.
    const s = windows(win(['Fri'], '22:00', '02:00', 'Europe/Berlin'));
    expect(stateAt(s, '2026-01-09T20:59:59.999Z')).toEqual(closedUntil('2026-01-09T21:00:00.000Z'));
    // `from` is inclusive.
    expect(stateAt(s, '2026-01-09T21:00:00.000Z')).toEqual(openUntil('2026-01-10T01:00:00.000Z'));
    // Sat 01:00 CET.
    expect(stateAt(s, '2026-01-10T00:00:00.000Z')).toEqual(openUntil('2026-01-10T01:00:00.000Z'));
    // `to` is exclusive: Sat 02:00 CET is closed; next Fri 2026-01-16 22:00 CET = 21:00Z.
    expect(stateAt(s, '2026-01-10T01:00:00.000Z')).toEqual(closedUntil('2026-01-16T21:00:00.000Z'));
    // Sat 03:00 CET.
    expect(stateAt(s, '2026-01-10T02:00:00.000Z')).toEqual(closedUntil('2026-01-16T21:00:00.000Z'));
    // `days` names the day a window begins: Saturday 23:00 is not inside it.
    expect(stateAt(s, '2026-01-10T22:00:00.000Z')).toEqual(closedUntil('2026-01-16T21:00:00.000Z'));
  });

  it('a window to midnight says to "00:00": Mon 18:00–00:00 UTC closes at Tuesday 00:00Z', () => {
    const s = windows(win(['Mon'], '18:00', '00:00', 'UTC'));
    expect(stateAt(s, '2026-01-12T23:59:00.000Z')).toEqual(openUntil('2026-01-13T00:00:00.000Z'));
  });

  it('from === to is a full day: Wed 12:00–12:00 UTC is open from Wednesday noon to Thursday noon', () => {
    const s = windows(win(['Wed'], '12:00', '12:00', 'UTC'));
    expect(stateAt(s, '2026-01-14T12:00:00.000Z')).toEqual(openUntil('2026-01-15T12:00:00.000Z'));
    expect(stateAt(s, '2026-01-15T11:59:00.000Z')).toEqual(openUntil('2026-01-15T12:00:00.000Z'));
    expect(stateAt(s, '2026-01-15T12:00:00.000Z')).toEqual(closedUntil('2026-01-21T12:00:00.000Z'));
  });
});

describe('zones with half- and three-quarter-hour offsets', () => {
  it('Asia/Kolkata (+05:30): Mon 09:00–17:00 is 03:30Z–11:30Z', () => {
    const s = windows(win(['Mon'], '09:00', '17:00', 'Asia/Kolkata'));
    expect(stateAt(s, '2026-01-11T12:00:00.000Z')).toEqual(closedUntil('2026-01-12T03:30:00.000Z'));
    expect(stateAt(s, '2026-01-12T03:29:59.999Z')).toEqual(closedUntil('2026-01-12T03:30:00.000Z'));
    expect(stateAt(s, '2026-01-12T03:30:00.000Z')).toEqual(openUntil('2026-01-12T11:30:00.000Z'));
    expect(stateAt(s, '2026-01-12T11:30:00.000Z')).toEqual(closedUntil('2026-01-19T03:30:00.000Z'));
  });

  it('Asia/Kathmandu (+05:45): Mon 09:00–17:00 is 03:15Z–11:15Z', () => {
    const s = windows(win(['Mon'], '09:00', '17:00', 'Asia/Kathmandu'));
    expect(stateAt(s, '2026-01-11T12:00:00.000Z')).toEqual(closedUntil('2026-01-12T03:15:00.000Z'));
    expect(stateAt(s, '2026-01-12T03:15:00.000Z')).toEqual(openUntil('2026-01-12T11:15:00.000Z'));
    expect(stateAt(s, '2026-01-12T11:15:00.000Z')).toEqual(closedUntil('2026-01-19T03:15:00.000Z'));
  });

  it("Asia/Kathmandu: the day is the zone's, not UTC's (Tuesday begins on Monday 18:15Z)", () => {
    const s = windows(win(['Tue'], '00:00', '00:00', 'Asia/Kathmandu'));
    // Mon 18:00Z = Mon 23:45 NPT: not Tuesday yet; Tue 00:00 NPT = Mon 18:15Z.
    expect(stateAt(s, '2026-01-12T18:00:00.000Z')).toEqual(closedUntil('2026-01-12T18:15:00.000Z'));
    // Mon 18:20Z = Tue 00:05 NPT: open until Wed 00:00 NPT = Tue 18:15Z.
    expect(stateAt(s, '2026-01-12T18:20:00.000Z')).toEqual(openUntil('2026-01-13T18:15:00.000Z'));
  });
});

describe('America/New_York across its 2026 changes (03-08 02:00 EST → 03:00 EDT; 11-01 02:00 EDT → 01:00 EST)', () => {
  it('workdays 09:00–17:00 follow the wall clock: 14:00Z–22:00Z in EST, 13:00Z–21:00Z in EDT', () => {
    const s = windows(win(WORKDAYS, '09:00', '17:00', 'America/New_York'));
    // Fri 2026-03-06 09:00 EST = 14:00Z.
    expect(stateAt(s, '2026-03-06T13:59:00.000Z')).toEqual(closedUntil('2026-03-06T14:00:00.000Z'));
    // Sat 2026-03-07: next is Mon 2026-03-09 09:00 EDT = 13:00Z.
    expect(stateAt(s, '2026-03-07T12:00:00.000Z')).toEqual(closedUntil('2026-03-09T13:00:00.000Z'));
    // Fri 2026-10-30 16:00 EDT: open until 17:00 EDT = 21:00Z.
    expect(stateAt(s, '2026-10-30T20:00:00.000Z')).toEqual(openUntil('2026-10-30T21:00:00.000Z'));
    // Sat 2026-10-31: next is Mon 2026-11-02 09:00 EST = 14:00Z.
    expect(stateAt(s, '2026-10-31T12:00:00.000Z')).toEqual(closedUntil('2026-11-02T14:00:00.000Z'));
  });

  it('Sun 01:30–03:30 is one hour on 03-08 (06:30Z–07:30Z) and three on 11-01 (05:30Z–08:30Z)', () => {
    const s = windows(win(['Sun'], '01:30', '03:30', 'America/New_York'));
    // 01:30 EST = 06:30Z to 03:30 EDT = 07:30Z.
    expect(stateAt(s, '2026-03-08T06:00:00.000Z')).toEqual(closedUntil('2026-03-08T06:30:00.000Z'));
    expect(stateAt(s, '2026-03-08T06:30:00.000Z')).toEqual(openUntil('2026-03-08T07:30:00.000Z'));
    // 01:30 EDT (first pass) = 05:30Z to 03:30 EST = 08:30Z.
    expect(stateAt(s, '2026-11-01T05:00:00.000Z')).toEqual(closedUntil('2026-11-01T05:30:00.000Z'));
    // 01:45 EST, the second pass.
    expect(stateAt(s, '2026-11-01T06:45:00.000Z')).toEqual(openUntil('2026-11-01T08:30:00.000Z'));
  });

  it('Sun 02:15–04:00 on 03-08 opens when the clock jumps, 03:00 EDT = 07:00Z, and closes at 04:00 EDT = 08:00Z', () => {
    const s = windows(win(['Sun'], '02:15', '04:00', 'America/New_York'));
    expect(stateAt(s, '2026-03-07T12:00:00.000Z')).toEqual(closedUntil('2026-03-08T07:00:00.000Z'));
    expect(stateAt(s, '2026-03-08T07:00:00.000Z')).toEqual(openUntil('2026-03-08T08:00:00.000Z'));
  });

  it('Sat 23:00–01:30 runs into the repeated hour and ends at its second 01:30, 01:30 EST = 06:30Z', () => {
    const s = windows(win(['Sat'], '23:00', '01:30', 'America/New_York'));
    // Sat 2026-10-31 23:00 EDT = 2026-11-01T03:00Z.
    expect(stateAt(s, '2026-11-01T02:59:00.000Z')).toEqual(closedUntil('2026-11-01T03:00:00.000Z'));
    // 01:15 EST.
    expect(stateAt(s, '2026-11-01T06:15:00.000Z')).toEqual(openUntil('2026-11-01T06:30:00.000Z'));
  });
});

describe('several windows', () => {
  // Twenty one-hour-or-less windows in twenty zones; on Mon 2026-01-12 (southern summer) they open at:
  const twenty = windows(
    win(['Mon'], '09:00', '10:00', 'Europe/Berlin'), // 09:00 CET = 08:00Z
    win(['Mon'], '09:00', '10:00', 'Asia/Kolkata'), // 09:00 IST = 03:30Z
    win(['Mon'], '07:00', '08:00', 'Asia/Kathmandu'), // 07:00 NPT = 01:15Z–02:15Z
    win(['Mon'], '00:00', '01:00', 'America/New_York'), // 00:00 EST = 05:00Z
    win(['Mon'], '02:00', '03:00', 'UTC'), // 02:00Z–03:00Z
    win(['Sun'], '20:00', '21:00', 'Etc/GMT+5'), // Sun 20:00 at UTC-5 = Mon 01:00Z
    win(['Mon'], '11:45', '12:15', 'Australia/Sydney'), // 11:45 AEDT (+11) = 00:45Z–01:15Z: the first
    win(['Mon'], '10:00', '11:00', 'Asia/Tokyo'), // 10:00 JST (+9) = 01:00Z–02:00Z
    win(['Sun'], '17:00', '18:00', 'America/Los_Angeles'), // Sun 17:00 PST (-8) = Mon 01:00Z
    win(['Mon'], '01:00', '02:00', 'Europe/London'), // 01:00 GMT = 01:00Z
    win(['Sun'], '22:00', '23:00', 'America/Sao_Paulo'), // Sun 22:00 (-3) = Mon 01:00Z
    win(['Mon'], '09:00', '10:00', 'Asia/Shanghai'), // 09:00 CST (+8) = 01:00Z
    win(['Mon'], '15:00', '16:00', 'Pacific/Kiritimati'), // 15:00 (+14) = 01:00Z
    win(['Mon'], '05:00', '06:00', 'Asia/Tehran'), // 05:00 (+03:30) = 01:30Z–02:30Z
    win(['Sun'], '22:00', '23:00', 'America/St_Johns'), // Sun 22:00 NST (-03:30) = Mon 01:30Z–02:30Z
    win(['Mon'], '14:45', '15:00', 'Pacific/Chatham'), // 14:45 CHADT (+13:45) = 01:00Z–01:15Z
    win(['Mon'], '04:00', '05:00', 'Europe/Moscow'), // 04:00 MSK (+3) = 01:00Z
    win(['Mon'], '05:00', '06:00', 'Africa/Nairobi'), // 05:00 EAT (+3) = 02:00Z–03:00Z
    win(['Sun'], '22:00', '23:00', 'America/Santiago'), // Sun 22:00 CLST (-3) = Mon 01:00Z
    win(['Mon'], '14:00', '15:00', 'Pacific/Auckland'), // 14:00 NZDT (+13) = 01:00Z
  );

  it('twenty windows in twenty zones: the next opening is the earliest of them (Sydney, 00:45Z)', () => {
    expect(twenty.windows).toHaveLength(20);
    expect(stateAt(twenty, '2026-01-12T00:00:00.000Z')).toEqual(closedUntil('2026-01-12T00:45:00.000Z'));
  });

  it('twenty windows in twenty zones: an open period runs on through every window that overlaps or touches it', () => {
    // 00:45–01:15 (Sydney), 01:00–02:00 (Tokyo …), 01:15–02:15 (Kathmandu), 01:30–02:30 (Tehran),
    // 02:00–03:00 (UTC, Nairobi); then nothing until 03:30Z (Kolkata).
    expect(stateAt(twenty, '2026-01-12T00:50:00.000Z')).toEqual(openUntil('2026-01-12T03:00:00.000Z'));
    expect(stateAt(twenty, '2026-01-12T03:10:00.000Z')).toEqual(closedUntil('2026-01-12T03:30:00.000Z'));
  });

  it('windows that overlap across midnight make one period: Mon 22:00–02:00 and Tue 00:00–06:00 close at Tue 06:00', () => {
    const s = windows(
      win(['Mon'], '22:00', '02:00', 'Europe/Berlin'), // Mon 2026-01-12 21:00Z to Tue 01:00Z
      win(['Tue'], '00:00', '06:00', 'Europe/Berlin'), // Mon 23:00Z to Tue 05:00Z
    );
    // Mon 23:30 CET.
    expect(stateAt(s, '2026-01-12T22:30:00.000Z')).toEqual(openUntil('2026-01-13T05:00:00.000Z'));
  });

  it('windows that touch make one period: Mon 18:00–20:00 and 20:00–22:00 close at 22:00', () => {
    const s = windows(win(['Mon'], '18:00', '20:00', 'Europe/Berlin'), win(['Mon'], '20:00', '22:00', 'Europe/Berlin'));
    // 18:30 CET; 22:00 CET = 21:00Z.
    expect(stateAt(s, '2026-01-12T17:30:00.000Z')).toEqual(openUntil('2026-01-12T21:00:00.000Z'));
    expect(stateAt(s, '2026-01-12T19:00:00.000Z')).toEqual(openUntil('2026-01-12T21:00:00.000Z'));
    expect(stateAt(s, '2026-01-12T21:00:00.000Z')).toEqual(closedUntil('2026-01-19T17:00:00.000Z'));
  });

  it('windows in different zones chain too: Mon 09:00–10:00 Berlin (08:00Z–09:00Z) and Mon 09:00–11:00 London', () => {
    const s = windows(win(['Mon'], '09:00', '10:00', 'Europe/Berlin'), win(['Mon'], '09:00', '11:00', 'Europe/London'));
    expect(stateAt(s, '2026-01-12T08:15:00.000Z')).toEqual(openUntil('2026-01-12T11:00:00.000Z'));
  });

  it('windows that cover the whole week never close: closesAt is a time to ask again, 8 days on', () => {
    const s = windows(win(WEEKDAYS_ALL, '00:00', '00:00', 'UTC'));
    expect(stateAt(s, '2026-01-12T10:00:00.000Z')).toEqual(openUntil('2026-01-20T10:00:00.000Z'));
  });
});

describe('consistency over a year of random windows and instants', () => {
  // A seeded generator: the same 300 cases every run.
  let seed = 20260329;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const ZONES = ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'America/Santiago', 'Asia/Kathmandu'];
  const hhmm = () => `${String(rand(24)).padStart(2, '0')}:${String(rand(4) * 15).padStart(2, '0')}`;
  const YEAR = Date.UTC(2026, 0, 1);

  it('resumesAt is the first instant open and closesAt the first instant closed, across DST changes', () => {
    for (let k = 0; k < 300; k++) {
      const ws = Array.from({ length: 1 + rand(3) }, () =>
        win([WEEKDAYS_ALL[rand(7)]!], hhmm(), hhmm(), ZONES[rand(ZONES.length)]!),
      );
      const s = windows(...ws);
      const now = new Date(YEAR + rand(365) * 86_400_000 + rand(86_400) * 1000);
      const label = `${JSON.stringify(ws)} at ${now.toISOString()}`;
      const state = scheduleState(s, now);
      if (state.open) {
        const closes = state.closesAt!.getTime();
        expect(closes, label).toBeGreaterThan(now.getTime());
        expect(scheduleState(s, new Date(closes - 1)).open, label).toBe(true);
        if (closes < now.getTime() + 8 * 86_400_000) expect(scheduleState(s, new Date(closes)).open, label).toBe(false);
      } else {
        const resumes = state.resumesAt!.getTime();
        expect(resumes, label).toBeGreaterThan(now.getTime());
        expect(scheduleState(s, new Date(resumes - 1)).open, label).toBe(false);
        expect(scheduleState(s, new Date(resumes)).open, label).toBe(true);
        // Closed all the way: nothing opens halfway.
        expect(scheduleState(s, new Date((now.getTime() + resumes) / 2)).open, label).toBe(false);
      }
    }
  });
});

describe('notBefore', () => {
  it('alone: closed until notBefore, then open with nothing to wait for', () => {
    // 09:00+02:00 = 07:00Z.
    const s = schedule({ notBefore: '2026-06-01T09:00:00+02:00' });
    expect(stateAt(s, '2026-06-01T06:59:59.999Z')).toEqual(closedUntil('2026-06-01T07:00:00.000Z'));
    expect(stateAt(s, '2026-06-01T07:00:00.000Z')).toEqual(OPEN);
    expect(stateAt(s, '2026-07-01T00:00:00.000Z')).toEqual(OPEN);
  });

  // Workdays 09:00–17:00 in Berlin in June (CEST): 07:00Z–15:00Z.
  const workdays = win(WORKDAYS, '09:00', '17:00', 'Europe/Berlin');

  it('inside a window: the plan resumes at notBefore itself', () => {
    // Mon 2026-06-01 10:00+02:00 = 08:00Z.
    const s = schedule({ notBefore: '2026-06-01T10:00:00+02:00', windows: [workdays] });
    expect(stateAt(s, '2026-05-31T12:00:00.000Z')).toEqual(closedUntil('2026-06-01T08:00:00.000Z'));
    // Inside the window, but before notBefore.
    expect(stateAt(s, '2026-06-01T07:30:00.000Z')).toEqual(closedUntil('2026-06-01T08:00:00.000Z'));
    expect(stateAt(s, '2026-06-01T08:00:00.000Z')).toEqual(openUntil('2026-06-01T15:00:00.000Z'));
  });

  it('outside every window: the plan resumes at the first opening after notBefore', () => {
    // Mon 18:00 CEST: next is Tue 2026-06-02 09:00 CEST = 07:00Z, even asked while Monday's window is open.
    const evening = schedule({ notBefore: '2026-06-01T18:00:00+02:00', windows: [workdays] });
    expect(stateAt(evening, '2026-06-01T08:00:00.000Z')).toEqual(closedUntil('2026-06-02T07:00:00.000Z'));
    // Fri 2026-06-05 20:00 CEST: next is Mon 2026-06-08 09:00 CEST = 07:00Z.
    const friday = schedule({ notBefore: '2026-06-05T20:00:00+02:00', windows: [workdays] });
    expect(stateAt(friday, '2026-06-01T08:00:00.000Z')).toEqual(closedUntil('2026-06-08T07:00:00.000Z'));
  });

  it('in the past: only the windows count', () => {
    const s = schedule({ notBefore: '2026-01-01T00:00:00Z', windows: [workdays] });
    expect(stateAt(s, '2026-06-01T08:00:00.000Z')).toEqual(openUntil('2026-06-01T15:00:00.000Z'));
    // Mon 17:00 CEST: next is Tue 07:00Z.
    expect(stateAt(s, '2026-06-01T15:00:00.000Z')).toEqual(closedUntil('2026-06-02T07:00:00.000Z'));
  });

  it('no schedule, an empty schedule and null fields hold nothing back', () => {
    expect(stateAt(undefined, '2026-06-01T00:00:00.000Z')).toEqual(OPEN);
    expect(stateAt(null, '2026-06-01T00:00:00.000Z')).toEqual(OPEN);
    expect(stateAt(schedule({}), '2026-06-01T00:00:00.000Z')).toEqual(OPEN);
    expect(stateAt(schedule({ notBefore: null, windows: null }), '2026-06-01T00:00:00.000Z')).toEqual(OPEN);
  });
});

describe('ScheduleSchema', () => {
  /** The 400's `errors`, as the API reports them (JSON pointers). */
  const errorsOf = (value: unknown) => {
    const r = ScheduleSchema.safeParse(value);
    return r.success ? [] : zodFieldErrors(r.error);
  };
  const good = win(['Mon'], '09:00', '17:00', 'Europe/Berlin');

  it('accepts a full schedule and keeps it as sent', () => {
    const body = {
      notBefore: '2026-06-01T09:00:00.000+05:30',
      windows: [good, win(['Sat', 'Sun'], '22:00', '02:00', 'UTC')],
    };
    expect(ScheduleSchema.parse(body)).toEqual(body);
  });

  it('accepts zones Node 20 does not list but knows: UTC, Etc/GMT+5, Asia/Kolkata, aliases', () => {
    for (const zone of [
      'UTC',
      'Etc/UTC',
      'Etc/GMT+5',
      'Etc/GMT-14',
      'Asia/Kolkata',
      'Asia/Calcutta',
      'US/Eastern',
      'EST5EDT',
    ])
      expect(errorsOf({ windows: [{ ...good, timeZone: zone }] }), zone).toEqual([]);
    expect(isTimeZone('America/Argentina/Buenos_Aires')).toBe(true);
  });

  it('names an unknown zone, and refuses offsets and padding', () => {
    expect(errorsOf({ windows: [{ ...good, timeZone: 'Mars/Olympus' }] })).toEqual([
      {
        path: '/windows/0/timeZone',
        message:
          'Unknown time zone "Mars/Olympus": expected an IANA time zone name such as "Europe/Berlin", "America/New_York" or "UTC"',
      },
    ]);
    for (const zone of ['', '+05:30', 'UTC+1', ' Europe/Berlin', 'Europe/Berlin/', '../etc/localtime', 'Local'])
      expect(errorsOf({ windows: [{ ...good, timeZone: zone }] }), zone).toEqual([
        { path: '/windows/0/timeZone', message: expect.stringContaining(`Unknown time zone ${JSON.stringify(zone)}`) },
      ]);
  });

  it('names a bad time: "25:00", "24:00", "7:5", "12:60"', () => {
    expect(errorsOf({ windows: [{ ...good, from: '25:00' }] })).toEqual([
      {
        path: '/windows/0/from',
        message:
          'Invalid time "25:00": expected "HH:MM" on a 24-hour clock, 00:00 to 23:59 (midnight as an end is "00:00")',
      },
    ]);
    for (const time of ['24:00', '7:5', '07:5', '7:05', '12:60', '12:00:00', ''])
      expect(errorsOf({ windows: [good, { ...good, to: time }] }), time).toEqual([
        { path: '/windows/1/to', message: expect.stringContaining(`Invalid time ${JSON.stringify(time)}`) },
      ]);
  });

  it('names empty days, a day named twice and a day misspelled', () => {
    expect(errorsOf({ windows: [{ ...good, days: [] }] })).toEqual([
      {
        path: '/windows/0/days',
        message: 'days must name at least one day: "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" or "Sun"',
      },
    ]);
    expect(errorsOf({ windows: [{ ...good, days: ['Sat', 'Sun', 'Sat'] }] })).toEqual([
      { path: '/windows/0/days/2', message: '"Sat" is named twice in days' },
    ]);
    expect(errorsOf({ windows: [{ ...good, days: ['Monday'] }] })).toEqual([
      { path: '/windows/0/days/0', message: expect.stringContaining('"Mon"') },
    ]);
  });

  it('takes 1 to 20 windows', () => {
    expect(errorsOf({ windows: Array.from({ length: 20 }, () => good) })).toEqual([]);
    expect(errorsOf({ windows: Array.from({ length: 21 }, () => good) })).toEqual([
      { path: '/windows', message: 'windows holds at most 20 windows' },
    ]);
    expect(errorsOf({ windows: [] })).toEqual([
      { path: '/windows', message: 'windows must hold at least one window (leave it out for no windows)' },
    ]);
  });

  it('refuses a notBefore without an offset', () => {
    expect(errorsOf({ notBefore: '2026-06-01T09:00:00' })).toEqual([
      { path: '/notBefore', message: expect.any(String) },
    ]);
    expect(errorsOf({ notBefore: '2026-06-01T09:00:00Z' })).toEqual([]);
    expect(errorsOf({ notBefore: '2026-06-01T09:00:00-03:30' })).toEqual([]);
  });

  it('is strict: an unknown or missing property is named', () => {
    const { timeZone: _zone, ...noZone } = good;
    expect(errorsOf({ windows: [{ ...noZone, timezone: 'UTC' }] })).toEqual([
      { path: '/windows/0/timeZone', message: expect.any(String) },
      { path: '/windows/0/timezone', message: 'Unknown property "timezone"' },
    ]);
    expect(errorsOf({ notBefore: '2026-06-01T09:00:00Z', window: [good] })).toEqual([
      { path: '/window', message: 'Unknown property "window"' },
    ]);
  });
});
