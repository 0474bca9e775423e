import { describe, expect, it, vi } from 'vitest';
import { PlaceWaiters, RequestScheduler, ShareTimeoutError, TenantCounter, TenantGate } from '../../src/shares.js';

describe('TenantCounter', () => {
  it('refuses a tenant past its share before the overall limit, and gives places back', () => {
    const c = new TenantCounter(2, 3);
    expect([c.tryTake('a'), c.tryTake('a'), c.tryTake('a')]).toEqual(['taken', 'taken', 'tenant']);
    expect(c.tryTake('b')).toBe('taken');
    expect(c.tryTake('c')).toBe('overall');
    c.give('a');
    expect(c.tryTake('c')).toBe('taken');
    expect(c.tryTake('a')).toBe('overall');
  });

  it('lets a few callers at their share wait for a place their tenant gives back, first come first served', async () => {
    const c = new TenantCounter(2, 10, 4);
    expect([c.tryTake('a'), c.tryTake('a')]).toEqual(['taken', 'taken']);
    const order: string[] = [];
    const a3 = c.take('a', 5_000).then((r) => (order.push('a3'), r));
    const a4 = c.take('a', 5_000).then((r) => (order.push('a4'), r));
    // Another tenant under its share is not queued.
    expect(await c.take('b', 5_000)).toBe('taken');
    expect(c.queued).toBe(2);
    c.give('a');
    expect(await a3).toBe('taken');
    // The place went to the waiter, not back to the pool: a newcomer is still refused.
    expect(c.tryTake('a')).toBe('tenant');
    c.give('a');
    expect(await a4).toBe('taken');
    expect(order).toEqual(['a3', 'a4']);
    expect(c.total).toBe(3);
  });

  it("lets a tenant wait on seats past its share while they are free, and gives them back to another's share", async () => {
    // 5 seats; each tenant's share (of places, and of seats) is 2.
    const c = new TenantCounter(2, 20, 5);
    for (const t of ['a', 'a', 'b', 'b', 'x', 'x']) expect(c.tryTake(t)).toBe('taken');
    // Alone, a's burst waits on every seat, none more.
    const a = [0, 1, 2, 3, 4].map(() => c.take('a', 5_000));
    expect(c.queued).toBe(5);
    expect(await c.take('a', 5_000)).toBe('tenant');
    // b, under its share of seats, takes the seat of a's last caller, who is refused as if it had come now; and b's
    // second the seat of a's fourth.
    const b = [c.take('b', 5_000)];
    expect(await a[4]).toBe('tenant');
    b.push(c.take('b', 5_000));
    expect(await a[3]).toBe('tenant');
    // At its share, b takes no more.
    expect(await c.take('b', 5_000)).toBe('tenant');
    // x's first takes a's third; x's second finds no tenant past its share: refused, a's and b's shares kept.
    const x = c.take('x', 5_000);
    expect(await a[2]).toBe('tenant');
    expect(await c.take('x', 5_000)).toBe('tenant');
    expect(c.queued).toBe(5);
    // The seats still held serve each tenant first come, first served.
    const order: string[] = [];
    const settled = (
      [
        ['a0', a[0]],
        ['a1', a[1]],
        ['b0', b[0]],
        ['b1', b[1]],
        ['x0', x],
      ] as const
    ).map(([name, waiter]) => waiter?.then(() => order.push(name)));
    for (const t of ['b', 'a', 'x', 'a', 'b']) c.give(t);
    await Promise.all(settled);
    expect(order).toEqual(['b0', 'a0', 'x0', 'a1', 'b1']);
    expect(await Promise.all([...a.slice(0, 2), ...b, x])).toEqual(['taken', 'taken', 'taken', 'taken', 'taken']);
    expect(c.queued).toBe(0);
    expect(c.total).toBe(6);
  });

  it('takes a seat back from the tenant furthest past its share, never for a caller that does not wait', async () => {
    vi.useFakeTimers();
    try {
      // 7 seats, a share of 2: a waits on 3 of them, then b on 4.
      const c = new TenantCounter(2, 20, 7);
      for (const t of ['a', 'a', 'b', 'b', 'x', 'x']) expect(c.tryTake(t)).toBe('taken');
      const a = [0, 1, 2].map(() => c.take('a', 5_000));
      const b = [0, 1, 2, 3].map(() => c.take('b', 5_000));
      expect(c.queued).toBe(7);
      // A caller that would not wait takes no seat from anyone.
      expect(await c.take('x', 0)).toBe('tenant');
      expect(c.queued).toBe(7);
      // x's caller takes the seat of b's last (b is 2 past its share, a 1); the next, of a's or b's last; then none.
      const x = [c.take('x', 5_000)];
      expect(await b[3]).toBe('tenant');
      x.push(c.take('x', 5_000));
      expect(await Promise.race([a[2], b[2]])).toBe('tenant');
      expect(await c.take('x', 5_000)).toBe('tenant');
      expect(c.queued).toBe(7);
      // The seats taken back leave no timer behind: when the others' waits run out, the count falls to nothing, not below.
      await vi.advanceTimersByTimeAsync(5_001);
      expect(await Promise.all([a[0], a[1], b[0], b[1], ...x])).toEqual(Array(6).fill('tenant'));
      expect(c.queued).toBe(0);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses a waiter once its time is up, and waits for no one when the queue overall is full', async () => {
    const c = new TenantCounter(1, 10, 1);
    expect(c.tryTake('a')).toBe('taken');
    expect(c.tryTake('b')).toBe('taken');
    const waiting = c.take('a', 20);
    // One waiter in all: b's caller is refused at once.
    expect(await c.take('b', 5_000)).toBe('tenant');
    expect(await waiting).toBe('tenant');
    expect(c.queued).toBe(0);
    // Gone from the queue: a later give frees the place.
    c.give('a');
    expect(c.tryTake('a')).toBe('taken');
  });
});

describe('TenantGate', () => {
  it('lets a tenant hold its share, queues its further callers first come first served, and leaves others alone', async () => {
    const gate = new TenantGate(2);
    const a1 = await gate.acquire('a', 1_000);
    const a2 = await gate.acquire('a', 1_000);
    const order: string[] = [];
    const a3 = gate.acquire('a', 1_000).then((release) => (order.push('a3'), release));
    const a4 = gate.acquire('a', 1_000).then((release) => (order.push('a4'), release));
    // Another tenant is not queued behind a.
    const b = await gate.acquire('b', 10);
    b();
    a1();
    (await a3)();
    a2();
    (await a4)();
    expect(order).toEqual(['a3', 'a4']);
  });

  it('times out a waiting caller, and an aborted one leaves the queue at once; a release counts once', async () => {
    const gate = new TenantGate(1);
    const held = await gate.acquire('a', 1_000);
    await expect(gate.acquire('a', 50)).rejects.toBeInstanceOf(ShareTimeoutError);
    const controller = new AbortController();
    const waiting = gate.acquire('a', 10_000, controller.signal);
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    held();
    held();
    const next = await gate.acquire('a', 50);
    await expect(gate.acquire('a', 50)).rejects.toBeInstanceOf(ShareTimeoutError);
    next();
  });
});

describe('RequestScheduler', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('gives a tenant its whole share while the loop is quiet or it is alone, and one request at a time when both are busy', async () => {
    const load = { value: 0 };
    const s = new RequestScheduler(3, load);
    const a = [await s.acquire('a', 100), await s.acquire('a', 100), await s.acquire('a', 100)];
    await expect(s.acquire('a', 30)).rejects.toBeInstanceOf(ShareTimeoutError);
    for (const r of a) r();
    load.value = 0.9;
    // Alone on a busy loop: still its share.
    const alone = [await s.acquire('a', 100), await s.acquire('a', 100)];
    expect(s.limitFor('a')).toBe(3);
    // Another tenant comes: each may have one in flight; b, with none, is let in at once.
    const b = await s.acquire('b', 10);
    expect(s.limitFor('a')).toBe(1);
    for (const r of alone) r();
    const a1 = await s.acquire('a', 100);
    await expect(s.acquire('a', 30)).rejects.toBeInstanceOf(ShareTimeoutError);
    a1();
    b();
  });

  it('makes a queueing tenant rest after each request on a contended loop, as long as the request took', async () => {
    const load = { value: 0.9 };
    const s = new RequestScheduler(4, load);
    const b = await s.acquire('b', 10);
    const first = await s.acquire('a', 100);
    const waiting = s.acquire('a', 1_000);
    await sleep(40);
    const released = performance.now();
    first(); // held ~40 ms, with a waiter: a rests ~40 ms before its next turn
    const next = await waiting;
    expect(performance.now() - released).toBeGreaterThanOrEqual(30);
    next();
    b();
  });
});

