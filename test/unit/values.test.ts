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
    ['DateTime', 12],
  ] as const)('%s rejects %j', (type, input) => {
    expect(convertValue(type, input)).toEqual({ ok: false });
  });
});
