//! Meituan Leaf's segment mode for uidgen: unique, increasing `i64` IDs per business tag, handed
//! out from segments of the `leaf_alloc` table.
//!
//! It is for services that want short, dense, roughly increasing IDs per tag (orders, users)
//! backed by any of uidgen's databases: each tag keeps two segments in memory (Leaf's
//! `SegmentBuffer`), takes IDs with one atomic add, loads the next segment in the background
//! once 10% of the current one is used, and sizes segments by demand (dynamic step). A segment is
//! served only after its claim is committed, so a crash may skip IDs but never repeats one, across
//! threads, processes and restarts. It is not for time-ordered IDs that encode a worker and a
//! timestamp (that is `uidgen-core`'s Snowflake/Baidu generators), nor for talking to the
//! database directly (that is `uidgen-store`), nor for HTTP (that is `uidgen-server`).
//!
//! A tag may also be served from several databases at once (Tinyid's multi-database segments,
//! [`SegmentGroup`] and [`SegmentService::start_with_groups`]): each database holds the tag with
//! `delta` = N and its own `remainder`, hands out only the numbers of its residue, and the
//! service claims from whichever database answers, so the tag serves while one of them lives.
//!
//! A clean stop ([`SegmentService::shutdown_and_hand_back`]) hands the untouched rest of every
//! buffered segment back to the store (`leaf_alloc_returned`), and every load takes such a
//! range, by one server only, before it claims a new segment: a restart throws no numbers
//! away, a crash still skips what was buffered (see the `hand_back` module).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use uidgen_core::SystemClock;
//! use uidgen_segment::{SegmentOptions, SegmentService};
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("uidgen.db").display());
//! let store = uidgen_store::Store::connect(&url).await?; // e.g. "sqlite://uidgen.db"
//! let service = SegmentService::start(store, SegmentOptions::default(), SystemClock).await?;
//! service.upsert_tag("order", 1000, None).await?;
//! // In async code, `get_async` waits for a segment in flight without blocking the runtime.
//! let first = service.get_async("order").await?;
//! let next = service.get_async("order").await?;
//! assert_eq!((first, next), (1, 2)); // Leaf's tags start at 1
//! # Ok(()) }
//! ```

mod buffer;
mod dated;
mod error;
mod group;
mod grouped;
mod hand_back;
mod handle;
mod options;
mod routed;
mod service;
mod shared;
mod slot;
mod source;
mod state;
mod step;
mod tag;
#[cfg(test)]
mod unit_tests;

pub use buffer::SegmentBuffer;
pub use dated::day_tag;
pub use error::{GroupProblem, Result, SegmentError};
pub use group::{GroupDatabaseState, GroupState, GroupTagRow, SegmentGroup};
pub use hand_back::HandedBack;
pub use handle::TagHandle;
pub use options::{MAX_RANDOM_SKIP, MAX_WAIT, SegmentOptions};
pub use service::SegmentService;
pub use state::{SegmentState, TagState};
pub use step::next_step;
pub use tag::validate_tag;
