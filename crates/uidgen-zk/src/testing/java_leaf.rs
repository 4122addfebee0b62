//! Java Leaf's snowflake holder (`SnowflakeZookeeperHolder`), as its ZooKeeper operations go:
//! for tests that run Leaf beside uidgen in one namespace (issue 31). One operation per line of
//! Leaf's code, written out here rather than run in a JVM: `init` (its `checkExists`,
//! `getChildren` and `key.split("-")` parse), `createNode` (`PERSISTENT_SEQUENTIAL`, parents as
//! needed) and `updateNewData` (its `Endpoint` JSON every 3 s).

use zookeeper_client as zk;

use crate::tree::NodeData;

/// One Java Leaf server (its `ip:port` and `leaf.name`), on its own session.
pub struct JavaLeaf {
    client: zk::Client,
    forever: String,
    ip: String,
    port: String,
}

impl JavaLeaf {
    /// A Leaf server of `10.9.8.7:{port}` in the namespace `name`, connected to `connect` (a
    /// test's chroot is created if missing, as Leaf's deployment had its root).
    pub async fn new(connect: &str, name: &str, port: u16) -> Self {
        let client = zk::Client::connect(connect).await.unwrap();
        let chroot = client.path().to_owned();
        if chroot != "/" {
            let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            let root = client.clone().chroot("/").unwrap_or_else(|same| same);
            root.mkdir(&chroot, &persistent).await.unwrap();
        }
        Self {
            client,
            forever: format!("/snowflake/{name}/forever"),
            ip: "10.9.8.7".to_owned(),
            port: port.to_string(),
        }
    }

    /// Its listen address, `ip:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// `buildData`: Jackson's `Endpoint` JSON, `timestamp` this clock.
    pub fn endpoint(&self) -> Vec<u8> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        NodeData {
            ip: self.ip.clone(),
            port: self.port.clone(),
            timestamp: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
            reserved_until: None,
            life: None,
        }
        .to_json()
    }

    /// `init()`: its worker id, or the `Exception` that would make it fall back to its
    /// `workerID.properties`.
    pub async fn init(&self) -> Result<u64, String> {
        let listen = self.address();
        // Stat stat = curator.checkExists().forPath(PATH_FOREVER);
        if self
            .client
            .check_stat(&self.forever)
            .await
            .unwrap()
            .is_none()
        {
            // zk_AddressNode = createNode(curator); the worker id stays 0.
            self.create_node(&listen).await;
            return Ok(0);
        }
        // List<String> keys = curator.getChildren().forPath(PATH_FOREVER);
        let keys = self.client.list_children(&self.forever).await.unwrap();
        let mut own = None;
        for key in keys {
            // String[] nodeKey = key.split("-"); Integer.parseInt(nodeKey[1]);
            let parts: Vec<&str> = key.split('-').collect();
            let id: u64 = parts
                .get(1)
                .ok_or_else(|| format!("ArrayIndexOutOfBounds on {key}"))?
                .parse()
                .map_err(|_| format!("NumberFormatException on {key}"))?;
            if parts[0] == listen {
                own = Some(id);
            }
        }
        match own {
            Some(id) => Ok(id),
            None => {
                // newNode = createNode(curator); workerID = parseInt(newNode.split("-")[1]);
                let name = self.create_node(&listen).await;
                Ok(name.rsplit('-').next().unwrap().parse().unwrap())
            }
        }
    }

    /// `createNode`: `PERSISTENT_SEQUENTIAL` at `forever/{ip}:{port}-`, parents created as
    /// needed (Curator's `creatingParentsIfNeeded`); the node's name.
    pub async fn create_node(&self, listen: &str) -> String {
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        self.client.mkdir(&self.forever, &persistent).await.unwrap();
        let sequential = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let prefix = format!("{}/{listen}-", self.forever);
        let (_, sequence) = self
            .client
            .create(&prefix, &self.endpoint(), &sequential)
            .await
            .unwrap();
        format!("{listen}-{sequence}")
    }

    /// `updateNewData` of its node for worker id `id` (Leaf: every 3 s).
    pub async fn report(&self, id: u64) {
        let path = format!("{}/{}-{id:010}", self.forever, self.address());
        self.client
            .set_data(&path, &self.endpoint(), None)
            .await
            .unwrap();
    }
}
