//! The counts of a torture run and their files: `summary.md` (counts, then one row per
//! trial) and `trials.csv` (one row per trial, every count and timing), plus one
//! `failures/trial-N-seed-S.txt` per failed trial with its whole report.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::trial::{describe_timings, Check, Fault, Record};
use crate::cluster::NODE_NAMES;

/// What a run found, over every trial so far.
#[derive(Debug, Default)]
pub struct Counts {
    pub trials: usize,
    pub passed: usize,
    pub kill_trials: usize,
    pub partition_trials: usize,
    /// Trials where two checked replicas differ.
    pub divergent_trials: usize,
    /// Acknowledged writes (blocks) missing on a checked replica, summed over trials.
    pub lost_writes: usize,
    pub trials_with_lost_writes: usize,
    /// Trials that ended with a StandAlone connection.
    pub standalone_dead_ends: usize,
    pub not_in_sync: usize,
    pub nodes_died: usize,
    pub promotions_refused: usize,
    pub harness_errors: usize,
}

impl Counts {
    pub fn of(records: &[Record]) -> Counts {
        let count = |check: Check| records.iter().filter(|record| record.has(check)).count();
        Counts {
            trials: records.len(),
            passed: records.iter().filter(|record| record.passed()).count(),
            kill_trials: records
                .iter()
                .filter(|record| record.plan.fault == Fault::Kill)
                .count(),
            partition_trials: records
                .iter()
                .filter(|record| record.plan.fault == Fault::Partition)
                .count(),
            divergent_trials: count(Check::Divergent),
            lost_writes: records.iter().map(|record| record.lost_writes).sum(),
            trials_with_lost_writes: records
                .iter()
                .filter(|record| record.lost_writes > 0)
                .count(),
            standalone_dead_ends: count(Check::StandAlone),
            not_in_sync: count(Check::NotInSync),
            nodes_died: count(Check::NodeDied),
            promotions_refused: count(Check::Promotion),
            harness_errors: count(Check::Harness),
        }
    }

    /// One line for the test's panic message and the driver's output.
    pub fn headline(&self) -> String {
        format!(
            "{} trials ({} kill, {} partition): {} passed, {} divergent, {} lost acknowledged \
             writes in {} trials, {} StandAlone dead ends, {} not in sync, {} node deaths, {} \
             promotions refused, {} harness errors",
            self.trials,
            self.kill_trials,
            self.partition_trials,
            self.passed,
            self.divergent_trials,
            self.lost_writes,
            self.trials_with_lost_writes,
            self.standalone_dead_ends,
            self.not_in_sync,
            self.nodes_died,
            self.promotions_refused,
            self.harness_errors
        )
    }
}

/// One line per trial, printed as it ends.
pub fn trial_line(record: &Record, trials: usize) -> String {
    let verdict = if record.passed() {
        "pass".to_string()
    } else {
        format!("FAIL ({})", checks(record))
    };
    format!(
        "torture trial {}/{trials} seed {} {} survivor {}: {verdict}; {} acknowledged, {} lost, \
         {} divergent blocks; {}",
        record.number,
        record.plan.seed,
        record.plan.fault.name(),
        NODE_NAMES[record.plan.survivor],
        record.acknowledged,
        record.lost_writes,
        record.divergent_blocks,
        describe_timings(&record.timings)
    )
}

/// The names of the checks a trial broke, without repeats.
fn checks(record: &Record) -> String {
    let mut names: Vec<&str> = record
        .findings
        .iter()
        .map(|finding| finding.check.name())
        .collect();
    names.dedup();
    names.join(" ")
}

