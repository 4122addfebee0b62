//! Where this process runs, as the holder strings and `worker_node` rows name it: a container's
//! host from the environment, else this host's outward IP address.

use std::net::{IpAddr, UdpSocket};

/// Environment variable naming the host of a containerised process (Baidu: `JPaaS_HOST`).
pub const ENV_HOST: &str = "UIDGEN_HOST";
/// Environment variable naming the port of a containerised process (Baidu: `JPaaS_HTTP_PORT`).
pub const ENV_PORT: &str = "UIDGEN_PORT";

/// This process's host name: [`ENV_HOST`] when both it and [`ENV_PORT`] are set (a
/// container), else the first non-loopback IP, else `127.0.0.1` (Baidu's rule). A half-set
/// pair is ignored here; the store's `WorkerNode::try_detect` refuses it.
///
/// ```
/// let host = uidgen_worker::host_name();
/// assert!(!host.is_empty());
/// ```
pub fn host_name() -> String {
    let set = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    match (set(ENV_HOST), set(ENV_PORT)) {
        (Some(host), Some(_)) => host,
        _ => local_ip().map_or_else(|| "127.0.0.1".to_owned(), |ip| ip.to_string()),
    }
}

/// The holder name of a claim without a configured one: `<host>/<pid>`.
///
/// ```
/// let holder = uidgen_worker::default_holder();
/// assert!(holder.ends_with(&format!("/{}", std::process::id())));
/// ```
pub fn default_holder() -> String {
    format!("{}/{}", host_name(), std::process::id())
}

/// The address this host would use to reach the outside: connecting a UDP socket sends
/// nothing, it only picks the route's source address. `None` on an isolated host.
pub fn local_ip() -> Option<IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?; // TEST-NET-1: never routed, never contacted.
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}
