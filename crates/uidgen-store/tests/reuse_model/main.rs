#![allow(clippy::unwrap_used)]
//! Issue #8, "Done means": random interleavings of start, crash, clean stop, renewal, clock
//! steps (forward and back), database loss and recovery, and bursts, run against one SQLite
//! database with every host on its own [`ManualClock`], and checked against a model of who may
//! issue which time units.
//!
//! The model: over a run a worker id passes through many *lives* (one start of one host, up to
//! its crash or stop), and the time units two lives stamp never interleave: all of one's come
//! before all of the other's; a life that takes the id over stamps only after every unit its
//! earlier lives had stamped. That is what the fences promise (`uidgen_core::fence`): a life
//! stamps only units that end by its lease's expiry or its reserved-until mark, and start at or
//! after its floor, where the earlier lives stopped. It implies that no unit is shared, which
//! implies zero duplicate IDs; a duplicate is checked first and reported as such. Between ops,
//! the lease rule those fences rest on is checked against the database too.
//!
//! Issue 18 adds hosts that share no files, only the store: every host has a state directory of
//! its own (`StateDir`) and the same configuration, so one relative file name is a different
//! file on each. The leased world is built that way; the static world runs on two such hosts
//! with one configured id (`hosts.rs`), where only what the store records can keep them apart.
//!
//! Hosts' clocks start equal and move together on [`Op::Tick`] (time passes); a step moves one
//! host's clock alone, as an NTP correction does. The checks compare time units, numbers
//! stamped into IDs, never the moments at which hosts acted, so they do not depend on the
//! clocks agreeing.
//!
//! What is left out, and why: the cached generator pads from a thread of its own on real time,
//! so a case could not be replayed. The heartbeat is driven by [`Op::Tick`] on the manual
//! clock instead of its background task, and [`Op::Renew`] is one more renewal by hand. The
//! local mark's refresher thread cannot be turned off; it only ever raises the mark, which can
//! turn a restart from the cache into a refusal, never into an overlap. A refusal (a start, an
//! ID, a renewal) is always a legal outcome: the property is about what is issued, not about
//! what is refused.

#[path = "../common/mod.rs"]
mod common;
mod harness;
mod hosts;
mod leased;
mod lives;
mod static_world;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harness::*;
use hosts::*;
use leased::*;
use lives::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use static_world::*;
use uidgen_core::{Clock, FieldKind, Layout, ManualClock, TimeUnit, UidGenerator};
use uidgen_store::testing::{OccupiedPool, occupy_pool};
use uidgen_store::{DEFAULT_SPACE, LeaseGuard, LeasedWorkerIdAssigner, Store, StoreOptions};
use uidgen_worker::{
    GeneratorBuilder, LeaseOptions, StateDir, StaticWorkerIdAssigner, WorkerAssignment,
    WorkerIdAssigner,
};

/// Where every host's clock starts (2027-01-15).
const T0: u64 = 1_800_000_000_000;
/// A short lease, so that a handful of ticks runs one out: expiries, takeovers and restarts
/// from the cache all happen within a case.
const TTL: Duration = Duration::from_secs(2);
/// The cache reserve: a crashed holder's row stays live this long past its own expiry.
const RESERVE: Duration = Duration::from_secs(4);
/// How often a running lease's heartbeat renews it while time passes ([`Op::Tick`]).
const HEARTBEAT_MS: u64 = 1_000;
/// How long a query waits for a connection while its host's database is "down" before it
/// fails as unreachable. Every refused query costs this much real time.
const OUTAGE_TIMEOUT: Duration = Duration::from_millis(10);
/// Cases per run of the leased property, unless `PROPTEST_CASES` says otherwise (a soak run
/// can raise it). About 60 ms each in a debug build, mostly SQLite and the real time an
/// unreachable query waits.
const LEASED_CASES: u32 = 256;
/// Cases per run of the static property: no database, about 2 ms each.
const STATIC_CASES: u32 = 1_024;
/// Cases per run of the two-host static property: a SQLite registration per start.
const STATIC_HOSTS_CASES: u32 = 256;

/// The generator a life runs.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Baidu's: refuses any backward step.
    Default,
    /// Leaf's policy: waits out backward steps of up to 5 ms (the auto-advancing clock moves
    /// on while it waits).
    Snowflake,
}

