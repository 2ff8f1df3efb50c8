//! The failover torture harness (issue 24 item 6): N seeded trials of a three-node protocol
//! C cluster under `quorum majority` losing its Primary under load, each checked on the
//! backing files. A trial (`trial`): alice Primary; stamped 4 KiB writes (`stamp`, one in
//! four with FUA) and random 4 KiB writes at queue depth 16 (`load`: fio, or the harness's
//! own writer without fio) through two NBD connections; SIGKILL of alice or a partition of
//! her link (`netns`); `tandem primary` on a random survivor, retried while quorum is being
//! confirmed; stamped writes and load through it; alice back (restarted, or demoted and
//! healed) during or after them; a wait until every node is Connected and UpToDate. Checks:
//! - no connection ends StandAlone, and every node gets in sync by the deadline;
//! - every acknowledged stamped write is in every in-sync replica's backing file, and no
//!   block holds a torn, misdirected or unexplained stamp;
//! - the replicas are byte-identical over the whole export (external metadata).
//!
//! Settings (environment): `TANDEM_TORTURE_TRIALS` (default 3), `TANDEM_TORTURE_SEED` (the
//! first trial's seed; later ones follow from it; default `SYSTEST_SEED` or the clock),
//! `TANDEM_TORTURE_FAULTS` (`mixed`, `kill` or `partition`; default `mixed`),
//! `TANDEM_TORTURE_LOAD` (`fio` or `builtin`; default fio when installed), and
//! `TANDEM_TORTURE_OUT`, a directory that receives `summary.md`, `trials.csv` and one report
//! per failed trial, rewritten after every trial (`scripts/torture` drives long runs).
//!
//! Partitions need root and iproute2; without them a mixed run uses SIGKILL only and says so,
//! and a partition-only run is skipped with the reason. Each failed trial prints a report:
//! the checks it broke with node and block, its seed and replay command, and the tail of
//! every node's log.

mod export;
mod load;
mod stamp;
mod summary;
mod trial;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::tools::{fresh_seed, Rng};
use trial::Fault;

/// Trials in a run unless `TANDEM_TORTURE_TRIALS` says otherwise (CI's short run).
const TRIALS_DEFAULT: usize = 3;
/// The most trials one run accepts.
const TRIALS_MAX: usize = 100_000;

/// A run's settings, from the environment.
#[derive(Debug)]
struct Settings {
    trials: usize,
    first_seed: u64,
    faults: String,
    out: Option<PathBuf>,
}

impl Settings {
    fn from_environment() -> Settings {
        let variable = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let trials = variable("TANDEM_TORTURE_TRIALS").map_or(TRIALS_DEFAULT, |text| {
            text.parse()
                .unwrap_or_else(|_| panic!("TANDEM_TORTURE_TRIALS={text} is not a count"))
        });
        assert!(
            (1..=TRIALS_MAX).contains(&trials),
            "TANDEM_TORTURE_TRIALS must be 1 to {TRIALS_MAX}"
        );
        let first_seed = variable("TANDEM_TORTURE_SEED").map_or_else(fresh_seed, |text| {
            text.parse()
                .unwrap_or_else(|_| panic!("TANDEM_TORTURE_SEED={text} is not a u64"))
        });
        let faults = variable("TANDEM_TORTURE_FAULTS").unwrap_or_else(|| "mixed".to_string());
        assert!(
            ["mixed", "kill", "partition"].contains(&faults.as_str()),
            "TANDEM_TORTURE_FAULTS must be mixed, kill or partition, not {faults}"
        );
        Settings {
            trials,
            first_seed,
            faults,
            out: variable("TANDEM_TORTURE_OUT").map(PathBuf::from),
        }
    }
}

/// Why partitions cannot run here, if they cannot (root and iproute2 are needed).
fn partitions_unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces need root)".to_string());
    }
    for program in ["ip", "tc"] {
        let found = Command::new(program)
            .arg("-V")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if found.is_err() {
            return Some(format!("'{program}' is missing (Debian package iproute2)"));
        }
    }
    None
}

/// The faults this run draws from; None (with the reason printed) when it must be skipped.
fn faults(settings: &Settings) -> Option<Vec<Fault>> {
    let unavailable = partitions_unavailable();
    match (settings.faults.as_str(), unavailable) {
        ("kill", _) => Some(vec![Fault::Kill]),
        ("partition", Some(why)) => {
            eprintln!("torture: skipped: partition trials need network namespaces: {why}");
            None
        }
        ("partition", None) => Some(vec![Fault::Partition]),
        (_, Some(why)) => {
            eprintln!("torture: partition trials skipped ({why}); SIGKILL trials only");
            Some(vec![Fault::Kill])
        }
        (_, None) => Some(vec![Fault::Kill, Fault::Partition]),
    }
}

// CI's short run (TANDEM_TORTURE_TRIALS, default 3, debug build); `scripts/torture` runs
// long ones against a release build and writes a summary.
#[test]
fn failover_trials_keep_every_acknowledged_write_and_converge() {
    let settings = Settings::from_environment();
    let Some(faults) = faults(&settings) else {
        return;
    };
    let _machine = crate::cluster::cpu_heavy();
    let load = match std::env::var("TANDEM_TORTURE_LOAD").as_deref() {
        Ok("builtin") => load::Kind::Builtin,
        Ok("fio") => {
            crate::tools::require_fio();
            load::Kind::Fio
        }
        _ => load::Kind::probe(),
    };
    if load == load::Kind::Builtin {
        eprintln!(
            "torture: background load by the harness's own QD16 writer (fio with its nbd engine \
             is missing, or TANDEM_TORTURE_LOAD=builtin)"
        );
    }
    let context = format!(
        "{} trials from seed {}, faults {}, background load {}, tandem {}",
        settings.trials,
        settings.first_seed,
        settings.faults,
        load.name(),
        crate::cluster::tandem_bin().display()
    );
    eprintln!("torture: {context}");
    let mut records = Vec::new();
    let mut seed = settings.first_seed;
    for number in 1..=settings.trials {
        let plan = trial::Plan::from_seed(seed, &faults);
        eprintln!(
            "torture trial {number}/{}: {}",
            settings.trials,
            plan.describe()
        );
        let record = trial::run(number, &plan, load);
        eprintln!("{}", summary::trial_line(&record, settings.trials));
        if let Some(report) = &record.report {
            eprintln!("{report}");
        }
        records.push(record);
        if let Some(out) = &settings.out {
            summary::write_files(out, &records, &context);
        }
        seed = Rng::new(seed).next_u64();
    }
    let counts = summary::Counts::of(&records);
    eprintln!("{}", summary::markdown(&records, &context));
    assert_eq!(
        counts.passed,
        counts.trials,
        "torture: {}",
        counts.headline()
    );
}
