//! A real workload end to end (issue 4 item 8): PostgreSQL on ext4 on the Primary's FUSE
//! export (a direct-I/O loop device over the FUSE file, as in `fuse`), pgbench running, and
//! the test's own client inserting ids into `commits(id bigint primary key)` and recording
//! each id whose COMMIT returned. Then the Primary crashes: SIGKILL to its tandem node and to
//! every PostgreSQL process. The peer is promoted; its ext4 is mounted once (the kernel
//! replays the journal, as any failover would), unmounted, and `fsck.ext4 -f -n` must find
//! nothing to fix; PostgreSQL starts there (its own crash recovery from the WAL) and every
//! recorded id must be there, and pgbench's balances must still add up. Finally bonnie++ runs
//! to completion on that ext4.
//!
//! Invariant checked: drbd-semantics.md §1 (protocol C: a write completes only once it is on
//! the peer's disk), seen through a database: a transaction whose COMMIT returned was made
//! durable by fsync on the Primary, so it is on the peer when the Primary dies.
//!
//! PostgreSQL refuses to run as root, so initdb, postgres, pgbench and bonnie++ run as the
//! `postgres` user the Debian package creates (uid and gid set on the command, no `runuser`).
//! The server listens only on a unix socket in a private directory (no TCP); the test talks
//! to it with a minimal frontend/backend protocol 3.0 client (simple queries, trust
//! authentication), so it knows exactly which COMMITs returned.
//!
//! Needs the Debian packages postgresql and bonnie++ (scripts/test installs them), plus what
//! `fuse` needs; without /dev/fuse it prints SKIPPED. Cleanup is by drop guards declared after
//! the cluster: the postmaster and every process it forked are killed (by pid: its children
//! leave its process group) and waited for before their file system is unmounted, then loop
//! devices and FUSE mounts go, also when an assertion fails. After the crash the Primary's
//! ext4 is unmounted plainly, never lazily, so a PostgreSQL process left behind fails the
//! test instead of leaking the mount and its loop device.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, NODE_NAMES, RESOURCE};
use crate::fuse::{
    fuse_available, fuse_dir, fuse_file, fuse_spec, tool, LoopDevice, MountGuard, TOOL_DEADLINE,
};
use crate::tools::{require, run_ok, Background};

const ALICE: usize = 0;
const BOB: usize = 1;
/// The replicated disk: room for the cluster PostgreSQL (about 40 MiB), pgbench's tables at
/// scale 1, a few WAL segments and bonnie++'s 64 MiB file.
const DISK_BYTES: u64 = 384 << 20;
/// Only names the socket file (`.s.PGSQL.5432`) in the test's private socket directory; the
/// server opens no TCP port.
const PG_PORT: u16 = 5432;
/// How many ids must have committed before the crash.
const COMMITS_BEFORE_CRASH_MIN: usize = 200;
/// How long the workload may take to commit that many, and a state change to show.
const STATE_DEADLINE: Duration = Duration::from_secs(30);
/// How long PostgreSQL may take to accept connections (crash recovery included).
const SERVER_READY_DEADLINE: Duration = Duration::from_secs(60);
/// How long killed processes may take to be gone, and a clean shutdown to finish.
const PROCESS_EXIT_DEADLINE: Duration = Duration::from_secs(20);
/// A query's reply must start within this; a dead server surfaces as EOF well before.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// bonnie++ with a 64 MiB file, 32 MiB of declared RAM and 1024 small files.
const BONNIE_DEADLINE: Duration = Duration::from_secs(120);
const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// The uid and gid of the `postgres` user (from /etc/passwd).
#[derive(Clone, Copy)]
struct PgUser {
    uid: u32,
    gid: u32,
}

fn postgres_user() -> PgUser {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("cannot read /etc/passwd");
    let line = passwd
        .lines()
        .find(|line| line.starts_with("postgres:"))
        .expect("no 'postgres' user; install the Debian package 'postgresql'");
    let fields: Vec<&str> = line.split(':').collect();
    let number = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse().ok())
            .expect("a malformed passwd line")
    };
    PgUser {
        uid: number(2),
        gid: number(3),
    }
}

