import { describe, expect, it } from 'vitest';
import { compileFilter, lastJsonString } from '../../src/alterations/filter.js';

describe("the streamed dry-run's pages", () => {
  it('reads the last id of a page from the end of its JSON text, whatever the id holds', () => {
    for (const ids of [['a'], ['a', 'b'], ['x"y'], ['a', 'ends\\'], ['a', '\\"', 'q'], ['a', 'ü "\\\\" \n']]) {
      // As json_agg writes it: elements separated by ", ".
      const text = `[${ids.map((id) => JSON.stringify(id)).join(', ')}]`;
      expect(lastJsonString(text)).toBe(ids[ids.length - 1]);
    }
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
