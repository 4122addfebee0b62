//! `uidgen etcd …`: etcd namespace operations (`init`, `recover`).

use clap::{Args, Subcommand};
use uidgen_etcd::EtcdWorkerIdAssigner;

/// `uidgen etcd …`: the configured etcd namespace (`[etcd]`).
#[derive(Debug, Args)]
pub struct EtcdArgs {
    /// Configuration (`[etcd]`, `worker.range`).
    #[command(flatten)]
    pub config: super::args::ConfigArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: EtcdCommand,
}

/// The `uidgen etcd` subcommands.
#[derive(Debug, Subcommand)]
pub enum EtcdCommand {
    /// Declare the namespace (`etcd.prefix`) new, once, before its first start: its worker ids
    /// are then claimed at once. A start on a prefix etcd holds nothing under cannot tell a new
    /// namespace from one whose data etcd lost, so without this it waits out the reservation.
    /// Refused when etcd records worker ids under the prefix (a start adopts them as they are)
    /// or its record says etcd lost data; nothing to do once initialised. Run it once, by
    /// hand, never as part of every start: after etcd lost its data it would let a claimant
    /// start an id below what its forgotten holder stamped.
    Init,
    /// Record that etcd lost data (restored from a snapshot, a member's disk replaced): every
    /// worker id whose mark was written before now waits out the reservation before it is
    /// claimed again. Running holders keep their ids.
    Recover {
        /// What happened, kept in the namespace record for operators.
        #[arg(long, default_value = "recorded by `uidgen etcd recover`")]
        why: String,
    },
}

/// Run `uidgen etcd …`.
pub async fn run(args: &EtcdArgs) -> anyhow::Result<()> {
    let config = args.config.read(false)?;
    let settings = config.settings()?;
    // `[etcd]` as the service would start with it, whatever assigner this host runs.
    let etcd = config
        .etcd
        .parsed(&settings.worker, &settings.layout, settings.listen.port())?;
    let assigner = EtcdWorkerIdAssigner::new(etcd.options);
    let prefix = &assigner.options().prefix;
    match &args.command {
        EtcdCommand::Init => {
            let record = assigner.init_namespace().await?;
            println!(
                "{prefix}: a new namespace ({:?}, written by {})",
                record.origin, record.by
            );
        }
        EtcdCommand::Recover { why } => {
            let record = assigner.recover_namespace(why).await?;
            println!(
                "{prefix}: worker ids marked before now are fenced until {} ms ({})",
                record.floor_ms, record.why
            );
        }
    }
    Ok(())
}
