/**
 * The console's one script, served as it is (no build step) under the CSP's `script-src 'self'`. Every page
 * works without it; it only keeps them current and saves round trips:
 * - a plan's page follows the plan's event stream (status, counts, speed, which actions apply), and ends
 *   the stream when the session has (a sign-out, a deleted user);
 * - a plan's actions (and the decisions on Approvals) post without leaving the page;
 * - the Plans list polls a small summary every 2 s;
 * - New plan keeps Plan JSON in step with the form while nobody edits it.
 * It writes text only (`textContent`), never HTML it made; a plan's jobs section is taken whole from the page
 * as the server renders it again (its own escaping), parsed inert by DOMParser.
 */

const main = document.querySelector('main');
const number = (n) => Number(n).toLocaleString('en-US');

function setText(selector, text, root = document) {
  const el = root.querySelector(selector);
  if (el && el.textContent !== text) el.textContent = text;
}

function say(id, text, kind, scope) {
  // A message about one plan of a list (Approvals) goes next to it; else to the page's own place.
  const el = (scope && scope.querySelector(`[data-say="${id}"]`)) || document.getElementById(id);
  if (!el) return;
  el.textContent = text || '';
  el.hidden = !text;
  if (kind) el.dataset.kind = kind;
}

const when = (iso) => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : '—');

/** The plan as the page last heard of it: an action's answer may carry the status alone. */
const known = { status: undefined, pauseReason: null };

/** Shows the plan's state as the stream (or an action) reports it. */
function showPlan(state, labels) {
  if ('pauseReason' in state) known.pauseReason = state.pauseReason;
  if (state.status !== undefined) {
    known.status = state.status;
    setText('[data-field="statusLabel"]', labels[state.status] || `Status ${state.status}`);
    for (const form of document.querySelectorAll('form[data-statuses]')) {
      // Pause is offered to a plan Paused by its schedule too (a manual pause holds across windows).
      const pausedFor = form.dataset.pausedFor;
      form.hidden = !(
        form.dataset.statuses.split(' ').includes(String(state.status)) ||
        (pausedFor && state.status === 7 && known.pauseReason === pausedFor)
      );
    }
  }
  if ('pauseReason' in state) setText('[data-field="pauseReason"]', state.pauseReason || '—');
  if ('resumesAt' in state) setText('[data-field="resumesAt"]', when(state.resumesAt));
  if (state.approvalState) setText('[data-field="approvalState"]', state.approvalState);
  const c = state.jobCounts;
  if (state.startedAt) setText('[data-field="startedAt"]', when(state.startedAt));
  const v = state.verification;
  if (v) {
    setText('[data-field="verified"]', number(v.verified));
    setText('[data-field="unverified"]', number(v.unverified));
    setText('[data-field="verifyPending"]', number(v.pending));
  }
  if (state.drift && state.drift.joined !== null) setText('[data-field="joined"]', number(state.drift.joined));
  if (c) {
    const done = c.completed + c.failed + c.cancelled + (c.skipped || 0);
    const bar = document.querySelector('progress[data-field="progress"]');
    if (bar) {
      bar.max = Math.max(1, c.total);
      bar.value = done;
    }
    setText('[data-field="doneText"]', `${number(done)} of ${number(c.total)}`);
    for (const k of ['completed', 'failed', 'cancelled', 'pending', 'skipped'])
      if (c[k] !== undefined) setText(`[data-field="${k}"]`, number(c[k]));
  }
  if (state.instancesPerSecond !== undefined)
    setText('[data-field="instancesPerSecond"]', number(state.instancesPerSecond));
}