/// The layouts a case may use, each with 0 or 1 worker bits so that ids are contended.
#[derive(Debug, Clone, Copy)]
enum Units {
    /// One-second units with a huge sequence: a lease's expiry falls inside a unit, so the
    /// fence's "the unit must *end* by the limit" is what keeps holders apart.
    Seconds,
    /// Millisecond units with an 8-ID sequence: a burst crosses units (the clock advances
    /// while the generator waits for the next one) and can run into a fence mid-burst.
    Millis,
}

/// The shape of one leased case's world.
#[derive(Debug, Clone)]
struct WorldSpec {
    hosts: usize,
    units: Units,
    worker_bits: u32,
    /// How often hosts lose the database, relative to how often they get it back: half the
    /// cases are outage-heavy, so that restarts from the cache happen often enough.
    outage_weight: u32,
}

/// One step of a leased world, aimed at a host (numbered from 0). An op the host cannot take
/// (an `Issue` while it runs nothing, a `Start` while it runs) goes to the next host in turn
/// that can; the log names the host that took it.
#[derive(Debug, Clone)]
enum Op {
    /// Assign a worker id (a database claim, or the local cache when the database is out of
    /// reach) and build a generator.
    Start(usize, Kind),
    /// The process dies: nothing is released, the cache file and the row stay as they were.
    Crash(usize),
    /// Clean shutdown: release the lease, then exit.
    Stop(usize),
    /// One heartbeat, by hand.
    Renew(usize),
    /// Take up to this many IDs, one at a time, until the first refusal.
    Issue(usize, usize),
    /// Time passes on every host (ms), and every running lease's heartbeat renews it each
    /// [`HEARTBEAT_MS`] on the way, as the background task would on a real clock.
    Tick(u64),
    /// One host's clock jumps forward (ms).
    StepForward(usize, u64),
    /// One host's clock steps back (ms).
    StepBack(usize, u64),
    /// The host loses the database (its queries time out).
    DbDown(usize),
    /// The host reaches the database again.
    DbUp(usize),
}

/// One step of the host with a static worker id; as in [`Op`].
#[derive(Debug, Clone)]
enum StaticOp {
    Start(Kind),
    Crash,
    Issue(usize),
    Tick(u64),
    StepBack(u64),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Default), Just(Kind::Snowflake)]
}

/// Time passing, at every scale that matters: within a unit, across a few units, and across
/// a ttl or a reserve.
fn tick_ms() -> impl Strategy<Value = u64> {
    prop_oneof![1..=20u64, 21..=2_500u64, 2_501..=8_000u64]
}

/// A clock step: a few ms (what Snowflake waits out), within a unit or a few, or far enough
/// back to reach below where a previous life stopped (a mark or an expiry seconds ago).
fn step_ms() -> impl Strategy<Value = u64> {
    prop_oneof![1..=10u64, 11..=3_000u64, 3_001..=15_000u64]
}

fn op(spec: &WorldSpec) -> impl Strategy<Value = Op> + use<> {
    let host = 0..spec.hosts;
    prop_oneof![
        5 => (host.clone(), kind()).prop_map(|(h, k)| Op::Start(h, k)),
        2 => host.clone().prop_map(Op::Crash),
        2 => host.clone().prop_map(Op::Stop),
        1 => host.clone().prop_map(Op::Renew),
        8 => (host.clone(), 1..=40usize).prop_map(|(h, n)| Op::Issue(h, n)),
        5 => tick_ms().prop_map(Op::Tick),
        1 => (host.clone(), step_ms()).prop_map(|(h, ms)| Op::StepForward(h, ms)),
        4 => (host.clone(), step_ms()).prop_map(|(h, ms)| Op::StepBack(h, ms)),
        spec.outage_weight => host.clone().prop_map(Op::DbDown),
        2 => host.prop_map(Op::DbUp),
    ]
}

fn leased_case() -> impl Strategy<Value = (WorldSpec, Vec<Op>)> {
    let units = prop_oneof![2 => Just(Units::Seconds), 1 => Just(Units::Millis)];
    (
        2..=3usize,
        units,
        0..=1u32,
        prop_oneof![Just(1u32), Just(3)],
    )
        .prop_map(|(hosts, units, worker_bits, outage_weight)| WorldSpec {
            hosts,
            units,
            worker_bits,
            outage_weight,
        })
        .prop_flat_map(|spec| {
            let ops = prop::collection::vec(op(&spec), 8..=96);
            (Just(spec), ops)
        })
}

