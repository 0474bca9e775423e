import type { Command } from 'commander';
import type { Client } from '../client/index.js';
import { type Bounds, connect, usable } from './connect.js';
import { type CliEnvironment, loadCredentials } from './credentials.js';
import { safeText, shellWord } from './format.js';
import { nextPageCommand } from './paging.js';
import { type Target, targetOf } from './target.js';
import { watchPlan } from './watch.js';

/** Where the CLI writes: standard output and error, and whether the output is a terminal. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  isTty: boolean;
}

/** The options every command takes, before its name. */
export interface GlobalOptions {
  url?: string;
  json?: boolean;
  timeout: number;
}

/** An answer larger than this is refused (a plan with its first 1,000 jobs is a few MB at most). */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** The service sends a keep-alive on an event stream every 15 s: four missed ones mean it is gone. */
const STREAM_IDLE_MS = 60_000;

/**
 * What every command of one `wfa` run shares: its arguments, environment and output, the global options,
 * the client, and the exit code a command sets when the call succeeded but what it reports did not (a
 * watched plan with failed jobs, a run with a failed instance).
 */
export class Cli {
  /** Where the CLI talks to, once known: failures name it. */
  target: Target | undefined;
  exitCode = 0;

  constructor(
    private readonly program: Command,
    readonly argv: string[],
    readonly env: CliEnvironment,
    readonly io: Io,
  ) {}

  get options(): GlobalOptions {
    return this.program.opts<GlobalOptions>();
  }

  /** --json, also when commander stopped before reading it (an error in the arguments before it). */
  wantsJson(): boolean {
    return Boolean(this.options.json) || optionWords(this.argv).includes('--json');
  }

  /** What the CLI reads of a server, broken or hostile: a time limit per request and a size limit per answer. */
  bounds(): Bounds {
    return {
      timeoutMs: this.options.timeout * 1000,
      maxResponseBytes: MAX_RESPONSE_BYTES,
      streamIdleTimeoutMs: STREAM_IDLE_MS,
    };
  }

  /** The answer: `json` as it is with --json, else `human()`, shown and never obeyed (control characters escaped). */
  print(human: () => string, json: unknown): void {
    this.io.out(this.options.json ? JSON.stringify(json, null, 2) : safeText(human()));
  }

  /** The service to talk to (--url, WFA_URL, the stored URL, the default), and a client signed in to it. */
  async client(): Promise<Client> {
    const stored = await loadCredentials(this.env.configDir);
    this.target = usable(targetOf(this.options.url, this.env.url, stored?.url));
    return connect(this.env, stored, this.target.url, this.bounds());
  }

  /** Follows a plan to its end; its exit code. */
  watch(client: Client, planId: string): Promise<number> {
    return watchPlan(client, planId, {
      json: Boolean(this.options.json),
      ...this.io,
      watchAgain: this.watchAgain(planId),
    });
  }

  /** How a list command prints its pages. */
  paging() {
    return { json: Boolean(this.options.json), out: this.io.out, err: this.io.err };
  }

  /** The command that prints the page after `cursor`. */
  more = (cursor: string): string => nextPageCommand(this.argv, cursor);

  /** How to follow a plan again (after Ctrl-C), with the --url this command was given. */
  private watchAgain(planId: string): string {
    const url = this.options.url;
    return ['wfa', ...(url ? ['--url', url] : []), 'plans', 'watch', planId].map(shellWord).join(' ');
  }
}

/** The arguments before `--` (after it, `--json` is an operand). */
function optionWords(argv: string[]): string[] {
  const end = argv.indexOf('--');
  return end < 0 ? argv : argv.slice(0, end);
}