/** The plan's jobs as the server shows them now: the page fetched again, its jobs section swapped in. */
let jobsDue = 0;
let jobsTimer;
function refreshJobs() {
  const wait = Math.max(0, jobsDue - Date.now());
  if (jobsTimer) return;
  jobsTimer = setTimeout(async () => {
    jobsTimer = undefined;
    jobsDue = Date.now() + 2000;
    const current = document.querySelector('section[aria-labelledby="jobs"]');
    if (!current) return;
    try {
      const r = await fetch(location.href, { headers: { accept: 'text/html' }, cache: 'no-store' });
      if (!r.ok) return;
      const page = new DOMParser().parseFromString(await r.text(), 'text/html');
      const fresh = page.querySelector('section[aria-labelledby="jobs"]');
      // Not while someone is inside it (a focused link, an open log): their place would be lost.
      if (fresh && !current.contains(document.activeElement)) current.replaceWith(document.importNode(fresh, true));
    } catch {
      // The next event tries again.
    }
  }, wait);
}

function followPlan() {
  const url = main.dataset.eventsUrl;
  if (!url) return;
  const labels = JSON.parse(main.dataset.statusLabels || '{}');
  let source;
  let ended = false;
  const live = (text) => setText('#live', text);
  const stop = (text) => {
    ended = true;
    if (source) source.close();
    live(text);
  };
  /** The stream broke off: a revoked session ends it for good; anything else is retried. */
  const check = async () => {
    try {
      const r = await fetch('/console/session', { headers: { accept: 'application/json' }, cache: 'no-store' });
      if (r.status === 401) {
        stop('Live updates ended: your session has ended. Sign in again to go on.');
        return;
      }
    } catch {
      // The service is unreachable for now: the retry below finds out when it is back.
    }
    if (ended) return;
    if (source.readyState === EventSource.CLOSED) {
      live('Live updates paused (the service refused the stream for now); trying again in 5 seconds.');
      setTimeout(open, 5000);
    } else {
      live('Live updates interrupted; reconnecting…');
    }
  };
  const open = () => {
    if (ended) return;
    source = new EventSource(url);
    source.addEventListener('open', () => live('Live: this page follows the plan as it runs.'));
    source.addEventListener('progress', (e) => {
      showPlan(JSON.parse(e.data), labels);
      refreshJobs();
    });
    source.addEventListener('done', (e) => {
      const plan = JSON.parse(e.data);
      showPlan({ ...plan, instancesPerSecond: 0 }, labels);
      if (plan.completedAt) setText('[data-field="completedAt"]', when(plan.completedAt));
      if (plan.approval) showPlan({ approvalState: plan.approval.state }, labels);
      const retry = document.querySelector('form[data-retry-failed]');
      if (retry) retry.hidden = !(plan.jobCounts.failed > 0 || (plan.verification && plan.verification.unverified > 0));
      refreshJobs();
      stop('The plan has finished.');
    });
    source.addEventListener('error', () => {
      if (!ended) void check();
    });
  };
  open();
}

/** A plan's action forms post in the background; the stream (and the answer) update the page. */
function enhancePlanActions() {
  const labels = JSON.parse(main.dataset.statusLabels || '{}');
  for (const form of document.querySelectorAll('form[data-enhance="plan-action"]')) {
    const scope = form.closest('[data-scope]');
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      // The button pressed says where the form goes (Reject's formaction beside Approve's action).
      const button = event.submitter;
      const action = button && button.hasAttribute('formaction') ? button.formAction : form.action;
      const buttons = form.querySelectorAll('button');
      for (const b of buttons) b.disabled = true;
      try {
        const response = await fetch(action, {
          method: 'POST',
          body: new URLSearchParams(new FormData(form)),
          headers: { accept: 'application/json' },
        });
        const answer = await response.json().catch(() => ({}));
        if (response.status === 401) {
          location.assign('/console/sign-in?why=ended');
          return;
        }
        if (!response.ok) {
          say('notice', '');
          const errors = (answer.errors || []).map((e) => ` ${e.path || '(form)'}: ${e.message}`).join(';');
          const text = `${answer.title || 'Error'} (${response.status}): ${answer.detail || 'the action failed'}`;
          say('problem', text + errors, undefined, scope);
          return;
        }
        if (answer.location) {
          location.assign(answer.location);
          return;
        }
        say('problem', '', undefined, scope);
        say('notice', answer.notice);
        // The answer carries what the action changed: the status, and the pause reason where it knows it.
        if (answer.status !== undefined) showPlan(answer, labels);
        for (const [k, v] of Object.entries(answer.fields || {})) setText(`[data-field="${k}"]`, v);
      } catch {
        say(
          'problem',
          'The service could not be reached; the action may not have been done. Reload the page to see.',
          undefined,
          scope,
        );
      } finally {
        for (const b of buttons) b.disabled = false;
      }
    });
  }
}

