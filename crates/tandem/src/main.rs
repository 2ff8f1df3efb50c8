//! `tandem`: the one binary of the project, with drbdadm's admin verbs, `node` (run a node),
//! `dump` (print a configuration), `create-md`/`dump-md` (offline metadata) and `demo`.
//!
//! Admin verbs talk to a running node over `RUN_DIR/admin.sock` (see the `admin` crate for
//! the protocol); they never start or stop a node themselves.
//!
//! Exit status: 0 when the command succeeded, 1 when it was refused or failed (the reason
//! goes to standard error as `tandem: REASON`), 2 for a usage error (clap's own).
//!
//! Invoked through a link named `drbdadm` or `drbdsetup` (argv[0]), the binary accepts the
//! part of those tools' command lines that scripts use instead (see `compat`), with the
//! same exit statuses; a command it does not support is a usage error (2).
//!
//! `tandem node` logs to standard error, filtered by `RUST_LOG` (default `info`; journald's
//! format under systemd, see `logging`); the admin verbs do not log.
//!
//! Invariant: no command panics on an operating error; every failure is a [`CliError`].

mod cli;
mod client;
mod commands;
mod compat;
mod demo;
mod docs;
mod dump;
mod error;
mod gi;
mod logging;
mod md;
mod terminal;
mod timestamp;
mod wait_connect;
mod wait_sync;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{resource_filter, Cli, Command};
use crate::commands::{StatusFormat, StatusStyle};
use crate::error::CliError;

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let tool = args.next().as_deref().and_then(compat::Tool::from_argv0);
    if let Some(tool) = tool {
        return compat::main(tool, args);
    }
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
            drbd_json,
            verbose,
            statistics,
            target,
        } => {
            let style = match (json, drbd_json) {
                (_, true) => StatusStyle::DrbdJson,
                (true, false) => StatusStyle::Json,
                (false, false) => StatusStyle::Text,
            };
            let format = StatusFormat {
                style,
                verbose,
                statistics,
            };
            commands::status(run_dir, resource_filter(&target), format)
        }
        Command::Events(args) => commands::events(run_dir, &args),
        Command::WaitConnect { timeout, spec } => {
            wait_connect::run(run_dir, &spec, timeout.map(std::time::Duration::from_secs))
        }
        Command::Role { spec } => compat::run_query(run_dir, compat::QueriedState::Role, &spec),
        Command::Cstate { spec } => {
            compat::run_query(run_dir, compat::QueriedState::Connection, &spec)
        }
        Command::NetOptions { spec, options } => {
            commands::runtime_options(run_dir, spec, &options, commands::OptionsKind::Net)
        }
        Command::DiskOptions { spec, options } => {
            commands::runtime_options(run_dir, spec, &options, commands::OptionsKind::Disk)
        }
        Command::ForgetPeer { spec } => {
            commands::simple(run_dir, &compat::forget_peer_request(spec))
        }
        Command::GetGi(args) => gi::run(run_dir, &args.spec, args.on_disk(), false),
        Command::ShowGi(args) => gi::run(run_dir, &args.spec, args.on_disk(), true),
        Command::Dstate { spec } => compat::run_query(run_dir, compat::QueriedState::Disk, &spec),
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
        command @ (Command::CreateMd { .. }
        | Command::Outdate { .. }
        | Command::WipeMd { .. }
        | Command::DumpMd { .. }) => run_metadata(run_dir, command),
        Command::WaitSync { timeout, target } => wait_sync::run(
            run_dir,
            resource_filter(&target),
            timeout.map(std::time::Duration::from_secs),
        ),
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

/// The commands that work on a volume's metadata (see `md.rs`).
fn run_metadata(run_dir: &std::path::Path, command: Command) -> Result<(), CliError> {
    match command {
        Command::CreateMd {
            config,
            node,
            force,
            max_peers,
            bitmap_granularity,
            resource,
        } => {
            let options = daemon::CreateOptions {
                force,
                max_peers,
                bitmap_granularity_bytes: bitmap_granularity,
            };
            md::create(
                md::MdArgs {
                    config,
                    node,
                    resource,
                },
                options,
            )
        }
        Command::Outdate { on_disk, resource } => md::outdate(run_dir, on_disk.md_args(resource)),
        Command::WipeMd {
            on_disk,
            force,
            resource,
        } => md::wipe(on_disk.md_args(resource), force),
        Command::DumpMd {
            config,
            node,
            json,
            resource,
        } => md::dump(
            md::MdArgs {
                config,
                node,
                resource,
            },
            json,
        ),
        _ => unreachable!("run handles the other commands"),
    }
}
