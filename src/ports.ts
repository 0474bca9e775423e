import net from 'node:net';

export interface PortUse {
  port: number;
  /** The setting that chooses it, named in the message. */
  variable: string;
  /** Where it will listen: undefined for every address (the API). */
  host?: string;
  /** What else the user may do instead, e.g. "or set DATABASE_URL to a Postgres of your own". */
  alternative?: string;
}

export class PortInUseError extends Error {}

/**
 * Checks, before anything starts, that every port this start will listen on is free (by listening on
 * it for a moment), so that taken ports are one clear message naming each and its setting, instead of a
 * half-started service, or a Temporal dev server that silently talks to a leftover one. Every port is
 * checked before the message is made: a user who moves one taken port should not find the next only at
 * the next start.
 */
export async function assertPortsFree(uses: PortUse[]): Promise<void> {
  const problems: string[] = [];
  const seen = new Map<number, string>();
  for (const use of uses) {
    if (use.port === 0) continue;
    const other = seen.get(use.port);
    if (other) {
      problems.push(`Port ${use.port} is set for both ${other} and ${use.variable}: give each its own port.`);
      continue;
    }
    seen.set(use.port, use.variable);
    const problem = await tryListen(use.port, use.host);
    if (problem) problems.push(takenMessage(use, problem));
  }
  if (problems.length === 1) throw new PortInUseError(problems[0]!);
  if (problems.length > 1)
    throw new PortInUseError([`${problems.length} ports cannot be used:`, ...problems.map((p) => `  ${p}`)].join('\n'));
}

/** One port's line: what is wrong with it and the setting that moves it (or what to set instead). */
function takenMessage(use: PortUse, problem: string): string {
  const what = problem === 'EADDRINUSE' ? 'is already in use' : `cannot be listened on (${problem})`;
  return (
    `Port ${use.port} (${use.variable}) ${what}. Stop what uses it, or set ${use.variable} to a free port` +
    `${use.alternative ? `, ${use.alternative}` : ''}.`
  );
}

function tryListen(port: number, host: string | undefined): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ port, ...(host ? { host } : {}), exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
