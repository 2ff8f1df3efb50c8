//! `tandem`: the one binary of the project, with drbdadm's admin verbs, `node` (run a node),
//! `dump` (print a configuration), `create-md`/`dump-md` (offline metadata) and `demo`.
//!
//! Admin verbs talk to a running node over `RUN_DIR/admin.sock` (see the `admin` crate for
//! the protocol); they never start or stop a node themselves.
//!
//! Exit status: 0 when the command succeeded, 1 when it was refused or failed (the reason
//! goes to standard error as `tandem: REASON`), 2 for a usage error (clap's own).
//!
//! `tandem node` logs to standard error, filtered by `RUST_LOG` (default `info`; journald's
//! format under systemd, see `logging`); the admin verbs do not log.
//!
//! Invariant: no command panics on an operating error; every failure is a [`CliError`].

mod cli;
mod client;
mod commands;
mod demo;
mod docs;
mod dump;
mod error;
mod logging;
mod md;
mod terminal;
mod wait_sync;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{resource_filter, Cli, Command};
use crate::commands::StatusFormat;
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tandem: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    let run_dir = cli.run_dir.as_path();
    match cli.command {
        Command::Status {
            json,
            verbose,
            statistics,
            target,
        } => {
            let format = StatusFormat {
                json,
                verbose,
                statistics,
            };
            commands::status(run_dir, resource_filter(&target), format)
        }
        Command::Events { statistics, target } => {
            commands::events(run_dir, resource_filter(&target), statistics)
        }
        Command::Node { config, node } => {
            logging::init();
            let options = daemon::NodeOptions {
                config,
                node,
                run_dir: cli.run_dir,
            };
            Ok(daemon::run_node(options)?)
        }
        Command::Dump { config, target } => {
            let text = dump::load_and_dump(&config, resource_filter(&target).as_deref())?;
            terminal::print(&text)?;
            Ok(())
        }
        Command::CreateMd { config, node, force, max_peers, bitmap_granularity, resource } => {
            let options = daemon::CreateOptions { force, max_peers, bitmap_granularity_bytes: bitmap_granularity };
            md::create(md::MdArgs { config, node, resource }, options)
        }
        Command::DumpMd { config, node, json, resource } => md::dump(md::MdArgs { config, node, resource }, json),
        Command::WaitSync { timeout, target } => wait_sync::run(run_dir, resource_filter(&target), timeout.map(std::time::Duration::from_secs)),
        Command::Demo => Ok(demo::run()?),
        Command::TlsKeygen { out, name } => {
            let lines = daemon::tls::keygen(&out, &name).map_err(CliError::TlsKeygen)?;
            terminal::print(&format!("{lines}\n"))?;
            Ok(())
        }
        Command::GenerateDocs { out } => docs::generate(&out),
        Command::Simple(verb) => commands::simple(run_dir, &verb.into_request()),
    }
}
