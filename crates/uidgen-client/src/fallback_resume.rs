//! A leased fallback restarted while no server answers: continuing the lease an earlier
//! process of this host left in the state directory (`uidgen_worker::RemoteLease`'s
//! `find_resumable`), with callers waiting for it meanwhile and told what for: the earlier
//! process's lock on the lease's file (a process killed a moment ago still holds it), or the
//! clock passing the file's mark.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use uidgen_core::{Clock, SystemClock};
use uidgen_worker::{RemoteLease, Resumable, StaticWorkerIdAssigner};

use crate::fallback_lease::{Held, LeaseKeeper, Next};

/// How long a restart polls a state file whose lease another process holds: the previous
/// process may still be exiting (a `kill -9` takes a moment to release its lock), and a
/// process of the application that keeps running is not waited for longer than this.
const HELD_POLL: Duration = Duration::from_secs(2);

/// How often that poll looks again.
const HELD_POLL_EVERY: Duration = Duration::from_millis(50);

impl LeaseKeeper {
    /// No server answers a claim (`last_error`): continue the lease an earlier process of this
    /// host left in the state directory, if there is one. Callers wait for it meanwhile (see
    /// [`next_id`](Self::next_id)), told what it waits for.
    pub(crate) async fn resume(&self, last_error: &str) -> Next {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let dir = self.state_dir.display();
        let unanswered = format!("no server has answered a claim ({last_error})");
        let polled_until = Instant::now() + HELD_POLL;
        let found = loop {
            match RemoteLease::find_resumable(&self.state_dir, &self.layout, Arc::clone(&clock)) {
                Ok(Resumable::Held(held)) if Instant::now() < polled_until => {
                    let lease = &held[0];
                    self.set_coming(
                        format!(
                            "{unanswered}; the state directory {dir} holds an unexpired lease on \
                             worker id {} (until {} ms), but another process holds its file {}: \
                             waiting up to {} ms for it to let go (the previous process may \
                             still be exiting)",
                            lease.worker_id,
                            lease.valid_until_ms,
                            lease.path.display(),
                            HELD_POLL.as_millis()
                        ),
                        polled_until,
                    );
                    tokio::time::sleep(HELD_POLL_EVERY).await;
                }
                found => break found,
            }
        };
        match found {
            Ok(Resumable::Ready(pending)) => {
                let (worker_id, mark, valid_until) = (
                    pending.worker_id(),
                    pending.mark_ms(),
                    pending.valid_until_ms(),
                );
                let path = pending.path().display().to_string();
                let wait_ms = mark.saturating_add(1).saturating_sub(clock.now_millis());
                // The longest `start` waits, and a little for the rest of it.
                let most = StaticWorkerIdAssigner::DEFAULT_MAX_START_WAIT;
                let until = Instant::now()
                    + Duration::from_millis(wait_ms).min(most)
                    + Duration::from_millis(100);
                self.set_coming(
                    format!(
                        "{unanswered}; continuing the lease on worker id {worker_id} that {path} \
                         records (until {valid_until} ms): waiting until the clock passes its \
                         mark {mark} ms, {wait_ms} ms from now, where the previous process \
                         stopped issuing"
                    ),
                    until,
                );
                match pending.start(&self.layout, clock).await {
                    Ok(Some(lease)) => match Held::new(&self.layout, lease) {
                        Ok(held) => {
                            self.set_current(Some(Arc::new(held)));
                        }
                        Err(error) => self.set_why_none(error.to_string()),
                    },
                    Ok(None) => self.set_unanswered_why_none(format!(
                        "{unanswered}; the lease on worker id {worker_id} that {path} recorded \
                         ran out at {valid_until} ms while waiting for the clock to pass its mark"
                    )),
                    Err(error) => self.set_unanswered_why_none(format!(
                        "{unanswered}; the lease on worker id {worker_id} that {path} records \
                         cannot be continued: {error}"
                    )),
                }
            }
            Ok(Resumable::Held(held)) => {
                let lease = &held[0];
                self.set_unanswered_why_none(format!(
                    "{unanswered}; the state directory {dir} holds an unexpired lease on worker \
                     id {} (until {} ms), but another process (of this application, still \
                     running) holds its file {}: tried again with every claim (at least a second \
                     apart)",
                    lease.worker_id,
                    lease.valid_until_ms,
                    lease.path.display()
                ));
            }
            Ok(Resumable::Nothing) => self.set_unanswered_why_none(format!(
                "{unanswered}, and the state directory {dir} holds no unexpired lease to continue"
            )),
            Err(error) => self.set_unanswered_why_none(format!(
                "{unanswered}, and the state directory cannot be read: {error}"
            )),
        }
        Next::Soon
    }
}
