//! The static world: one host with a configured worker id, its lives kept apart by the state
//! file's mark.

use super::*;

/// A directory for one case's files, in memory where the system offers it (`/dev/shm`): the
/// crashes modelled here are process crashes, which leave written files in the page cache, so
/// the fsyncs that make the marks and the database durable add nothing but seconds of waiting
/// on a busy disk.
pub(crate) fn case_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    shm.is_dir()
        .then(|| {
            tempfile::Builder::new()
                .prefix("uidgen-model-")
                .tempdir_in(shm)
                .ok()
        })
        .flatten()
        .unwrap_or_else(|| tempfile::tempdir().unwrap())
}

/// One host whose worker id is configured (0), its lives kept apart by the state file's mark.
pub(crate) struct StaticWorld {
    pub(crate) layout: Layout,
    pub(crate) clock: ManualClock,
    pub(crate) state: PathBuf,
    pub(crate) life: Option<Life>,
    pub(crate) ledger: Ledger,
    pub(crate) _dir: tempfile::TempDir,
}

impl StaticWorld {
    pub(crate) fn new(units: Units) -> Self {
        let dir = case_dir();
        Self {
            layout: layout(units, 0),
            clock: host_clock(),
            state: dir.path().join("worker-0.state"),
            life: None,
            ledger: Ledger::default(),
            _dir: dir,
        }
    }

    /// Run `ops`, checking as it goes; `Ok` with the number of lives that started.
    pub(crate) async fn run(mut self, ops: &[StaticOp]) -> Result<usize, TestCaseError> {
        for op in ops {
            self.ledger.note(format!("{op:?}"));
            match *op {
                StaticOp::Start(kind) => self.start(kind).await,
                StaticOp::Crash => {
                    if let Some(life) = self.life.take() {
                        self.ledger.note(format!("life {} crashed", life.number));
                    }
                }
                StaticOp::Issue(n) => {
                    if let Some(life) = &self.life {
                        self.ledger.issue(&self.layout, life, n)?;
                    }
                }
                StaticOp::Tick(ms) => self.clock.advance(ms),
                StaticOp::StepBack(ms) => self.clock.rewind(ms),
            }
        }
        Ok(self.ledger.lives)
    }

    pub(crate) async fn start(&mut self, kind: Kind) {
        if self.life.is_some() {
            return;
        }
        let assigner = StaticWorkerIdAssigner::new(0, &self.state)
            .with_clock(self.clock.clone())
            .max_start_wait(Duration::ZERO);
        match start_life(&self.layout, assigner, self.clock.clone(), kind).await {
            Ok(mut life) => {
                self.ledger.begin(&mut life, true);
                self.ledger.note(format!("life {} started", life.number));
                self.life = Some(life);
            }
            Err(error) => self.ledger.note(format!("could not start: {error}")),
        }
    }
}
