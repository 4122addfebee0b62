//! The `uidgen` binary: `serve`, `gen`, `decode`, `make`, `migrate`, `bench`, `health` and
//! the rest of [`Command`]'s subcommands.

use std::process::ExitCode;

use clap::Parser;
use uidgen_server::cli;
#[cfg(feature = "bench")]
use uidgen_server::cli::bench;
use uidgen_server::cli::{Cli, Command};
use uidgen_server::config::log::LogFormat;
use uidgen_server::logging;
use uidgen_server::serve;

fn run(cli: Cli) -> anyhow::Result<()> {
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

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cli::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