/// The newest `/usr/lib/postgresql/<major>/bin` that has initdb; fails naming the package.
fn pg_bin_dir() -> PathBuf {
    let mut majors: Vec<u32> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    majors.sort_unstable();
    majors
        .iter()
        .rev()
        .map(|major| PathBuf::from(format!("/usr/lib/postgresql/{major}/bin")))
        .find(|bin| bin.join("initdb").exists())
        .expect("this test needs PostgreSQL's initdb; install the Debian package 'postgresql'")
}

/// Everything the test runs as `postgres`: the binaries, the user, and a directory of its
/// own to run in (the test's working directory may be closed to it).
struct PgTools {
    bin: PathBuf,
    user: PgUser,
    home: PathBuf,
}

impl PgTools {
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let path = if program.contains('/') {
            PathBuf::from(program)
        } else {
            self.bin.join(program)
        };
        let mut command = Command::new(path);
        command
            .args(args)
            .uid(self.user.uid)
            .gid(self.user.gid)
            .current_dir(&self.home)
            .stdin(Stdio::null());
        command
    }

    /// A directory owned by `postgres` with mode 0700.
    fn private_dir(&self, path: &Path) {
        std::fs::create_dir_all(path).expect("cannot create a directory");
        chown(path, Some(self.user.uid), Some(self.user.gid)).expect("cannot chown a directory");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .expect("cannot chmod");
    }
}

/// One postmaster and its children: all killed (SIGKILL, by pid) and waited for when dropped,
/// so their files on ext4 are closed before it unmounts.
struct Server {
    child: Option<Child>,
    socket_dir: PathBuf,
    log: PathBuf,
}

impl Server {
    /// `postgres -D DATA` on a unix socket in `socket_dir` only; waits until it accepts a
    /// connection. Durability settings are PostgreSQL's defaults, spelled out.
    fn start(tools: &PgTools, data: &Path, socket_dir: &Path) -> Server {
        let log = socket_dir.with_extension("log");
        let stderr = File::create(&log).expect("cannot create the server log");
        let data_text = data.to_str().expect("UTF-8 path");
        let socket_text = socket_dir.to_str().expect("UTF-8 path");
        let port = PG_PORT.to_string();
        let mut command = tools.command(
            "postgres",
            &["-D", data_text, "-k", socket_text, "-p", &port],
        );
        for setting in [
            "listen_addresses=",
            "fsync=on",
            "synchronous_commit=on",
            "full_page_writes=on",
            "shared_buffers=16MB",
            "max_wal_size=64MB",
            "min_wal_size=32MB",
            "max_connections=10",
        ] {
            command.arg("-c").arg(setting);
        }
        command
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = command.spawn().expect("cannot spawn postgres");
        let mut server = Server {
            child: Some(child),
            socket_dir: socket_dir.to_path_buf(),
            log,
        };
        server.wait_ready();
        server
    }

