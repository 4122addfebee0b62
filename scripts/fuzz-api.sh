#!/usr/bin/env bash
# Fuzz the HTTP API from its own description: schemathesis reads /openapi.json of a real
# `uidgen serve` (sharded mode on against the local Redis, segment mode on a fresh SQLite
# store, admin routes enabled, fallback worker ids leased to clients, the masked form on with
# one key) and sends what the document allows, then what it forbids, then chains of calls
# (stateful phase). Any failure of schemathesis's default checks fails the run: a 5xx, a
# request the document allows that the server refuses, a response the document does not
# describe, a request the document forbids that the server takes (one exception, explained in
# scripts/schemathesis.toml). It runs twice:
# with the admin token, and without (every admin route must then answer 401, as described).
#
# Usage: scripts/fuzz-api.sh [path/to/uidgen]   (default: target/debug/uidgen, built if missing)
# FUZZ_EXAMPLES sets schemathesis's --max-examples (default 40 per operation and phase). The
# script's own variables are not UIDGEN_ ones: the server refuses names it does not know.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-target/debug/uidgen}
# Its one exception to the default checks, and why: scripts/schemathesis.toml.
config=$PWD/scripts/schemathesis.toml
examples=${FUZZ_EXAMPLES:-40}
redis_url=${UIDGEN_REDIS_URL:-redis://127.0.0.1:6379}

# shellcheck source=scripts/venv.sh
. scripts/venv.sh
ensure_venv

[ -x "$bin" ] || cargo build --locked -p uidgen-server --bin uidgen

work=$(mktemp -d "${TMPDIR:-/tmp}/uidgen-fuzz.XXXXXX")
prefix="uidgen-fuzz-$$."
token="fuzz-admin-token-$$-$RANDOM$RANDOM"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  # The run's Redis lists, by its own key prefix.
  if command -v redis-cli >/dev/null; then
    redis-cli -u "$redis_url" --scan --pattern "${prefix}*" | xargs -r redis-cli -u "$redis_url" del >/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Borrowing unbounded: the fuzzer asks for tens of millions of IDs in a minute, thousands of
# times the baidu layout's 8,192 a second, and with the default bound (60 s) its batches of
# 100,000 would wait some 12 s each for the clock, past its 10 s timeout (waiting under the
# bound is tested in crates/uidgen-server/tests/serve/ring_load.rs).
# A port nobody listens on: bind 0, read it back, let go.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
UIDGEN_STATE_DIR="$work" UIDGEN_STORE="sqlite://$work/uidgen.db" \
UIDGEN_SHARDED_ENABLED=true UIDGEN_REDIS_URL="$redis_url" UIDGEN_SHARDED_KEY_PREFIX="$prefix" \
UIDGEN_ADMIN_TOKEN="$token" UIDGEN_GRPC_LISTEN="" RUST_LOG=warn \
UIDGEN_RING_MAX_BORROW_SECONDS=0 \
UIDGEN_MASK_KEYS="1:8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b" \
UIDGEN_WORKER_RANGE=1-4000000 UIDGEN_WORKER_FALLBACK_RANGE=4000001-max \
  "$bin" serve --listen "127.0.0.1:$port" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; echo "error: uidgen serve exited" >&2; exit 1; }
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/server.log" >&2; exit 1; }

run() { # what, extra schemathesis args...
  local what=$1; shift
  printf '\n--- schemathesis, %s\n' "$what"
  # Its example database and reports stay in the scratch directory.
  (cd "$work" && "$VENV/bin/schemathesis" --config-file "$config" run "http://127.0.0.1:$port/openapi.json" \
    --max-examples "$examples" --phases examples,coverage,fuzzing,stateful \
    --generation-database none --no-color "$@")
}
status=0
run "with the admin token" -H "Authorization: Bearer $token" || status=1
run "without the admin token" || status=1
if [ "$status" != 0 ]; then
  echo "error: schemathesis found failures (above); the server's log:" >&2
  tail -n 50 "$work/server.log" >&2
fi
exit "$status"