/** The Plans list: status and counts every 2 s, while the page is visible. */
function pollPlans() {
  const table = document.querySelector('table[data-live-url]');
  if (!table) return;
  const url = table.dataset.liveUrl;
  const timer = setInterval(async () => {
    if (document.hidden) return;
    try {
      const response = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
      if (response.status === 401) {
        clearInterval(timer);
        say('list-changed', '');
        return;
      }
      if (!response.ok) return;
      const { items } = await response.json();
      const rows = new Map([...table.querySelectorAll('tr[data-plan-id]')].map((tr) => [tr.dataset.planId, tr]));
      let changed = items.length !== rows.size;
      for (const item of items) {
        const tr = rows.get(item.id);
        if (!tr) {
          changed = true;
          continue;
        }
        for (const k of ['statusLabel', 'progress', 'failed']) setText(`[data-cell="${k}"]`, item[k], tr);
      }
      const note = document.getElementById('list-changed');
      if (note && changed) note.hidden = false;
    } catch {
      // Offline for a moment: the next poll tries again.
    }
  }, 2000);
}

/** A section that says where it lives (the Dashboard's plans): fetched again every 5 s while the page is visible. */
function pollSections() {
  for (const section of document.querySelectorAll('section[data-live-url]')) {
    const url = section.dataset.liveUrl;
    let current = section;
    const timer = setInterval(async () => {
      if (document.hidden) return;
      try {
        const response = await fetch(url, { headers: { accept: 'text/html' }, cache: 'no-store' });
        if (response.status === 401) {
          clearInterval(timer);
          return;
        }
        if (!response.ok) return;
        const fresh = new DOMParser().parseFromString(await response.text(), 'text/html').querySelector('section');
        // Not while someone is inside it (a focused link): their place would be lost.
        if (fresh && !current.contains(document.activeElement)) {
          const node = document.importNode(fresh, true);
          current.replaceWith(node);
          current = node;
        }
      } catch {
        // Offline for a moment: the next poll tries again.
      }
    }, 5000);
  }
}

/** New plan: Plan JSON follows the form until someone edits it (then the server uses what they typed). */
function syncPlanJson() {
  const form = document.querySelector('form[data-enhance="plan-json"]');
  if (!form) return;
  const textarea = form.querySelector('#plan-json');
  const fingerprint = form.querySelector('input[name="plan-json-fingerprint"]');
  // No fingerprint: the page says Plan JSON is in charge (typed, and more than the form can show).
  let edited = fingerprint.value === '' && textarea.value.trim() !== '';
  let timer;
  let asked = 0;
  textarea.addEventListener('input', () => {
    edited = true;
  });
  const sync = async () => {
    const body = new URLSearchParams(new FormData(form));
    body.delete('plan-json');
    body.delete('action');
    const mine = ++asked;
    try {
      const response = await fetch('/console/new-plan/json', {
        method: 'POST',
        body,
        headers: { accept: 'application/json' },
      });
      if (!response.ok) return;
      const answer = await response.json();
      if (edited || mine !== asked) return;
      textarea.value = answer.json;
      fingerprint.value = answer.fingerprint;
    } catch {
      // Plan JSON catches up at the next change or the next button.
    }
  };
  // On a field's change (left, picked, ticked), not each keystroke: every request is an entry of the audit trail.
  form.addEventListener('change', (event) => {
    if (event.target === textarea || edited) return;
    clearTimeout(timer);
    timer = setTimeout(sync, 300);
  });
}

if (main) {
  followPlan();
  enhancePlanActions();
  pollPlans();
  pollSections();
  syncPlanJson();
}
