#!/usr/bin/env bash
# uidgen's single-ID HTTP routes next to a bare axum route, in one run, on one machine.
#
# Builds (release) `uidgen` and the example `bare_axum` (an axum route that returns an atomic
# counter), starts both with one tokio worker each, and measures them alternately with the same
# wrk settings, round after round, so a machine that gets busier part-way hurts both alike. Prints
# req/s per round and each uidgen route's ratio to the bare route of the same round. Then the same
# over HTTP/2 cleartext (h2c, prior knowledge) with h2load, when it is installed.
#
#   scripts/bench-http.sh                 # 3 rounds, wrk -t1 -c32 -d8s
#   ROUNDS=5 DURATION=8s scripts/bench-http.sh
#   SKIP_BUILD=1 scripts/bench-http.sh    # reuse target/release
#   CALLGRIND=1 scripts/bench-http.sh     # instructions per request instead (valgrind, h2load)
#
# CALLGRIND=1 runs both servers under callgrind and, per route, counts what the server executes
# in user space for REQUESTS (default 20,000) HTTP/1.1 requests after a 2,000-request warm-up
# (`callgrind_control -z` before, `-d` after): deterministic, unlike req/s, so it is the figure
# to compare on a machine that other work keeps busy. It prints instructions per request and
# leaves the dumps in CALLGRIND_DIR (default: a fresh temporary directory) for
# `callgrind_annotate --inclusive=yes`.
#
# The absolute figures move from machine to machine; the ratio is the figure to compare
# (docs/BENCHMARKS.md records it).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
CONNECTIONS=${CONNECTIONS:-32}
BARE_PORT=${BARE_PORT:-18090}
UIDGEN_PORT=${UIDGEN_PORT:-18091}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

command -v wrk >/dev/null || { echo "error: wrk is not installed (Debian: apt-get install wrk)" >&2; exit 1; }
command -v curl >/dev/null || { echo "error: curl is not installed" >&2; exit 1; }

if [ -z "${SKIP_BUILD:-}" ]; then
  # Apart: an example activates the dev-dependencies' features (bare_axum's `matched-path`),
  # which one build of both would give the server too.
  cargo build --release --locked -p uidgen-server --bin uidgen
  cargo build --release --locked -p uidgen-server --example bare_axum
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Under callgrind a server takes seconds to start.
wait_ready() { # url
  for _ in $(seq 1 "${READY_TRIES:-200}"); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "error: $1 did not answer" >&2
  return 1
}

under=()
if [ -n "${CALLGRIND:-}" ]; then
  command -v valgrind >/dev/null || { echo "error: valgrind is not installed (Debian: apt-get install valgrind)" >&2; exit 1; }
  command -v h2load >/dev/null || { echo "error: h2load is not installed (Debian: apt-get install nghttp2-client)" >&2; exit 1; }
  CALLGRIND_DIR=${CALLGRIND_DIR:-$(mktemp -d)}
  mkdir -p "$CALLGRIND_DIR"
  READY_TRIES=1200
  under=(valgrind --tool=callgrind --callgrind-out-file="$CALLGRIND_DIR/callgrind.out.%p")
fi

TOKIO_WORKER_THREADS=1 "${under[@]}" "$TARGET_DIR/release/examples/bare_axum" "127.0.0.1:$BARE_PORT" \
  2>"$work/bare.log" &
pids+=($!)
# The service as the README starts it: embedded SQLite, the sample segment tag created at start;
# borrowing unbounded (as when docs/BENCHMARKS.md was measured), so batch routes measure the HTTP
# layer rather than the layout's 8,192 IDs a second.
TOKIO_WORKER_THREADS=1 RUST_LOG=warn UIDGEN_STATE_DIR="$work" UIDGEN_STORE="sqlite://$work/uidgen.db" UIDGEN_RING_MAX_BORROW_SECONDS=0 \
  "${under[@]}" "$TARGET_DIR/release/uidgen" serve --listen "127.0.0.1:$UIDGEN_PORT" 2>"$work/uidgen.log" &
pids+=($!)

bare="http://127.0.0.1:$BARE_PORT/id"
base="http://127.0.0.1:$UIDGEN_PORT"
routes=(/api/snowflake/get/x /api/segment/get/leaf-segment-test /genid)
wait_ready "$bare"
for route in "${routes[@]}"; do wait_ready "$base$route"; done

