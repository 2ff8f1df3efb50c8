//! `tandem-sim`: runs batches of seeded simulations and prints a summary; exits 1 if any run
//! violated a checker, 2 on a usage error. `--seed S` replays one run exactly. A panic (an
//! engine or simulator assertion; the build aborts on panics) first names the run it
//! happened in, with its replay command, so a batch that dies still says where.

use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Parser;

/// Prints a line; a closed stdout (`| head`) is not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
use tandem_sim::{run, Outcome, Scenario, SimConfig, SimError};

/// The replay command of the run in progress, for the panic hook.
static RUNNING: Mutex<String> = Mutex::new(String::new());

/// Names the run in progress before the default hook reports a panic.
fn install_panic_hook() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let running = RUNNING.lock().map(|r| r.clone()).unwrap_or_default();
        eprintln!("PANIC in the run {running}");
        default_hook(info);
    }));
}

/// Deterministic simulation of tandem's replication engine.
#[derive(Debug, Parser)]
#[command(name = "tandem-sim")]
struct Args {
    /// Number of seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// First seed of the batch.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Stop starting new seeds after this many seconds (wall clock).
    #[arg(long = "time-limit")]
    time_limit: Option<u64>,
    /// Scenario: random, primary-crash-mid-resync, partition-during-split-brain,
    /// secondary-crash-mid-burst, failover, split-brain-two-primaries, double-failure, or all
    /// (the named ones in turn, then random).
    #[arg(long, default_value = "random")]
    scenario: String,
    /// Run this one seed only (replays it exactly).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the trace tail of every run, not only of failures.
    #[arg(long)]
    verbose: bool,
    /// Fault classes of random runs: all, none, or a list of drop, partition, stop-reading,
    /// crash, disk-errors, no-space (a full data disk until space is freed),
    /// cluster-power-loss (every node crashes at once, then all boot).
    #[arg(long, default_value = "all")]
    faults: String,
    /// Force the number of nodes (2 or 3) instead of drawing it from the seed.
    #[arg(long)]
    nodes: Option<u8>,
    /// Debugging only (CI never uses it): replicated writes are durable when written on a
    /// Secondary, as if written with FUA, so a failure that goes away with it needs a
    /// Secondary's volatile cache (resync writes stay volatile).
    #[arg(long = "durable-peer-writes")]
    durable_peer_writes: bool,
    /// Force the metadata placement: internal or external (default: drawn from the seed).
    #[arg(long)]
    metadata: Option<String>,
    /// The data and control sockets of a direction deliver in one order (a network-model
    /// switch; the engine no longer needs it: kept to narrow down a failure).
    #[arg(long = "sockets-in-order")]
    sockets_in_order: bool,
    /// Quorum mode: every node runs with `quorum majority` and `on-no-quorum suspend-io`, and
    /// the administrator (which sees only what `tandem status` and events show) fails over as
    /// a quorum cluster manager does: once a partition has not reached the Primary for a
    /// second, its Secondary with quorum last seen connected to the Primary is promoted, even
    /// while the old Primary still runs in a minority partition (two or three nodes; failover
    /// always on). Random runs only: the named scenarios script a cluster without quorum (a
    /// forced promotion during a partition, a two-node failover), so they run as without the
    /// flag.
    #[arg(long)]
    quorum: bool,
    /// Also trace every local I/O (debugging a replay).
    #[arg(long = "trace-io")]
    trace_io: bool,
    /// Trace lines printed with a report.
    #[arg(long, default_value_t = 40)]
    tail: usize,
}

fn scenarios(name: &str) -> Result<Vec<Scenario>, SimError> {
    if name == "all" {
        return Ok(Scenario::ALL.to_vec());
    }
    Scenario::from_name(name)
        .map(|s| vec![s])
        .ok_or_else(|| SimError::Usage(format!("unknown scenario {name:?}")))
}

/// The switches of `args` that shape a run, as command-line text (for the replay command).
fn shaping_flags(args: &Args) -> String {
    let mut flags = Vec::new();
    if args.faults != "all" {
        flags.push(format!("--faults {}", args.faults));
    }
    if let Some(nodes) = args.nodes {
        flags.push(format!("--nodes {nodes}"));
    }
    if let Some(metadata) = &args.metadata {
        flags.push(format!("--metadata {metadata}"));
    }
    for (on, flag) in [
        (args.durable_peer_writes, "--durable-peer-writes"),
        (args.sockets_in_order, "--sockets-in-order"),
        (args.quorum, "--quorum"),
    ] {
        if on {
            flags.push(flag.to_string());
        }
    }
    flags.iter().map(|f| format!(" {f}")).collect()
}

