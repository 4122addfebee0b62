//! What the `uidgen` binary does with its parsed command line ([`run`]): one non-generic
//! function in the library, so that the binary instantiates nothing of its own. Issue 34: with the
//! dispatch in `main.rs`, every `block_on` of a subcommand's future was compiled again in the
//! binary, at opt-level 3, and the binary took 40 s of a cold release build on its own.

use crate::cli;
#[cfg(feature = "bench")]
use crate::cli::bench;
use crate::cli::{Cli, Command};
use crate::config::log::LogFormat;
use crate::logging;
use crate::serve;

/// Run `cli`'s subcommand to its end: `serve` until a shutdown signal, the others until done.
/// Errors are the subcommand's, for the caller to print ([`cli::error_line`]).
///
/// ```no_run
/// use clap::Parser;
/// let cli = uidgen_server::cli::Cli::parse_from(["uidgen", "decode", "4611686018427387904"]);
/// uidgen_server::command::run(cli)?;
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    match cli.command {
        Command::Serve(args) => {
            // The configuration first: it says how to log (`log.format`), and a broken one is
            // refused on stderr as before, logger or not.
            let settings = serve::settings(&args)?;
            logging::init(settings.log.format)?;
            let runtime = runtime()?;
            let served = runtime.block_on(serve::serve(settings));
            // A request abandoned after the shutdown grace may still be generating on the
            // blocking pool; its IDs are refused once the lease is released, so do not wait.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served
        }
        Command::Decode(args) => cli::decode::decode(&args),
        Command::Make(args) => cli::decode::make(&args),
        Command::Gen(args) => cli::generate::gen_ids(&args),
        Command::Migrate(args) => runtime()?.block_on(cli::generate::migrate(&args)),
        Command::Zk(args) => {
            logging::init(LogFormat::Text)?;
            runtime()?.block_on(cli::zk::run(&args))
        }
        Command::Etcd(args) => {
            logging::init(LogFormat::Text)?;
            runtime()?.block_on(cli::etcd::run(&args))
        }
        #[cfg(feature = "bench")]
        Command::Bench(bench::BenchArgs {
            command: Some(bench::BenchCommand::Check(args)),
            ..
        }) => {
            let report = bench::check::check(&args)?;
            println!("{report}");
            report.unique()
        }
        Command::Takeover(args) => runtime()?.block_on(cli::takeover::run(&args)),
        Command::Layout(args) => runtime()?.block_on(cli::layout::run(&args)),
        Command::Health(args) => {
            let ready = runtime()?.block_on(cli::health::health(&args))?;
            println!("{ready}");
            Ok(())
        }
        #[cfg(feature = "bench")]
        Command::Bench(args) => match (&args.url, &args.grpc) {
            (Some(url), _) => {
                let report = runtime()?.block_on(bench::run_http(&args, url))?;
                println!("{report}");
                Ok(())
            }
            (None, Some(url)) => {
                let report = runtime()?.block_on(bench::run_grpc(&args, url))?;
                println!("{report}");
                Ok(())
            }
            (None, None) => {
                let generator = cli::generate::bench_generator(&args.config)?;
                println!("{}", bench::run_embedded(&args, generator)?);
                Ok(())
            }
        },
    }
}
