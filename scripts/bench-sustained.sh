#!/usr/bin/env bash
# Sustained, not burst (issue 30): a default-configured uidgen server held at load for DURATION
# per figure, beside bare axum and a bare tonic server in the same run, then the duplicate runs.
#
#   scripts/bench-sustained.sh                   # DURATION=600s for every figure (about 2 hours)
#   DURATION=60s scripts/bench-sustained.sh      # a quick look
#   SKIP_BUILD=1 scripts/bench-sustained.sh      # reuse target/release
#
# Builds (release) `uidgen` and, apart (as scripts/bench-http.sh does: examples bring the
# dev-dependencies' features), the examples `bare_axum` (an axum route returning a counter) and
# `bare_tonic` (uidgen's own gRPC IdService answering NextId/NextIds from a counter). Every
# server runs with one tokio worker (TOKIO_WORKER_THREADS=1), and so does every `uidgen bench`
# load driver (DRIVER_THREADS); wrk runs one thread. uidgen is started as a new user starts it:
# `uidgen serve` with no configuration file and no UIDGEN_* variable (the script unsets any it
# inherits), a fresh state directory (XDG_STATE_HOME pointed at a new directory, so the default
# embedded SQLite store and the disposable worker ids start empty), only the listen ports given.
# So: the `baidu` layout, the cached generator, ring.max_borrow_seconds = 60.
#
# Then, each for DURATION, baseline and uidgen alternating so a machine that gets busier
# part-way hurts both alike:
#   1. HTTP single IDs, wrk -t1 -c$CONNECTIONS: bare axum /id, uidgen /api/snowflake/get/bench,
#      bare axum /id, uidgen /genid. Goal: uidgen >= 0.9x the bare run just before it.
#   2. gRPC NextId, `uidgen bench --grpc`, same settings: bare tonic, then uidgen. Goal >= 0.9x.
#   3. Batches of $BATCH: uidgen /v1/ids?count=$BATCH (`uidgen bench --url --batch`); gRPC
#      NextIds count $BATCH on bare tonic (reference) and on uidgen, IDs listed in the answer
#      (`runs` unset, what a client that does not ask for runs gets; GRPC_RUNS=1 asks for runs,
#      as uidgen-client does, on both). Goal: >= 2,000,000 IDs/s.
#   While uidgen serves, its /metrics is sampled every second: the largest
#   uidgen_ring_borrowed_units (x 1 s, the baidu unit) must stay <= 60 s, and the slowest
#   request of every uidgen run <= 1 s. A failed request in these runs fails the run.
#   4. Duplicates across a restart: a new default server loaded with HTTP batches, gRPC NextIds
#      and HTTP single IDs, every ID recorded (`uidgen bench --record`); at DURATION/2 the
#      server gets SIGTERM and is started again on the same state directory; then
#      `uidgen bench check` over every ID. Failed calls while it is down are reported, not
#      fatal. Goal: 0 duplicates.
#   5. Duplicates with three servers on one PostgreSQL store (a fresh database, dropped after):
#      each server loaded alike (HTTP batches and gRPC NextIds, recorded), all checked together.
#      Goal: 0 duplicates, and each server at the batch goal's rate.
#   Recording costs the client CPU, so 4 and 5 are separate runs from the throughput figures.
#
# Prints a table (figure, goal, measured, met?) and writes it, with the machine line, to
# $OUT_DIR/results.md; logs, per-second timelines (CSV) and metric samples stay in $OUT_DIR.
# Exit status: 0 when every goal is met, 1 when one is not, 2 when a step could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-600s}
CONNECTIONS=${CONNECTIONS:-32}
BATCH=${BATCH:-1000}
BATCH_CONNECTIONS=${BATCH_CONNECTIONS:-16}
DUP_CONNECTIONS=${DUP_CONNECTIONS:-8}
DRIVER_THREADS=${DRIVER_THREADS:-1}
PORT_BASE=${PORT_BASE:-18300}
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
OUT_DIR=${OUT_DIR:-$TARGET_DIR/bench-sustained/$(date -u +%Y%m%dT%H%M%SZ)}
# The goals of issue 30.
RATIO_GOAL=0.90
IDS_GOAL=2000000
MAX_LEAD_S=60       # ring.max_borrow_seconds, default
MAX_LATENCY_MS=1000
UNIT_S=1            # the baidu layout counts seconds

