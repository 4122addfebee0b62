//! The one trait every generator implements.

use crate::error::{Result, UidError};
use crate::layout::{DecodedUid, Layout};

/// The most IDs one `next_ids` call hands out; larger batches would make one caller hold a huge
/// allocation and starve the others.
pub const MAX_BATCH: usize = 10_000_000;

/// Check a batch size: 1 to [`MAX_BATCH`].
///
/// ```
/// assert!(uidgen_core::check_count(0).is_err());
/// assert!(uidgen_core::check_count(1000).is_ok());
/// ```
pub fn check_count(n: usize) -> Result<()> {
    if n == 0 || n > MAX_BATCH {
        return Err(UidError::InvalidCount {
            requested: n,
            max: MAX_BATCH,
        });
    }
    Ok(())
}

/// A source of unique 64-bit IDs.
///
/// Object safe, so a service can hold an `Arc<dyn UidGenerator>` and switch kinds by
/// configuration.
///
/// ```
/// use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, UidGenerator};
/// let clock = ManualClock::auto_advancing(1_700_000_000_000);
/// let generator: Box<dyn UidGenerator> =
///     Box::new(SnowflakeGenerator::new(Layout::snowflake().unwrap(), 5, clock).unwrap());
/// let ids = generator.next_ids(10).unwrap();
/// assert!(ids.windows(2).all(|w| w[0] < w[1]));
/// assert_eq!(generator.parse(ids[0]).unwrap().parts.worker, 5);
/// ```
pub trait UidGenerator: Send + Sync {
    /// One new ID.
    fn next_id(&self) -> Result<u64>;

    /// `n` new IDs (1 to [`MAX_BATCH`]).
    fn next_ids(&self, n: usize) -> Result<Vec<u64>> {
        check_count(n)?;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(self.next_id()?);
        }
        Ok(ids)
    }

    /// The layout IDs are made with.
    fn layout(&self) -> &Layout;

    /// The wall-clock instant (ms since the Unix epoch) before which every ID this generator has
    /// issued, or holds ready to issue, was stamped; `None` before the first ID.
    ///
    /// A successor that reuses this worker id must not issue until its clock reaches this
    /// instant: that is how a leased worker id is handed over without a duplicate.
    fn issued_until_ms(&self) -> Option<u64>;

    /// Take an ID of this generator's layout apart.
    fn parse(&self, id: u64) -> Result<DecodedUid> {
        self.layout().decode(id)
    }
}
