//! Runs every target's body over its committed corpus and the generated seeds, on stable Rust
//! without libFuzzer, so a broken property or a stale corpus shows up in an ordinary test run.
//! With `TANDEM_FUZZ_WRITE_SEEDS=1` it first (re)writes the generated seeds into
//! `corpus/<target>/`.

use std::fs;
use std::path::PathBuf;

use tandem_fuzz::{seeds, TARGETS};

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

#[test]
fn generated_seeds_pass_their_targets() {
    let write = std::env::var_os("TANDEM_FUZZ_WRITE_SEEDS").is_some();
    let seeds = seeds::all();
    assert!(seeds.len() >= 20, "{} seeds", seeds.len());
    for (target, name, bytes) in seeds {
        let run = TARGETS
            .iter()
            .find(|(candidate, _)| *candidate == target)
            .map(|(_, run)| *run);
        let Some(run) = run else {
            panic!("seed {name} names an unknown target {target}");
        };
        run(&bytes);
        if write {
            let directory = corpus_dir(target);
            fs::create_dir_all(&directory).expect("create the corpus directory");
            fs::write(directory.join(name), &bytes).expect("write a seed");
        }
    }
}

#[test]
fn every_target_has_a_corpus_that_passes() {
    for (target, run) in TARGETS {
        let entries = fs::read_dir(corpus_dir(target))
            .unwrap_or_else(|error| panic!("corpus of {target}: {error}"));
        let mut count = 0;
        for entry in entries {
            let path = entry.expect("a corpus entry").path();
            let bytes = fs::read(&path).expect("read a corpus file");
            run(&bytes);
            count += 1;
        }
        assert!(count > 0, "{target} has an empty corpus");
    }
}

/// The `nbd_server` harness really reaches transmission: the seed's read returns its data,
/// after the write of the same seed put it there.
#[test]
fn nbd_server_seed_reaches_transmission() {
    let seed = fs::read(corpus_dir("nbd_server").join("go-then-requests")).expect("the seed");
    let out = tandem_fuzz::nbd_server::exchange(&seed);
    let reply_magic = 0x6744_6698_u32.to_be_bytes();
    let replies = out
        .windows(4)
        .filter(|window| *window == reply_magic)
        .count();
    assert!(
        replies >= 6,
        "{replies} simple replies in {} bytes",
        out.len()
    );
    assert!(out
        .windows(64)
        .any(|window| window.iter().all(|&byte| byte == 0x5A)));
}
