#!/usr/bin/env bash
# Run every check and test uidgen has, on a fresh machine: start (or install) the services the
# tests talk to, then formatting, lints, unit/integration/doc tests (the docs' examples
# included), a fuzz of the HTTP API from its OpenAPI document, the container files, the loom
# models, and a build of the benchmarks. This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step with the time since the start: where the suite's minutes go (docs/BENCHMARKS.md).
log() { printf '\n==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

# --- services -------------------------------------------------------------------------------
# Tests never skip a missing service: they fail naming it. So make sure they are up first.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # name port
  for _ in $(seq 1 60); do port_open "$2" && return 0; sleep 0.5; done
  echo "error: $1 is not listening on 127.0.0.1:$2" >&2
  return 1
}

apt_install() {
  if [ "$(id -u)" != 0 ]; then echo "error: need root to install $*" >&2; return 1; fi
  [ -n "${APT_UPDATED:-}" ] || { apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres() {
  if ! port_open 5432; then
    log "starting PostgreSQL"
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    local version; version=$(ls /etc/postgresql | head -n1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    wait_port PostgreSQL 5432
  fi
  # The tests log in over TCP as `postgres` without a password and create their own databases
  # next to `test`; a stock Debian cluster asks for a password on 127.0.0.1, so open it up when
  # we are the machine's root and it is not so already (a developer's own server is left alone).
  if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    local hba; hba=$(ls /etc/postgresql/*/main/pg_hba.conf | head -n1)
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    su postgres -c "psql -Atc 'select pg_reload_conf()'" >/dev/null
  fi
  if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname = 'test'" 2>/dev/null | grep -q 1; then
    psql -h 127.0.0.1 -U postgres -d postgres -c 'create database test' >/dev/null
  fi
}

ensure_mariadb() {
  if ! port_open 3306; then
    log "starting MariaDB"
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
    # The socket directory is made by the service unit, which does not run here.
    install -d -o mysql -g mysql /run/mysqld
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
    wait_port MariaDB 3306
  fi
  # Tests log in over TCP as root with an empty password (Debian's root uses the unix socket).
  if ! mariadb -h 127.0.0.1 -uroot -e 'select 1' >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    mariadb -uroot -e "ALTER USER root@localhost IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')"
  fi
  mariadb -h 127.0.0.1 -uroot -e 'create database if not exists test'
}

ensure_redis() {
  # The sharded mode's fault tests start private redis-server processes (to flush, kill and
  # restore them without disturbing the shared one), so the binary must be here either way.
  command -v redis-server >/dev/null || apt_install redis-server
  port_open 6379 && return 0
  log "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  wait_port Redis 6379
}

# ZooKeeper answers `srvr` (the one four-letter word 3.5+ allows by default; `ruok` is not).
zk_answers() {
  (exec 3<>/dev/tcp/127.0.0.1/2181 && printf srvr >&3 && timeout 2 cat <&3) 2>/dev/null \
    | grep -q 'Zookeeper version'
}

ensure_zookeeper() {
  zk_answers && return 0
  log "starting ZooKeeper"
  [ -x /usr/share/zookeeper/bin/zkServer.sh ] || apt_install zookeeperd
  # No systemd here: the package's own script starts the server in the background. Debian's
  # zkEnv.sh points the log at /var/log/zookeeper; give it a writable one either way. The
  # uidgen-zk tests also run private servers with `java` and this package's classpath.
  local logdir=${ZOO_LOG_DIR:-/tmp/zklog}
  mkdir -p "$logdir" /var/log/zookeeper 2>/dev/null || true
  ZOO_LOG_DIR=$logdir /usr/share/zookeeper/bin/zkServer.sh start >/dev/null 2>&1 || true
  for _ in $(seq 1 120); do zk_answers && return 0; sleep 0.5; done
  echo "error: ZooKeeper does not answer srvr on 127.0.0.1:2181 (see $logdir and /var/log/zookeeper)" >&2
  return 1
}

# etcd answers its gateway's /version with the server's version.
etcd_answers() {
  curl -sf --max-time 2 http://127.0.0.1:2379/version 2>/dev/null | grep -q etcdserver
}

ensure_etcd() {
  # The uidgen-etcd tests also start private etcd processes (to kill them), so the binary must
  # be here either way.
  command -v etcd >/dev/null || apt_install etcd-server
  etcd_answers && return 0
  log "starting etcd"
  # No systemd here: run it in the background on the client port only, data under /tmp.
  local dir=${UIDGEN_ETCD_DIR:-/tmp/uidgen-etcd}
  mkdir -p "$dir"
  nohup etcd --name uidgen-test --data-dir "$dir/data" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster uidgen-test=http://127.0.0.1:2380 >"$dir/etcd.log" 2>&1 &
  for _ in $(seq 1 120); do etcd_answers && return 0; sleep 0.5; done
  echo "error: etcd does not answer on 127.0.0.1:2379 (see $dir/etcd.log)" >&2
  return 1
}

# The web console's test (crates/uidgen-server/tests/console/main.rs) drives headless Chromium
# through chromedriver; UIDGEN_CHROMEDRIVER / UIDGEN_CHROMIUM point elsewhere.
ensure_chromium() {
  [ -x "${UIDGEN_CHROMEDRIVER:-/usr/bin/chromedriver}" ] && [ -x "${UIDGEN_CHROMIUM:-/usr/bin/chromium}" ] && return 0
  log "installing chromium and chromium-driver"
  apt_install chromium chromium-driver
}

ensure_chromium

# The doc examples (crates/uidgen-server/tests/docs/) run real curl, and the API fuzz below
# reads its answers with it too.
command -v curl >/dev/null || apt_install curl
# The emulated containers (crates/uidgen-server/tests/containers*.rs) reach ZooKeeper and etcd
# through socat, as another host reaches them over the network.
command -v socat >/dev/null || apt_install socat
# The clock watch's test (crates/uidgen-server/tests/serve/clock_watch.rs) steps one server's
# clock with libfaketime while it serves.
command -v faketime >/dev/null || apt_install faketime
# The fuzz and the container linters are Python tools in a venv (scripts/venv.sh).
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv

if [ -z "${UIDGEN_SKIP_SERVICES:-}" ]; then
  ensure_postgres
  ensure_mariadb
  ensure_redis
  ensure_zookeeper
  ensure_etcd
fi

# --- checks -----------------------------------------------------------------------------------
log "cargo fmt --check"
cargo fmt --all -- --check

# Issue 34: no two files of a folder import each other, directly or round a circle.
log "no import circle between the files of a folder (scripts/import-cycles.py)"
python3 scripts/import-cycles.py

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# Every test as its own process, from all binaries at once (.config/nextest.toml), when
# cargo-nextest is installed; `cargo test` runs the binaries one after another, which on the
# 2-core box took twice as long. Both run the same tests; nextest has no doc tests, so those
# run with `cargo test --doc`.
if cargo nextest --version >/dev/null 2>&1; then
  log "cargo nextest (workspace: unit and integration tests, all binaries at once)"
  cargo nextest run --workspace --locked --no-fail-fast
  log "cargo test --doc (workspace: doc tests)"
  cargo test --workspace --doc --locked --no-fail-fast
else
  log "cargo test (workspace: unit, integration, doc tests; cargo-nextest not installed)"
  cargo test --workspace --locked --no-fail-fast
fi

# The API's description against the real server: schemathesis 4 (pinned in
# scripts/requirements.txt, in a venv under target/) with its default checks, the stateful
# phase included, with and without the admin token; about a minute at 100 examples per
# operation and phase.
log "API fuzz: schemathesis against /openapi.json of a live server"
FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-100} scripts/fuzz-api.sh target/debug/uidgen

# The README's first command needs nothing but Rust. The gRPC code is checked in
# (crates/uidgen-proto/src/generated/), so no build compiles the .proto file; its test
# regenerates it with protox (in Rust) and compares. Prove that needs no system protoc either:
# run that test with a `protoc` that fails, first on PATH and in PROTOC.
log "gRPC code regenerates without protoc, as checked in"
fake=$(mktemp -d)
printf '#!/bin/sh\necho "protoc was called: the build must not need it" >&2\nexit 1\n' >"$fake/protoc"
chmod +x "$fake/protoc"
PATH="$fake:$PATH" PROTOC="$fake/protoc" \
  cargo test -p uidgen-proto --test generated --locked --quiet
rm -rf "$fake"

log "container: Dockerfile and compose.yaml (built when a container engine runs, else linted)"
scripts/check-container.sh

log "loom models of the ring buffer and the sequencer"
RUSTFLAGS="--cfg uidgen_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
  cargo test -p uidgen-loom --release --locked

# In the dev profile: that proves every bench compiles, on the dependencies the tests built,
# where the bench profile (release) would build the whole tree again for minutes of CI. The
# figures in docs/BENCHMARKS.md come from release builds (scripts/bench-*.sh).
log "benchmarks build (not run, dev profile)"
cargo bench --workspace --no-run --locked --profile dev

log "all checks passed"
