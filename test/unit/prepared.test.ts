import { describe, expect, it } from 'vitest';
import { prepared } from '../../src/db/pool.js';

describe('prepared', () => {
  it('names a text once, the same name each time, another text another name, and none past 256 texts', () => {
    const first = prepared('SELECT $1::int AS a', [1]);
    expect(first).toEqual({ name: expect.stringMatching(/^wfa_\d+$/), text: 'SELECT $1::int AS a', values: [1] });
    expect(prepared('SELECT $1::int AS a', [2])).toEqual({ ...first, values: [2] });
    const other = prepared('SELECT $1::int AS b', [1]);
    expect(other.name).toBeDefined();
    expect(other.name).not.toBe(first.name);
    const names = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const q = prepared(`SELECT ${i} AS n`, []);
      if (q.name !== undefined) names.add(q.name);
    }
    // 256 in all, two of them taken above: the rest go unnamed, as before, and the names stay distinct.
    expect(names.size).toBe(254);
    expect(prepared('SELECT 299 AS n', [])).toEqual({ text: 'SELECT 299 AS n', values: [] });
    expect(prepared('SELECT $1::int AS a', [3]).name).toBe(first.name);
  });
});
