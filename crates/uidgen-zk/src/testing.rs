//! Test support (cargo feature `testing`): a chroot per test on the shared ZooKeeper, a
//! private ZooKeeper server a test may stop and start, a proxy that loses a reply, and Java
//! Leaf's ZooKeeper operations ([`JavaLeaf`]).
//!
//! Tests never skip a missing ZooKeeper: they fail with a message naming [`ENV_TEST_ZK`].

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

mod java_leaf;
mod proxy;
pub use java_leaf::JavaLeaf;
pub use proxy::ReplyDropper;

/// The variable naming the test ensemble (default `127.0.0.1:2181`).
pub const ENV_TEST_ZK: &str = "UIDGEN_TEST_ZK";

/// The classpath of Debian's `zookeeperd` (what `zkServer.sh` runs), overridable with
/// `UIDGEN_TEST_ZK_CLASSPATH`.
pub const DEBIAN_CLASSPATH: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";

/// The test ensemble's address: `UIDGEN_TEST_ZK` or `127.0.0.1:2181`.
pub fn test_zk() -> String {
    std::env::var(ENV_TEST_ZK).unwrap_or_else(|_| "127.0.0.1:2181".to_owned())
}

/// Whether a ZooKeeper server answers the `srvr` four-letter word at `address` (host:port).
pub fn answers_srvr(address: &str) -> bool {
    ask(address, b"srvr").is_some_and(|reply| reply.contains("Zookeeper version"))
}

/// A connect string with a chroot of its own (`{zk}/uidgen-tests/{unique}`), after checking
/// that the test ensemble answers; panics naming [`ENV_TEST_ZK`] when it does not.
pub fn test_connect() -> String {
    let zk = test_zk();
    let first = zk.split(',').next().unwrap_or_default().to_owned();
    assert!(
        answers_srvr(&first),
        "ZooKeeper does not answer at {first}: start it (scripts/test.sh does) or point \
         {ENV_TEST_ZK} at one"
    );
    format!("{zk}/uidgen-tests/{}", unique("t"))
}

use uidgen_worker::testing::{PrivateServer, ask};
pub use uidgen_worker::testing::{copy_dir, unique};

/// Declare the namespace `name` on `connect` new, as `uidgen zk init` does, unless it has a
/// namespace record already (a test's restarts call it again): claims there start at once
/// instead of waiting out an unknown past. Errors (ZooKeeper down) are the caller's to ignore
/// or report.
pub async fn init_namespace(connect: &str, name: &str) -> Result<(), zookeeper_client::Error> {
    let client = zookeeper_client::Client::connect(connect).await?;
    let chroot = client.path().to_owned();
    if chroot != "/" {
        let unrooted = client.clone().chroot("/").unwrap_or_else(|same| same);
        unrooted.mkdir(&chroot, &crate::session::PERSISTENT).await?;
    }
    let root = format!("/snowflake/{name}");
    client.mkdir(&root, &crate::session::PERSISTENT).await?;
    let record = uidgen_worker::NamespaceRecord::open(
        uidgen_worker::Origin::Init,
        uidgen_core::Clock::now_millis(&uidgen_core::SystemClock),
        "test",
    );
    match client
        .create(
            &format!("{root}/namespace"),
            &record.to_json(),
            &crate::session::PERSISTENT,
        )
        .await
    {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
        Err(error) => Err(error),
    }
}

/// A ZooKeeper server of this test alone, on its own port and data directory, started with
/// `java` and Debian's classpath (as `zkServer.sh` does), so a test can stop the process and
/// start it again. Killed when dropped.
#[derive(Debug)]
pub struct PrivateZooKeeper {
    server: PrivateServer,
}

impl PrivateZooKeeper {
    /// Start one and wait until it answers; panics with what is missing otherwise.
    pub fn start() -> Self {
        let server = PrivateServer::new("ZooKeeper", "server.log", "127.0.0.1", answers_srvr);
        let config = format!(
            "tickTime=500\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n\
             minSessionTimeout=1000\nmaxSessionTimeout=20000\n",
            server.data_dir().display(),
            server.port()
        );
        std::fs::write(server.dir().join("zoo.cfg"), config).unwrap();
        let mut server = Self { server };
        server.resume();
        server
    }

    /// The connect string (no chroot).
    pub fn address(&self) -> String {
        self.server.address().to_owned()
    }

    /// Kill the server process (SIGKILL: no goodbye to its clients).
    pub fn stop(&mut self) {
        self.server.kill();
    }

    /// Start the process again on the same port and data, and wait until it answers.
    pub fn resume(&mut self) {
        let classpath = std::env::var("UIDGEN_TEST_ZK_CLASSPATH")
            .unwrap_or_else(|_| DEBIAN_CLASSPATH.to_owned());
        let dir = self.server.dir();
        std::fs::create_dir_all(self.server.data_dir()).unwrap();
        let mut command = Command::new("java");
        command
            .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
            .arg("-Dzookeeper.log.file=zookeeper.log")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(&classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(dir.join("zoo.cfg"));
        self.server
            .run(command, "install zookeeperd (scripts/test.sh does)");
    }

    /// Kill the server, empty its data directory (a disk lost, a container without a volume),
    /// and start it again on the same port.
    pub fn restart_empty(&mut self) {
        self.server.empty_data();
        self.resume();
    }

    /// Kill the server and copy its data directory aside: a snapshot that
    /// [`restore`](Self::restore) rolls the server back to. Start it again with
    /// [`resume`](Self::resume).
    pub fn snapshot(&mut self) -> PathBuf {
        self.server.snapshot()
    }

    /// Kill the server, replace its data with `snapshot`'s, and start it again: a restore from
    /// an older snapshot.
    pub fn restore(&mut self, snapshot: &Path) {
        self.server.replace_data(snapshot);
        self.resume();
    }

    /// Its directory (data, configuration and log).
    pub fn dir(&self) -> &Path {
        self.server.dir()
    }
}
