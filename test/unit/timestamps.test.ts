import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { parseTimestamptz } from '../../src/db/timestamps.js';

// pg's own parser (postgres-date), which the fast path must agree with on every input.
const reference = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ) as (value: string) => Date | number | null;
const asNumber = (d: Date | number | null) => (d instanceof Date ? d.getTime() : d);

describe('parseTimestamptz', () => {
  const cases = [
    '2026-11-23 08:12:28.421+00',
    '2026-11-23 08:12:28+00',
    '2026-11-23 08:12:28.4+00',
    '2026-11-23 08:12:28.42+00',
    '2026-11-23 08:12:28.421123+00',
    '2026-11-23 08:12:28.999999+00',
    '2026-11-23 08:12:28.000001+00',
    '2026-11-23 23:59:59.5-03',
    '2026-01-01 00:00:00+05:30',
    '2026-01-01 00:00:00-09:30',
    '1899-12-31 23:59:59+00:09:21',
    '2000-02-29 12:00:00.123+14',
    '1970-01-01 00:00:00+00',
    '1000-01-01 00:00:00+00',
    '9999-12-31 23:59:59.999999+00',
    '0099-06-01 00:00:00+00',
    '0001-01-01 00:00:00+00',
    '0044-03-15 12:00:00+00 BC',
    '12345-01-01 00:00:00+00',
    'infinity',
    '-infinity',
  ];
  for (const text of cases) {
    it(`reads ${text} as pg's own parser does`, () => {
      expect(asNumber(parseTimestamptz(text))).toBe(asNumber(reference(text)));
    });
  }

  it('agrees with pg on 10,000 random times and offsets', () => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const pad = (v: number, w = 2) => String(v).padStart(w, '0');
    for (let k = 0; k < 10_000; k++) {
      const frac =
        rand(7) === 0
          ? ''
          : `.${String(rand(1_000_000))
              .padStart(6, '0')
              .slice(0, 1 + rand(6))}`;
      const zone = [`+00`, `-${pad(rand(12))}`, `+${pad(rand(14))}:${pad(rand(4) * 15)}`][rand(3)];
      const text = `${1000 + rand(9000)}-${pad(1 + rand(12))}-${pad(1 + rand(28))} ${pad(rand(24))}:${pad(rand(60))}:${pad(rand(60))}${frac}${zone}`;
      expect(asNumber(parseTimestamptz(text)), text).toBe(asNumber(reference(text)));
    }
  });

  it('reads what this Postgres writes for a Date it was given', () => {
    const d = new Date('2026-11-23T08:12:28.421Z');
    expect(parseTimestamptz('2026-11-23 08:12:28.421+00').toISOString()).toBe(d.toISOString());
  });
});
