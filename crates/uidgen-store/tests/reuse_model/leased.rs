//! The leased world: hosts leasing worker ids from one database, each with a cache file in a
//! state directory of its own (the hosts share no files, only the database).

use super::*;

/// One machine of a leased world.
pub(crate) struct Host {
    pub(crate) clock: ManualClock,
    /// This host's way to the database: one connection, given up after [`OUTAGE_TIMEOUT`].
    pub(crate) store: Store,
    /// Held while the host cannot reach the database.
    pub(crate) outage: Option<OccupiedPool>,
    pub(crate) cache: PathBuf,
    pub(crate) life: Option<Life>,
}

/// Hosts leasing worker ids from one database, each with a local cache file.
pub(crate) struct LeasedWorld {
    pub(crate) layout: Layout,
    /// The database as it is, for the checks; never down.
    pub(crate) observer: Store,
    pub(crate) hosts: Vec<Host>,
    pub(crate) ledger: Ledger,
    /// Holds the database and the hosts' cache files.
    pub(crate) _dir: tempfile::TempDir,
}

impl LeasedWorld {
    pub(crate) async fn new(spec: &WorldSpec) -> Self {
        let dir = case_dir();
        let url = format!("sqlite://{}", dir.path().join("uidgen.db").display());
        let observer = Store::connect(&url).await.unwrap(); // a fresh file, migrated
        let hosts = (0..spec.hosts)
            .map(|h| Host {
                clock: host_clock(),
                store: Store::connect_lazy(
                    &url,
                    StoreOptions {
                        max_connections: 1,
                        connect_timeout: OUTAGE_TIMEOUT,
                        migrate: false,
                        ..StoreOptions::default()
                    },
                )
                .unwrap(),
                outage: None,
                // Configured alike (`worker.cache_file = "lease.cache"`), each host's own file.
                cache: {
                    let state_dir = StateDir::at(dir.path().join(format!("host-{h}"))).unwrap();
                    state_dir.create().unwrap();
                    state_dir.resolve(Path::new("lease.cache"))
                },
                life: None,
            })
            .collect::<Vec<_>>();
        for host in &hosts {
            // Open each host's one connection now, so that an op's query waits only for it,
            // never for a connect that [`OUTAGE_TIMEOUT`] would cut short on a busy machine.
            for _ in 0..100 {
                if host.store.lease_rows(DEFAULT_SPACE, 0).await.is_ok() {
                    break;
                }
            }
        }
        Self {
            layout: layout(spec.units, spec.worker_bits),
            observer,
            hosts,
            ledger: Ledger::default(),
            _dir: dir,
        }
    }

    pub(crate) fn options(h: usize, cache: &Path) -> LeaseOptions {
        LeaseOptions {
            ttl: TTL,
            // `Op::Tick` beats instead, on the manual clock: a background task sleeping real
            // time would make cases unrepeatable.
            heartbeat_interval: None,
            // A start whose clock is behind the last issued time is refused at once (a legal
            // outcome) instead of polling real time for the manual clock to move.
            max_takeover_wait: Duration::ZERO,
            cache_path: Some(cache.to_owned()),
            cache_reserve: RESERVE,
            holder: Some(format!("host-{h}")),
            ..LeaseOptions::default()
        }
    }

    /// Run `ops`, checking as it goes; `Ok` with the number of lives that started.
    pub(crate) async fn run(mut self, ops: &[Op]) -> Result<usize, TestCaseError> {
        let mut result = Ok(());
        for op in ops {
            self.ledger.note(format!("{op:?}"));
            result = self.apply(op).await;
            if result.is_ok() {
                result = self.check_leases().await;
            }
            if result.is_err() {
                break;
            }
        }
        let lives = self.ledger.lives;
        self.close().await;
        result.map(|()| lives)
    }

    /// The host an op aimed at `h` acts on: `h` if it `fits`, else the next one in turn that
    /// does, so that few ops are wasted on a host that cannot take them.
    pub(crate) fn aim(&self, h: usize, fits: impl Fn(&Host) -> bool) -> Option<usize> {
        let n = self.hosts.len();
        (0..n).map(|i| (h + i) % n).find(|&k| fits(&self.hosts[k]))
    }

