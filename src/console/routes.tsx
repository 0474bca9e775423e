import { type Context, Hono } from 'hono';
import type { AppEnv } from '../api/context.js';
import { handleError, problem } from '../api/problem.js';
import { planEventStream } from '../api/plan-event-stream.js';
import type { Principal } from '../auth/principal.js';
import { ALTERATIONS_VIEW } from '../auth/route-permissions.js';
import type { TenantCounter } from '../shares.js';
import { IMMUTABLE, loadAssets } from './assets.js';
import { ProblemBox, problemOf } from './components.js';
import { checkInputRule } from './form.js';
import { HOME_PATH, Layout, renderPage } from './layout.js';
import { approvalsRoutes } from './pages/approvals.js';
import { auditRoutes } from './pages/audit.js';
import { definitionsRoutes } from './pages/definitions.js';
import { fleetRoutes } from './pages/fleet.js';
import { instanceRoutes } from './pages/instance.js';
import { instancesRoutes } from './pages/instances.js';
import { newPlanRoutes } from './pages/new-plan.js';
import { planRoutes } from './pages/plan.js';
import { plansRoutes } from './pages/plans.js';
import { signInRoutes, signOutRoute } from './pages/sign-in.js';
import { usersRoutes } from './pages/users.js';
import { checkSameOrigin, clearSessionCookie, isConsolePath, ownOrigin } from './session.js';
import { requirePermission, type ShellOf } from './shell.js';

/**
 * The console's Content-Security-Policy, on every answer under /console: only this origin's scripts,
 * styles, images (and the data: images Pico's stylesheet draws its icons with), fetches and form targets;
 * no inline script or style; no <base>; never framed.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
};

/** Answers read by the script (JSON, the event stream): problems and 401s as problem+json, never a page. */
function wantsData(c: Context<AppEnv>): boolean {
  const path = c.req.path;
  if (path.startsWith('/console/live/') || path.endsWith('/events') || path === '/console/session') return true;
  if (path === '/console/new-plan/json') return true;
  const accept = c.req.header('accept') ?? '';
  return accept.includes('application/json') || accept.includes('text/event-stream');
}

/**
 * The operator's console (contract section 11), mounted by the API app at /console: server-rendered pages
 * (hono/jsx) whose forms post and redirect, one small script for live updates, on the API's own port. It
 * calls the API's domain functions, commands and permission checks for the session's principal, so it can
 * do exactly what the API would let its user do. `streams` is the API's count of open event streams, so a
 * plan page's stream takes its place in the tenant's share (EVENT_STREAMS_PER_TENANT) like any other.
 */
