import { describe, expect, it } from 'vitest';
import { ALTERATION_TYPES, type Alteration, type AlterationType } from '../../src/alterations/types/index.js';
import { planSummary } from '../../src/alterations/summary.js';

// The one line the Temporal UI shows of a plan (its static summary): what each alteration does, in that
// type's own words, then to which instances. One example per type; a type added without one fails here.
const EXAMPLES: { [K in AlterationType]: [Extract<Alteration, { type: K }>, string] } = {
  ModifyVariable: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }, 'ModifyVariable amount'],
  Migrate: [{ type: 'Migrate', targetVersion: 3 }, 'Migrate to version 3'],
  ScheduleActivity: [{ type: 'ScheduleActivity', activityId: 'note' }, 'ScheduleActivity note'],
  CancelActivity: [{ type: 'CancelActivity', activityId: 'wait' }, 'CancelActivity wait'],
  Cancel: [{ type: 'Cancel' }, 'Cancel'],
};
const filter = { definitionIds: ['order-approval'] };

describe('the Temporal summary of a plan', () => {
  it('names every registered alteration type', () => {
    expect(Object.keys(EXAMPLES).sort()).toEqual(Object.keys(ALTERATION_TYPES).sort());
  });

  it.each(Object.values(EXAMPLES))('of %j says %s', (alteration, words) => {
    expect(planSummary({ alterations: [alteration], filter })).toBe(`${words} on instances of order-approval`);
  });

  it('of a plan of every type lists each in order', () => {
    const all = Object.values(EXAMPLES);
    expect(planSummary({ alterations: all.map(([a]) => a), filter: { workflowInstanceIds: ['a', 'b'] } })).toBe(
      'ModifyVariable amount, Migrate to version 3, ScheduleActivity note, CancelActivity wait, Cancel on 2 listed instances',
    );
  });

  it('of a revert names the plan it reverts', () => {
    expect(planSummary({ alterations: [], filter: {}, revertOf: 'p1' })).toBe(
      'Revert plan p1: restore the instances it changed',
    );
  });
});
