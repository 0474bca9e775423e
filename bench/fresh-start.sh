#!/usr/bin/env bash
# Clone -> npm ci -> npm start -> /health 200, with HOME pointed at an empty folder (empty npm, Go and
# Temporal CLI caches), then the same again with the warm cache. Prints the timings.
set -uo pipefail
MODE=${1:-cold}
BASE=$(mktemp -d /tmp/fresh-XXXX)
chmod 755 "$BASE"
export HOME=${FRESH_HOME:-$BASE/home}
mkdir -p "$HOME"
unset XDG_CACHE_HOME TEMPORAL_CLI_PATH DATABASE_URL TEMPORAL_ADDRESS GOPATH GOMODCACHE GOCACHE
T0=$(date +%s.%N)
git clone -q "${REPO:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}" "$BASE/repo" && cd "$BASE/repo"
npm ci --no-audit --no-fund > "$BASE/npm.log" 2>&1
T1=$(date +%s.%N)
PORT=39311 EMBEDDED_POSTGRES_PORT=39312 TEMPORAL_DEV_SERVER_PORT=39313 TEMPORAL_UI_PORT=39314 DATA_DIR=$(mktemp -d) \
  npm start > "$BASE/start.out" 2> "$BASE/start.err" &
PID=$!
until curl -sf http://127.0.0.1:39311/health > /dev/null; do
  if ! kill -0 $PID 2>/dev/null; then echo "service exited"; cat "$BASE/start.err"; exit 1; fi
  sleep 1
done
T2=$(date +%s.%N)
kill -INT $PID; wait $PID
echo "mode=$MODE home=$HOME"
echo "clone+npm ci: $(echo "$T1 - $T0" | bc) s"
echo "npm start -> healthy: $(echo "$T2 - $T1" | bc) s"
echo "total: $(echo "$T2 - $T0" | bc) s"
echo "--- stderr of npm start:"; cat "$BASE/start.err" | tr '\r' '\n' | grep -v "building…" | head -20
echo "FRESH_HOME=$HOME"