    pub(crate) async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let running = |host: &Host| host.life.is_some();
        match *op {
            Op::Start(h, kind) => {
                if let Some(h) = self.aim(h, |host| host.life.is_none()) {
                    self.start(h, kind).await;
                }
            }
            Op::Crash(h) => {
                if let Some(h) = self.aim(h, running)
                    && let Some(life) = self.hosts[h].life.take()
                {
                    self.ledger.note(format!("life {} crashed", life.number));
                }
            }
            Op::Stop(h) => {
                if let Some(h) = self.aim(h, running)
                    && let Some(life) = self.hosts[h].life.take()
                    && let Some(lease) = LeaseGuard::of(&life.assignment)
                {
                    let outcome = lease.release().await;
                    self.ledger
                        .note(format!("life {} released: {outcome:?}", life.number));
                }
            }
            Op::Renew(h) => {
                if let Some(h) = self.aim(h, running)
                    && let Some(life) = &self.hosts[h].life
                    && let Some(lease) = LeaseGuard::of(&life.assignment)
                {
                    let outcome = lease.renew().await;
                    let until = lease.valid_until_ms().saturating_sub(T0);
                    self.ledger.note(format!(
                        "life {} renewed: {outcome:?}, valid until T0+{until}",
                        life.number
                    ));
                }
            }
            Op::Issue(h, n) => {
                if let Some(h) = self.aim(h, running)
                    && let Some(life) = &self.hosts[h].life
                {
                    self.ledger.issue(&self.layout, life, n)?;
                }
            }
            Op::Tick(ms) => self.pass_time(ms).await,
            Op::StepForward(h, ms) => {
                let h = self.aim(h, running).unwrap_or(h);
                self.hosts[h].clock.advance(ms);
                self.note_clock(h);
            }
            Op::StepBack(h, ms) => {
                let h = self.aim(h, running).unwrap_or(h);
                self.hosts[h].clock.rewind(ms);
                self.note_clock(h);
            }
            Op::DbDown(h) => {
                if let Some(h) = self.aim(h, |host| host.outage.is_none()) {
                    let host = &mut self.hosts[h];
                    // Failing to take the connection (a slow machine) leaves the host
                    // connected: fewer outages, never a wrong result.
                    host.outage = occupy_pool(&host.store).await.ok();
                    let what = if host.outage.is_some() {
                        "lost"
                    } else {
                        "kept"
                    };
                    self.ledger.note(format!("host {h} {what} the database"));
                }
            }
            Op::DbUp(h) => {
                if let Some(h) = self.aim(h, |host| host.outage.is_some()) {
                    self.hosts[h].outage = None;
                    self.ledger
                        .note(format!("host {h} reaches the database again"));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn note_clock(&mut self, h: usize) {
        let now = self.hosts[h].clock.now_millis();
        let offset = i128::from(now) - i128::from(T0);
        self.ledger
            .note(format!("host {h}'s clock reads T0{offset:+}"));
    }

    pub(crate) async fn pass_time(&mut self, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let slice = left.min(HEARTBEAT_MS);
            left -= slice;
            for host in &self.hosts {
                host.clock.advance(slice);
            }
            // A heartbeat that cannot reach the database changes nothing but the lease's last
            // error; skipping it spares a connection timeout of real time per beat.
            let beating = self.hosts.iter().filter(|host| host.outage.is_none());
            for life in beating.filter_map(|host| host.life.as_ref()) {
                let Some(lease) = LeaseGuard::of(&life.assignment).filter(|l| !l.is_ended()) else {
                    continue;
                };
                if let Err(error) = lease.renew().await {
                    self.ledger
                        .note(format!("life {}'s heartbeat: {error}", life.number));
                }
            }
        }
    }

    pub(crate) async fn start(&mut self, h: usize, kind: Kind) {
        let host = &self.hosts[h];
        debug_assert!(host.life.is_none(), "aim() picks an idle host");
        let assigner = LeasedWorkerIdAssigner::new(
            host.store.clone(),
            host.clock.clone(),
            Self::options(h, &host.cache),
        );
        match start_life(&self.layout, assigner, host.clock.clone(), kind).await {
            Ok(mut life) => {
                let takes_over = life.assignment.kind == LeasedWorkerIdAssigner::KIND;
                self.ledger.begin(&mut life, takes_over);
                let lease = LeaseGuard::of(&life.assignment);
                self.ledger.note(format!(
                    "life {} = host {h} on worker {} ({:?}, valid until T0+{})",
                    life.number,
                    life.assignment.worker_id,
                    life.assignment.kind,
                    lease.map_or(0, |l| l.valid_until_ms().saturating_sub(T0)),
                ));
                self.hosts[h].life = Some(life);
            }
            Err(error) => self
                .ledger
                .note(format!("host {h} could not start: {error}")),
        }
    }

    /// The lease rule the fences rest on (`lease_guard.rs`): while the database names a lease's
    /// holder, the expiry it shows is at least the holder's own, so a successor, which claims
    /// only past the database's expiry, never takes the id while the holder may stamp.
    pub(crate) async fn check_leases(&self) -> Result<(), TestCaseError> {
        for life in self.hosts.iter().filter_map(|host| host.life.as_ref()) {
            let Some(lease) = LeaseGuard::of(&life.assignment).filter(|l| !l.is_ended()) else {
                continue;
            };
            let row = self
                .observer
                .lease_row(DEFAULT_SPACE, lease.worker_id())
                .await
                .unwrap();
            let Some(row) = row else {
                return Err(self.ledger.fail(format!(
                    "life {} holds worker {} but the database has no row for it",
                    life.number,
                    lease.worker_id()
                )));
            };
            if row.holder == lease.holder() && lease.valid_until_ms() > row.expires_at_ms {
                return Err(self.ledger.fail(format!(
                    "life {} may stamp worker {} until {} but the database shows expiry {}",
                    life.number,
                    lease.worker_id(),
                    lease.valid_until_ms(),
                    row.expires_at_ms
                )));
            }
        }
        Ok(())
    }

    /// End the case: every process exits; the database and the cache files go with the
    /// directory.
    pub(crate) async fn close(mut self) {
        self.hosts.iter_mut().for_each(|host| {
            host.life = None;
            host.outage = None;
        });
        for host in &self.hosts {
            host.store.close().await;
        }
        self.observer.close().await;
    }
}
