import { describe, expect, it } from 'vitest';
import { recheckAfterMs } from '../../activities/calls.js';

describe('how soon a call whose earlier delivery is still out looks again', () => {
  it('after 2 s while that delivery is young, a quarter of its time out later, never past 10 s', () => {
    expect(recheckAfterMs(0)).toBe(2_000);
    expect(recheckAfterMs(1_500)).toBe(2_000);
    expect(recheckAfterMs(8_000)).toBe(2_000);
    expect(recheckAfterMs(20_000)).toBe(5_000);
    expect(recheckAfterMs(40_000)).toBe(10_000);
    expect(recheckAfterMs(300_000)).toBe(10_000);
  });

  it('looks about 35 times over a five-minute claim a dead worker left (150 at a flat 2 s)', () => {
    let looks = 0;
    for (let t = 5_000; t < 305_000; t += recheckAfterMs(t)) looks++;
    expect(looks).toBeLessThanOrEqual(40);
    expect(looks).toBeGreaterThanOrEqual(30);
  });
});
