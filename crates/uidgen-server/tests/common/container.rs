//! Emulated containers for the multi-host tests: `uidgen serve` as pid 1 of its own pid, mount
//! and network namespace (`unshare --pid --net --fork --mount-proc`), with a Docker-style MAC on
//! its `eth0`, optionally a Docker-style IPv4 address, and its own state directory, as
//! containers started from one image on different hosts are: same pid (1), same hostname, same
//! machine id, nothing local shared.
//!
//! What the containers share is reached the way another host reaches it: PostgreSQL through
//! its unix socket (a path the network namespaces share), and a TCP service (ZooKeeper, etcd)
//! through a [`Bridge`]: a unix socket on this side forwarding to the service, and `socat`
//! inside the container listening on the service's usual `127.0.0.1` port. Nothing in the
//! container's network namespace can reach this host's loopback otherwise.
//!
//! The kernel here has no `dummy` driver, so `eth0` is one end of a veth pair (both ends get
//! fixed MACs: the machine part hashes every MAC it sees). IDs are fetched over HTTP from
//! inside the container's network namespace (`nsenter --net curl`). A machine where
//! namespaces cannot be made fails these tests, saying so: they do not skip.

#![allow(dead_code)] // shared by several test binaries, each using a part

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uidgen_core::Layout;
use uidgen_store::testing::{TestDb, fresh_url};

use crate::common::{binary, fresh_cwd, ids_in, json};

/// IDs fetched from each container.
pub const PER_CONTAINER: usize = 50_000;
/// Where PostgreSQL's unix socket lives (a directory), overridable for other machines.
const SOCKET_DIR_VAR: &str = "UIDGEN_TEST_POSTGRES_SOCKET_DIR";

/// What sets up the container's network and mounts, then becomes `uidgen serve` (pid 1).
/// Arguments: the binary, eth0's MAC, the peer's MAC, eth0's IPv4 address (or empty), and
/// the bridges as `port=socket` words (or empty).
const SETUP: &str = r#"set -e
ip link set lo up
ip link add eth0 type veth peer name veth0
ip link set eth0 address "$2"
ip link set veth0 address "$3"
ip link set eth0 up
ip link set veth0 up
if [ -n "$4" ]; then
  ip addr add "$4/16" dev eth0
  ip route add default via "${4%.*}.1" dev eth0
fi
mount -t sysfs sysfs /sys
for bridge in $5; do
  port=${bridge%%=*}
  socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:${bridge#*=}" &
  n=0
  until ss -ltn | grep -q "127.0.0.1:$port "; do
    n=$((n + 1)); [ "$n" -lt 100 ] || { echo "socat did not listen on $port" >&2; exit 1; }
    sleep 0.05
  done
done
exec "$1" serve --listen 0.0.0.0:8080
"#;

/// Fail (not skip) with what is missing when this machine cannot make namespaces.
pub fn require_namespaces() {
    let out = Command::new("unshare")
        .args(["--pid", "--net", "--fork", "--mount-proc", "sh", "-c"])
        .arg("ip link add eth0 type veth peer name veth0 && mount -t sysfs sysfs /sys")
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "cannot emulate containers here: `unshare --pid --net --fork --mount-proc` with a \
             veth pair and a sysfs mount failed ({}): {}; these tests need root (or \
             CAP_SYS_ADMIN and CAP_NET_ADMIN), util-linux's unshare and iproute2",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(error) => panic!("cannot run `unshare` (util-linux): {error}"),
    }
    let socat = Command::new("socat").arg("-V").output();
    assert!(
        socat.is_ok_and(|out| out.status.success()),
        "cannot run `socat`: the containers reach ZooKeeper and etcd through it (scripts/test.sh \
         installs Debian's socat)"
    );
}

/// A fresh PostgreSQL database as the containers reach it: through the unix socket.
pub async fn shared_postgres() -> String {
    let tcp = fresh_url(TestDb::Postgres).await.unwrap();
    let name = tcp.rsplit('/').next().unwrap().to_owned();
    let dir = std::env::var(SOCKET_DIR_VAR).unwrap_or_else(|_| "/var/run/postgresql".into());
    assert!(
        PathBuf::from(&dir).join(".s.PGSQL.5432").exists(),
        "PostgreSQL's unix socket is not in {dir} (set {SOCKET_DIR_VAR}): the containers have \
         network namespaces of their own and reach the database only through it"
    );
    format!("postgres://postgres@localhost/{name}?host={dir}")
}

