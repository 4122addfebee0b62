//! Connecting to the ensemble and making sure the namespace's tree exists.

use std::time::Duration;

use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::tree::Tree;

/// Persistent nodes anyone may read and write, as Leaf creates them (no ACLs).
pub(crate) const PERSISTENT: zk::CreateOptions<'static> =
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());

/// The live nodes: gone with the session that made them.
pub(crate) const EPHEMERAL: zk::CreateOptions<'static> =
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());

/// A session with the ensemble at `connect` (with its chroot, created if missing). Gives up
/// after about `session_timeout` when no server answers ([`ZkError::Unreachable`]).
///
/// Cancel safety: dropping the future drops a half-made session, which closes itself.
pub(crate) async fn connect(connect: &str, session_timeout: Duration) -> Result<zk::Client> {
    let unreachable = |reason: String| ZkError::Unreachable {
        connect: connect.to_owned(),
        reason,
    };
    let mut connector = zk::Client::connector();
    connector.session_timeout(session_timeout);
    // The client gives up by itself after the session timeout; the outer bound only guards
    // against a server that accepts the TCP connection and never answers.
    let bound = session_timeout.saturating_mul(2);
    let client = match tokio::time::timeout(bound, connector.connect(connect)).await {
        Ok(Ok(client)) => client,
        Ok(Err(error)) => return Err(unreachable(error.to_string())),
        Err(_) => return Err(unreachable(format!("no session within {bound:?}"))),
    };
    let chroot = client.path().to_owned();
    if chroot != "/" {
        // The chroot is the client's own prefix; the server needs the node itself.
        let unrooted = client.clone().chroot("/").unwrap_or_else(|same| same);
        unrooted
            .mkdir(&chroot, &PERSISTENT)
            .await
            .map_err(|source| zk_error(connect, "creating the chroot", source))?;
    }
    Ok(client)
}

/// Create the namespace's `forever`, `ids` and `live` parents if missing.
pub(crate) async fn ensure_tree(client: &zk::Client, connect: &str, tree: &Tree) -> Result<()> {
    for dir in [tree.forever_dir(), tree.ids_dir(), tree.live_dir()] {
        client
            .mkdir(&dir, &PERSISTENT)
            .await
            .map_err(|source| zk_error(connect, "creating the namespace's nodes", source))?;
    }
    Ok(())
}

/// A client error as ours, naming what we were doing.
#[cold]
pub(crate) fn zk_error(connect: &str, action: &'static str, source: zk::Error) -> ZkError {
    ZkError::ZooKeeper {
        connect: connect.to_owned(),
        action,
        source,
    }
}
