#!/usr/bin/env bash
# uidgen next to its floor and its peers, in one window, on one machine, with a table of ratios.
#
# 1. `cargo bench --bench generators`: uidgen's cached, default and snowflake generators, the
#    `AtomicU64::fetch_add` floor and the peer Rust crates of the workspace's dev-dependencies
#    (snowflaked, snowdon, snowflake_me, idgenerator, uuid v7), built by Cargo from crates.io;
#    and the ring's take and padding paths measured apart (`ring_paths`).
# 2. scripts/bench-http.sh: uidgen's single-ID HTTP routes next to a bare axum route (wrk, and
#    h2load when installed), alternating round by round.
# 3. Optionally (CLIENT=1) `cargo bench --bench client`: the gRPC client sustained next to the
#    in-process cached generator.
# 4. Optionally (BAIDU_UID_SRC=<a checkout of github.com/baidu/uid-generator>)
#    scripts/bench-baidu-java.sh, right after the generators: Baidu's Java CachedUidGenerator,
#    built from those unchanged sources against Debian's Spring, commons-lang and slf4j jars (no
#    registry this project may reach serves Baidu's sources, and this repository keeps no copy).
# Then one summary: every figure as a ratio to the floor or the peer measured in the same run,
# next to the goal of issue 23.
#
#   scripts/bench-side-by-side.sh                   # generators + HTTP (ROUNDS=3 DURATION=8s)
#   CLIENT=1 scripts/bench-side-by-side.sh          # and the client bench
#   SKIP_HTTP=1 scripts/bench-side-by-side.sh       # generators only
#   SKIP_HTTP=1 BAIDU_UID_SRC=../uid-generator scripts/bench-side-by-side.sh   # and Baidu's Java
#   SKIP_GENERATORS=1 ROUNDS=5 scripts/bench-side-by-side.sh
#
# Needs: cargo, wrk (Debian: apt-get install wrk), curl; h2load optional (nghttp2-client); for
# Baidu's Java, the packages scripts/bench-baidu-java.sh names.
# Two vCPUs are enough, but every other process on them moves the figures: read the ratios, and
# note the load average this script prints.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET_DIR=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "bench-side-by-side: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rustc: $(rustc --version)"

