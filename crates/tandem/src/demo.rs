//! `tandem demo`: a two-node cluster on this machine, a workload, and proof that it replicated.
//!
//! Steps: create a temporary directory with two backing files and a DRBD-syntax config on free
//! loopback ports; `create-md` on both; start two `tandem node` processes; wait for them to
//! connect; skip the initial sync of the empty disks (`new-current-uuid --clear-bitmap`);
//! promote one; write a workload through its NBD export with a progress bar; disconnect the
//! peer, write more, and show the resync of only the changed blocks when it reconnects; show
//! `tandem status`; compare the two replicas (the exported part of the backing files) by
//! checksum; stop the nodes and remove everything.
//!
//! Invariant: every process the demo starts is stopped and the directory removed on every
//! path out of `run`, success or failure (the guards' `Drop`).

mod nbd_client;

use std::fs::File;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use admin::{Reply, Request, StatusOptions, StatusReport};
use indicatif::{ProgressBar, ProgressStyle};

use crate::client::Session;
use nbd_client::Client;

/// Size of each node's backing file.
const DISK_BYTES: u64 = 256 * 1024 * 1024;
/// Workload: this many 1 MiB writes.
const WRITE_COUNT: u64 = 192;
const WRITE_BYTES: usize = 1024 * 1024;
/// Requests in flight during the workload.
const QUEUE_DEPTH: usize = 8;
/// While bob is disconnected: this many 1 MiB writes, every `AWAY_STRIDE_BLOCKS`-th block.
const AWAY_WRITE_COUNT: u64 = 24;
const AWAY_STRIDE_BLOCKS: u64 = 8;
/// The blocks rewritten while bob is away were all written before, so the samples check both.
const _: () = assert!((AWAY_WRITE_COUNT - 1) * AWAY_STRIDE_BLOCKS < WRITE_COUNT);
/// How long the nodes may take to start and connect, or a resync to finish.
const CONNECT_DEADLINE: Duration = Duration::from_secs(20);
const NODES: [&str; 2] = ["alice", "bob"];

/// Why the demonstration failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A file or process operation failed.
    #[error("demo: {context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// A node answered an admin request with an error.
    #[error("demo: {0}")]
    Admin(String),
    /// Something did not happen in time.
    #[error("demo: {0} did not happen within {1:?}; node logs are in {2}")]
    Timeout(&'static str, Duration, String),
    /// The replicas differ.
    #[error("demo: the replicas differ: alice {alice:08x}, bob {bob:08x}")]
    Differ { alice: u32, bob: u32 },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DemoError {
    let context = context.into();
    move |source| DemoError::Io { context, source }
}

/// The demo's node processes; stopped on drop.
struct Cluster {
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            stop(child);
        }
    }
}

/// SIGTERM, then SIGKILL if the node has not exited within five seconds.
fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: sending a signal to a process we started has no memory-safety conditions.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Cluster {
    fn run_dir(&self, node: &str) -> PathBuf {
        self.dir.path().join(node)
    }

    fn disk(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}.img"))
    }

    fn logs(&self) -> String {
        self.dir.path().join("*.log").display().to_string()
    }
}

