import { describe, expect, it } from 'vitest';
import { convertValue } from '../../src/engine/values.js';

describe('variable value conversion', () => {
  it.each([
    ['Int32', 42, 42],
    ['Int32', '42', 42],
    ['Int64', 9007199254740991, 9007199254740991],
    ['Double', '4.5', 4.5],
    ['Boolean', 'true', true],
    ['String', 7, '7'],
    ['DateTime', '2026-11-22T04:30:00+01:00', '2026-11-22T03:30:00.000Z'],
    ['DateTime', '2026-11-22T04:30:00.1234-0130', '2026-11-22T06:00:00.123Z'],
    ['DateTime', '2024-02-29', '2024-02-29T00:00:00.000Z'],
    ['DateTime', '2000-02-29 23:59:59', '2000-02-29T23:59:59.000Z'],
    // Without an offset: UTC, whatever the server's time zone.
    ['DateTime', '2026-06-01T10:00', '2026-06-01T10:00:00.000Z'],
    ['DateTime', '0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['DateTime', '9999-12-31T23:59:59Z', '9999-12-31T23:59:59.000Z'],
    ['Int32', ' 42 ', 42],
    ['Double', '-1.5e3', -1500],
    ['Object', { a: [1] }, { a: [1] }],
    ['Int32', null, null],
  ] as const)('%s accepts %j as %j', (type, input, expected) => {
    expect(convertValue(type, input)).toEqual({ ok: true, value: expected });
  });

  it.each([
    ['Int32', 4.2],
    ['Int32', 2 ** 31],
    ['Int32', 'forty-two'],
    ['Int64', 2 ** 60],
    ['Double', 'abc'],
    ['Boolean', 'yes'],
    ['Boolean', 1],
    ['String', { a: 1 }],
    ['DateTime', 'next tuesday'],
    // Dates and times that do not exist are refused, not rolled over.
    ['DateTime', '2026-02-31'],
    ['DateTime', '2026-02-29'],
    ['DateTime', '1900-02-29'],
    ['DateTime', '2026-13-01'],
    ['DateTime', '2026-04-31T10:00'],
    ['DateTime', '2026-01-01T24:00'],
    ['DateTime', '2026-01-01T10:60'],
    ['DateTime', '2026-01-01T10:00:60'],
    ['DateTime', '2026-01-01T10:00+24:00'],
    ['DateTime', '0000-01-01'],
    ['DateTime', '0001-01-01T00:00:00+01:00'],
    ['DateTime', '9999-12-31T23:00:00-05:00'],
    ['Int32', '0x10'],
    ['Int32', '0b1'],
    ['Int64', '1_000'],
    ['Double', 'Infinity'],
    ['Double', ''],
    ['DateTime', 12],
  ] as const)('%s rejects %j', (type, input) => {
    expect(convertValue(type, input)).toEqual({ ok: false });
  });
});