fn static_case() -> impl Strategy<Value = (Units, Vec<StaticOp>)> {
    let units = prop_oneof![Just(Units::Seconds), Just(Units::Millis)];
    let op = prop_oneof![
        3 => kind().prop_map(StaticOp::Start),
        3 => Just(StaticOp::Crash),
        4 => (1..=40usize).prop_map(StaticOp::Issue),
        4 => tick_ms().prop_map(StaticOp::Tick),
        3 => step_ms().prop_map(StaticOp::StepBack),
    ];
    (units, prop::collection::vec(op, 4..=48))
}

/// Two hosts configured alike with static worker id 0 on one store, each with its own state
/// directory and its own clock, stepped apart: their lives may stop, crash and restart in any
/// order, on either host.
fn static_hosts_case() -> impl Strategy<Value = (Units, Vec<Op>)> {
    let units = prop_oneof![Just(Units::Seconds), Just(Units::Millis)];
    let host = 0..2usize;
    let op = prop_oneof![
        4 => (host.clone(), kind()).prop_map(|(h, k)| Op::Start(h, k)),
        2 => host.clone().prop_map(Op::Crash),
        2 => host.clone().prop_map(Op::Stop),
        1 => host.clone().prop_map(Op::Renew),
        6 => (host.clone(), 1..=40usize).prop_map(|(h, n)| Op::Issue(h, n)),
        4 => tick_ms().prop_map(Op::Tick),
        1 => (host.clone(), step_ms()).prop_map(|(h, ms)| Op::StepForward(h, ms)),
        3 => (host, step_ms()).prop_map(|(h, ms)| Op::StepBack(h, ms)),
    ];
    (units, prop::collection::vec(op, 4..=64))
}

// Two hosts that share only the store: each host's state file protects that host alone, so
// what keeps them apart is the store's lease on the exact id (a static id registered in a
// store is leased there; before that, both hosts ran worker 0 within a handful of cases).

#[test]
fn a_static_id_on_two_hosts_sharing_only_the_store_never_gives_one_time_unit_to_two_lives() {
    run_property(
        static_hosts_case(),
        STATIC_HOSTS_CASES,
        |units, ops| async move {
            StaticHostsWorld::new(units, 2)
                .await
                .run(&ops)
                .await
                .map(drop)
        },
    );
}

/// The smallest case of the property above: the second host starts while the first runs.
/// Its own state file is empty, so only the store can refuse it.
#[test]
fn a_static_id_started_on_a_second_host_while_the_first_runs_never_repeats_its_units() {
    use Op::{Issue, Start};
    let ops = [
        Start(0, Kind::Default),
        Issue(0, 1),
        Start(1, Kind::Default),
        Issue(1, 1),
    ];
    let outcome = runtime().block_on(async {
        StaticHostsWorld::new(Units::Seconds, 2)
            .await
            .run(&ops)
            .await
    });
    // One life: the second host's start is refused.
    check(outcome, 1);
}

#[test]
fn leased_worker_ids_never_give_one_time_unit_to_two_lives() {
    run_property(leased_case(), LEASED_CASES, |spec, ops| async move {
        LeasedWorld::new(&spec).await.run(&ops).await.map(drop)
    });
}

#[test]
fn a_static_worker_id_never_gives_one_time_unit_to_two_lives() {
    run_property(static_case(), STATIC_CASES, |units, ops| async move {
        StaticWorld::new(units).run(&ops).await.map(drop)
    });
}

// What the leased and static properties found on commit b1b5c46, before fences had a floor,
// shrunk and kept as named cases. Each time, a life took its worker id over (a claim after a
// release, a claim past a crashed holder's expiry, a restart from the cache or from a static
// id's state file) and its host's clock stepped back before its first ID. The start had
// waited for the clock to pass where the earlier life stopped, but the generator, having
// issued nothing, did not know that point: it stamped the earlier life's unit again, and its
// first ID (sequence 0) with it.

/// A named case must pass, with all its `lives` started: a refused takeover tests nothing.
fn check(outcome: Result<usize, TestCaseError>, lives: usize) {
    match outcome {
        Ok(started) => assert_eq!(started, lives, "a life the case needs did not start"),
        Err(error) => panic!("{error}"),
    }
}

