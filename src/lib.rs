//! uidgen: distributed unique 64-bit IDs.
//!
//! This crate is a facade: it re-exports the workspace crates so that applications depend on one
//! name and the benchmarks in `benches/` can live at the top of the workspace. It holds no logic.
//!
//! ```
//! use uidgen::core::{Layout, SystemClock, DefaultUidGenerator, UidGenerator};
//! let layout = Layout::baidu_default().unwrap();
//! let generator = DefaultUidGenerator::new(layout, 7, SystemClock).unwrap();
//! let id = generator.next_id().unwrap();
//! assert_eq!(generator.parse(id).unwrap().parts.worker, 7);
//! ```

pub use uidgen_core as core;
pub use uidgen_segment as segment;

/// The README, whose Rust examples run as this crate's doctests, so the first code a reader
/// copies compiles and says what it prints.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
