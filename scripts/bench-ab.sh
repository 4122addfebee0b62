#!/usr/bin/env bash
# Two `uidgen` release binaries side by side, in one run: the served routes of each, measured
# alternately with the same wrk settings, round after round, so a machine that gets busier
# part-way hurts both alike. For "is this build as fast as that one" (a profile, a refactor),
# where scripts/bench-http.sh compares one build with a bare axum route.
#
#   scripts/bench-ab.sh BEFORE/uidgen AFTER/uidgen      # 3 rounds, wrk -t1 -c32 -d8s
#   ROUNDS=4 DURATION=8s scripts/bench-ab.sh A B
#
# Each server runs with the defaults a new user gets (`uidgen serve`, its own embedded SQLite
# store and state directory), with one tokio worker and gRPC off (both would want its port).
# MAX_BORROW_SECONDS=0 runs both as scripts/bench-http.sh does instead, borrowing unbounded: a
# tuned figure, to stand beside the default one. Prints each round's req/s and B/A.
#
#   DURATION=60s ROUNDS=2 scripts/bench-ab.sh A B       # sustained, the defaults
#   MAX_BORROW_SECONDS=0 scripts/bench-ab.sh A B        # tuned: borrowing unbounded
#   ROUTES="/v1/ids?count=1000" scripts/bench-ab.sh A B  # some routes only
set -euo pipefail
A=$1
B=$2
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
CONNECTIONS=${CONNECTIONS:-32}
command -v wrk >/dev/null || { echo "error: wrk is not installed (Debian: apt-get install wrk)" >&2; exit 1; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

start() { # binary port name
  mkdir -p "$work/$3"
  local tuned=()
  [ -n "${MAX_BORROW_SECONDS:-}" ] && tuned=(UIDGEN_RING_MAX_BORROW_SECONDS="$MAX_BORROW_SECONDS")
  env TOKIO_WORKER_THREADS=1 RUST_LOG=warn UIDGEN_STATE_DIR="$work/$3" \
    UIDGEN_STORE="sqlite://$work/$3/uidgen.db" "${tuned[@]}" \
    "$1" serve --listen "127.0.0.1:$2" --grpc-listen "" 2>"$work/$3.log" &
  pids+=($!)
}
ready() { # port
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/api/snowflake/get/x" >/dev/null && return 0
    sleep 0.1
  done
  echo "error: the server on port $1 did not answer; its log:" >&2
  cat "$work"/*.log >&2
  exit 1
}
rps() { wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "$1" | awk '/^Requests\/sec:/ { printf "%d", $2 }'; }

start "$A" 18191 a
start "$B" 18192 b
ready 18191
ready 18192
echo "A: $A"
echo "B: $B"
echo "${MAX_BORROW_SECONDS:+tuned: ring.max_borrow_seconds = $MAX_BORROW_SECONDS; }wrk -t1 -c$CONNECTIONS -d$DURATION, $ROUNDS rounds"
read -r -a routes <<< "${ROUTES:-/api/snowflake/get/x /genid /v1/ids?count=1000}"
for route in "${routes[@]}"; do
  for round in $(seq 1 "$ROUNDS"); do
    a=$(rps "http://127.0.0.1:18191$route")
    b=$(rps "http://127.0.0.1:18192$route")
    echo "$route round $round: A $a req/s, B $b req/s, B/A $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')"
  done
done
