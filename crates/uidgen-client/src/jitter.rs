//! Jitter for the pauses between retries on peers: a client sleeps a random part of each
//! pause, so clients that lost the same server at the same moment do not retry in lockstep.
//!
//! Without it, every client that saw a server go down retries after the same 10, 20, 40 ms,
//! and the next peer takes the whole fleet's retries in bursts. "Equal jitter" (AWS
//! Architecture Blog, "Exponential Backoff And Jitter",
//! <https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/>): a pause `p`
//! becomes a uniform draw in `[p/2, p]`, which spreads the retries and still keeps half of
//! the backoff, so a retry never comes sooner than half the configured pause.
//!
//! The random source is per client and cheap (SplitMix64 over one atomic counter, seeded from
//! the clock, the process id and a per-process count): it only spreads timings, it guards
//! nothing, so it needs no cryptographic quality and no crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// One client's random source for its retry pauses.
#[derive(Debug)]
pub(crate) struct Jitter {
    /// SplitMix64's state: each draw adds [`GAMMA`] and mixes the sum.
    state: AtomicU64,
}

impl Jitter {
    /// A source seeded apart from every other client's: by the wall clock, the process id
    /// (clients started together on several hosts or in several processes) and a count of
    /// the clients of this process (clients made in the same nanosecond).
    pub(crate) fn new() -> Self {
        static CLIENTS: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only needs a distinct value per client of the process.
        let count = CLIENTS.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                since.as_secs().wrapping_mul(1_000_000_000) ^ u64::from(since.subsec_nanos())
            });
        let pid = u64::from(std::process::id());
        Self::seeded(mix(now) ^ mix(pid.rotate_left(32)) ^ mix(count.wrapping_add(GAMMA)))
    }

    fn seeded(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
        }
    }

    /// A uniform draw in `[pause/2, pause]` (equal jitter). A pause past `u64::MAX`
    /// nanoseconds (585 years) is drawn as if it were that long.
    pub(crate) fn spread(&self, pause: Duration) -> Duration {
        let nanos = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        let floor = nanos / 2;
        let span = nanos - floor;
        // Multiply-shift: uniform in [0, span] without the bias of a remainder.
        let extra = (u128::from(self.next()) * (u128::from(span) + 1)) >> 64;
        Duration::from_nanos(floor + u64::try_from(extra).unwrap_or(span))
    }

    fn next(&self) -> u64 {
        // Relaxed: each draw only needs its own state value, which the atomic add gives every
        // caller; no other memory is published through it.
        mix(self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA))
    }
}

/// SplitMix64's finaliser: spreads every bit of `z` over the whole word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_pause_stays_between_half_and_all_of_the_configured_pause() {
        let jitter = Jitter::new();
        for pause in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(3),
            Duration::from_millis(10),
            Duration::from_millis(200),
            Duration::MAX,
        ] {
            let capped = Duration::from_nanos(u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX));
            for _ in 0..1_000 {
                let slept = jitter.spread(pause);
                assert!(slept >= capped / 2, "{slept:?} below half of {pause:?}");
                assert!(slept <= capped, "{slept:?} above {pause:?}");
            }
        }
    }

    #[test]
    fn retry_pauses_spread_over_the_range() {
        let jitter = Jitter::seeded(7);
        let pause = Duration::from_millis(100);
        let draws: Vec<Duration> = (0..1_000).map(|_| jitter.spread(pause)).collect();
        // Each quarter of [50, 100] ms gets its share: no lockstep within one client either.
        for quarter in 0..4u32 {
            let low = pause / 2 + pause / 8 * quarter;
            let high = low + pause / 8;
            let inside = draws.iter().filter(|d| **d >= low && **d < high).count();
            assert!(
                inside > 150,
                "{inside} of 1000 draws in [{low:?}, {high:?})"
            );
        }
    }

    #[test]
    fn two_clients_pause_differently() {
        let (a, b) = (Jitter::new(), Jitter::new());
        let pause = Duration::from_millis(100);
        let first: Vec<Duration> = (0..16).map(|_| a.spread(pause)).collect();
        let second: Vec<Duration> = (0..16).map(|_| b.spread(pause)).collect();
        assert_ne!(first, second, "two clients made together retry in lockstep");
    }
}
