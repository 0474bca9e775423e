import { describe, expect, it } from 'vitest';
import { callsInline } from '../../src/engine/executor.js';

describe('callsInline (WORKER_INLINE_CALL_MAX_MS)', () => {
  it('marks a call whose connection answers within the bound, up to the bound itself', () => {
    expect(callsInline({ inlineCallMaxMs: 10_000 }, { timeoutMs: 10_000 })).toBe(true);
    expect(callsInline({ inlineCallMaxMs: 10_000 }, { timeoutMs: 500 })).toBe(true);
  });

  it('leaves on the calls task queue a call with a longer timeout, any call with the bound at 0 or unset', () => {
    expect(callsInline({ inlineCallMaxMs: 10_000 }, { timeoutMs: 10_001 })).toBe(false);
    expect(callsInline({ inlineCallMaxMs: 0 }, { timeoutMs: 500 })).toBe(false);
    expect(callsInline({}, { timeoutMs: 500 })).toBe(false);
  });

  it('leaves a configuration without its timeout on the queue', () => {
    expect(callsInline({ inlineCallMaxMs: 10_000 }, {})).toBe(false);
    expect(callsInline({ inlineCallMaxMs: 10_000 }, { timeoutMs: '500' })).toBe(false);
  });
});
