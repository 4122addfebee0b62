//! Bit layouts: how an ID of at most 64 bits is cut into fields (Baidu's `BitsAllocator`,
//! generalised).
//!
//! Invariants every [`Layout`] value keeps (checked by [`Layout::new`] and the builders):
//! - the fields tile the ID's low [`width`](Layout::width) bits, from the most significant
//!   down; every bit above the width is zero in every ID (a JavaScript-safe layout is 53 wide);
//! - a sign field, if any, is the single top bit of a 64-bit layout;
//! - time and sequence have at least one bit and together at most 63 (generators pack them
//!   into one atomic word);
//! - the defaults generators stamp (Vesta's fields, the datacenter) fit their fields.
//!
//! The module is cut along its seams: `types` holds the type and its accessors, `builders`
//! the ways to derive one layout from another, `codec` composing and taking IDs apart,
//! `presets` the named layouts, `split` the worker field read as machine and process parts,
//! `decoded` how a taken-apart ID is shown, `runway` how long the time field lasts,
//! `succession` whether a move from one layout to another can repeat or reorder IDs
//! (reasoning on `id_set`'s sets of IDs). The vocabulary (field kinds, time units, an ID's
//! parts) is the crate's `fields`, which the error type names too.

mod builders;
mod codec;
pub(crate) mod decoded;
pub(crate) mod epochs;
mod id_set;
mod presets;
mod runway;
pub(crate) mod split;
mod succession;
mod types;

pub use decoded::DecodedUid;
pub use epochs::{
    BAIDU_LEGACY_EPOCH_MS, DEFAULT_EPOCH, JS_MAX_SAFE_INTEGER, PRESET_NAMES, SONYFLAKE_EPOCH_MS,
    TWITTER_EPOCH_MS, VESTA_EPOCH_MS,
};
pub use runway::{DEFAULT_RUNWAY_WARNING, Runway};
pub use split::{PartOrder, PartSpan, WorkerParts, WorkerSplit};
pub use succession::{HighMark, Succession};
pub use types::{IntoEpoch, Layout};