/// A TCP service made reachable from inside the containers: a unix socket here that forwards
/// every connection to `target`, and the port the containers' `socat` listens on.
pub struct Bridge {
    /// The port inside the containers (`127.0.0.1:{port}`).
    pub port: u16,
    /// The unix socket the containers' `socat` connects to.
    pub socket: PathBuf,
}

impl Bridge {
    /// Forward connections on a fresh unix socket to `target` (`host:port`), for as long as
    /// the test process runs; inside the containers the service is at `127.0.0.1:{port}`.
    pub fn to(target: &str, port: u16) -> Bridge {
        let socket = fresh_cwd().join(format!("bridge-{port}.sock"));
        let listener = UnixListener::bind(&socket).unwrap();
        let target = target.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue; // the container sees a closed connection, as from a dead server
                };
                let (mut up_in, mut up_out) = (client.try_clone().unwrap(), client);
                let (mut down_in, mut down_out) = (server.try_clone().unwrap(), server);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_in, &mut down_out);
                    let _ = down_out.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut down_in, &mut up_out);
                    let _ = up_out.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Bridge { port, socket }
    }

    fn word(&self) -> String {
        format!("{}={}", self.port, self.socket.display())
    }
}

/// How a container's network looks: `eth0`'s last MAC byte, an optional IPv4 address (Docker
/// gives the first container on every host's default bridge 172.17.0.2), and the bridges to
/// shared TCP services.
#[derive(Default)]
pub struct Network<'a> {
    /// `eth0`'s MAC is `02:42:ac:11:00:{mac}`.
    pub mac: u8,
    /// `eth0`'s IPv4 address (a /16), if any.
    pub ip: Option<&'a str>,
    /// Shared TCP services reachable inside.
    pub bridges: &'a [&'a Bridge],
}

/// One emulated container running `uidgen serve`; killed when dropped.
pub struct Container {
    /// The `unshare` process: it sits in the container's network namespace.
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Container {
    /// Start a container with `eth0`'s last MAC byte `n` and `envs`: `Ok` once it serves,
    /// `Err(log)` when it exits first.
    pub fn start(n: u8, envs: &[(&str, &str)]) -> Result<Container, String> {
        Self::start_on(
            &Network {
                mac: n,
                ..Network::default()
            },
            envs,
        )
    }

    /// Start a container on `network` with `envs`: `Ok` once it serves, `Err(log)` when it
    /// exits first.
    pub fn start_on(network: &Network<'_>, envs: &[(&str, &str)]) -> Result<Container, String> {
        let n = network.mac;
        let bridges: Vec<String> = network.bridges.iter().map(|b| b.word()).collect();
        let mut child = Command::new("unshare")
            .args(["--pid", "--net", "--fork", "--mount-proc", "--kill-child"])
            .args(["sh", "-c", SETUP, "sh"])
            .arg(binary())
            .arg(format!("02:42:ac:11:00:{n:02x}"))
            .arg(format!("02:42:ac:11:ff:{n:02x}"))
            .arg(network.ip.unwrap_or(""))
            .arg(bridges.join(" "))
            .current_dir(fresh_cwd())
            .env_remove("UIDGEN_CONFIG")
            .env("UIDGEN_GRPC_LISTEN", "")
            .env("UIDGEN_SEGMENT_ENABLED", "false")
            // Each container's own volume: its default store, state files and machine locks.
            .env("UIDGEN_STATE_DIR", fresh_cwd().join("state"))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
                if line.contains("uidgen serving") {
                    let _ = tx.send(true);
                }
            }
            let _ = tx.send(false); // the container ended
        });
        match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(true) => Ok(Container { child, log }),
            Ok(false) => {
                let status = child.wait().unwrap();
                assert!(!status.success(), "a refusal exits non-zero");
                Err(log.lock().unwrap().clone())
            }
            Err(_) => {
                let _ = child.kill();
                panic!("no `uidgen serving` within 90 s:\n{}", log.lock().unwrap());
            }
        }
    }

    /// What the container has logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// `count` IDs from the container's server, in batches of 10,000, fetched from inside its
    /// network namespace.
    pub fn ids(&self, count: usize) -> Vec<u64> {
        let url = "http://127.0.0.1:8080/v1/ids?count=10000";
        let mut ids = Vec::with_capacity(count);
        while ids.len() < count {
            let out = Command::new("nsenter")
                .args(["--target", &self.child.id().to_string(), "--net"])
                .args(["curl", "-sS", "--max-time", "30", url])
                .output()
                .expect("run nsenter and curl");
            let body = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let answer = json(&body);
            assert!(answer["ids"].is_array(), "{body}\n{}", self.log());
            let batch = ids_in(&answer);
            assert_eq!(batch.len(), 10_000, "{body}");
            ids.extend(batch);
        }
        ids
    }

    /// Kill the container (its pid 1, and with it the rest), as a host that dies does.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        // `--kill-child`: unshare's death kills pid 1 of the namespace, and with it the rest.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The worker ids stamped in `ids` under `layout`.
