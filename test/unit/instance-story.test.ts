import { describe, expect, it } from 'vitest';
import {
  type InstanceStory,
  noSteps,
  STORY_LIMITS,
  stepRan,
  storyLine,
  storyResult,
  withSteps,
} from '../../workflows/instance-story.js';

const story = (o: Partial<InstanceStory> = {}): InstanceStory => ({
  definitionId: 'order-approval',
  activities: 2,
  lastActivities: [{ id: 'start' }, { id: 'wait', status: 'Running' }],
  bookmarks: 1,
  incidents: 0,
  ...o,
});

describe("an instance's story, as its workflow tells it", () => {
  it('says where it stands, its definition and version, and what ran', () => {
    const suspended = { status: 'Running', subStatus: 'Suspended', version: 2, waitingOn: ['approve (wait)'] };
    expect(storyLine({ ...suspended, story: story() })).toBe(
      'suspended, waiting on approve (wait) · order-approval v2 · ran start, wait (Running)',
    );
    const faulted = {
      status: 'Running',
      subStatus: 'Faulted',
      version: 1,
      story: story({
        lastActivities: [{ id: 'start' }, { id: 'charge', status: 'Faulted' }],
        incidents: 3,
        lastIncident: 'charge: card declined',
      }),
    };
    expect(storyLine(faulted)).toBe(
      'faulted: charge: card declined (3 incidents) · order-approval v1 · ran start, charge (Faulted)',
    );
    const cancelled = { status: 'Finished', subStatus: 'Cancelled', version: 1 };
    expect(storyLine({ ...cancelled, story: story({ cause: 'plan c-1' }) })).toMatch(/^cancelled by plan c-1 · /);
    expect(storyLine({ ...cancelled, story: story() })).toMatch(/^cancelled · /);
    // A word of a relay of the release before: no story, the status in words only.
    expect(storyLine(suspended)).toBe('suspended, waiting on approve (wait)');
  });

  it('counts what ran beyond the last few it names, and past its count', () => {
    const long = story({
      activities: 1234,
      lastActivities: ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id })),
      bookmarks: 3500,
    });
    const t = { status: 'Running', subStatus: 'Suspended', version: 1, waitingOn: ['e1 (w1)', 'e2 (w2)'] };
    expect(storyLine({ ...t, story: long })).toBe(
      'suspended, waiting on e1 (w1), e2 (w2) and 3,498 more · order-approval v1 · ran 1,234 activities, the last: a, b, c, d, e',
    );
    expect(storyLine({ ...t, story: { ...long, activities: 1000, moreActivities: true } })).toContain(
      'ran over 1,000 activities, the last: a, b, c, d, e',
    );
  });

  it("adds the steps this workflow ran since the word: counted, the last few named, the word's story unchanged", () => {
    const since = noSteps();
    for (const id of ['call', 'end']) stepRan(since, id);
    const word = story();
    const told = withSteps(word, since);
    expect(told).toMatchObject({
      activities: 4,
      lastActivities: [{ id: 'start' }, { id: 'wait', status: 'Running' }, { id: 'call' }, { id: 'end' }],
    });
    expect(word.activities).toBe(2);
    for (let i = 0; i < 20; i++) stepRan(since, `step-${i}`);
    expect(since.last).toHaveLength(STORY_LIMITS.lastActivities);
    expect(withSteps(word, since)).toMatchObject({ activities: 24 });
    const result = storyResult({ status: 'Finished', subStatus: 'Finished', version: 1, story: word }, since);
    expect(result.executedActivityIds).toEqual(['step-15', 'step-16', 'step-17', 'step-18', 'step-19']);
    expect(result).toMatchObject({ instance: 'Finished/Finished', activityCount: 24, definitionId: 'order-approval' });
  });

  it('stays within about 1 KB whatever the names, as the relay bounds them', () => {
    const long = 'x'.repeat(STORY_LIMITS.name);
    const worst = story({
      definitionId: long,
      activities: STORY_LIMITS.countedActivities,
      moreActivities: true,
      lastActivities: Array.from({ length: STORY_LIMITS.lastActivities }, () => ({ id: long, status: 'Canceled' })),
      bookmarks: 100_000,
      incidents: 100_000,
      lastIncident: 'y'.repeat(STORY_LIMITS.incident),
      cause: 'z'.repeat(STORY_LIMITS.cause),
    });
    const waitingOn = Array.from({ length: STORY_LIMITS.waitingOn }, () => `${long} (${long})`);
    for (const [status, subStatus] of [
      ['Running', 'Suspended'],
      ['Running', 'Faulted'],
      ['Finished', 'Cancelled'],
    ] as const) {
      const t = { status, subStatus, version: 12345, waitingOn, story: worst };
      expect(Buffer.byteLength(storyLine(t))).toBeLessThan(1024);
      // The result names the bookmarks and the incident beside the summary: under 2 KB at the very worst.
      expect(Buffer.byteLength(JSON.stringify(storyResult(t)))).toBeLessThan(2048);
    }
  });
});