    fn socket(&self) -> PathBuf {
        self.socket_dir.join(format!(".s.PGSQL.{PG_PORT}"))
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        while Client::connect(&self.socket()).is_err() {
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            assert!(
                exited.is_none() && start.elapsed() < SERVER_READY_DEADLINE,
                "PostgreSQL is not ready ({exited:?}):\n{}",
                self.log_text()
            );
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    fn connect(&self) -> Client {
        Client::connect(&self.socket())
            .unwrap_or_else(|error| panic!("cannot connect: {error}\n{}", self.log_text()))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL to the postmaster and every process it forked (a crash); returns once none is
    /// left running, so none holds a file on the ext4 below.
    fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let processes = kill_process_tree(&child);
        let _ = wait_child(&mut child);
        assert!(
            wait_gone(&processes),
            "PostgreSQL's processes {processes:?} outlived SIGKILL by {PROCESS_EXIT_DEADLINE:?}"
        );
    }

    /// SIGINT (PostgreSQL's fast shutdown: the postmaster ends its children, then itself);
    /// the server must exit cleanly.
    fn shut_down(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let log = self.log_text();
        let pid = libc::pid_t::try_from(child.id()).expect("pid out of range");
        // SAFETY: kill(2) takes plain integers; the pid is our own unreaped child.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let status = wait_child(&mut child);
        assert!(
            status.is_some_and(|status| status.success()),
            "PostgreSQL's fast shutdown: {status:?}\n{log}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let processes = kill_process_tree(&child);
            let _ = wait_child(&mut child);
            let _ = wait_gone(&processes);
        }
    }
}

/// SIGKILL to `postmaster` and all its descendants; returns the descendants' pids. The
/// postmaster is stopped first so it forks no more while they are listed. Its children call
/// setsid(), so its process group does not hold them, and a backend that waits on a lock of
/// a killed one never notices the postmaster's death: each must be killed by pid.
fn kill_process_tree(postmaster: &Child) -> Vec<libc::pid_t> {
    let Ok(root) = libc::pid_t::try_from(postmaster.id()) else {
        return Vec::new();
    };
    // SAFETY: kill(2) takes plain integers; root is our own unreaped child.
    unsafe { libc::kill(root, libc::SIGSTOP) };
    let descendants = descendants_of(root);
    for pid in descendants.iter().chain([&root]) {
        // SAFETY: as above; each pid was listed as a live descendant of our stopped child,
        // which cannot reap it while stopped, so the pid is not reused.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    descendants
}

/// The live descendants of `root`, from the parent pids in /proc.
fn descendants_of(root: libc::pid_t) -> Vec<libc::pid_t> {
    let parents: Vec<(libc::pid_t, libc::pid_t)> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .filter_map(|pid| Some((pid, stat_fields(pid)?)))
                .filter(|(_, (state, _))| state != "Z")
                .map(|(pid, (_, parent))| (pid, parent))
                .collect()
        })
        .unwrap_or_default();
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(pid, _)| *pid),
        );
        index += 1;
    }
    found.split_off(1)
}

/// (state, parent pid) of a process, from /proc/PID/stat.
fn stat_fields(pid: libc::pid_t) -> Option<(String, libc::pid_t)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state, ppid.
    let (_, rest) = stat.rsplit_once(") ")?;
    let mut fields = rest.split(' ');
    let state = fields.next()?.to_string();
    Some((state, fields.next()?.parse().ok()?))
}