pub fn workers_in(layout: &Layout, ids: &[u64]) -> HashSet<u64> {
    ids.iter()
        .map(|&id| layout.decompose(id).unwrap().worker)
        .collect()
}

/// The worker ids stamped in `ids` (keyworker layout).
pub fn workers(ids: &[u64]) -> HashSet<u64> {
    workers_in(&Layout::keyworker().unwrap(), ids)
}

/// Fetch from both containers at once, and count the equal IDs.
pub fn ids_of_both(a: &Container, b: &Container) -> (Vec<u64>, Vec<u64>, usize) {
    let (ids_a, ids_b) = std::thread::scope(|s| {
        let a = s.spawn(|| a.ids(PER_CONTAINER));
        let b = s.spawn(|| b.ids(PER_CONTAINER));
        (a.join().unwrap(), b.join().unwrap())
    });
    let equal = equal_between(&ids_a, &ids_b);
    (ids_a, ids_b, equal)
}

/// How many IDs `a` and `b` have in common, counted over both (duplicates inside one count
/// too).
pub fn equal_between(a: &[u64], b: &[u64]) -> usize {
    let mut all: Vec<u64> = a.iter().chain(b).copied().collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    total - all.len()
}

/// What makes a namespace another host, then becomes `uidgen <args>`. Arguments: the binary,
/// the hostname, the machine-id file and the boot-id file to show at `/etc/machine-id` and
/// `/proc/sys/kernel/random/boot_id`, then uidgen's arguments.
const HOST_SETUP: &str = r#"set -e
hostname "$2"
mount --bind "$3" /etc/machine-id
mount --bind "$4" /proc/sys/kernel/random/boot_id
ip link set lo up
bin=$1
shift 4
exec "$bin" "$@"
"#;

/// An emulated host of its own, for the host-identity checks (issue 36, point 6): its own
/// hostname (a UTS namespace), machine id and boot id (files bound over the system's in its
/// mount namespace), pid and network namespace; the file system is this machine's, so a state
/// directory "copied to it" is a path given in `UIDGEN_STATE_DIR`. PostgreSQL is reached
/// through its unix socket, as from [`Container`]s.
pub struct Host {
    name: String,
    machine_id: PathBuf,
    boot_id: PathBuf,
}

impl Host {
    /// Host `n`: hostname `host-{n}`, a machine id and a boot id of its own.
    pub fn new(n: u8) -> Host {
        let dir = fresh_cwd();
        let machine_id = dir.join("machine-id");
        let boot_id = dir.join("boot_id");
        std::fs::write(&machine_id, format!("{n:032x}\n")).unwrap();
        std::fs::write(&boot_id, format!("00000000-0000-4000-8000-{n:012x}\n")).unwrap();
        Host {
            name: format!("host-{n}"),
            machine_id,
            boot_id,
        }
    }

    /// `uidgen <args>` on this host with `envs` (over `NO_COLOR=1`, `RUST_LOG=info` and a fresh
    /// `UIDGEN_STATE_DIR`), its output piped, not yet started.
    pub fn command(&self, args: &[&str], envs: &[(&str, &str)]) -> Command {
        let mut command = Command::new("unshare");
        command
            .args([
                "--pid",
                "--net",
                "--uts",
                "--fork",
                "--mount-proc",
                "--kill-child",
            ])
            .args(["sh", "-c", HOST_SETUP, "sh"])
            .arg(binary())
            .arg(&self.name)
            .arg(&self.machine_id)
            .arg(&self.boot_id)
            .args(args)
            .current_dir(fresh_cwd())
            .env_remove("UIDGEN_CONFIG")
            // The host's own state directory unless `envs` names one.
            .env("UIDGEN_STATE_DIR", fresh_cwd().join("state"))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// `uidgen <args>` on this host to completion: `Ok(the IDs printed)` or `Err(stderr)`.
    pub fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Result<Vec<u64>, String> {
        let out = self.command(args, envs).output().expect("run unshare");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(stderr);
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                line.parse()
                    .unwrap_or_else(|e| panic!("{line:?}: {e}\n{stderr}"))
            })
            .collect())
    }
}
