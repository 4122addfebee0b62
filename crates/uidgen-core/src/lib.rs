//! The pure core of uidgen: bit layouts, clocks, and the ID generators.
//!
//! It is for turning a worker id and a clock into unique, time-ordered 64-bit IDs, and for
//! taking such IDs apart again. It is not for obtaining the worker id (that is `uidgen-store`'s
//! job), nor for anything asynchronous or networked: no I/O, no async, no database here.
//!
//! ```
//! use uidgen_core::{DefaultUidGenerator, Layout, SystemClock, UidGenerator};
//! let generator = DefaultUidGenerator::new(Layout::baidu_default()?, 1, SystemClock)?;
//! let id = generator.next_id()?;
//! let decoded = generator.parse(id)?;
//! assert_eq!(decoded.parts.worker, 1);
//! # Ok::<(), uidgen_core::UidError>(())
//! ```

pub mod cached;
pub mod calendar;
mod civil;
pub mod clock;
pub mod default_gen;
pub mod error;
pub mod fence;
mod fields;
pub mod forms;
pub mod generator;
pub mod layout;
pub mod local;
pub mod mask;
pub mod ring;
mod sequencer;
pub mod snowflake;
mod sync;
mod tag;
pub mod zone;

pub use cached::{CachedOptions, CachedUidGenerator};
pub use clock::{Clock, ManualClock, SystemClock};
pub use default_gen::DefaultUidGenerator;
pub use error::{Result, UidError};
pub use fence::{FenceRefusal, TimeFence};
pub use fields::{FieldKind, GenMethod, TimeUnit, UidParts};
pub use forms::{DatedForm, DatedNumber, IdForm};
pub use generator::{MAX_BATCH, PaddedHook, ReadyStock, UidGenerator, WorkerLanes, check_count};
pub use layout::decoded::DecodedUid;
pub use layout::epochs::LEAF_RANDOM_START_BOUND;
pub use layout::split::{WorkerParts, WorkerSplit};
pub use layout::{IntoEpoch, Layout};
pub use local::{LocalIds, UnitIds};
pub use mask::{MaskKey, Masker};
pub use ring::{RejectPut, RejectTake, RingBuffer};
pub use snowflake::{DEFAULT_MAX_BACKWARD_MS, SnowflakeGenerator};
pub use tag::{MAX_TAG_LEN, TAG_PATTERN, TAG_PUNCTUATION, check_biz_tag, is_tag_char};
pub use zone::Zone;
