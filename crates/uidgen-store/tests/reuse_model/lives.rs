//! What a case records: layouts and clocks of the hosts, one running life, and the ledger of
//! every ID each life issued, checked against the model.

use super::*;

/// A layout with `worker_bits` worker bits in the given units.
pub(crate) fn layout(units: Units, worker_bits: u32) -> Layout {
    use FieldKind::{Sequence, Sign, Time, Worker};
    match units {
        Units::Seconds => common::narrow_layout(worker_bits),
        Units::Millis => Layout::new(
            "tiny-ms",
            &[
                (Sign, 1),
                (Time, 60 - worker_bits),
                (Worker, worker_bits),
                (Sequence, 3),
            ],
            TimeUnit::Millis,
            "2026-01-01",
        )
        .unwrap(),
    }
}

/// A clock that moves on when a generator waits on it (a used-up sequence, a small backward
/// step), so a burst never spins; where it moves to is still fixed by the ops.
pub(crate) fn host_clock() -> ManualClock {
    ManualClock::auto_advancing(T0)
}

/// One running process: the generator and the assignment that keeps it (and its lease).
pub(crate) struct Life {
    pub(crate) number: usize,
    pub(crate) generator: Arc<dyn UidGenerator>,
    pub(crate) assignment: WorkerAssignment,
}

pub(crate) async fn start_life(
    layout: &Layout,
    assigner: impl WorkerIdAssigner + 'static,
    clock: ManualClock,
    kind: Kind,
) -> uidgen_store::Result<Life> {
    let builder = GeneratorBuilder::new(layout.clone()).assigner(assigner);
    let (generator, assignment): (Arc<dyn UidGenerator>, _) = match kind {
        Kind::Default => {
            let built = builder.build_default(clock).await?;
            (built.generator, built.assignment)
        }
        Kind::Snowflake => {
            let built = builder.build_snowflake(clock).await?;
            (built.generator, built.assignment)
        }
    };
    Ok(Life {
        number: 0,
        generator,
        assignment,
    })
}

/// Every ID issued in a case, by the life that issued it, and what happened, for the report.
#[derive(Default)]
pub(crate) struct Ledger {
    /// Every ID → the life that issued it.
    pub(crate) by_id: HashMap<u64, usize>,
    /// Life → the span of time units it stamped so far.
    pub(crate) spans: HashMap<usize, Span>,
    /// Life → the last unit its worker id's earlier lives had stamped when it took the id
    /// over: it must stamp only after it.
    pub(crate) floors: HashMap<usize, u64>,
    pub(crate) lives: usize,
    pub(crate) log: Vec<String>,
}

/// The time units one life stamped: its worker id and the lowest and highest unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) worker: u64,
    pub(crate) first: u64,
    pub(crate) last: u64,
}

impl Span {
    pub(crate) fn interleaves(self, other: Span) -> bool {
        self.worker == other.worker && self.first <= other.last && other.first <= self.last
    }
}

impl Ledger {
    /// Number a new life. One that takes its worker id over from the id's earlier lives (a
    /// claim from the database, a static id's restart) gets their last unit as its floor.
    ///
    /// A start from the local cache gets none: it continues its own host's lease, and with
    /// that host's clock behind, it may legally stamp below a unit another host stamped after
    /// taking the id over past the lease's expiry (the spans still never interleave).
    pub(crate) fn begin(&mut self, life: &mut Life, takes_over: bool) {
        self.lives += 1;
        life.number = self.lives;
        let worker = life.assignment.worker_id;
        let earlier = self.spans.values().filter(|span| span.worker == worker);
        if let Some(floor) = earlier.map(|span| span.last).max().filter(|_| takes_over) {
            self.floors.insert(life.number, floor);
        }
    }

    pub(crate) fn note(&mut self, line: String) {
        self.log.push(line);
    }

    pub(crate) fn fail(&self, what: String) -> TestCaseError {
        TestCaseError::fail(format!(
            "{what}\nwhat happened:\n  {}",
            self.log.join("\n  ")
        ))
    }

    /// Take up to `n` IDs from `life`, stopping at the first refusal, and check each.
    pub(crate) fn issue(
        &mut self,
        layout: &Layout,
        life: &Life,
        n: usize,
    ) -> Result<(), TestCaseError> {
        let mut issued = 0;
        let mut refusal = None;
        for _ in 0..n {
            match life.generator.next_id() {
                Ok(id) => {
                    self.record(layout, life, id)?;
                    issued += 1;
                }
                Err(error) => {
                    refusal = Some(error);
                    break;
                }
            }
        }
        let refusal = refusal.map_or(String::new(), |e| format!("; then refused: {e}"));
        self.note(format!(
            "life {} issued {issued} of {n}{refusal}",
            life.number
        ));
        Ok(())
    }

    pub(crate) fn record(
        &mut self,
        layout: &Layout,
        life: &Life,
        id: u64,
    ) -> Result<(), TestCaseError> {
        let parts = layout.decompose(id).unwrap();
        let worker = life.assignment.worker_id;
        if parts.worker != worker {
            return Err(self.fail(format!(
                "life {} was assigned worker id {worker} but stamped {}",
                life.number, parts.worker
            )));
        }
        if let Some(&other) = self.by_id.get(&id) {
            return Err(self.fail(format!(
                "DUPLICATE: ID {id} (worker {worker}, unit {}, sequence {}) issued by life {other} \
                 and by life {}",
                parts.time, parts.sequence, life.number
            )));
        }
        self.by_id.insert(id, life.number);
        let unit = parts.time;
        if let Some(&floor) = self.floors.get(&life.number)
            && unit <= floor
        {
            return Err(self.fail(format!(
                "worker {worker}: life {} stamped unit {unit}, but it took the id over after unit \
                 {floor} had been stamped",
                life.number
            )));
        }
        let span = self.spans.entry(life.number).or_insert(Span {
            worker,
            first: unit,
            last: unit,
        });
        span.first = span.first.min(unit);
        span.last = span.last.max(unit);
        let span = *span;
        let interleaved = self
            .spans
            .iter()
            .find(|&(&other, &theirs)| other != life.number && span.interleaves(theirs));
        if let Some((other, theirs)) = interleaved {
            return Err(self.fail(format!(
                "worker {worker}: life {} stamped units {}..={} (now {unit}), which interleave \
                 with life {other}'s {}..={}",
                life.number, span.first, span.last, theirs.first, theirs.last
            )));
        }
        Ok(())
    }
}
