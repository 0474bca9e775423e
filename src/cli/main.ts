import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { registerAudit } from './commands/audit.js';
import { registerConnections } from './commands/connections.js';
import { registerDefinitions } from './commands/definitions.js';
import { registerFindFix } from './commands/find-fix.js';
import { registerIdentity } from './commands/identity.js';
import { registerInstances } from './commands/instances.js';
import { registerPolicy } from './commands/governance.js';
import { registerPlans } from './commands/plans.js';
import { registerPrincipals } from './commands/principals.js';
import { registerRuns } from './commands/runs.js';
import { Cli, type Io } from './context.js';
import { type CliEnvironment, cliEnvironment } from './credentials.js';
import { CliFailure, exitCodeOf, humanProblem, jsonProblem, problemOf } from './failure.js';
import { positive } from './options.js';

/**
 * `wfa`: the service from a terminal. Human tables by default, `--json` for scripts; a failure prints the
 * problem's detail and the paths of the offending fields (src/cli/failure.ts), never a stack. Each group of
 * commands registers itself from src/cli/commands/, in the order `wfa --help` lists them.
 */
const COMMAND_GROUPS = [
  registerIdentity,
  registerDefinitions,
  registerInstances,
  registerPlans,
  registerFindFix,
  registerPolicy,
  registerRuns,
  registerConnections,
  registerPrincipals,
  registerAudit,
];

export async function runCli(
  argv: string[],
  env: CliEnvironment = cliEnvironment(),
  io: Io = defaultIo(),
): Promise<number> {
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
    io.out(packageVersion());
    return 0;
  }
  const program = new Command('wfa');
  const cli = new Cli(program, argv, env, io);
  describeProgram(program, cli);
  for (const register of COMMAND_GROUPS) register(program, cli);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return cli.exitCode;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    const problem = problemOf(err, cli.target);
    io.err(cli.wantsJson() ? jsonProblem(problem) : humanProblem(problem));
    return exitCodeOf(err);
  }
}

/** The global options, and commander's own output (help, usage errors) written through `io`. */
function describeProgram(program: Command, cli: Cli): void {
  program
    .description('Bulk, safe alterations of workflow instances: the CLI of workflow-alterations')
    // `wfa --version` (runCli): the program's, only as its first word, since a command may have a --version of its
    // own (`definitions counts --version 2`) that commander would otherwise take for the program's anywhere.
    .addHelpText('after', '\n`wfa --version` (or -V) prints the version of wfa.')
    .option('--url <url>', 'the service URL (WFA_URL; default: the one `wfa login` stored, else http://localhost:3000)')
    .option('--json', 'machine-readable JSON output; a failure is {"error": {…}} on standard error')
    .option('--timeout <seconds>', 'how long a request may take', positive, 60)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => cli.io.out(s.replace(/\n$/, '')),
      writeErr: (s) => cli.io.err(s.replace(/\n$/, '')),
      // A usage error (unknown option, missing argument) is a problem like any other under --json.
      outputError: (s, write) =>
        write(
          cli.wantsJson() ? jsonProblem(problemOf(new CliFailure(s.replace(/^error: /, '').trim(), 2), cli.target)) : s,
        ),
    });
}

/** The version in the package's package.json, found by the package's name from src/cli or dist/src/cli alike. */
function packageVersion(): string {
  return (createRequire(import.meta.url)('workflow-alterations/package.json') as { version: string }).version;
}

function defaultIo(): Io {
  return {
    out: (t) => process.stdout.write(`${t}\n`),
    err: (t) => process.stderr.write(`${t}\n`),
    isTty: Boolean(process.stdout.isTTY),
  };
}