# Criterion's report lines: a name at the start of a line, then `thrpt:  [low mid high]` (on the
# same line when the name is short). Prints "name mid_in_elements_per_second" per benchmark.
thrpt() { # criterion stdout file
  awk '
    function scale(v, u) {
      if (u ~ /^Gelem/) return v * 1e9
      if (u ~ /^Melem/) return v * 1e6
      if (u ~ /^Kelem/) return v * 1e3
      return v
    }
    /^[A-Za-z0-9_]+\/[A-Za-z0-9_]+/ { name = $1 }
    /thrpt:/ && name != "" {
      sub(/.*thrpt: *\[/, "")
      # The change block after a saved run repeats `thrpt:` in percent: keep the figure only.
      if ($4 ~ /elem\/s/) { printf "%s %.0f\n", name, scale($3, $4); name = "" }
    }' "$1"
}

if [ -z "${SKIP_GENERATORS:-}" ]; then
  echo
  echo "== generators (cargo bench --bench generators) =="
  cargo bench --locked --bench generators -- --noplot | tee "$work/generators.out"
  thrpt "$work/generators.out" >"$work/gen"
  if [ -n "${BAIDU_UID_SRC:-}" ]; then
    echo
    echo "== Baidu Java (scripts/bench-baidu-java.sh) =="
    scripts/bench-baidu-java.sh | tee "$work/java.out"
    awk '{ print $1, $2 }' "$work/java.out" >>"$work/gen"
  fi
fi

if [ -n "${CLIENT:-}" ]; then
  echo
  echo "== client (cargo bench --bench client) =="
  [ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked -p uidgen-server --bin uidgen
  cargo bench --locked --bench client -- --noplot | tee "$work/client.out"
  thrpt "$work/client.out" >"$work/client"
fi

if [ -z "${SKIP_HTTP:-}" ]; then
  echo
  echo "== HTTP (scripts/bench-http.sh) =="
  scripts/bench-http.sh | tee "$work/http.out"
fi

get() { # file name -> elements/s, empty when not measured
  [ -f "$1" ] && awk -v n="$2" '$1 == n { print $2; exit }' "$1" || true
}
row() { # label value-e/s reference-e/s goal
  awk -v l="$1" -v v="$2" -v r="$3" -v g="$4" 'BEGIN {
    if (v == "" || r == "") { printf "%-44s %12s %12s %8s  %s\n", l, "-", "-", "-", g; exit }
    printf "%-44s %10.1f M %10.1f M %7.2fx  %s\n", l, v / 1e6, r / 1e6, v / r, g }'
}

echo
echo "== summary: ratios within this run ($(date -u '+%H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)) =="
if [ -f "$work/gen" ]; then
  printf '%-44s %12s %12s %8s  %s\n' "generators (IDs/s)" uidgen "floor/peer" ratio "goal (issue 23)"
  f1=$(get "$work/gen" next_id_1_thread/atomic_fetch_add_floor)
  f2=$(get "$work/gen" next_id_2_thread/atomic_fetch_add_floor)
  row "cached next_id, 1 thread / fetch_add" "$(get "$work/gen" next_id_1_thread/uidgen_cached)" "$f1" ">= 0.5x"
  row "cached next_id, 2 threads / fetch_add" "$(get "$work/gen" next_id_2_thread/uidgen_cached)" "$f2" ">= 0.7x"
  row "per-thread batch, 1 thread / fetch_add" \
    "$(get "$work/gen" next_id_1_thread/uidgen_cached_per_thread_batch)" "$f1" "(opt-in LocalIds)"
  row "per-thread batch, 2 threads / fetch_add" \
    "$(get "$work/gen" next_id_2_thread/uidgen_cached_per_thread_batch)" "$f2" ">= 0.7x (opt-in LocalIds)"
  row "per-thread units, 1 thread / fetch_add" \
    "$(get "$work/gen" next_id_1_thread/uidgen_cached_per_thread_units)" "$f1" ">= 0.5x (opt-in UnitIds)"
  row "per-thread units, 2 threads / fetch_add" \
    "$(get "$work/gen" next_id_2_thread/uidgen_cached_per_thread_units)" "$f2" ">= 0.7x (opt-in UnitIds)"
  row "cached next_ids(1000) / fetch_add 1 thread" "$(get "$work/gen" next_ids_1000/uidgen_cached)" "$f1" ">= 0.8x"
  for t in 1 2; do
    for peer in snowflaked_sync snowdon snowflake_me idgenerator uuid_now_v7; do
      row "cached, $t thread(s) / $peer" "$(get "$work/gen" "next_id_${t}_thread/uidgen_cached")" \
        "$(get "$work/gen" "next_id_${t}_thread/$peer")" ""
    done
    row "snowflake, $t thread(s) / snowflaked_sync" "$(get "$work/gen" "next_id_${t}_thread/uidgen_snowflake")" \
      "$(get "$work/gen" "next_id_${t}_thread/snowflaked_sync")" "(layout cap: 4.1 M/s)"
  done
  row "ring alone: try_take / fetch_add" "$(get "$work/gen" ring_paths/try_take)" "$f1" "(take path)"
  row "ring alone: put_batch / fetch_add" "$(get "$work/gen" ring_paths/put_batch)" "$f1" "(padding path)"
  row "ring alone: take_batch(1000) / fetch_add" "$(get "$work/gen" ring_paths/take_batch_1000)" "$f1" "(batch read)"
  if [ -n "${BAIDU_UID_SRC:-}" ]; then
    for t in 1 2; do
      goal=">= 15x"
      [ "$t" = 2 ] && goal=">= 10x"
      row "cached next_id, $t thread(s) / Baidu Java" "$(get "$work/gen" "next_id_${t}_thread/uidgen_cached")" \
        "$(get "$work/gen" "next_id_${t}_thread/baidu_java_cached")" "$goal"
      row "per-thread units, $t thread(s) / Baidu Java" \
        "$(get "$work/gen" "next_id_${t}_thread/uidgen_cached_per_thread_units")" \
        "$(get "$work/gen" "next_id_${t}_thread/baidu_java_cached")" "(opt-in UnitIds)"
    done
  else
    echo "Baidu Java: not measured (set BAIDU_UID_SRC to a checkout of baidu/uid-generator; see the header)"
  fi
fi
if [ -f "$work/client" ]; then
  echo
  for t in 1 2; do
    row "client next_id sustained, $t thread(s) / in-process" \
      "$(get "$work/client" "client_${t}_thread/client_next_id_sustained")" \
      "$(get "$work/client" "client_${t}_thread/cached_generator")" ">= 0.5x"
  done
fi
if [ -f "$work/http.out" ]; then
  echo
  echo "HTTP: uidgen / bare axum, lowest / median / highest over the rounds (goal >= 0.9 on every route):"
  sed -n '/^ratio to bare axum/,/^$/p' "$work/http.out" | tail -n +2
fi
