//! Running a property: proptest's runner, a runtime per test, and a shrinker that keeps
//! dropping ops while the case still fails.

use super::*;

/// A runtime for one test: the database and the assigners are async, proptest is not.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// How long a failing run may spend shrinking, in proptest and then in [`drop_ops`] (each).
pub(crate) const SHRINK_TIME: Duration = Duration::from_secs(120);

/// Run a property over a world and its ops. A failure is reported with the fewest ops that
/// still fail and what happened in them.
pub(crate) fn run_property<W, O, S, F, Fut>(strategy: S, cases: u32, case: F)
where
    W: Clone + std::fmt::Debug,
    O: Clone + std::fmt::Debug,
    S: Strategy<Value = (W, Vec<O>)>,
    F: Fn(W, Vec<O>) -> Fut,
    Fut: std::future::Future<Output = Result<(), TestCaseError>>,
{
    let runtime = runtime();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let config = Config {
        cases,
        // A failure is turned into a named test in this file, not a regressions file.
        failure_persistence: None,
        max_shrink_time: u32::try_from(SHRINK_TIME.as_millis()).unwrap(),
        ..Config::default()
    };
    let run = |world: &W, ops: &[O]| runtime.block_on(case(world.clone(), ops.to_vec()));
    match TestRunner::new(config).run(&strategy, |(world, ops)| run(&world, &ops)) {
        Ok(()) => {}
        Err(TestError::Fail(_, (world, ops))) => {
            let ops = drop_ops(ops, |ops| run(&world, ops).is_err());
            let why = run(&world, &ops).err().map_or_else(
                || "(it passed when run again: the failure depends on timing)".to_owned(),
                |error| error.to_string(),
            );
            let ops: Vec<String> = ops.iter().map(|op| format!("{op:?}")).collect();
            panic!(
                "{why}\nminimal failing input: {world:?}, [\n    {},\n]",
                ops.join(",\n    ")
            );
        }
        Err(error) => panic!("{error}"),
    }
}

/// Delete ops one at a time for as long as the case still `fails`, pass after pass. Proptest
/// tries each deletion once; here one deletion often makes another possible (an op aimed at
/// a host lands elsewhere once an earlier one is gone).
pub(crate) fn drop_ops<O: Clone>(mut ops: Vec<O>, fails: impl Fn(&[O]) -> bool) -> Vec<O> {
    let deadline = std::time::Instant::now() + SHRINK_TIME;
    let mut progress = true;
    while progress && std::time::Instant::now() < deadline {
        progress = false;
        let mut i = 0;
        while i < ops.len() && std::time::Instant::now() < deadline {
            let mut fewer = ops.clone();
            fewer.remove(i);
            if fails(&fewer) {
                ops = fewer;
                progress = true;
            } else {
                i += 1;
            }
        }
    }
    ops
}
