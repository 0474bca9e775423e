import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import type { AppEnv } from '../api/context.js';
import type { PermissionSpec } from '../auth/permissions.js';
import { NotAllowed } from './components.js';
import { Layout, type NavKey, renderPage } from './layout.js';
import { may, permissionName, type ShellOf } from './shell.js';

/** Who may see a page, and what the others are told instead: its title and tab, and what they may not do. */
export interface PageAccess {
  title: string;
  nav: NavKey;
  what: string;
  permission: PermissionSpec;
}

/** The page a user without the permission gets instead (403): the page's frame and title, and why not. */
export function notAllowedPage(c: Context<AppEnv>, shell: ShellOf, access: PageAccess) {
  return renderPage(
    c,
    <Layout shell={shell(c)} title={access.title} nav={access.nav}>
      <h1>{access.title}</h1>
      <NotAllowed what={access.what} permission={permissionName(c, access.permission)} />
    </Layout>,
    403,
  );
}

/**
 * Runs before a page's handler: a user without the page's permission gets the 403 page, and the handler
 * runs only for the others. The check is the API's own (`may`), so the console shows what the API would answer.
 */
export const gate = (shell: ShellOf, access: PageAccess) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (!may(c, access.permission)) return notAllowedPage(c, shell, access);
    await next();
  });
