import { describe, expect, it } from 'vitest';
import { BUILTIN_ACTIVITIES } from '../../src/engine/activity-types.js';
import { HANDLED_TYPES } from '../../src/engine/handlers/index.js';

describe('the activity handler registry', () => {
  it('executes exactly the activity types the catalog describes', () => {
    expect([...HANDLED_TYPES].sort()).toEqual(BUILTIN_ACTIVITIES.map((a) => a.typeName).sort());
  });
});