fn report(outcome: &Outcome, verbose: bool, flags: &str) {
    let cfg = &outcome.cfg;
    let placement = if cfg.internal_metadata {
        "internal"
    } else {
        "external"
    };
    let quorum = if cfg.quorum { ", quorum majority" } else { "" };
    let shape = format!(
        "{} nodes, protocol {}, activity log {}, {placement} metadata{quorum}",
        cfg.nodes,
        cfg.protocol,
        if cfg.al_enabled { "on" } else { "off" }
    );
    if let Some(failure) = &outcome.failure {
        say!(
            "FAIL seed {} scenario {} ({shape}): {failure}",
            cfg.seed,
            cfg.scenario.name()
        );
        say!(
            "  replay: cargo run -p tandem-sim --release -- --scenario {} --seed {}{flags} --tail \
             200",
            cfg.scenario.name(),
            cfg.seed
        );
    } else if verbose {
        let stats = &outcome.stats;
        let lost = format!(
            "{} writes lost by a double failure, {} lost unflushed with their Primary",
            stats.writes_lost_by_double_failure, stats.writes_lost_unflushed
        );
        say!(
            "ok   seed {} scenario {} ({shape}): {} steps, {} faults, {lost}, trace {:016x}",
            cfg.seed,
            cfg.scenario.name(),
            stats.steps,
            stats.faults,
            outcome.trace_hash
        );
    }
    if outcome.failure.is_some() || verbose {
        for line in &outcome.trace_tail {
            say!("    {line}");
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let list = match scenarios(&args.scenario) {
        Ok(list) => list,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let Some(mask) = tandem_sim::faults::FaultMask::parse(&args.faults) else {
        eprintln!("unknown fault class in {:?}", args.faults);
        return ExitCode::from(2);
    };
    let flags = shaping_flags(&args);
    install_panic_hook();
    let started = Instant::now();
    let limit = args.time_limit.map(Duration::from_secs);
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.start..args.start.saturating_add(args.seeds)).collect(),
    };
    let (mut runs, mut steps, mut faults, mut failures, mut writes) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut double_failures, mut unflushed) = (0u64, 0u64);
    'batch: for seed in seeds {
        for &scenario in &list {
            if limit.is_some_and(|l| started.elapsed() >= l) {
                break 'batch;
            }
            let mut config = SimConfig {
                trace_tail: args.tail,
                trace_io: args.trace_io,
                faults: mask,
                durable_peer_writes: args.durable_peer_writes,
                sockets_in_order: args.sockets_in_order,
                ..SimConfig::new(seed, scenario)
            };
            match args.metadata.as_deref() {
                Some("internal") => config.internal_metadata = true,
                Some("external") => config.internal_metadata = false,
                _ => {}
            }
            if let Some(nodes) = args.nodes {
                config.nodes = nodes.clamp(2, 3);
            }
            if args.quorum && scenario == Scenario::Random {
                config = config.with_quorum();
            }
            if let Ok(mut running) = RUNNING.lock() {
                *running = format!(
                    "seed {seed} (replay: cargo run -p tandem-sim --release -- --scenario {} \
                     --seed {seed}{flags})",
                    scenario.name()
                );
            }
            let outcome = run(config);
            runs += 1;
            steps += outcome.stats.steps;
            faults += outcome.stats.faults + outcome.stats.crashes;
            writes += outcome.stats.writes_acked;
            double_failures += outcome.stats.writes_lost_by_double_failure;
            unflushed += outcome.stats.writes_lost_unflushed;
            failures += u64::from(outcome.failure.is_some());
            report(&outcome, args.verbose || args.seed.is_some(), &flags);
        }
    }
    say!(
        "tandem-sim: {runs} runs, {steps} steps, {faults} faults injected, {writes} writes \
         acknowledged ({double_failures} lost by a double failure, {unflushed} lost unflushed \
         with their Primary), {failures} failures, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