if [ -n "${CALLGRIND:-}" ]; then
  requests=${REQUESTS:-20000}
  instructions() { # pid url -> instructions the server executed per request
    h2load --h1 -n 2000 -c"$CONNECTIONS" "$2" >/dev/null
    callgrind_control -z "$1" >/dev/null 2>&1
    h2load --h1 -n "$requests" -c"$CONNECTIONS" "$2" >"$work/h2load.out"
    grep -q " 0 failed, 0 errored" "$work/h2load.out" || { echo "error: failed requests on $2" >&2; exit 1; }
    callgrind_control -d "$1" >/dev/null 2>&1
    # The dump is written by the server's own thread: wait for the new file.
    local dump=""
    for _ in $(seq 1 100); do
      dump=$(ls -t "$CALLGRIND_DIR"/callgrind.out."$1".* 2>/dev/null | head -1)
      [ -n "$dump" ] && [ "$dump" != "${last_dump:-}" ] && break
      sleep 0.1
    done
    last_dump=$dump
    awk -v n="$requests" '/^(summary|totals):/ { printf "%d", $2 / n; exit }' "$dump"
  }
  echo "callgrind, $requests HTTP/1.1 requests per route (h2load --h1 -c$CONNECTIONS), one tokio worker; dumps in $CALLGRIND_DIR"
  printf '%-36s %22s\n' route instructions/request
  printf '%-36s %22s\n' "bare axum /id" "$(instructions "${pids[0]}" "$bare")"
  for route in "${routes[@]}"; do
    printf '%-36s %22s\n' "$route" "$(instructions "${pids[1]}" "$base$route")"
  done
  exit 0
fi

rps() { # url -> requests per second, as wrk reports it
  wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "$1" | awk '/^Requests\/sec:/ { printf "%d", $2 }'
}

echo "wrk -t1 -c$CONNECTIONS -d$DURATION, one tokio worker per server; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
# Warm both up (connection pools, the segment's first load, page cache) off the record.
wrk -t1 -c"$CONNECTIONS" -d1s "$bare" >/dev/null
for route in "${routes[@]}"; do wrk -t1 -c"$CONNECTIONS" -d1s "$base$route" >/dev/null; done

compare() { # measure-function: every round, each uidgen route right after the bare route
  printf '%-6s %-36s %10s %10s %7s\n' round route req/s bare ratio
  for round in $(seq 1 "$ROUNDS"); do
    for route in "${routes[@]}"; do
      # Alternate, so a machine that gets busier part-way hurts both alike.
      b=$("$1" "$bare")
      u=$("$1" "$base$route")
      ratio=$(awk -v u="$u" -v b="$b" 'BEGIN { printf "%.2f", u / b }')
      printf '%-6s %-36s %10s %10s %7s\n' "$round" "$route" "$u" "$b" "$ratio"
      echo "$1 $route $ratio" >>"$work/ratios"
    done
  done
}

compare rps

h2rps() { # url -> requests per second over h2c, as h2load reports it
  h2load -t1 -c"$CONNECTIONS" -m1 -D"${DURATION%s}" --warm-up-time=1 "$1" |
    awk '/^finished in/ { printf "%d", $4 }'
}

echo
if command -v h2load >/dev/null; then
  echo "HTTP/2 cleartext (prior knowledge): h2load -t1 -c$CONNECTIONS -m1 -D${DURATION%s}"
  compare h2rps
else
  echo "h2load not installed (Debian: apt-get install nghttp2-client): HTTP/2 not measured"
fi

echo
echo "ratio to bare axum, lowest / median / highest over $ROUNDS rounds:"
for measure in rps h2rps; do
  for route in "${routes[@]}"; do
    awk -v m="$measure" -v r="$route" '$1 == m && $2 == r { print $3 }' "$work/ratios" | sort -n |
      awk -v m="$measure" -v r="$route" '{ v[NR] = $1 } END {
        if (NR) printf "  %-5s %-36s %s / %s / %s\n", (m == "rps" ? "h1" : "h2c"), r, v[1], v[int((NR + 1) / 2)], v[NR] }'
  done
done

# A failed request would make a fast figure meaningless: say so.
errors=$(curl -fsS "$base/metrics" | awk '/^uidgen_errors_total/ { n += $2 } END { print n + 0 }')
echo
echo "uidgen error responses during the run: $errors"