/// Runs the demonstration.
pub fn run() -> Result<(), DemoError> {
    let mut cluster = Cluster {
        dir: tempfile::tempdir().map_err(io_error("create a temporary directory"))?,
        children: Vec::new(),
    };
    let config = write_config(&cluster)?;
    println!(
        "== tandem demo: two nodes on this machine ({})",
        cluster.dir.path().display()
    );
    println!(
        "{}",
        std::fs::read_to_string(&config).map_err(io_error("read the config back"))?
    );
    for node in NODES {
        create_md(&config, node)?;
    }
    for node in NODES {
        let child = start_node(&cluster, &config, node)?;
        cluster.children.push(child);
    }
    wait_for(&cluster, "the two nodes connecting", |report| {
        connection_of(report) == Some("Connected")
    })?;
    println!("== both nodes are up and connected, their fresh disks Inconsistent");
    println!(
        "== the disks are empty, so skip the initial sync: tandem new-current-uuid --clear-bitmap \
         r0"
    );
    admin(
        &cluster.run_dir("alice"),
        &Request::NewCurrentUuid {
            resource: Some("r0".into()),
            clear_bitmap: true,
        },
    )?;
    wait_for(&cluster, "bob's disk becoming UpToDate", |report| {
        local_disk(report) == Some("UpToDate")
    })?;
    println!("== making alice Primary");
    admin(
        &cluster.run_dir("alice"),
        &Request::Primary {
            resource: Some("r0".into()),
            force: false,
        },
    )?;
    wait_for(&cluster, "bob seeing alice as Primary", |report| {
        peer_role(report) == Some("Primary")
    })?;
    show_refusal(&cluster);
    let uri = write_workload(
        &cluster,
        WRITE_COUNT,
        |index| index * WRITE_BYTES as u64,
        fill_block,
    )?;
    println!("== wrote {WRITE_COUNT} MiB to {uri}");
    resync_after_absence(&cluster)?;
    println!("== tandem status (on alice)");
    print!(
        "{}",
        admin::format_status(
            &status(&cluster.run_dir("alice"))?,
            &StatusOptions {
                verbose: false,
                statistics: true,
                width: 80
            }
        )
    );
    prove_identical(&cluster)?;
    println!(
        "== stopping the nodes and removing {}",
        cluster.dir.path().display()
    );
    drop(cluster);
    println!("== done");
    Ok(())
}

fn free_port() -> Result<u16, DemoError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_error("find a free port"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(io_error("find a free port"))
}

fn write_config(cluster: &Cluster) -> Result<PathBuf, DemoError> {
    let mut hosts = String::new();
    for (id, node) in NODES.iter().enumerate() {
        let disk = cluster.disk(node);
        File::create(&disk)
            .and_then(|f| f.set_len(DISK_BYTES))
            .map_err(io_error(format!("create {}", disk.display())))?;
        let port = free_port()?;
        hosts.push_str(&format!(
            "  on {node} {{\n    node-id {id};\n    address 127.0.0.1:{port};\n    volume 0 {{ \
             device /dev/drbd0; disk {}; meta-disk internal; }}\n  }}\n",
            disk.display()
        ));
    }
    let text =
        format!("resource r0 {{\n  net {{\n    protocol C;\n    connect-int 1;\n  }}\n{hosts}}}\n");
    let path = cluster.dir.path().join("r0.res");
    std::fs::write(&path, text).map_err(io_error("write the config"))?;
    Ok(path)
}