/// Waits until none of `pids` is a live process (zombies hold no files); false after
/// [`PROCESS_EXIT_DEADLINE`].
fn wait_gone(pids: &[libc::pid_t]) -> bool {
    let start = Instant::now();
    while pids
        .iter()
        .any(|pid| stat_fields(*pid).is_some_and(|(state, _)| state != "Z"))
    {
        if start.elapsed() > PROCESS_EXIT_DEADLINE {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    true
}

/// Reaps the child within [`PROCESS_EXIT_DEADLINE`], SIGKILLing it if it overstays.
fn wait_child(child: &mut Child) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if start.elapsed() > PROCESS_EXIT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Why a query failed: the connection broke, or the server answered with an error.
#[derive(Debug)]
enum QueryError {
    Io(io::Error),
    Server(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Io(error) => write!(formatter, "connection: {error}"),
            QueryError::Server(message) => write!(formatter, "server: {message}"),
        }
    }
}

impl From<io::Error> for QueryError {
    fn from(error: io::Error) -> QueryError {
        QueryError::Io(error)
    }
}

/// A minimal PostgreSQL frontend (protocol 3.0, simple queries, trust authentication).
struct Client {
    stream: UnixStream,
}

impl Client {
    fn connect(socket: &Path) -> Result<Client, QueryError> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(QUERY_TIMEOUT))?;
        let mut client = Client { stream };
        let mut body = 196_608_u32.to_be_bytes().to_vec(); // protocol 3.0
        for text in ["user", "postgres", "database", "postgres", ""] {
            body.extend_from_slice(text.as_bytes());
            body.push(0);
        }
        client.send(None, &body)?;
        client.read_until_ready().map(|_| client)
    }

    /// Runs one simple query; its rows, each column as text (None for NULL). In autocommit
    /// mode an `Ok` for an INSERT means its COMMIT returned.
    fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, QueryError> {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        self.send(Some(b'Q'), &body)?;
        self.read_until_ready()
    }

    fn send(&mut self, kind: Option<u8>, body: &[u8]) -> io::Result<()> {
        let length =
            u32::try_from(body.len() + 4).map_err(|_| io::Error::other("message too long"))?;
        let mut message = kind.map(|kind| vec![kind]).unwrap_or_default();
        message.extend_from_slice(&length.to_be_bytes());
        message.extend_from_slice(body);
        self.stream.write_all(&message)
    }

    /// Reads messages up to ReadyForQuery: the data rows, or the first error.
    fn read_until_ready(&mut self) -> Result<Vec<Vec<Option<String>>>, QueryError> {
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            let (kind, body) = self.receive()?;
            match kind {
                b'Z' => return error.map_or(Ok(rows), Err),
                b'E' => error = Some(QueryError::Server(error_message(&body))),
                b'R' if body.get(..4) != Some(&[0, 0, 0, 0]) => {
                    return Err(QueryError::Server(format!(
                        "authentication {body:?} asked; the test sets trust"
                    )))
                }
                b'D' => rows.push(parse_data_row(&body)?),
                // AuthenticationOk, parameters, key data, row descriptions, notices,
                // CommandComplete.
                _ => {}
            }
        }
    }

    fn receive(&mut self) -> io::Result<(u8, Vec<u8>)> {
        let mut header = [0_u8; 5];
        self.stream.read_exact(&mut header)?;
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let length = usize::try_from(length).map_err(|_| io::Error::other("length"))?;
        let mut body = vec![
            0_u8;
            length
                .checked_sub(4)
                .ok_or_else(|| io::Error::other("short message"))?
        ];
        self.stream.read_exact(&mut body)?;
        Ok((header[0], body))
    }
}

/// The 'M' (message) field of an ErrorResponse, with its severity and code.
fn error_message(body: &[u8]) -> String {
    let fields: Vec<String> = body
        .split(|byte| *byte == 0)
        .filter(|field| field.first().is_some_and(|kind| b"SCM".contains(kind)))
        .map(|field| String::from_utf8_lossy(&field[1..]).into_owned())
        .collect();
    fields.join(" ")
}

fn parse_data_row(body: &[u8]) -> io::Result<Vec<Option<String>>> {
    let bad = || io::Error::other("malformed DataRow");
    let count = u16::from_be_bytes([
        *body.first().ok_or_else(bad)?,
        *body.get(1).ok_or_else(bad)?,
    ]);
    let mut at = 2;
    let mut columns = Vec::new();
    for _ in 0..count {
        let length = i32::from_be_bytes(
            body.get(at..at + 4)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        );
        at += 4;
        let Ok(length) = usize::try_from(length) else {
            columns.push(None); // -1: NULL
            continue;
        };
        let value = body.get(at..at + length).ok_or_else(bad)?;
        columns.push(Some(String::from_utf8_lossy(value).into_owned()));
        at += length;
    }
    Ok(columns)
}

/// Runs `sql` and returns the first column of every row.
fn column(client: &mut Client, sql: &str) -> Vec<String> {
    let rows = client
        .query(sql)
        .unwrap_or_else(|error| panic!("{sql}: {error:?}"));
    rows.into_iter()
        .map(|row| row.into_iter().next().flatten().unwrap_or_default())
        .collect()
}

/// Inserts ids 1, 2, 3... one autocommit transaction each until the connection fails, and
/// records every id whose COMMIT returned.
fn spawn_inserter(socket: PathBuf, committed: Arc<Mutex<Vec<i64>>>) -> JoinHandle<QueryError> {
    std::thread::spawn(move || {
        let mut client = match Client::connect(&socket) {
            Ok(client) => client,
            Err(error) => return error,
        };
        for id in 1_i64.. {
            if let Err(error) = client.query(&format!("INSERT INTO commits (id) VALUES ({id})")) {
                return error;
            }
            committed.lock().expect("a poisoned lock").push(id);
        }
        QueryError::Server("ran out of ids".to_string())
    })
}

