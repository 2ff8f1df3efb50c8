//! `tandem create-md` and `tandem dump-md` end to end: the built binary against a
//! configuration and sparse backing files in a temporary directory (no node runs).
//!
//! The `tandem` binary is `TANDEM_BIN`, or built once with `cargo build -p tandem`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use tempfile::TempDir;

/// Size of alice's backing file: 1 GiB, sparse.
const BACKING_BYTES: u64 = 1 << 30;

/// The `tandem` binary: `TANDEM_BIN` if set, else built once with `cargo build -p tandem`.
fn tandem_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("TANDEM_BIN") {
            return PathBuf::from(path);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "tandem", "--quiet"])
            .current_dir(&root)
            .status()
            .expect("cannot run cargo to build tandem");
        assert!(
            status.success(),
            "'cargo build -p tandem' failed with {status}"
        );
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
        let bin = target.join("debug").join("tandem");
        assert!(
            bin.exists(),
            "{} is missing after 'cargo build -p tandem'",
            bin.display()
        );
        bin
    })
}

/// A two-node resource `r0` whose node alice has a 1 GiB backing file with internal metadata.
struct Setup {
    dir: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("cannot create a tempdir");
        let disk = dir.path().join("alice.img");
        std::fs::File::create(&disk)
            .and_then(|file| file.set_len(BACKING_BYTES))
            .expect("cannot create the backing file");
        let config = format!(
            "resource r0 {{\n  volume 0 {{\n    device /dev/drbd0;\n    disk {};\n    meta-disk \
             internal;\n  }}\n  on alice {{\n    node-id 0;\n    address \
             127.0.0.1:7789;\n  }}\n  on bob {{\n    node-id 1;\n    address \
             127.0.0.1:7790;\n  }}\n}}\n",
            disk.display()
        );
        std::fs::write(dir.path().join("tandem.conf"), config).expect("cannot write the config");
        Setup { dir }
    }

    fn disk(&self) -> PathBuf {
        self.dir.path().join("alice.img")
    }

    /// Run `tandem VERB --config CONF --node alice ARGS...`.
    fn run(&self, verb: &str, args: &[&str]) -> Output {
        let config = self.dir.path().join("tandem.conf");
        Command::new(tandem_bin())
            .arg(verb)
            .arg("--config")
            .arg(&config)
            .args(["--node", "alice"])
            .args(args)
            .output()
            .expect("cannot run tandem")
    }

    /// Run and require success; standard output.
    fn run_ok(&self, verb: &str, args: &[&str]) -> String {
        let output = self.run(verb, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "tandem {verb} {args:?} failed ({}): {stderr}",
            output.status
        );
        String::from_utf8(output.stdout).expect("stdout is not UTF-8")
    }

    /// Run and require exit status 1; standard error.
    fn run_refused(&self, verb: &str, args: &[&str]) -> String {
        let output = self.run(verb, args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(1),
            "tandem {verb} {args:?} must be refused: {stderr}"
        );
        assert!(stderr.starts_with("tandem: "), "{stderr}");
        stderr
    }
}

#[test]
fn create_md_then_dump_md_as_text_and_json() {
    let setup = Setup::new();
    let created = setup.run_ok("create-md", &["r0"]);
    let expected = format!(
        "r0/0: metadata created (internal, 68 KiB at the end of {}; 1023.9 MiB of data)\n",
        setup.disk().display()
    );
    assert_eq!(created, expected);

    let text = setup.run_ok("dump-md", &["r0"]);
    assert!(
        text.starts_with(&format!(
            "# r0/0: metadata at the end of {}\n",
            setup.disk().display()
        )),
        "{text}"
    );
    for line in [
        "node-id 0",
        "current uuid:   0000000000000004",
        "peer slot 0:    node-id 1",
    ] {
        assert!(text.contains(line), "dump-md text lacks '{line}':\n{text}");
    }

    let json: serde_json::Value =
        serde_json::from_str(&setup.run_ok("dump-md", &["--json", "all"]))
            .expect("dump-md --json is not JSON");
    let volumes = json
        .as_array()
        .expect("dump-md --json is an array of volumes");
    assert_eq!(volumes.len(), 1);
    let metadata = &volumes[0]["metadata"];
    assert_eq!(volumes[0]["resource"], "r0");
    assert_eq!(metadata["node_id"], 0);
    assert_eq!(metadata["current_uuid"], "0000000000000004");
    assert_eq!(metadata["layout"]["backing_bytes"], BACKING_BYTES);
    assert_eq!(metadata["layout"]["data_bytes"], BACKING_BYTES - 68 * 1024);
    assert_eq!(metadata["peers"][0]["node_id"], 1);
    assert_eq!(metadata["peers"][0]["out_of_sync_blocks"], 0);
}

