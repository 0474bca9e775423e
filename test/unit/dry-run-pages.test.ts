import { describe, expect, it } from 'vitest';
import { compileFilter, joinedPlainly, lastJsonString } from '../../src/alterations/filter.js';

describe("the streamed dry-run's pages", () => {
  it('reads the last id of a page from the end of its JSON text, whatever the id holds', () => {
    for (const ids of [['a'], ['a', 'b'], ['x"y'], ['a', 'ends\\'], ['a', '\\"', 'q'], ['a', 'ü "\\\\" \n']]) {
      // As json_agg writes it: elements separated by ", ".
      const text = `[${ids.map((id) => JSON.stringify(id)).join(', ')}]`;
      expect(lastJsonString(text)).toBe(ids[ids.length - 1]);
    }
  });

  it('sends ids as Postgres joined them only when each is a JSON string as it is', () => {
    const joined = (ids: string[]) => ids.join('","');
    for (const ids of [['a'], ['a', 'b'], ['0190c1e2-7d3a-7b1c-9f00-1234567890ab', 'ü', 'x y', 'a,b', '\u007f']])
      expect(joinedPlainly(joined(ids), ids.length)).toBe(true);
    for (const ids of [
      ['x"y'],
      ['a', 'ends\\'],
      ['a', '\\"', 'q'],
      ['a', 'line\nbreak'],
      ['tab\t'],
      ['a", "b'],
      ['","'],
    ])
      expect(joinedPlainly(joined(ids), ids.length)).toBe(false);
  });

  it('compiles a list of one to an equality and a longer list to ANY, without duplicates', () => {
    expect(compileFilter({ definitionIds: ['d'] }, 't')).toMatchObject({
      where: expect.stringContaining('i.definition_id = $2::text'),
      params: ['t', 'd'],
    });
    expect(compileFilter({ definitionIds: ['d', 'd'] }, 't').params).toEqual(['t', 'd']);
    expect(compileFilter({ definitionIds: ['d', 'e'] }, 't')).toMatchObject({
      where: expect.stringContaining('i.definition_id = ANY($2::text[])'),
      params: ['t', ['d', 'e']],
    });
  });
});