/// The TPC-B invariant pgbench's transactions keep: every one adds the same delta to one
/// account, teller and branch, so the three sums are equal.
fn assert_pgbench_balances(client: &mut Client) {
    let sums = column(
        client,
        "SELECT sum(abalance)::text FROM pgbench_accounts \
         UNION ALL SELECT sum(tbalance)::text FROM pgbench_tellers \
         UNION ALL SELECT sum(bbalance)::text FROM pgbench_branches \
         UNION ALL SELECT count(*)::text FROM pgbench_history",
    );
    assert_eq!(sums.len(), 4, "{sums:?}");
    assert!(
        sums[0] == sums[1] && sums[1] == sums[2],
        "pgbench's balances (accounts, tellers, branches) differ: {sums:?}"
    );
    eprintln!(
        "pgbench: {} transactions in history, balances {}",
        sums[3], sums[0]
    );
}

/// Alice's half: ext4 on her FUSE file, PostgreSQL on it, pgbench and the inserter running;
/// then SIGKILL to her node and to PostgreSQL. Returns the ids whose COMMIT returned.
fn run_and_crash_the_primary(cluster: &Cluster, tools: &PgTools) -> Vec<i64> {
    let device = LoopDevice::attach(&fuse_file(cluster, ALICE), false);
    run_ok(
        tool("mkfs.ext4", &["-q", "-F", &device.device]),
        TOOL_DEADLINE,
    );
    let ext4 = MountGuard::mount(&device.device, cluster.dir().join("ext4-alice"), &[]);
    let data = ext4.path.join("pgdata");
    tools.private_dir(&data);
    let data_text = data.to_str().expect("UTF-8 path");
    // initdb's own fsyncs are skipped (-N); the `sync` after it makes the cluster durable.
    run_ok(
        tools.command(
            "initdb",
            &["-N", "-D", data_text, "-U", "postgres", "--auth=trust"],
        ),
        TOOL_DEADLINE,
    );
    run_ok(tool("sync", &[]), TOOL_DEADLINE);
    let socket_dir = cluster.dir().join("pg-alice");
    tools.private_dir(&socket_dir);
    let mut server = Server::start(tools, &data, &socket_dir);
    server
        .connect()
        .query("CREATE TABLE commits (id bigint PRIMARY KEY)")
        .expect("CREATE TABLE");
    let host = socket_dir.to_str().expect("UTF-8 path");
    let port = PG_PORT.to_string();
    run_ok(
        tools.command(
            "pgbench",
            &["-i", "-s", "1", "-q", "-h", host, "-p", &port, "postgres"],
        ),
        TOOL_DEADLINE,
    );
    let mut pgbench = Background::spawn(tools.command(
        "pgbench",
        &[
            "-n", "-c", "2", "-j", "1", "-T", "600", "-h", host, "-p", &port, "postgres",
        ],
    ));
    let committed = Arc::new(Mutex::new(Vec::new()));
    let inserter = spawn_inserter(server.socket(), Arc::clone(&committed));
    let count = || committed.lock().expect("a poisoned lock").len();
    cluster.wait_until("enough ids commit", STATE_DEADLINE, || {
        count() >= COMMITS_BEFORE_CRASH_MIN || inserter.is_finished()
    });
    assert!(
        pgbench.is_running() && !inserter.is_finished(),
        "the workload stopped before the crash:\n{}",
        server.log_text()
    );
    // The crash: the disk goes first (in-flight writes fail), then every PostgreSQL process.
    cluster.kill(ALICE);
    server.kill();
    let error = inserter.join().expect("the inserter panicked");
    eprintln!("the inserter stopped at the crash: {error:?}");
    drop(pgbench);
    // Plain unmount and detach, failing the test if anything (a process PostgreSQL left
    // behind) still holds the file system: a lazy unmount would hide it and leak the device.
    ext4.unmount();
    device.detach();
    let ids = Arc::try_unwrap(committed).expect("the inserter has ended");
    ids.into_inner().expect("a poisoned lock")
}

