//! Loom models of uidgen's [`RingBuffer`](uidgen_core::RingBuffer) and of the sequencer behind
//! the Default and Snowflake generators.
//!
//! It is for proving, by exhaustive interleaving, that the ring's claim-then-read protocol hands
//! every ID to exactly one consumer and loses none, per-thread batches (`LocalIds`) included,
//! and that a stop ends a handle with its reason (`tests/ring.rs`), and that the sequencer's
//! compare-and-swap never returns one ID twice, through a sequence overflow and a clock that
//! steps back (`tests/sequencer.rs`), and that a unit handle and a padding run never claim one
//! time unit twice (`tests/units.rs`). It is not a test of speed, nor of the padding thread's
//! timing (loom cannot model the wall clock: time enters through `ManualClock`). The models
//! only compile under `RUSTFLAGS="--cfg uidgen_loom"`, which swaps the ring's, the sequencer's
//! and the manual clock's atomics for loom's through `uidgen-core`'s internal `sync` module:
//! the real code, not a copy.
//!
//! ```text
//! RUSTFLAGS="--cfg uidgen_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p uidgen-loom --release
//! ```