describe('PlaceWaiters', () => {
  /** A counter, its waiters on a clock the test moves, and the workflows woken, in order; `gone` are not found. */
  const setUp = (perTenant = 1, overall = 10) => {
    let now = 1_000;
    const woken: string[] = [];
    const gone = new Set<string>();
    const counter = new TenantCounter(perTenant, overall, 2);
    const waiters = new PlaceWaiters(
      counter,
      async (id) => {
        woken.push(id);
        return !gone.has(id);
      },
      () => now,
      1_000,
    );
    return { counter, waiters, woken, gone, tick: (ms: number) => (now += ms) };
  };
  const settle = () => new Promise((r) => setTimeout(r, 0));

  it('wakes the first waiter of the tenant whose place freed, one per place, in the order they came', () => {
    const { counter, waiters, woken } = setUp();
    expect(counter.tryTake('a')).toBe('taken');
    expect(counter.tryTake('b')).toBe('taken');
    waiters.add('a', 'wf-1', 30_000);
    waiters.add('a', 'wf-2', 30_000);
    waiters.add('b', 'wf-3', 30_000);
    // Turned back again, wf-1 keeps its place in line.
    waiters.add('a', 'wf-1', 30_000);
    counter.give('a');
    expect(woken).toEqual(['wf-1']);
    // wf-1's call took the place and waits no more; the next place of a goes to wf-2, not to b's waiter.
    waiters.remove('a', 'wf-1');
    expect(counter.tryTake('a')).toBe('taken');
    counter.give('a');
    expect(woken).toEqual(['wf-1', 'wf-2']);
    waiters.stop();
  });

  it('wakes a waiter at most once per freed place, never one whose own timer is due', () => {
    const { counter, waiters, woken, tick } = setUp(2);
    waiters.add('a', 'wf-1', 5_000);
    waiters.add('a', 'wf-2', 500);
    expect(counter.tryTake('a')).toBe('taken');
    tick(600);
    // wf-2's timer brought it back already: only wf-1 is woken, and a second freed place wakes no one again.
    counter.give('a');
    expect(woken).toEqual(['wf-1']);
    expect(counter.tryTake('a')).toBe('taken');
    counter.give('a');
    expect(woken).toEqual(['wf-1']);
    // Turned back again (asked, found the place taken), it may be woken again.
    waiters.add('a', 'wf-1', 5_000);
    expect(counter.tryTake('a')).toBe('taken');
    counter.give('a');
    expect(woken).toEqual(['wf-1', 'wf-1']);
    // Its own timer due, the next place wakes no one and its entry is gone.
    tick(6_000);
    expect(counter.tryTake('a')).toBe('taken');
    counter.give('a');
    expect(woken).toEqual(['wf-1', 'wf-1']);
    expect(waiters.size).toBe(0);
    waiters.stop();
  });

  it('gives the place of a waiter whose workflow is gone to the next in line', async () => {
    const { counter, waiters, woken, gone } = setUp();
    expect(counter.tryTake('a')).toBe('taken');
    waiters.add('a', 'wf-cancelled', 30_000);
    waiters.add('a', 'wf-2', 30_000);
    gone.add('wf-cancelled');
    counter.give('a');
    await settle();
    expect(woken).toEqual(['wf-cancelled', 'wf-2']);
    expect(waiters.size).toBe(1);
    waiters.stop();
  });

  it('wakes the first in line, once a second, when a place goes to a caller waiting inside the worker', async () => {
    const { counter, waiters, woken, tick } = setUp(1, 2);
    expect(counter.tryTake('a')).toBe('taken');
    expect(counter.tryTake('b')).toBe('taken');
    waiters.add('a', 'wf-1', 30_000);
    waiters.add('c', 'wf-c', 30_000);
    waiters.add('a', 'wf-2', 30_000);
    const inside = counter.take('a', 5_000);
    counter.give('a');
    expect(await inside).toBe('taken');
    // The place stayed with tenant a: c's waiter, refused by the limit overall, is not woken for it.
    expect(woken).toEqual(['wf-1']);
    // Another place handed on inside the same second wakes no one more; one a second later does.
    const again = counter.take('a', 5_000);
    counter.give('a');
    expect(await again).toBe('taken');
    expect(woken).toEqual(['wf-1']);
    tick(1_000);
    const third = counter.take('a', 5_000);
    counter.give('a');
    expect(await third).toBe('taken');
    expect(woken).toEqual(['wf-1', 'wf-2']);
    waiters.stop();
  });

  it('wakes a waiter of another tenant with room when a place frees under the limit overall, none at its share', () => {
    const { counter, waiters, woken } = setUp(1, 2);
    expect(counter.tryTake('a')).toBe('taken');
    expect(counter.tryTake('b')).toBe('taken');
    // c was refused by the limit overall; a's waiter is at its share (a holds its one place).
    waiters.add('a', 'wf-a', 30_000);
    waiters.add('c', 'wf-c', 30_000);
    counter.give('b');
    expect(woken).toEqual(['wf-c']);
    waiters.stop();
  });

  it('sweeps every interval: as many waiters as the tenant has places free, again those woken a while ago', async () => {
    const woken: string[] = [];
    const counter = new TenantCounter(2, 10);
    const waiters = new PlaceWaiters(counter, async (id) => (woken.push(id), true), Date.now, 20, 40);
    expect([counter.tryTake('a'), counter.tryTake('a')]).toEqual(['taken', 'taken']);
    waiters.add('a', 'wf-1', 60_000);
    waiters.add('a', 'wf-2', 60_000);
    waiters.add('a', 'wf-3', 60_000);
    await new Promise((r) => setTimeout(r, 70));
    // No room: the sweep wakes no one.
    expect(woken).toEqual([]);
    counter.give('a');
    counter.give('a');
    expect(woken).toEqual(['wf-1', 'wf-2']);
    // Their calls went elsewhere: the sweep wakes wf-3, never woken, first, then wf-1 again (two places free).
    await new Promise((r) => setTimeout(r, 150));
    expect(woken[2]).toBe('wf-3');
    expect(woken.filter((id) => id === 'wf-1').length).toBeGreaterThanOrEqual(2);
    for (const id of ['wf-1', 'wf-2', 'wf-3']) waiters.remove('a', id);
    const after = woken.length;
    await new Promise((r) => setTimeout(r, 60));
    expect(woken.length).toBe(after);
    expect(waiters.size).toBe(0);
    waiters.stop();
  });

  it('wakes no more in a sweep than the limit overall leaves free, whatever each tenant has', async () => {
    const woken: string[] = [];
    const counter = new TenantCounter(2, 3);
    const waiters = new PlaceWaiters(counter, async (id) => (woken.push(id), true), Date.now, 20);
    expect([counter.tryTake('x'), counter.tryTake('x')]).toEqual(['taken', 'taken']);
    // b and c were refused by the limit overall; one place is free in all, and each has room under its share.
    for (const t of ['b', 'c', 'd']) waiters.add(t, `wf-${t}`, 60_000);
    // One sweep's wakes all happen in one turn of the event loop: looked at as soon as there are any.
    while (woken.length === 0) await new Promise((r) => setTimeout(r, 1));
    expect(woken.length).toBe(1);
    waiters.stop();
  });
});