export function consoleRoutes(streams: TenantCounter, shutdown?: AbortSignal) {
  const assets = loadAssets();
  const shell: ShellOf = (c) => ({
    assets: assets.byName,
    user: c.get('principal') as Principal | undefined,
    banner: c.get('consoleBanner'),
  });
  const app = new Hono<AppEnv>();

  app.use('*', async (c, next) => {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.header(k, v);
    await next();
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(k, v);
    // An answer that sets or clears the session cookie (sign-in, sign-out, an ended session) is never stored
    // by a cache: the cookie carries the session's refresh token.
    if (c.res.headers.has('set-cookie')) c.res.headers.set('cache-control', 'no-store');
  });

  app.get('/assets/:file', (c) => {
    const asset = assets.byPath.get(c.req.path);
    if (!asset) return c.text('No such asset (its hash names another version)\n', 404);
    return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, {
      'content-type': asset.contentType,
      'cache-control': IMMUTABLE,
    });
  });

  app.use('*', async (c, next) => {
    checkInputRule(c);
    // Every state-changing request, the sign-in's included, must come from the console's own pages.
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') checkSameOrigin(c);
    await next();
  });

  app.get('/', (c) => {
    const identity = c.get('identity');
    return c.redirect(identity && 'principal' in identity ? HOME_PATH : '/console/sign-in', 302);
  });
  app.route('/', signInRoutes(shell));

  // Everything below needs a session. A request without one (never signed in, signed out, revoked, the
  // user deleted) goes to the sign-in page, or gets a 401 where the script asked.
  app.use('*', async (c, next) => {
    const identity = c.get('identity');
    if (identity && 'principal' in identity) {
      c.set('principal', identity.principal);
      return next();
    }
    const ended = identity !== undefined && 'refused' in identity;
    // Only a page clears the refused cookie: a script's request (a live page noticing first) leaves it, so
    // the next page the user opens, in any tab, still says the session ended rather than asking to sign in.
    if (wantsData(c)) {
      return problem(c, 401, ended ? 'The session has ended; sign in again' : 'Not signed in', undefined, {
        'cache-control': 'no-store',
      });
    }
    if (ended) clearSessionCookie(c);
    return c.redirect(`/console/sign-in?why=${ended ? 'ended' : 'required'}`, 303);
  });
  // A page says so while Temporal is not reachable (the readiness /health/ready answers, cached): plans and
  // the instances' steps wait until it is back, and the page would otherwise look as if nothing happened.
  app.use('*', async (c, next) => {
    if (c.req.method === 'GET' && !wantsData(c)) {
      // What the last readiness check found, never waited for: a check that is slow because Temporal is away
      // must not hold the page (a stale answer starts a new check in the background, for the next page).
      const checks = c.get('deps').probes?.lastKnown();
      if (checks && checks.temporal !== 'ok')
        c.set(
          'consoleBanner',
          'Temporal is not reachable: plans and the instances’ steps wait until it is back (see /health/ready).',
        );
    }
    await next();
  });
  app.route('/', signOutRoute());
  app.get('/session', (c) => {
    c.header('cache-control', 'no-store');
    return c.json({ name: c.get('principal').name }, 200);
  });
  app.route('/', fleetRoutes(shell));
  app.route('/', definitionsRoutes(shell));
  app.route('/', auditRoutes(shell));
  app.route('/', plansRoutes(shell));
  app.route('/', newPlanRoutes(shell));
  app.get('/plans/:planId/events', (c) => {
    requirePermission(c, ALTERATIONS_VIEW);
    // The page also shows when a plan paused by its schedule goes on, and its approval's state, live.
    return planEventStream(c, c.req.param('planId'), streams, shutdown, (plan) => ({
      resumesAt: plan.resumesAt,
      approvalState: plan.approval?.state ?? null,
      startedAt: plan.startedAt,
      verification: plan.verification,
      drift: plan.drift,
    }));
  });
  app.route('/', planRoutes(shell));
  app.route('/', instancesRoutes(shell));
  app.route('/', instanceRoutes(shell));
  app.route('/', approvalsRoutes(shell));
  app.route('/', usersRoutes(shell));

  app.all('*', (c) => {
    if (c.req.path === '/console/' && c.req.method === 'GET') return c.redirect(HOME_PATH, 302);
    return renderPage(
      c,
      <Layout shell={shell(c)} title="Not found">
        <h1>Not found</h1>
        <p>There is no page at this address.</p>
        <p>
          <a href="/console/plans">Plans</a>
        </p>
      </Layout>,
      404,
    );
  });

  // A problem is shown as the API would answer it: its status, detail and field errors; as problem+json to
  // the script, as a page to a person.
  app.onError(async (err, c) => {
    if (wantsData(c)) return handleError(err, c);
    const p = await problemOf(err, c);
    const back = backLink(c.req.header('referer'), ownOrigin(c));
    return renderPage(
      c,
      <Layout shell={shell(c)} title={p.title}>
        <h1>{p.status === 403 ? 'Not allowed' : p.status === 404 ? 'Not found' : 'That did not work'}</h1>
        <ProblemBox problem={p} />
        <p>
          {back ? <a href={back}>Back</a> : null} <a href="/console/plans">Plans</a>
        </p>
      </Layout>,
      p.status as 400,
    );
  });
  return app;
}

/**
 * The page the browser came from, as a link back: only a console page of this origin, and written as a path,
 * so that it cannot lead anywhere else (`http://host:port.evil.example/`, `http://host:port@evil.example/`
 * start with the origin's characters and are other hosts).
 */
function backLink(referer: string | undefined, origin: string | undefined): string | undefined {
  if (!referer || !origin) return undefined;
  try {
    const from = new URL(referer);
    if (from.origin.toLowerCase() !== origin || !isConsolePath(from.pathname)) return undefined;
    return `${from.pathname}${from.search}`;
  } catch {
    return undefined;
  }
}