#[test]
fn create_md_twice_refuses_and_force_overwrites() {
    let setup = Setup::new();
    setup.run_ok("create-md", &["r0"]);
    let stderr = setup.run_refused("create-md", &["r0"]);
    for words in ["already", "current UUID 0000000000000004", "--force"] {
        assert!(
            stderr.contains(words),
            "the refusal lacks '{words}': {stderr}"
        );
    }
    let forced = setup.run_ok("create-md", &["--force", "--max-peers", "3", "r0"]);
    assert!(
        forced.starts_with("r0/0: metadata created (internal, "),
        "{forced}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&setup.run_ok("dump-md", &["--json", "r0"])).expect("not JSON");
    assert_eq!(
        json[0]["metadata"]["layout"]["peer_slots"], 3,
        "--force --max-peers 3 recreated the metadata"
    );
}

#[test]
fn create_md_takes_a_bitmap_granularity_and_refuses_bad_ones() {
    let setup = Setup::new();
    setup.run_ok("create-md", &["--bitmap-granularity", "64K", "r0"]);
    let json: serde_json::Value =
        serde_json::from_str(&setup.run_ok("dump-md", &["--json", "r0"])).expect("not JSON");
    assert_eq!(
        json[0]["metadata"]["layout"]["bitmap_granularity_bytes"],
        65536
    );
    for bad in ["3K", "2K", "2M", "lots"] {
        let output = setup.run("create-md", &["--force", "--bitmap-granularity", bad, "r0"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "--bitmap-granularity {bad} was accepted"
        );
        assert!(stderr.contains("--bitmap-granularity"), "{stderr}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&setup.run_ok("dump-md", &["--json", "r0"])).expect("not JSON");
    assert_eq!(
        json[0]["metadata"]["layout"]["bitmap_granularity_bytes"], 65536,
        "a refused create-md wrote nothing"
    );
}

#[test]
fn bad_resource_names_and_missing_metadata_are_clear_errors() {
    let setup = Setup::new();
    for verb in ["create-md", "dump-md"] {
        let stderr = setup.run_refused(verb, &["nope"]);
        assert!(stderr.contains("'nope' not defined in"), "{verb}: {stderr}");
    }
    let stderr = setup.run_refused("dump-md", &["r0"]);
    assert!(
        stderr.contains("no tandem metadata") && stderr.contains("tandem create-md"),
        "{stderr}"
    );
    let output = setup.run("create-md", &[]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a missing resource argument is a usage error"
    );
}

/// A running node holds its metadata: create-md and dump-md are refused until it stops.
#[test]
fn metadata_commands_are_refused_while_a_node_runs() {
    let setup = Setup::new();
    setup.run_ok("create-md", &["r0"]);
    let run_dir = setup.dir.path().join("run");
    let config = setup.dir.path().join("tandem.conf");
    let mut node = Command::new(tandem_bin())
        .arg("--run-dir")
        .arg(&run_dir)
        .arg("node")
        .arg("--config")
        .arg(&config)
        .args(["--node", "alice"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start tandem node");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !run_dir.join("admin.sock").exists() {
        if let Some(status) = node.try_wait().expect("cannot poll the node") {
            panic!("tandem node exited with {status} before it was up");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tandem node did not come up within 20 s"
        );
        // A poll interval, not a wait for an event.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refusals = [
        setup.run("create-md", &["--force", "r0"]),
        setup.run("dump-md", &["r0"]),
    ];
    let _ = node.kill();
    let _ = node.wait();
    for output in refusals {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("in use by a running tandem node"),
            "{stderr}"
        );
    }
    setup.run_ok("dump-md", &["r0"]);
}
