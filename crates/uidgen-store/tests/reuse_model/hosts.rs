//! Issue 18: hosts that share no files, only the store. Each host has a state directory of its
//! own ([`StateDir`]) and the same configuration, so a relative file name (the static id's
//! state file, a lease's cache) names a different file on each: a fence kept in those files
//! keeps one host's lives apart, never two hosts'. Only what the store records can.

use super::*;

/// One host: its clock, its own state directory, and the life it runs.
pub(crate) struct StaticHost {
    pub(crate) clock: ManualClock,
    pub(crate) state_dir: StateDir,
    pub(crate) life: Option<Life>,
}

/// Hosts configured alike with static worker id 0 (`worker.id = 0`, the default state file,
/// the store), each with its own state directory, all on one store.
pub(crate) struct StaticHostsWorld {
    pub(crate) layout: Layout,
    pub(crate) store: Store,
    pub(crate) hosts: Vec<StaticHost>,
    pub(crate) ledger: Ledger,
    pub(crate) _dir: tempfile::TempDir,
}

/// The state file every host is configured with: relative, so each host's own.
pub(crate) const STATE_FILE: &str = "uidgen-worker-0.state";

impl StaticHostsWorld {
    pub(crate) async fn new(units: Units, hosts: usize) -> Self {
        let dir = case_dir();
        let url = format!("sqlite://{}", dir.path().join("uidgen.db").display());
        let store = Store::connect(&url).await.unwrap();
        let hosts = (0..hosts)
            .map(|h| {
                let state_dir = StateDir::at(dir.path().join(format!("host-{h}"))).unwrap();
                state_dir.create().unwrap();
                StaticHost {
                    clock: host_clock(),
                    state_dir,
                    life: None,
                }
            })
            .collect();
        Self {
            layout: layout(units, 0),
            store,
            hosts,
            ledger: Ledger::default(),
            _dir: dir,
        }
    }

    /// Run `ops`, checking as it goes; `Ok` with the number of lives that started.
    pub(crate) async fn run(mut self, ops: &[Op]) -> Result<usize, TestCaseError> {
        let mut result = Ok(());
        for op in ops {
            self.ledger.note(format!("{op:?}"));
            result = self.apply(op).await;
            if result.is_err() {
                break;
            }
        }
        let lives = self.ledger.lives;
        for host in &mut self.hosts {
            host.life = None;
        }
        self.store.close().await;
        result.map(|()| lives)
    }

    fn host(&self, h: usize) -> usize {
        h % self.hosts.len()
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Start(h, kind) => self.start(self.host(h), kind).await,
            Op::Crash(h) => {
                let h = self.host(h);
                if let Some(life) = self.hosts[h].life.take() {
                    self.ledger.note(format!("life {} crashed", life.number));
                }
            }
            Op::Stop(h) => {
                let h = self.host(h);
                if let Some(life) = self.hosts[h].life.take() {
                    // A registered claim, when the store keeps one, is handed back.
                    if let Some(lease) = LeaseGuard::of(&life.assignment) {
                        let outcome = lease.release().await;
                        self.ledger
                            .note(format!("life {} released: {outcome:?}", life.number));
                    }
                }
            }
            Op::Renew(h) => {
                if let Some(life) = &self.hosts[self.host(h)].life
                    && let Some(lease) = LeaseGuard::of(&life.assignment)
                {
                    let outcome = lease.renew().await;
                    self.ledger
                        .note(format!("life {} renewed: {outcome:?}", life.number));
                }
            }
            Op::Issue(h, n) => {
                if let Some(life) = &self.hosts[self.host(h)].life {
                    self.ledger.issue(&self.layout, life, n)?;
                }
            }
            Op::Tick(ms) => {
                for host in &self.hosts {
                    host.clock.advance(ms);
                }
            }
            Op::StepForward(h, ms) => {
                let h = self.host(h);
                self.hosts[h].clock.advance(ms);
            }
            Op::StepBack(h, ms) => {
                let h = self.host(h);
                self.hosts[h].clock.rewind(ms);
            }
            // One store for all, never down here: what is modelled is the hosts' files.
            Op::DbDown(_) | Op::DbUp(_) => {}
        }
        Ok(())
    }

    async fn start(&mut self, h: usize, kind: Kind) {
        let host = &self.hosts[h];
        if host.life.is_some() {
            return;
        }
        let assigner =
            StaticWorkerIdAssigner::new(0, host.state_dir.resolve(Path::new(STATE_FILE)))
                .registered_in(self.store.clone())
                .with_clock(host.clock.clone())
                .max_start_wait(Duration::ZERO);
        match start_life(&self.layout, assigner, host.clock.clone(), kind).await {
            Ok(mut life) => {
                // Every start of worker 0 takes it over from its earlier lives, on any host.
                self.ledger.begin(&mut life, true);
                self.ledger
                    .note(format!("life {} = host {h} on worker 0", life.number));
                self.hosts[h].life = Some(life);
            }
            Err(error) => self
                .ledger
                .note(format!("host {h} could not start: {error}")),
        }
    }
}