/// issue 4 item 8, drbd-semantics.md §1: every COMMIT that returned on the crashed Primary is
/// in the database on the promoted peer; its ext4 is clean after journal replay; bonnie++
/// then runs to completion on it.
#[test]
fn postgresql_commits_survive_the_primarys_crash_on_the_promoted_peer() {
    if !fuse_available() {
        return;
    }
    require("bonnie++", "bonnie++");
    let (bin, user) = (pg_bin_dir(), postgres_user());
    let cluster = Cluster::with_primary(fuse_spec().disk_bytes(DISK_BYTES));
    let _fuse_mounts = [
        MountGuard {
            path: fuse_dir(&cluster, ALICE),
        },
        MountGuard {
            path: fuse_dir(&cluster, BOB),
        },
    ];
    // The postgres user must reach the mounts and sockets below the test's tempdir.
    std::fs::set_permissions(cluster.dir(), std::fs::Permissions::from_mode(0o711))
        .expect("cannot chmod the tempdir");
    let tools = PgTools {
        bin,
        user,
        home: cluster.dir().join("pg-home"),
    };
    tools.private_dir(&tools.home);
    let committed = run_and_crash_the_primary(&cluster, &tools);
    assert!(
        committed.len() >= COMMITS_BEFORE_CRASH_MIN,
        "only {} commits",
        committed.len()
    );

    cluster.wait_until("bob sees alice gone", STATE_DEADLINE, || {
        cluster.status(BOB).connection_state(NODE_NAMES[ALICE]) != "Connected"
    });
    cluster.admin_ok(BOB, &["primary", RESOURCE]);
    let device = LoopDevice::attach(&fuse_file(&cluster, BOB), false);
    // The crash left ext4's journal to replay: mounting replays it, as a failover would; then
    // a forced read-only check must find nothing to fix.
    MountGuard::mount(&device.device, cluster.dir().join("ext4-bob"), &[]).unmount();
    run_ok(
        tool("fsck.ext4", &["-f", "-n", &device.device]),
        TOOL_DEADLINE,
    );
    let ext4 = MountGuard::mount(&device.device, cluster.dir().join("ext4-bob"), &[]);
    let socket_dir = cluster.dir().join("pg-bob");
    tools.private_dir(&socket_dir);
    let mut server = Server::start(&tools, &ext4.path.join("pgdata"), &socket_dir);
    let log = server.log_text();
    assert!(
        log.contains("automatic recovery in progress"),
        "PostgreSQL on bob did not recover from a crash, so the test did not crash it:\n{log}"
    );
    let mut client = server.connect();
    let present: std::collections::BTreeSet<i64> =
        column(&mut client, "SELECT id::text FROM commits")
            .iter()
            .map(|id| id.parse().expect("an id"))
            .collect();
    let missing: Vec<i64> = committed
        .iter()
        .copied()
        .filter(|id| !present.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} committed ids are missing on bob, first {:?}",
        missing.len(),
        committed.len(),
        &missing[..missing.len().min(10)]
    );
    eprintln!(
        "{} ids committed before the crash, {} present on bob",
        committed.len(),
        present.len()
    );
    assert_pgbench_balances(&mut client);
    drop(client);
    server.shut_down();

    run_bonnie(&tools, &ext4.path);
    ext4.unmount();
    device.detach();
}

/// bonnie++ (small sizes, as `postgres`) in `mount`; it must finish and print its CSV line.
fn run_bonnie(tools: &PgTools, mount: &Path) {
    let dir = mount.join("bonnie");
    tools.private_dir(&dir);
    let dir_text = dir.to_str().expect("UTF-8 path");
    let mut command = tool(
        "bonnie++",
        &[
            "-d", dir_text, "-u", "postgres", "-s", "64", "-r", "32", "-n", "1", "-f", "-b", "-q",
            "-m", "tandem",
        ],
    );
    command.current_dir(&tools.home);
    let output = run_ok(command, BONNIE_DEADLINE);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|line| line.starts_with("1.98,") || line.matches(',').count() > 20),
        "bonnie++ printed no results: {stdout}"
    );
    eprintln!("bonnie++: {}", stdout.trim());
}
