//! Loom models of uidgen's [`RingBuffer`](uidgen_core::RingBuffer).
//!
//! It is for proving, by exhaustive interleaving, that the ring's claim-then-read protocol hands
//! every ID to exactly one consumer and loses none. It is not a test of speed, nor of the padding
//! thread's timing (loom cannot model the wall clock). The models are in `tests/ring.rs` and only
//! compile under `RUSTFLAGS="--cfg uidgen_loom"`, which swaps the ring's atomics for loom's
//! through `uidgen-core`'s internal `sync` module: the real code, not a copy.
//!
//! ```text
//! RUSTFLAGS="--cfg uidgen_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p uidgen-loom --release
//! ```
