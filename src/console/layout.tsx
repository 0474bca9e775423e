import type { Context } from 'hono';
import type { Child, PropsWithChildren } from 'hono/jsx';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { Principal } from '../auth/principal.js';
import type { AppEnv } from '../api/context.js';
import type { Asset, AssetName } from './assets.js';

/** What every page's frame needs: the assets' hashed URLs and who is signed in (none on the sign-in page). */
export interface Shell {
  assets: Record<AssetName, Asset>;
  user?: Pick<Principal, 'name' | 'tenantId'> | undefined;
  /** What is down that the user should know, said at the top of the page. */
  banner?: string | undefined;
}

/** The console's first page after signing in: the Dashboard (section 12). */
export const HOME_PATH = '/console/dashboard';

export type NavKey =
  'dashboard' | 'incidents' | 'definitions' | 'plans' | 'instances' | 'new-plan' | 'approvals' | 'users' | 'audit';

const NAV: { key: NavKey; href: string; label: string }[] = [
  // The fleet at a glance, what is broken, and where (section 12).
  { key: 'dashboard', href: '/console/dashboard', label: 'Dashboard' },
  { key: 'incidents', href: '/console/incidents', label: 'Incidents' },
  { key: 'definitions', href: '/console/definitions', label: 'Definitions' },
  { key: 'plans', href: '/console/plans', label: 'Plans' },
  { key: 'instances', href: '/console/instances', label: 'Instances' },
  { key: 'new-plan', href: '/console/new-plan', label: 'New plan' },
  // Governance (contract section 10): the Approvals page lists plans awaiting approval (status 8).
  { key: 'approvals', href: '/console/approvals', label: 'Approvals' },
  // Who may act, and who created whom (the records four eyes follow).
  { key: 'users', href: '/console/users', label: 'Users' },
  // Who did what, provably (section 13).
  { key: 'audit', href: '/console/audit', label: 'Audit' },
];

/**
 * The frame of every page: Pico's classless stylesheet and ours, the one script (a module: deferred, and
 * allowed by `script-src 'self'`), the navigation and the main region. No inline script or style.
 */
export function Layout(
  props: PropsWithChildren<{
    shell: Shell;
    title: string;
    nav?: NavKey | undefined;
    /** data-* attributes of <main> the script reads (the plan page's stream URL, …). */
    data?: Record<string, string> | undefined;
  }>,
) {
  const { shell, title, nav } = props;
  const data = Object.fromEntries(Object.entries(props.data ?? {}).map(([k, v]) => [`data-${k}`, v]));
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <link rel="icon" href="data:," />
        <title>{`${title} · Workflow alterations`}</title>
        <link rel="stylesheet" href={shell.assets.pico.path} />
        <link rel="stylesheet" href={shell.assets.console.path} />
        <script type="module" src={shell.assets.script.path}></script>
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header>
          <nav aria-label="Console">
            <ul>
              <li>
                <strong>Workflow alterations</strong>
              </li>
            </ul>
            {shell.user ? (
              <ul>
                {NAV.map((item) => (
                  <li>
                    <a href={item.href} aria-current={item.key === nav ? 'page' : undefined}>
                      {item.label}
                    </a>
                  </li>
                ))}
                <li>
                  <form method="post" action="/console/sign-out">
                    <button type="submit" class="secondary">
                      Sign out
                    </button>
                  </form>
                </li>
              </ul>
            ) : null}
          </nav>
        </header>
        <main id="main" tabindex={-1} {...data}>
          {shell.banner ? (
            <p class="banner" role="alert">
              {shell.banner}
            </p>
          ) : null}
          {props.children}
        </main>
        <footer>
          <small class="muted">
            {shell.user
              ? `Signed in as ${shell.user.name}${shell.user.tenantId === null ? '' : ` (tenant ${shell.user.tenantId})`}. `
              : ''}
            <a href="/docs">API reference</a>
          </small>
        </footer>
      </body>
    </html>
  );
}

/** Answers a page: the doctype and the rendered tree, never cached (pages show a tenant's data). */
export async function renderPage(c: Context<AppEnv>, node: Child, status: ContentfulStatusCode = 200) {
  const html = `<!DOCTYPE html>${(await node)?.toString() ?? ''}`;
  return c.html(html, status, { 'cache-control': 'no-store' });
}
