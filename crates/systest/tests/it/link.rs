//! The link emulator (`tandem-linkemu`) between test nodes: one process relays every peer
//! connection (`Spec::through_relays`), and a test changes delay, rate or partitions while
//! the nodes run, through its control socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{OnceLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{tandem_bin, Cluster};
use crate::tools::Background;

/// How long the emulator may take to listen.
const START_DEADLINE: Duration = Duration::from_secs(20);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A running `tandem-linkemu`; dropping it kills it.
pub struct LinkEmulator {
    _process: Background,
    /// Every test behind the emulator judges latency or congestion.
    _timing: RwLockReadGuard<'static, ()>,
    control: PathBuf,
}

fn linkemu_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let tandem = tandem_bin();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "linkemu", "--quiet"])
            .current_dir(&root)
            .status()
            .expect("cannot run cargo to build tandem-linkemu");
        assert!(
            status.success(),
            "'cargo build -p linkemu' failed with {status}"
        );
        let bin = tandem.with_file_name("tandem-linkemu");
        assert!(bin.exists(), "{} is missing", bin.display());
        bin
    })
}

impl LinkEmulator {
    /// Starts relays for a cluster made with `Spec::through_relays`: relay `i` forwards to
    /// node `i`. No delay until [`LinkEmulator::set`] says so.
    pub fn start(cluster: &Cluster) -> LinkEmulator {
        let timing = crate::cluster::timing_sensitive();
        let ports = cluster
            .relay_ports()
            .expect("the cluster was made with Spec::through_relays");
        let control = cluster.dir().join("link.sock");
        let mut command = Command::new(linkemu_bin());
        for (index, port) in ports.iter().enumerate() {
            command
                .arg("--pair")
                .arg(format!("127.0.0.1:{port}={}", cluster.address(index)));
        }
        command.arg("--control").arg(&control);
        let mut process = Background::spawn(command);
        let start = Instant::now();
        while !control.exists() {
            assert!(process.is_running(), "tandem-linkemu exited at start");
            assert!(
                start.elapsed() < START_DEADLINE,
                "tandem-linkemu did not start within {START_DEADLINE:?}"
            );
            std::thread::sleep(POLL_INTERVAL);
        }
        LinkEmulator {
            _process: process,
            _timing: timing,
            control,
        }
    }

    /// Sends one control request (a JSON object, e.g. `{"delay_ms":10}`); fails the test if
    /// the emulator refuses it.
    pub fn set(&self, request: &str) -> Value {
        let mut stream = UnixStream::connect(&self.control).expect("connect to the link emulator");
        stream
            .write_all(format!("{request}\n").as_bytes())
            .expect("send to the link emulator");
        let mut line = String::new();
        BufReader::new(&stream)
            .read_line(&mut line)
            .expect("read the link emulator's answer");
        let reply: Value = serde_json::from_str(&line).expect("the link emulator answers JSON");
        assert_eq!(
            reply["ok"], true,
            "the link emulator refused {request}: {line}"
        );
        reply
    }
}