die() { echo "error: $*" >&2; exit 2; }
command -v wrk >/dev/null || die "wrk is not installed (Debian: apt-get install wrk)"
command -v curl >/dev/null || die "curl is not installed"
command -v psql >/dev/null || die "psql is not installed (Debian: apt-get install postgresql-client)"

# A default server: nothing inherited may configure it.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^UIDGEN_' || true)

secs=$(awk -v d="$DURATION" 'BEGIN {
  n = d + 0; u = substr(d, length(n "") + 1)
  if (u == "m") n *= 60; else if (u == "h") n *= 3600; else if (u != "" && u != "s") n = -1
  if (n < 2 || n != int(n)) { print "bad"; exit } print n }')
[ "$secs" != bad ] || die "DURATION=$DURATION: give whole seconds (600s, 10m, 60), at least 2"

if [ -z "${SKIP_BUILD:-}" ]; then
  # `uidgen bench` is the load driver here: the `bench` feature builds it in.
  cargo build --release --locked -p uidgen-server --bin uidgen --features bench
  cargo build --release --locked -p uidgen-server --example bare_axum --example bare_tonic
fi
uidgen=$TARGET_DIR/release/uidgen
for bin in "$uidgen" "$TARGET_DIR/release/examples/bare_axum" "$TARGET_DIR/release/examples/bare_tonic"; do
  [ -x "$bin" ] || die "$bin is missing: run without SKIP_BUILD"
done
"$uidgen" bench --help >/dev/null 2>&1 ||
  die "$uidgen has no \`bench\` command (the README's build leaves it out): run without SKIP_BUILD"

mkdir -p "$OUT_DIR/logs" "$OUT_DIR/runs" "$OUT_DIR/rec"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
state=$(mktemp -d)
pids=()
database=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$state"
  [ -n "${KEEP_RECORDINGS:-}" ] || rm -rf "$OUT_DIR/rec"
  if [ -n "$database" ]; then
    psql "$PG_URL/postgres" -qc "DROP DATABASE IF EXISTS $database" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

port() { echo $((PORT_BASE + $1)); }
BARE_AXUM=$(port 0); BARE_TONIC=$(port 1); HTTP=$(port 2); GRPC=$(port 3)