/// `tandem create-md` for one node, its output shown.
fn create_md(config: &Path, node: &str) -> Result<(), DemoError> {
    let exe = std::env::current_exe().map_err(io_error("find the tandem binary"))?;
    println!("== tandem create-md --node {node} r0");
    let output = Command::new(exe)
        .args(["create-md", "--node", node, "--config"])
        .arg(config)
        .arg("r0")
        .output()
        .map_err(io_error("run create-md"))?;
    print!("{}", String::from_utf8_lossy(&output.stdout));
    if !output.status.success() {
        return Err(DemoError::Admin(format!(
            "create-md for {node} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

fn start_node(cluster: &Cluster, config: &Path, node: &str) -> Result<Child, DemoError> {
    let exe = std::env::current_exe().map_err(io_error("find the tandem binary"))?;
    let log = File::create(cluster.dir.path().join(format!("{node}.log")))
        .map_err(io_error("create a log file"))?;
    Command::new(exe)
        .arg("--run-dir")
        .arg(cluster.run_dir(node))
        .args(["node", "--node", node, "--config"])
        .arg(config)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(io_error(format!("start node {node}")))
}

fn admin(run_dir: &Path, request: &Request) -> Result<Reply, DemoError> {
    let reply = Session::open(run_dir, request)
        .and_then(Session::reply)
        .map_err(|e| DemoError::Admin(e.to_string()))?;
    match reply {
        Reply::Error { message } => Err(DemoError::Admin(message)),
        reply => Ok(reply),
    }
}

fn status(run_dir: &Path) -> Result<StatusReport, DemoError> {
    match admin(run_dir, &Request::Status { resource: None })? {
        Reply::Status(report) => Ok(report),
        _ => Err(DemoError::Admin("unexpected reply to status".into())),
    }
}

fn connection_of(report: &StatusReport) -> Option<&str> {
    Some(
        report
            .resources
            .first()?
            .connections
            .first()?
            .connection
            .as_str(),
    )
}

fn peer_role(report: &StatusReport) -> Option<&str> {
    Some(report.resources.first()?.connections.first()?.role.as_str())
}

fn local_disk(report: &StatusReport) -> Option<&str> {
    Some(report.resources.first()?.devices.first()?.disk.as_str())
}

fn peer_device(report: &StatusReport) -> Option<&admin::PeerDeviceStatus> {
    report
        .resources
        .first()?
        .connections
        .first()?
        .peer_devices
        .first()
}

/// Disconnect bob, write while he is away, reconnect: only the changed blocks move, with a
/// progress bar from the resync's `done:` percentage.
fn resync_after_absence(cluster: &Cluster) -> Result<(), DemoError> {
    let alice = cluster.run_dir("alice");
    println!("== disconnecting bob (tandem disconnect r0 on alice) and writing while he is away");
    admin(
        &alice,
        &Request::Disconnect {
            resource: Some("r0".into()),
            peer: None,
        },
    )?;
    write_workload(
        cluster,
        AWAY_WRITE_COUNT,
        |index| index * AWAY_STRIDE_BLOCKS * WRITE_BYTES as u64,
        fill_away_block,
    )?;
    let away = status(&alice)?;
    let out_of_sync_kib = peer_device(&away).map_or(0, |d| d.out_of_sync_kib);
    println!(
        "== alice tracks {} MiB out of sync for bob in her bitmap; reconnecting",
        out_of_sync_kib / 1024
    );
    admin(
        &alice,
        &Request::Connect {
            resource: Some("r0".into()),
            peer: None,
            discard_my_data: false,
        },
    )?;
    println!("== tandem wait-sync r0");
    crate::wait_sync::run(&alice, Some("r0".into()), Some(CONNECT_DEADLINE)).map_err(|error| {
        DemoError::Admin(format!(
            "wait-sync: {error}; node logs are in {}",
            cluster.logs()
        ))
    })?;
    println!(
        "== bob is in sync again: {} MiB moved, not the whole {} MiB disk",
        out_of_sync_kib / 1024,
        DISK_BYTES >> 20
    );
    Ok(())
}

/// What the writes made while bob was away put in block `index` (different from before).
fn fill_away_block(index: u64, buffer: &mut [u8]) {
    fill_block(index.wrapping_add(1 << 32), buffer);
}

/// Poll both nodes' status until `condition` holds on bob's (and alice answers), or time out.
fn wait_for(
    cluster: &Cluster,
    what: &'static str,
    condition: impl Fn(&StatusReport) -> bool,
) -> Result<(), DemoError> {
    let deadline = Instant::now() + CONNECT_DEADLINE;
    loop {
        let alice = status(&cluster.run_dir("alice"));
        let bob = status(&cluster.run_dir("bob"));
        if let (Ok(_), Ok(report)) = (&alice, &bob) {
            if condition(report) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(DemoError::Timeout(what, CONNECT_DEADLINE, cluster.logs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn show_refusal(cluster: &Cluster) {
    match Client::open(&cluster.run_dir("bob").join("nbd.sock"), "r0") {
        Err(error) => println!("== bob (Secondary) refuses to serve the export: {error}"),
        Ok(_) => println!("== warning: bob (Secondary) opened the export"),
    }
}

/// Deterministic, incompressible-looking block contents.
fn fill_block(index: u64, buffer: &mut [u8]) {
    let mut state = index.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in buffer.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let bytes = state.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Write `count` 1 MiB blocks through alice's export; returns its URI.
fn write_workload(
    cluster: &Cluster,
    count: u64,
    offset_of: impl Fn(u64) -> u64 + Send,
    fill: impl Fn(u64, &mut [u8]) + Send,
) -> Result<String, DemoError> {
    let socket = cluster.run_dir("alice").join("nbd.sock");
    let uri = format!("nbd+unix:///r0?socket={}", socket.display());
    let mut client = Client::open(&socket, "r0").map_err(io_error(format!("open {uri}")))?;
    let end = (0..count).map(&offset_of).max().unwrap_or(0) + WRITE_BYTES as u64;
    if client.size < end {
        return Err(DemoError::Admin(format!(
            "the export is only {} bytes",
            client.size
        )));
    }
    println!(
        "== writing {count} MiB to the {} MiB export {uri}",
        client.size >> 20
    );
    println!("   (protocol C: each write completes only once it is on every connected disk)");
    let bar = ProgressBar::new(count * WRITE_BYTES as u64);
    let style = ProgressStyle::with_template("   [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec}")
        .map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    client
        .write_all_blocks(count, WRITE_BYTES, QUEUE_DEPTH, offset_of, fill, |bytes| {
            bar.inc(bytes)
        })
        .map_err(io_error("write the workload"))?;
    bar.finish();
    client.disconnect().map_err(io_error("disconnect"))?;
    let closed = |report: &StatusReport| {
        report
            .resources
            .first()
            .and_then(|r| r.devices.first())
            .is_some_and(|d| !d.open)
    };
    let deadline = Instant::now() + CONNECT_DEADLINE;
    while !status(&cluster.run_dir("alice")).is_ok_and(|report| closed(&report)) {
        if Instant::now() > deadline {
            return Err(DemoError::Timeout(
                "alice noticing the client closed the export",
                CONNECT_DEADLINE,
                cluster.logs(),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(uri)
}

/// crc32c of the first `length` bytes of `path`.
fn checksum(path: &Path, length: u64) -> Result<u32, DemoError> {
    let file = File::open(path).map_err(io_error(format!("open {}", path.display())))?;
    let mut file = file.take(length);
    let mut buffer = vec![0u8; 1 << 20];
    let mut crc = 0;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(io_error(format!("read {}", path.display())))?;
        if n == 0 {
            return Ok(crc);
        }
        crc = crc32c::crc32c_append(crc, &buffer[..n]);
    }
}

fn prove_identical(cluster: &Cluster) -> Result<(), DemoError> {
    let report = status(&cluster.run_dir("alice"))?;
    let size_bytes = report
        .resources
        .first()
        .and_then(|r| r.devices.first())
        .map_or(0, |d| d.size_kib * 1024);
    let alice = checksum(&cluster.disk("alice"), size_bytes)?;
    let bob = checksum(&cluster.disk("bob"), size_bytes)?;
    println!(
        "== crc32c of the {} MiB of data on each backing file (the metadata after it differs): \
         alice {alice:08x}, bob {bob:08x}",
        size_bytes >> 20
    );
    if alice != bob {
        return Err(DemoError::Differ { alice, bob });
    }
    let mut expected = vec![0u8; WRITE_BYTES];
    let mut actual = vec![0u8; WRITE_BYTES];
    let mut file = File::open(cluster.disk("bob")).map_err(io_error("open bob's disk"))?;
    type Fill = fn(u64, &mut [u8]);
    let samples: [(u64, Fill, u64); 4] = [
        (0, fill_away_block, 0),
        (5 * AWAY_STRIDE_BLOCKS, fill_away_block, 5),
        (1, fill_block, 1),
        (WRITE_COUNT - 1, fill_block, WRITE_COUNT - 1),
    ];
    for (index, fill, key) in samples {
        fill(key, &mut expected);
        std::io::Seek::seek(
            &mut file,
            std::io::SeekFrom::Start(index * WRITE_BYTES as u64),
        )
        .map_err(io_error("seek"))?;
        file.read_exact(&mut actual)
            .map_err(io_error("read bob's disk"))?;
        if actual != expected {
            return Err(DemoError::Admin(format!(
                "block {index} on bob is not what was written"
            )));
        }
    }
    println!("== the replicas are byte-identical, and bob holds exactly what was written");
    Ok(())
}