/// `summary.md`: the counts, how to replay, one row per trial.
pub fn markdown(records: &[Record], context: &str) -> String {
    let counts = Counts::of(records);
    let mut text = String::from("# tandem failover torture run\n\n");
    let _ = writeln!(text, "{context}\n");
    let _ = writeln!(text, "| count | value |\n|---|---|");
    for (name, value) in [
        ("trials", counts.trials),
        ("kill trials", counts.kill_trials),
        ("partition trials", counts.partition_trials),
        ("passed", counts.passed),
        ("divergent trials", counts.divergent_trials),
        ("lost acknowledged writes (blocks)", counts.lost_writes),
        ("trials with lost writes", counts.trials_with_lost_writes),
        ("StandAlone dead ends", counts.standalone_dead_ends),
        ("not in sync by the deadline", counts.not_in_sync),
        ("node deaths", counts.nodes_died),
        ("promotions refused", counts.promotions_refused),
        ("harness errors", counts.harness_errors),
    ] {
        let _ = writeln!(text, "| {name} | {value} |");
    }
    let _ = writeln!(
        text,
        "\nReplay one trial: `TANDEM_TORTURE_SEED=SEED TANDEM_TORTURE_TRIALS=1 \
         TANDEM_TORTURE_FAULTS=FAULT cargo test -p systest --test it torture:: -- \
         --include-ignored --nocapture` (the seed fixes the plan, not the processes' timing).\n"
    );
    let _ = writeln!(
        text,
        "| trial | seed | fault | survivor | alice returns (vs. new writes) | acknowledged (FUA) \
         | result | lost | divergent blocks | total s | first finding \
         |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for record in records {
        let first = record
            .findings
            .first()
            .map(|finding| finding.text.replace('|', "/"))
            .unwrap_or_default();
        let result = if record.passed() {
            "pass".to_string()
        } else {
            checks(record)
        };
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} ({}) | {result} | {} | {} | {:.1} | {} |",
            record.number,
            record.plan.seed,
            record.plan.fault.name(),
            NODE_NAMES[record.plan.survivor],
            record.plan.alice_returns.name(),
            record.acknowledged,
            record.acknowledged_fua,
            record.lost_writes,
            record.divergent_blocks,
            record.timings.total.as_secs_f64(),
            shorten(&first, 200)
        );
    }
    text
}

/// `trials.csv`: one row per trial.
pub fn csv(records: &[Record]) -> String {
    let mut text = String::from(
        "trial,seed,fault,survivor,alice_returns,load,acknowledged,acknowledged_fua,passed,checks,\
         lost_writes,divergent_blocks,standalone,promotion_retries,setup_s,before_s,failover_s,\
         after_s,sync_s,check_s,teardown_s,total_s,first_finding\n",
    );
    let seconds = |duration: Option<Duration>| {
        duration.map_or_else(String::new, |duration| {
            format!("{:.2}", duration.as_secs_f64())
        })
    };
    for record in records {
        let timings = &record.timings;
        let first = record
            .findings
            .first()
            .map(|finding| finding.text.replace('"', "'"))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.2},\"{}\"",
            record.number,
            record.plan.seed,
            record.plan.fault.name(),
            NODE_NAMES[record.plan.survivor],
            record.plan.alice_returns.name(),
            record.load.name(),
            record.acknowledged,
            record.acknowledged_fua,
            record.passed(),
            checks(record),
            record.lost_writes,
            record.divergent_blocks,
            record.has(Check::StandAlone),
            record.promotion_retries,
            seconds(timings.setup),
            seconds(timings.before),
            seconds(timings.failover),
            seconds(timings.after),
            seconds(timings.sync),
            seconds(timings.check),
            seconds(timings.teardown),
            timings.total.as_secs_f64(),
            shorten(&first, 500)
        );
    }
    text
}

/// Writes `summary.md`, `trials.csv` and the failed trials' reports into `directory`.
pub fn write_files(directory: &Path, records: &[Record], context: &str) {
    let failures = directory.join("failures");
    std::fs::create_dir_all(&failures)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", failures.display()));
    let write = |name: &Path, text: &str| {
        std::fs::write(name, text)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", name.display()))
    };
    write(&directory.join("summary.md"), &markdown(records, context));
    write(&directory.join("trials.csv"), &csv(records));
    for record in records {
        if let Some(report) = &record.report {
            write(
                &failures.join(format!(
                    "trial-{}-seed-{}.txt",
                    record.number, record.plan.seed
                )),
                report,
            );
        }
    }
}

fn shorten(text: &str, length_max: usize) -> String {
    match text.char_indices().nth(length_max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