wait_http() { # url
  for _ in $(seq 1 600); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.05; done
  die "$1 did not answer"
}
wait_tcp() { # port
  for _ in $(seq 1 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done
  die "nothing listens on 127.0.0.1:$1"
}

# What uidgen takes for a container (crates/uidgen-worker/src/container.rs, in short).
in_container() {
  [ -e /.dockerenv ] || [ -e /run/.containerenv ] || [ -n "${container:-}" ]
}

started=""
start_uidgen() { # name http-port grpc-port state-home [store-url]
  mkdir -p "$4"
  local env=(XDG_STATE_HOME="$4" TOKIO_WORKER_THREADS=1)
  if [ -n "${5:-}" ]; then
    env+=(UIDGEN_STORE="$5")
  elif in_container; then
    # In a container the zero-config store is refused unless this is stated to be the only
    # instance (issue 36): the one key a default start here needs.
    env+=(UIDGEN_WORKER_SINGLE_INSTANCE=true)
  fi
  env "${env[@]}" "$uidgen" serve --listen "127.0.0.1:$2" --grpc-listen "127.0.0.1:$3" \
    >>"$OUT_DIR/logs/$1.log" 2>&1 &
  started=$!
  pids+=("$started")
  wait_http "http://127.0.0.1:$2/readyz"
}

# /metrics once a second into FILE: unix time, uidgen_ring_borrowed_units, ring_available, IDs
# issued (all routes and methods), error responses. Runs until killed.
sampler=""
start_sampler() { # base-url file
  (
    while :; do
      curl -fsS --max-time 1 "$1/metrics" 2>/dev/null |
        awk -v t="$(date +%s)" '
          /^uidgen_ring_borrowed_units / { b = $2 }
          /^uidgen_ring_available / { a = $2 }
          /^uidgen_ids_issued_total/ { i += $NF }
          /^uidgen_errors_total/ { e += $NF }
          END { if (b != "") printf "%s %s %s %d %d\n", t, b, a, i, e }' >>"$2" || true
      sleep 1
    done
  ) &
  sampler=$!
  pids+=("$sampler")
}
stop_sampler() { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
max_borrowed() { # sample files... -> the largest borrowed units seen ("n/a" without samples)
  cat "$@" 2>/dev/null | awk 'NF >= 2 { if (!n++ || $2 + 0 > m + 0) m = $2 } END { print (n ? m : "n/a") }'
}

# wrk for DURATION on URL, into runs/NAME.wrk (a request slower than 10 s counts as a timeout,
# so the goal's 1 s shows in the latency); then wrk_figures prints "req/s max_ms p99_ms errors".
wrk_run() { # name url
  wrk -t1 -c"$CONNECTIONS" -d"${secs}s" --timeout 10s --latency "$2" >"$OUT_DIR/runs/$1.wrk" ||
    die "wrk $2 failed"
}
wrk_figures() { # name
  awk '
    function ms(v) {
      if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0
      if (v ~ /m$/) return v * 60000; if (v ~ /s$/) return v * 1000; return v + 0 }
    /^ +Latency / && !seen { max = ms($4); seen = 1 }
    /^ +99%/ { p99 = ms($2) }
    /^Requests\/sec:/ { rps = $2 }
    /Non-2xx or 3xx responses:/ { err += $NF }
    /Socket errors:/ { gsub(",", ""); err += $4 + $6 + $8 + $10 }
    END { printf "%d %.3f %.3f %d\n", rps, max, p99, err }' "$OUT_DIR/runs/$1.wrk"
}

# `uidgen bench` for DURATION, into runs/NAME.txt and NAME.csv (per second); then
# driver_figures prints "req/s IDs/s errors max_ms p99_ms p999_ms slowest-second-IDs/s".
driver_run() { # name bench-args...
  local name=$1; shift
  TOKIO_WORKER_THREADS=$DRIVER_THREADS "$uidgen" bench --quiet --duration "$secs" \
    --timeline "$OUT_DIR/runs/$name.csv" "$@" >"$OUT_DIR/runs/$name.txt" ||
    die "uidgen bench $* failed (runs/$name.txt)"
  grep '^failed calls, e.g.:' "$OUT_DIR/runs/$name.txt" | sed "s/^/  $name: /" || true
}
driver_figures() { # report-file
  awk '
    /^requests:/ { err = $4 }
    /^throughput:/ { rps = $2; ids = $4 }
    /^per second:/ { low = $4 }
    /^latency:/ { p99 = $9 / 1000; p999 = $12 / 1000; max = $15 / 1000 }
    END { printf "%d %d %d %.3f %.3f %.3f %d\n", rps, ids, err, max, p99, p999, low }' "$1"
}

rows=()
failed_goals=()
row() { # figure goal measured met
  rows+=("$1|$2|$3|$4")
  [ "$4" = yes ] || failed_goals+=("$1")
}
ratio() { awk -v u="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? u / b : 0) }'; }
at_least() { awk -v v="$1" -v g="$2" 'BEGIN { print (v + 0 >= g + 0 ? "yes" : "no") }'; }
at_most() { awk -v v="$1" -v g="$2" 'BEGIN { print (v != "n/a" && v + 0 <= g + 0 ? "yes" : "no") }'; }
units_to_s() { awk -v b="$1" -v u="$UNIT_S" 'BEGIN { print (b == "n/a" ? b : b * u) }'; }

machine="$(nproc) vCPU $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), \
$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), \
$(. /etc/os-release && echo "$PRETTY_NAME"), $(rustc --version | cut -d' ' -f1-2), \
uidgen $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started_at=$(date -u +%Y-%m-%dT%H:%MZ)
echo "bench-sustained: DURATION=${secs}s per figure; $machine; load $load_before"
echo "servers and drivers: one tokio worker each; wrk -t1; output in $OUT_DIR"

# ---- 1-3: throughput, one default server beside the bare ones -------------------------------
TOKIO_WORKER_THREADS=1 "$TARGET_DIR/release/examples/bare_axum" "127.0.0.1:$BARE_AXUM" \
  2>"$OUT_DIR/logs/bare_axum.log" &
pids+=($!)
TOKIO_WORKER_THREADS=1 "$TARGET_DIR/release/examples/bare_tonic" "127.0.0.1:$BARE_TONIC" \
  2>"$OUT_DIR/logs/bare_tonic.log" &
pids+=($!)
start_uidgen uidgen "$HTTP" "$GRPC" "$state/default"
wait_http "http://127.0.0.1:$BARE_AXUM/id"
wait_tcp "$BARE_TONIC"
base=http://127.0.0.1:$HTTP
start_sampler "$base" "$OUT_DIR/runs/metrics-throughput.txt"

slowest=0; failures=0
note_uidgen() { # max_ms errors: the slowest request and failures of uidgen's runs
  slowest=$(awk -v a="$slowest" -v b="$1" 'BEGIN { print (b > a ? b : a) }')
  failures=$((failures + $2))
}

printf '\n%-44s %12s %12s %10s %10s %8s\n' run req/s IDs/s max_ms p99_ms errors
show() { printf '%-44s %12s %12s %10s %10s %8s\n' "$@"; }
# A goal of uidgen's rate over a bare server's, met only when neither run failed a request.
ratio_row() { # figure uidgen_rate bare_rate uidgen_errors bare_errors detail
  local r met
  r=$(ratio "$2" "$3")
  met=$(at_least "$r" "$RATIO_GOAL"); [ "$4" = 0 ] && [ "$5" = 0 ] || met=no
  row "$1" ">= ${RATIO_GOAL}x" "${r}x ($6)" "$met"
}

for route in /api/snowflake/get/bench /genid; do
  name=${route//\//_}
  wrk_run "bare-axum-before$name" "http://127.0.0.1:$BARE_AXUM/id"
  read -r b_rps b_max b_p99 b_err < <(wrk_figures "bare-axum-before$name")
  show "bare axum /id (wrk)" "$b_rps" "$b_rps" "$b_max" "$b_p99" "$b_err"
  wrk_run "uidgen$name" "$base$route"
  read -r u_rps u_max u_p99 u_err < <(wrk_figures "uidgen$name")
  show "uidgen $route (wrk)" "$u_rps" "$u_rps" "$u_max" "$u_p99" "$u_err"
  note_uidgen "$u_max" "$u_err"
  ratio_row "HTTP $route, req/s vs bare axum (wrk)" "$u_rps" "$b_rps" "$u_err" "$b_err" \
    "$u_rps vs $b_rps req/s; $u_err failed"
done

driver_run bare-tonic-next-id --grpc "http://127.0.0.1:$BARE_TONIC" --concurrency "$CONNECTIONS"
read -r b_rps _ b_err b_max b_p99 _ _ < <(driver_figures "$OUT_DIR/runs/bare-tonic-next-id.txt")
show "bare tonic NextId (uidgen bench)" "$b_rps" "$b_rps" "$b_max" "$b_p99" "$b_err"
driver_run uidgen-next-id --grpc "http://127.0.0.1:$GRPC" --concurrency "$CONNECTIONS"
read -r u_rps _ u_err u_max u_p99 _ u_low < <(driver_figures "$OUT_DIR/runs/uidgen-next-id.txt")
show "uidgen NextId (uidgen bench)" "$u_rps" "$u_rps" "$u_max" "$u_p99" "$u_err"
note_uidgen "$u_max" "$u_err"
ratio_row "gRPC NextId, calls/s vs bare tonic" "$u_rps" "$b_rps" "$u_err" "$b_err" \
  "$u_rps vs $b_rps/s, slowest second $u_low; $u_err failed"

driver_run uidgen-v1-ids --url "$base" --batch "$BATCH" --concurrency "$BATCH_CONNECTIONS"
read -r rps ids err max p99 _ low < <(driver_figures "$OUT_DIR/runs/uidgen-v1-ids.txt")
show "uidgen /v1/ids?count=$BATCH (uidgen bench)" "$rps" "$ids" "$max" "$p99" "$err"
note_uidgen "$max" "$err"
met=$(at_least "$ids" "$IDS_GOAL"); [ "$err" = 0 ] || met=no
row "HTTP /v1/ids?count=$BATCH, IDs/s" ">= $IDS_GOAL" "$ids (slowest second $low; $err failed)" "$met"

runs_flag=(); form="IDs listed"
if [ -n "${GRPC_RUNS:-}" ]; then runs_flag=(--runs); form="runs"; fi
driver_run bare-tonic-next-ids --grpc "http://127.0.0.1:$BARE_TONIC" --batch "$BATCH" "${runs_flag[@]}" --concurrency "$BATCH_CONNECTIONS"
read -r b_rps b_ids b_err b_max b_p99 _ _ < <(driver_figures "$OUT_DIR/runs/bare-tonic-next-ids.txt")
show "bare tonic NextIds $BATCH, $form" "$b_rps" "$b_ids" "$b_max" "$b_p99" "$b_err"
driver_run uidgen-next-ids --grpc "http://127.0.0.1:$GRPC" --batch "$BATCH" "${runs_flag[@]}" --concurrency "$BATCH_CONNECTIONS"
read -r rps ids err max p99 _ low < <(driver_figures "$OUT_DIR/runs/uidgen-next-ids.txt")
show "uidgen NextIds $BATCH, $form" "$rps" "$ids" "$max" "$p99" "$err"
note_uidgen "$max" "$err"
met=$(at_least "$ids" "$IDS_GOAL"); [ "$err" = 0 ] || met=no
row "gRPC NextIds count $BATCH ($form), IDs/s" ">= $IDS_GOAL" \
  "$ids (slowest second $low; bare tonic $b_ids; $err failed)" "$met"

stop_sampler
# What the server says of itself at the end (worker ids held, capacity, borrowing), kept whole.
curl -fsS "$base/metrics" >"$OUT_DIR/runs/metrics-throughput-end.prom" || true
curl -fsS "$base/v1/status" >"$OUT_DIR/runs/status-throughput.json" || true
borrowed=$(max_borrowed "$OUT_DIR/runs/metrics-throughput.txt")
lead=$(units_to_s "$borrowed")
row "time field ahead of the clock (max uidgen_ring_borrowed_units x ${UNIT_S} s)" "<= ${MAX_LEAD_S} s" \
  "$lead s" "$(at_most "$lead" "$MAX_LEAD_S")"
row "slowest uidgen request, runs above" "<= ${MAX_LATENCY_MS} ms" "$slowest ms" \
  "$(at_most "$slowest" "$MAX_LATENCY_MS")"
row "failed uidgen requests, runs above" "0" "$failures" "$([ "$failures" = 0 ] && echo yes || echo no)"
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()

# ---- 4: duplicates across a restart ----------------------------------------------------------
# `uidgen bench check` over the recordings of GROUP, into runs/GROUP.check (exit status 1 on a
# duplicate: reported, the table says so); then check_figures prints "ids duplicates workers lead_s".
check_recordings() { # group
  local status=0
  "$uidgen" bench check "$OUT_DIR/rec/$1" >"$OUT_DIR/runs/$1.check" 2>&1 || status=$?
  grep -q '^IDs: ' "$OUT_DIR/runs/$1.check" || die "uidgen bench check failed: $(cat "$OUT_DIR/runs/$1.check")"
  [ "$status" = 0 ] || echo "error: duplicate IDs, see $OUT_DIR/runs/$1.check" >&2
  cat "$OUT_DIR/runs/$1.check"
}
check_figures() { # group
  awk '
    /^IDs: / { ids = $2; dup = $4 }
    /^worker ids: / { workers = $3 }
    /^time lead: at most/ { lead = $5 }
    END { printf "%d %d %d %s\n", ids, dup, workers, (lead == "" ? "n/a" : lead) }' "$OUT_DIR/runs/$1.check"
}
# Drivers in the background, each recording: sets `drivers` to their pids.
drivers=()
start_driver() { # group name bench-args...: records into rec/GROUP/NAME
  local group=$1 name=$2; shift 2
  TOKIO_WORKER_THREADS=$DRIVER_THREADS "$uidgen" bench --quiet --duration "$secs" \
    --timeline "$OUT_DIR/runs/$name.csv" --record "$OUT_DIR/rec/$group/$name" "$@" \
    >"$OUT_DIR/runs/$name.txt" 2>&1 &
  drivers+=($!)
  pids+=($!)
}
wait_drivers() {
  for pid in "${drivers[@]}"; do wait "$pid" || die "a recording driver failed (see $OUT_DIR/runs/)"; done
  drivers=()
}

echo
echo "duplicates across a restart: HTTP batches, gRPC NextIds and HTTP single IDs, all recorded; SIGTERM and restart at $((secs / 2)) s"
start_uidgen restart "$HTTP" "$GRPC" "$state/restart"
server=$started
base=http://127.0.0.1:$HTTP
start_sampler "$base" "$OUT_DIR/runs/metrics-restart.txt"
start_driver restart restart-v1-ids --url "$base" --batch "$BATCH" --concurrency "$DUP_CONNECTIONS"
start_driver restart restart-next-ids --grpc "http://127.0.0.1:$GRPC" --batch "$BATCH" --concurrency "$DUP_CONNECTIONS"
start_driver restart restart-snowflake --url "$base" --concurrency "$DUP_CONNECTIONS"
sleep $((secs / 2))
down_at=$(date +%s%N)
kill -TERM "$server"
for _ in $(seq 1 600); do kill -0 "$server" 2>/dev/null || break; sleep 0.05; done
kill -0 "$server" 2>/dev/null && die "uidgen did not stop within 30 s of SIGTERM"
wait "$server" 2>/dev/null || true
start_uidgen restart "$HTTP" "$GRPC" "$state/restart"
down_ms=$((($(date +%s%N) - down_at) / 1000000))
wait_drivers
stop_sampler
curl -fsS "$base/metrics" >"$OUT_DIR/runs/metrics-restart-end.prom" || true
curl -fsS "$base/v1/status" >"$OUT_DIR/runs/status-restart.json" || true
check_recordings restart
read -r ids dup workers client_lead < <(check_figures restart)
restart_errors=0; restart_ids_s=0
for f in "$OUT_DIR"/runs/restart-*.txt; do
  read -r _ i e _ _ _ _ < <(driver_figures "$f")
  restart_errors=$((restart_errors + e)); restart_ids_s=$((restart_ids_s + i))
done
echo "restart: $ids IDs, $dup duplicates, $workers worker ids, down ${down_ms} ms, $restart_errors calls failed while down"
row "duplicates across a restart ($ids IDs, $workers worker ids, $restart_errors calls failed in ${down_ms} ms down)" \
  "0" "$dup" "$([ "$dup" = 0 ] && echo yes || echo no)"
borrowed_r=$(max_borrowed "$OUT_DIR/runs/metrics-restart.txt")
lead_r=$(units_to_s "$borrowed_r")
row "time field ahead, restart run (borrowed units x ${UNIT_S} s; IDs seen by the client)" "<= ${MAX_LEAD_S} s" \
  "$lead_r s; $client_lead s" "$(at_most "$lead_r" "$MAX_LEAD_S")"
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()
[ -n "${KEEP_RECORDINGS:-}" ] || rm -rf "${OUT_DIR:?}/rec/restart"

# ---- 5: three servers on one PostgreSQL store ------------------------------------------------
database="uidgen_sustained_$(date +%s)_$$"
psql "$PG_URL/postgres" -v ON_ERROR_STOP=1 -qc "CREATE DATABASE $database" >/dev/null ||
  die "cannot create database $database at $PG_URL (is PostgreSQL running?)"
echo
echo "three servers on $PG_URL/$database: each loaded with HTTP batches and gRPC NextIds, all recorded"
for n in 1 2 3; do
  start_uidgen "pg-$n" "$(port $((10 + 2 * n)))" "$(port $((11 + 2 * n)))" "$state/pg-$n" "$PG_URL/$database"
done
samplers=()
for n in 1 2 3; do
  start_sampler "http://127.0.0.1:$(port $((10 + 2 * n)))" "$OUT_DIR/runs/metrics-pg-$n.txt"
  samplers+=("$sampler")
done
for n in 1 2 3; do
  start_driver pg "pg-$n-v1-ids" --url "http://127.0.0.1:$(port $((10 + 2 * n)))" --batch "$BATCH" --concurrency "$DUP_CONNECTIONS"
  start_driver pg "pg-$n-next-ids" --grpc "http://127.0.0.1:$(port $((11 + 2 * n)))" --batch "$BATCH" --concurrency "$DUP_CONNECTIONS"
done
wait_drivers
for s in "${samplers[@]}"; do sampler=$s; stop_sampler; done
for n in 1 2 3; do
  curl -fsS "http://127.0.0.1:$(port $((10 + 2 * n)))/metrics" >"$OUT_DIR/runs/metrics-pg-$n-end.prom" || true
  curl -fsS "http://127.0.0.1:$(port $((10 + 2 * n)))/v1/status" >"$OUT_DIR/runs/status-pg-$n.json" || true
done
check_recordings pg
read -r ids dup workers client_lead < <(check_figures pg)
pg_errors=0; per_server=()
for n in 1 2 3; do
  total=0
  for f in "$OUT_DIR/runs/pg-$n-v1-ids.txt" "$OUT_DIR/runs/pg-$n-next-ids.txt"; do
    read -r _ i e _ _ _ _ < <(driver_figures "$f")
    total=$((total + i)); pg_errors=$((pg_errors + e))
  done
  per_server+=("$total")
done
lowest=$(printf '%s\n' "${per_server[@]}" | sort -n | head -1)
echo "three servers: $ids IDs, $dup duplicates, $workers worker ids; IDs/s per server: ${per_server[*]}"
row "duplicates, three servers on one PostgreSQL store ($ids IDs, $workers worker ids)" \
  "0" "$dup" "$([ "$dup" = 0 ] && echo yes || echo no)"
met=$(at_least "$lowest" "$IDS_GOAL"); [ "$pg_errors" = 0 ] || met=no
row "three servers, each server's IDs/s (recording)" ">= $IDS_GOAL each" \
  "${per_server[*]} ($pg_errors failed)" "$met"
borrowed_p=$(max_borrowed "$OUT_DIR"/runs/metrics-pg-*.txt)
lead_p=$(units_to_s "$borrowed_p")
row "time field ahead, three servers (borrowed units x ${UNIT_S} s; IDs seen by the client)" "<= ${MAX_LEAD_S} s" \
  "$lead_p s; $client_lead s" "$(at_most "$lead_p" "$MAX_LEAD_S")"

# ---- summary -----------------------------------------------------------------------------------
{
  echo "# bench-sustained, $started_at"
  echo
  echo "**Machine:** $machine; load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after."
  echo "DURATION=${secs}s per figure; every server and \`uidgen bench\` driver on one tokio worker; wrk -t1 -c$CONNECTIONS;"
  echo "batches: $BATCH IDs, $BATCH_CONNECTIONS connections; recording runs: $DUP_CONNECTIONS connections per driver;"
  echo "gRPC NextIds: $form."
  echo
  echo "| figure | goal | measured | met? |"
  echo "| --- | --- | --- | --- |"
  for r in "${rows[@]}"; do
    IFS='|' read -r figure goal measured met <<<"$r"
    echo "| $figure | $goal | $measured | $met |"
  done
} >"$OUT_DIR/results.md"
echo
cat "$OUT_DIR/results.md"
echo
echo "results: $OUT_DIR/results.md (runs/: wrk and uidgen bench reports, per-second CSV, /metrics samples)"
if [ "${#failed_goals[@]}" -gt 0 ]; then
  echo "not met: ${#failed_goals[@]} of ${#rows[@]} goals" >&2
  exit 1
fi
echo "every goal met"
