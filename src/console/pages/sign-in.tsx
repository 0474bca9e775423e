import { Hono } from 'hono';
import { login, logout } from '../../auth/tokens.js';
import { DomainError } from '../../errors.js';
import { type AppEnv, clientAddress } from '../../api/context.js';
import type { Problem } from '../../api/problem.js';
import { ProblemBox, problemOf } from '../components.js';
import { field, readForm } from '../form.js';
import { HOME_PATH, Layout, renderPage, type Shell } from '../layout.js';
import { clearSessionCookie, setSessionCookie } from '../session.js';
import type { ShellOf } from '../shell.js';

/** Why the sign-in page was shown instead of what was asked for (`?why=`). */
const REASONS: Record<string, string> = {
  ended: 'Your session has ended (signed out elsewhere, expired, or your user was removed). Sign in again.',
  'signed-out': 'You have signed out.',
  required: 'Sign in to use the console.',
};

function SignInPage(props: { shell: Shell; username?: string; note?: string | undefined; problem?: Problem }) {
  return (
    <Layout shell={props.shell} title="Sign in">
      <h1>Sign in</h1>
      {props.note ? (
        <p class="notice" role="status">
          {props.note}
        </p>
      ) : null}
      <ProblemBox problem={props.problem} heading="Could not sign in" />
      <form method="post" action="/console/sign-in">
        <label for="username">Username</label>
        <input
          id="username"
          name="username"
          autocomplete="username"
          required
          value={props.username ?? ''}
          autofocus={!props.username}
        />
        <label for="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          autofocus={!!props.username}
        />
        <button type="submit">Sign in</button>
      </form>
      <p class="muted">
        Users and their permissions are made through the API (<code>POST /identity/users</code>); the console can do
        exactly what your permissions allow.
      </p>
    </Layout>
  );
}

/**
 * Signing in and out. Sign-in runs `login`, the code of `POST /identity/login` (its throttling per client
 * address and per user name included, with the same client address), and keeps the new session's refresh
 * token in the session cookie; sign-out revokes the session as `POST /identity/logout` does.
 */
export function signInRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/sign-in', (c) =>
    renderPage(c, <SignInPage shell={shell(c)} note={REASONS[c.req.query('why') ?? ''] ?? undefined} />),
  );
  app.post('/sign-in', async (c) => {
    const form = await readForm(c);
    const username = field(form, 'username');
    const password = form.get('password') ?? '';
    const { pool, tokens } = c.get('deps');
    try {
      if (!username || !password) throw new DomainError('Enter a user name and a password', 400);
      const pair = await login(pool, tokens, username, password, clientAddress(c));
      setSessionCookie(c, pair.refreshToken);
      c.get('logger').info({ user: username }, 'console: signed in');
      return c.redirect(HOME_PATH, 303);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      const problem = await problemOf(err, c);
      if (err.status === 429)
        c.header('retry-after', String((err as { retryAfterSeconds?: number }).retryAfterSeconds));
      return renderPage(
        c,
        <SignInPage shell={shell(c)} username={username} problem={problem} />,
        err.status === 400 ? 400 : err.status === 429 ? 429 : 401,
      );
    }
  });
  return app;
}

/** Sign-out: the session is revoked server-side (its cookie stops working on every node), then forgotten. */
export function signOutRoute() {
  const app = new Hono<AppEnv>();
  app.post('/sign-out', async (c) => {
    const { pool, tokens } = c.get('deps');
    await logout(pool, tokens, c.get('principal'));
    clearSessionCookie(c);
    return c.redirect('/console/sign-in?why=signed-out', 303);
  });
  return app;
}
