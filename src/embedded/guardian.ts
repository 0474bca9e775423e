import { type ChildProcess, spawn } from 'node:child_process';

/**
 * The parent-death watch: the embedded Postgres and dev server run in process groups of their own (a
 * Ctrl-C reaches only the service, which stops them last), so nothing would stop them if the service
 * process itself died (kill -9, an OOM kill). A small shell in a process group of its own reads a pipe
 * from the service; the pipe closes when the service is gone, however it went, and the shell then stops
 * every child still registered: its signal first, SIGKILL after its grace period.
 *
 * The service registers a child when it starts it and forgets it as soon as it has exited, so a pid the
 * system hands out again is never signalled.
 */
const WATCH_SCRIPT = `
children=""
while read -r cmd pid sig grace; do
  case "$cmd" in
    watch) children="$children $pid:$sig:$grace" ;;
    forget) kept=""; for c in $children; do [ "\${c%%:*}" = "$pid" ] || kept="$kept $c"; done; children="$kept" ;;
  esac
done
for c in $children; do
  (
    pid=\${c%%:*}; rest=\${c#*:}; sig=\${rest%%:*}; grace=\${rest#*:}
    kill -s "$sig" "$pid" 2>/dev/null || exit 0
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt "$((grace * 10))" ]; do sleep 0.1; i=$((i + 1)); done
    kill -s KILL "$pid" 2>/dev/null
  ) &
done
wait
`;

let watcher: ChildProcess | undefined;

function theWatcher(): ChildProcess | undefined {
  if (process.platform === 'win32') return undefined;
  if (watcher?.stdin?.writable) return watcher;
  watcher = spawn('/bin/sh', ['-c', WATCH_SCRIPT], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  // A missing /bin/sh is no reason to stop the service: the children are then stopped only in order.
  watcher.once('error', () => undefined);
  watcher.stdin?.on('error', () => undefined);
  // The watch must never keep the service's event loop alive.
  watcher.unref();
  (watcher.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return watcher;
}

export interface Guard {
  /** The signal that stops the child in order (without SIG), e.g. INT for Postgres's fast shutdown. */
  signal: 'INT' | 'TERM';
  /** Seconds the child gets after that signal before SIGKILL. */
  graceSeconds: number;
}

/** Registers `child` with the watch until it exits. */
export function guardChild(child: ChildProcess, guard: Guard): void {
  const pid = child.pid;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const w = theWatcher();
  if (!w?.stdin) return;
  w.stdin.write(`watch ${pid} ${guard.signal} ${Math.max(1, Math.round(guard.graceSeconds))}\n`);
  child.once('exit', () => {
    if (w.stdin?.writable) w.stdin.write(`forget ${pid}\n`);
  });
}
