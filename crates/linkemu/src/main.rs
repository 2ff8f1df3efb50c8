//! `tandem-linkemu`: run one or more link-emulating TCP relays until SIGINT or SIGTERM, with an
//! optional JSON-lines control socket (see `linkemu::control`).
//!
//! Invariants:
//! - Bad arguments and start-up failures print one clear message and exit non-zero (2 for
//!   arguments, 1 for start-up); nothing panics.
//! - Each relay's listening address is printed on stdout, one line per pair, once every relay
//!   listens and the control socket exists, so callers may use port 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use linkemu::{
    control, parse, Link, LinkError, OnPartition, Partition, Relay, Shape, QUEUE_DEFAULT_BYTES,
};
use tokio::net::UnixListener;

/// A userspace link emulator: a TCP relay adding delay, jitter, a bandwidth limit and partitions
/// between tandem peers (no netem needed).
#[derive(Debug, Parser)]
#[command(name = "tandem-linkemu", version)]
struct Arguments {
    /// Address to listen on (with --target). Port 0 picks a free port.
    #[arg(long, requires = "target")]
    listen: Option<SocketAddr>,
    /// Address to forward every connection to (with --listen).
    #[arg(long, requires = "listen")]
    target: Option<SocketAddr>,
    /// A LISTEN=TARGET pair; repeat for several relays in one process.
    #[arg(long = "pair", value_parser = parse_pair)]
    pairs: Vec<(SocketAddr, SocketAddr)>,
    /// One-way delay added in each direction (for example 20ms, 1.5ms, 500us).
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    delay: Duration,
    /// Uniform jitter around the delay; never reorders bytes.
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    jitter: Duration,
    /// Bandwidth limit per direction, shared by the relay's connections (100mbit, 12MB, unlimited).
    #[arg(long, value_parser = parse_rate, default_value = "unlimited")]
    rate: Rate,
    /// Bytes each connection may queue per direction before backpressure (64MiB).
    #[arg(long, value_parser = parse_size)]
    queue: Option<u64>,
    /// Initial partition: none, both, forward (client to target) or reverse.
    #[arg(long, value_parser = parse_partition, default_value = "none")]
    partition: Partition,
    /// Reset connections (and refuse new ones) while partitioned, instead of holding data.
    #[arg(long)]
    reset_on_partition: bool,
    /// Seed of the jitter generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Unix socket accepting JSON-lines requests such as {"delay_ms":5} or {"stats":true}.
    #[arg(long)]
    control: Option<PathBuf>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    parse::duration(text).map_err(|error| error.to_string())
}

/// A bandwidth limit in bytes/s; `None` is unlimited. (A newtype, since clap reads a bare
/// `Option` as "the flag may be absent".)
#[derive(Debug, Clone, Copy)]
struct Rate(Option<u64>);

fn parse_rate(text: &str) -> Result<Rate, String> {
    parse::rate_bytes_per_s(text)
        .map(Rate)
        .map_err(|error| error.to_string())
}

fn parse_size(text: &str) -> Result<u64, String> {
    parse::size_bytes(text).map_err(|error| error.to_string())
}

fn parse_partition(text: &str) -> Result<Partition, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| format!("bad partition {text:?}: expected none, both, forward or reverse"))
}

fn parse_pair(text: &str) -> Result<(SocketAddr, SocketAddr), String> {
    let (listen, target) = text
        .split_once('=')
        .ok_or_else(|| format!("bad pair {text:?}: expected LISTEN=TARGET"))?;
    let address = |part: &str| {
        part.trim()
            .parse::<SocketAddr>()
            .map_err(|error| format!("bad address {part:?} in pair {text:?}: {error}"))
    };
    Ok((address(listen)?, address(target)?))
}

impl Arguments {
    fn link(&self) -> Link {
        let shape = Shape {
            delay: self.delay,
            jitter: self.jitter,
            rate_bytes_per_s: self.rate.0,
            queue_bytes_max: self.queue.unwrap_or(QUEUE_DEFAULT_BYTES),
        };
        let on_partition = if self.reset_on_partition {
            OnPartition::Reset
        } else {
            OnPartition::Hold
        };
        Link {
            partition: self.partition,
            on_partition,
            jitter_seed: self.seed,
            ..Link::symmetric(shape)
        }
    }

    fn all_pairs(&self) -> Vec<(SocketAddr, SocketAddr)> {
        let single = self.listen.zip(self.target);
        single
            .into_iter()
            .chain(self.pairs.iter().copied())
            .collect()
    }
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let pairs = arguments.all_pairs();
    let link = arguments.link();
    if pairs.is_empty() {
        eprintln!(
            "tandem-linkemu: nothing to relay: give --listen ADDR --target ADDR or --pair \
             LISTEN=TARGET"
        );
        return ExitCode::from(2);
    }
    if let Err(error) = link.check() {
        eprintln!("tandem-linkemu: {error}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tandem-linkemu: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(pairs, link, arguments.control)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tandem-linkemu: {error}");
            ExitCode::from(1)
        }
    }
}

async fn run(
    pairs: Vec<(SocketAddr, SocketAddr)>,
    link: Link,
    control_path: Option<PathBuf>,
) -> Result<(), LinkError> {
    let mut relays = Vec::new();
    for (listen, target) in pairs {
        relays.push(Relay::start(listen, target, link).await?);
    }
    let relays = Arc::new(relays);
    let control = match &control_path {
        Some(path) => Some(tokio::spawn(control::serve(
            bind_control(path)?,
            Arc::clone(&relays),
        ))),
        None => None,
    };
    for relay in relays.iter() {
        println!("{} -> {}", relay.local_addr(), relay.target_addr());
    }
    wait_for_signal().await;
    if let Some(task) = control {
        task.abort();
    }
    if let Some(path) = &control_path {
        let _ = std::fs::remove_file(path);
    }
    for relay in relays.iter() {
        relay.shutdown().await;
    }
    Ok(())
}

fn bind_control(path: &PathBuf) -> Result<UnixListener, LinkError> {
    // A socket file left by a previous run that nobody answers on is stale; remove it.
    if path.exists() && std::os::unix::net::UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
    UnixListener::bind(path).map_err(|source| LinkError::Control {
        path: path.clone(),
        source,
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGTERM; only SIGINT stops the relay");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
