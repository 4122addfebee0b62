//! Meituan's clock check for a new holder: this clock against the other live holders' reports
//! (the Leaf article, <https://tech.meituan.com/2017/04/21/mt-leaf.html>: a node that never
//! wrote its forever node compares its clock with the other nodes'; one that did checks only
//! its own last written time). Leaf's code has no peer check; a restart on this address's own
//! node is checked only against that node's own last report, as the article says.
//!
//! A live holder reports every interval, so its last report is at most an interval old, and a
//! true clock reads at most that far past it. But right after ZooKeeper was away for longer
//! than the session timeout, the holders' reports are as old as the outage until they have
//! opened a new session and reported again (a few intervals), and the holders that died
//! meanwhile keep their live nodes until the server expires their sessions (one session
//! timeout after it is back). Comparing against those reports would refuse a good clock. So a
//! report older than two intervals by this clock counts as stale and is left out; when every
//! report is stale, the check waits, in the process, for fresh reports (or for the dead
//! holders' live nodes to go) for two session timeouts and two intervals. Only when reports
//! are still all stale after that is this clock compared with them: a clock that far ahead of
//! every live holder is wrong, not early.

use std::collections::HashSet;
use std::time::Duration;

use uidgen_core::Clock;
use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::options::ZkOptions;
use crate::session::zk_error;
use crate::tree::{NodeData, Tree, parse_forever_name};
use uidgen_core::clock::saturating_millis as ms;

/// What the reports say about this clock.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Within the skew allowed, or no other live holder.
    Fine,
    /// Every report is stale: ask again later.
    Stale,
    /// Off by more than allowed.
    Skewed(Skew),
}

#[derive(Debug, PartialEq, Eq)]
struct Skew {
    peers_avg_ms: u64,
    peers: usize,
    skew_ms: u64,
}

/// Check this clock against the other live holders of the namespace (not those of this
/// address), waiting out stale reports as the module documentation says.
pub(crate) async fn check_peers(
    client: &zk::Client,
    tree: &Tree,
    options: &ZkOptions,
    clock: &dyn Clock,
) -> Result<()> {
    let patience = options
        .session_timeout
        .saturating_mul(2)
        .saturating_add(options.report_interval.saturating_mul(2));
    let deadline = tokio::time::Instant::now() + patience;
    let mut waited = false;
    loop {
        let reports = live_reports(client, tree, options).await?;
        let now_ms = clock.now_millis();
        let give_up = tokio::time::Instant::now() >= deadline;
        match judge(&reports, now_ms, options, give_up) {
            Verdict::Fine => {
                if waited {
                    tracing::info!("the other live holders report again: this clock agrees");
                }
                return Ok(());
            }
            Verdict::Skewed(skew) => {
                return Err(ZkError::PeerSkew {
                    now_ms,
                    peers_avg_ms: skew.peers_avg_ms,
                    peers: skew.peers,
                    skew_ms: skew.skew_ms,
                    max_skew_ms: ms(options.max_peer_skew),
                });
            }
            Verdict::Stale => {
                if !waited {
                    tracing::info!(
                        peers = reports.len(),
                        "every other live holder's last report is older than two report \
                         intervals (was ZooKeeper away?): waiting for fresh reports before \
                         checking this clock against them"
                    );
                    waited = true;
                }
                tokio::time::sleep(options.report_interval.min(Duration::from_secs(1))).await;
            }
        }
    }
}

/// The decision, from the reports (ms, their holders' clocks) and this clock.
fn judge(reports: &[u64], now_ms: u64, options: &ZkOptions, give_up: bool) -> Verdict {
    if reports.is_empty() {
        return Verdict::Fine;
    }
    let interval_ms = ms(options.report_interval);
    let fresh: Vec<u64> = reports
        .iter()
        .copied()
        .filter(|&t| t.saturating_add(interval_ms.saturating_mul(2)) >= now_ms)
        .collect();
    let compared = match (fresh.is_empty(), give_up) {
        (false, _) => fresh,
        (true, false) => return Verdict::Stale,
        (true, true) => reports.to_vec(),
    };
    let peers = compared.len();
    let sum: u128 = compared.iter().map(|&t| u128::from(t)).sum();
    let peers_avg_ms = u64::try_from(sum / peers as u128).unwrap_or(u64::MAX);
    // A report is up to one interval old: a true clock reads at most that much past it.
    let skew_ms = if peers_avg_ms > now_ms {
        peers_avg_ms - now_ms
    } else {
        (now_ms - peers_avg_ms).saturating_sub(interval_ms)
    };
    if skew_ms > ms(options.max_peer_skew) {
        return Verdict::Skewed(Skew {
            peers_avg_ms,
            peers,
            skew_ms,
        });
    }
    Verdict::Fine
}

/// The last report of every live holder of the namespace but this address's.
async fn live_reports(client: &zk::Client, tree: &Tree, options: &ZkOptions) -> Result<Vec<u64>> {
    let error = |source| {
        zk_error(
            &options.connect,
            "reading the other holders' reports",
            source,
        )
    };
    let live: HashSet<u64> = client
        .list_children(&tree.live_dir())
        .await
        .map_err(error)?
        .iter()
        .filter_map(|id| id.parse().ok())
        .collect();
    let own = format!("{}-", options.listen_address());
    let mut reports = Vec::new();
    for name in client
        .list_children(&tree.forever_dir())
        .await
        .map_err(error)?
    {
        let Some((_, id)) = parse_forever_name(&name) else {
            continue;
        };
        if !live.contains(&id) || name.starts_with(&own) {
            continue;
        }
        let path = tree.forever(&name);
        if let Ok((bytes, _)) = client.get_data(&path).await
            && let Ok(data) = NodeData::parse(&path, &bytes)
        {
            reports.push(data.timestamp);
        }
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ZkOptions {
        // Reports every 3 s, a 5 s skew allowed.
        ZkOptions::new("127.0.0.1:2181", "t", "10.0.0.1", "1")
    }

    #[test]
    fn no_peer_or_a_close_clock_is_fine() {
        let o = options();
        assert_eq!(judge(&[], 1_000_000, &o, false), Verdict::Fine);
        assert_eq!(
            judge(&[1_000_000 - 2_000], 1_000_000, &o, false),
            Verdict::Fine
        );
        assert_eq!(judge(&[1_004_000], 1_000_000, &o, false), Verdict::Fine);
    }

    #[test]
    fn a_clock_behind_fresh_reports_is_refused() {
        let o = options();
        assert!(matches!(
            judge(&[1_060_000, 1_060_100], 1_000_000, &o, false),
            Verdict::Skewed(Skew { peers: 2, .. })
        ));
    }

    #[test]
    fn stale_reports_are_left_out_and_waited_for() {
        let o = options();
        let now = 10_000_000;
        // A holder that reported a minute ago (ZooKeeper away) beside one reporting now: only
        // the fresh one counts.
        assert_eq!(
            judge(&[now - 60_000, now - 1_000], now, &o, false),
            Verdict::Fine
        );
        // Only stale reports: wait for fresh ones ...
        assert_eq!(judge(&[now - 60_000], now, &o, false), Verdict::Stale);
        // ... but still all stale at the end of the wait: this clock is ahead of every live
        // holder, which is refused.
        assert!(matches!(
            judge(&[now - 60_000], now, &o, true),
            Verdict::Skewed(Skew {
                skew_ms: 57_000,
                ..
            })
        ));
        // Reports just inside two intervals are fresh.
        assert_eq!(judge(&[now - 6_000], now, &o, false), Verdict::Fine);
    }
}