/// One-second units, one worker id, two hosts: the smallest world where lives share an id.
fn run_one_id_two_hosts(ops: &[Op]) -> Result<usize, TestCaseError> {
    let spec = WorldSpec {
        hosts: 2,
        units: Units::Seconds,
        worker_bits: 0,
        outage_weight: 1,
    };
    runtime().block_on(async { LeasedWorld::new(&spec).await.run(ops).await })
}

#[test]
fn a_claim_after_a_release_never_stamps_below_it_when_the_clock_steps_back() {
    use Op::{Issue, Start, StepBack, Stop, Tick};
    let outcome = run_one_id_two_hosts(&[
        Start(0, Kind::Default),
        Issue(0, 1), // unit [T0, T0 + 1 s)
        Tick(1_001),
        Stop(0),                 // records issued-until T0 + 1 s
        Start(0, Kind::Default), // the clock is past it: no wait
        StepBack(0, 2),          // T0 + 999 ms: a 2 ms correction is enough
        Issue(0, 1),             // was: unit [T0, T0 + 1 s) again
    ]);
    check(outcome, 2);
}

#[test]
fn a_claim_past_a_crashed_holders_expiry_never_stamps_below_it_when_the_clock_steps_back() {
    use Op::{Crash, Issue, Start, StepBack, Tick};
    let outcome = run_one_id_two_hosts(&[
        Start(0, Kind::Default),
        Issue(0, 1),
        Crash(0), // its row holds until T0 + ttl + reserve = T0 + 6 s
        Tick(6_001),
        Start(1, Kind::Default),
        StepBack(1, 6_000),
        Issue(1, 1),
    ]);
    check(outcome, 2);
}

#[test]
fn a_restart_from_the_cache_never_stamps_below_its_mark_when_the_clock_steps_back() {
    use Op::{Crash, DbDown, Issue, Start, StepBack, Tick};
    let outcome = run_one_id_two_hosts(&[
        Start(0, Kind::Default),
        Issue(0, 1), // the mark goes to the unit's end plus a 2 s step: T0 + 3 s
        Crash(0),
        DbDown(0),
        Tick(3_001),
        Start(0, Kind::Default), // from the cache: past the mark, before the row's expiry
        StepBack(0, 3_000),
        Issue(0, 1),
    ]);
    check(outcome, 2);
}

/// Found by the leased property with floors in place: a claim started its cache file's mark at
/// what the file held (nothing, after this host's own release deleted it, or on a host that
/// never held the id), not at the claim's floor, which lived only in the generator; a restart
/// from the file takes the file's mark as its floor. Fixed: the claim writes its floor into
/// the file's mark (`LocalMark::begin_from`).
#[test]
fn a_restart_from_the_cache_of_a_claim_that_issued_nothing_never_stamps_below_its_floor() {
    use Op::{Crash, DbDown, Issue, Start, StepBack, Stop, Tick};
    let outcome = run_one_id_two_hosts(&[
        Start(0, Kind::Default),
        Issue(0, 1), // life 1: unit [T0, T0 + 1 s)
        Stop(0),     // records issued-until T0 + 1 s and deletes the cache file
        Tick(1_001),
        Start(0, Kind::Default), // life 2: floor T0 + 1001 ms, now also the file's mark
        StepBack(0, 5_000),      // T0 - 3999 ms
        Crash(0),                // before any ID
        DbDown(0),
        Start(0, Kind::Default), // life 3, from the file: refused, its clock is behind the mark
        Tick(4_000),             // T0 + 1 ms
        Issue(0, 1),             // was unit [T0, T0 + 1 s) again; now nobody issues
    ]);
    // Life 3 must not start: before the fix it did, and repeated life 1's first ID.
    check(outcome, 2);
}

#[test]
fn a_static_restart_never_stamps_below_its_mark_when_the_clock_steps_back() {
    use StaticOp::{Crash, Issue, Start, StepBack, Tick};
    let ops = [
        Start(Kind::Default),
        Issue(1),
        Crash,
        Tick(3_001),
        Start(Kind::Default),
        StepBack(3_000),
        Issue(1),
    ];
    check(
        runtime().block_on(StaticWorld::new(Units::Seconds).run(&ops)),
        2,
    );
}
