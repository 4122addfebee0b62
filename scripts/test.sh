#!/usr/bin/env bash
# Run every check and test uidgen has, on a fresh machine: start (or install) the services the
# tests talk to, then formatting, lints, unit/integration/doc tests, the loom models, and a build
# of the benchmarks. This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

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
  port_open 5432 && return 0
  log "starting PostgreSQL"
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  local version; version=$(ls /etc/postgresql | head -n1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_port PostgreSQL 5432
}

ensure_mariadb() {
  port_open 3306 && return 0
  log "starting MariaDB"
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_port MariaDB 3306
}

ensure_redis() {
  port_open 6379 && return 0
  log "starting Redis"
  command -v redis-server >/dev/null || apt_install redis-server
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  wait_port Redis 6379
}

if [ -z "${UIDGEN_SKIP_SERVICES:-}" ]; then
  ensure_postgres
  ensure_mariadb
  ensure_redis
fi

# --- checks -----------------------------------------------------------------------------------
log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo test (workspace: unit, integration, doc tests)"
cargo test --workspace --locked

log "loom models of the ring buffer"
RUSTFLAGS="--cfg uidgen_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
  cargo test -p uidgen-loom --release --locked

log "benchmarks build (not run)"
cargo bench --workspace --no-run --locked

log "all checks passed"
