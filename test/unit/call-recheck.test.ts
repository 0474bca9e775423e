import { describe, expect, it } from 'vitest';
import { recheckAfterMs, shareTurnBackMs } from '../../activities/calls.js';

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

describe("how soon a call turned back over its tenant's share asks again", () => {
  it("from 0.5 s, growing with the turn-backs of late and with how long the tenant's places stood still", () => {
    expect(shareTurnBackMs(1, 5, 0)).toBe(600);
    expect(shareTurnBackMs(20, 5, 0)).toBe(2_500);
    // Places that stood still a little: the turn-backs decide.
    expect(shareTurnBackMs(1, 5, 800)).toBe(600);
    // Half the still time, up to 30 s; never past a minute.
    expect(shareTurnBackMs(1, 5, 40_000)).toBe(20_000);
    expect(shareTurnBackMs(1, 5, 300_000)).toBe(30_000);
    expect(shareTurnBackMs(1_000, 5, 300_000)).toBe(60_000);
  });

  /**
   * 55 calls of one tenant wait behind its 5 places, held for the whole minute by an endpoint that hangs (the
   * noisy bench's tenant A): how often they come back, each time a timer, two workflow tasks and an activity
   * task on the Temporal server. The turn-backs of late fade as the worker counts them (time constant 10 s).
   */
  const comebacks = (stillFrom: number | null): number => {
    let count = 0;
    let countAt = 0;
    let asks = 0;
    const due = Array.from({ length: 55 }, (_, i) => i * 10);
    for (;;) {
      const i = due.indexOf(Math.min(...due));
      const t = due[i]!;
      if (t >= 120_000) break;
      if (t >= 60_000) asks++;
      count = count * Math.exp(-(t - countAt) / 10_000) + 1;
      countAt = t;
      due[i] = t + shareTurnBackMs(count, 5, stillFrom === null ? 0 : t - stillFrom);
    }
    return asks;
  };

  it('comes back far less often while the places stand still than if they turned over', () => {
    const still = comebacks(0);
    const turning = comebacks(null);
    // In the second minute: 429 asks for places that turn over (7 a second), 110 for places that stand still.
    expect(turning).toBeGreaterThan(300);
    expect(still).toBeLessThan(turning / 3);
  });
});
