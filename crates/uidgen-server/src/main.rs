//! The `uidgen` binary: `serve`, `gen`, `decode`, `make`, `migrate`, `bench`, `health` and
//! the rest of [`Command`](uidgen_server::cli::Command)'s subcommands, run by
//! [`uidgen_server::command::run`].

use std::process::ExitCode;

use clap::Parser;
use uidgen_server::cli;

fn main() -> ExitCode {
    match uidgen_server::command::run(cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cli::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
