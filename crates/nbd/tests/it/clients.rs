//! Interoperability with independent client implementations: libnbd (nbdinfo, nbdcopy, fio's
//! nbd engine) and qemu (qemu-img, qemu-io). Each test prints a note and passes when its tool is
//! not installed; CI installs them all.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use crate::support::{pattern, within, MemExport, MemRegistry, Server};

const SIZE: u64 = 8 << 20;

fn installed(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()));
    if !found {
        eprintln!("note: {tool} is not installed; skipping this interoperability test");
    }
    found
}

/// Runs a client tool off the runtime's worker threads and returns its output.
async fn run(program: &str, args: Vec<String>) -> Output {
    let program = program.to_owned();
    let description = format!("{program} {}", args.join(" "));
    let output = within(
        &description,
        tokio::task::spawn_blocking(move || Command::new(&program).args(&args).output()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        output.status.success(),
        "{description} failed: {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

async fn disk_server() -> (Server, Arc<MemExport>) {
    let disk = MemExport::full(SIZE);
    let server = Server::start(
        MemRegistry::default().with("disk", &disk),
        nbd::ServerConfig::default(),
    )
    .await;
    (server, disk)
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nbdinfo_reports_the_size() {
    if !installed("nbdinfo") {
        return;
    }
    let (server, _) = disk_server().await;
    let output = run("nbdinfo", vec!["--json".into(), server.uri("disk")]).await;
    let json = String::from_utf8_lossy(&output.stdout);
    let compact: String = json.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(
        compact.contains(&format!("\"export-size\":{SIZE}")),
        "{json}"
    );
    assert!(compact.contains("\"is_read_only\":false"), "{json}");
    assert!(compact.contains("\"can_flush\":true"), "{json}");
    assert!(compact.contains("\"block_size_preferred\":4096"), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nbdinfo_over_tcp() {
    if !installed("nbdinfo") {
        return;
    }
    let disk = MemExport::full(SIZE);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let registry = Arc::new(MemRegistry::default().with("disk", &disk));
    let task = tokio::spawn(nbd::serve_tcp(
        listener,
        registry,
        Arc::new(nbd::ServerConfig::default()),
    ));
    let output = run(
        "nbdinfo",
        vec!["--size".into(), format!("nbd://127.0.0.1:{port}/disk")],
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        SIZE.to_string()
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nbdcopy_round_trip_is_identical() {
    if !installed("nbdcopy") {
        return;
    }
    let (server, disk) = disk_server().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.img");
    let target = dir.path().join("target.img");
    let contents = pattern(SIZE as usize, 3);
    std::fs::write(&source, &contents).unwrap();
    run("nbdcopy", vec![path(&source), server.uri("disk")]).await;
    assert!(
        disk.contents() == contents,
        "export differs from the source after nbdcopy"
    );
    run("nbdcopy", vec![server.uri("disk"), path(&target)]).await;
    assert!(
        std::fs::read(&target).unwrap() == contents,
        "copy back differs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_img_convert_writes_the_image() {
    if !installed("qemu-img") {
        return;
    }
    let (server, disk) = disk_server().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.img");
    // Leave holes so qemu exercises write-zeroes or skips as well as writes.
    let mut contents = pattern(SIZE as usize, 5);
    contents[1 << 20..3 << 20].fill(0);
    std::fs::write(&source, &contents).unwrap();
    disk.fill_with(&vec![0xff; SIZE as usize]);
    let args = ["convert", "-n", "-f", "raw", "-O", "raw"].map(String::from);
    run(
        "qemu-img",
        [&args[..], &[path(&source), server.uri("disk")]].concat(),
    )
    .await;
    assert!(
        disk.contents() == contents,
        "export differs from the source after qemu-img convert"
    );
    let compare = ["compare", "-f", "raw", "-F", "raw"].map(String::from);
    run(
        "qemu-img",
        [&compare[..], &[path(&source), server.uri("disk")]].concat(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qemu_io_writes_and_verifies_patterns() {
    if !installed("qemu-io") {
        return;
    }
    let (server, disk) = disk_server().await;
    let commands = [
        "write -P 0xab 0 64k",
        "write -P 0xcd 64k 64k",
        "write -z 64k 32k",
        "aio_write -P 0x11 1M 512k",
        "aio_flush",
        "read -P 0xab 0 64k",
        "read -P 0 64k 32k",
        "read -P 0xcd 96k 32k",
        "read -P 0x11 1M 512k",
        "flush",
    ];
    let mut args = vec!["-f".to_owned(), "raw".to_owned()];
    for command in commands {
        args.extend(["-c".to_owned(), command.to_owned()]);
    }
    args.push(server.uri("disk"));
    let output = run("qemu-io", args).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("Pattern verification failed"), "{stdout}");
    let contents = disk.contents();
    assert!(contents[..64 << 10].iter().all(|&byte| byte == 0xab));
    assert!(contents[1 << 20..(1 << 20) + (512 << 10)]
        .iter()
        .all(|&byte| byte == 0x11));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fio_nbd_engine_verifies_random_writes() {
    if !installed("fio") {
        return;
    }
    let (server, _) = disk_server().await;
    let args = [
        "--name=nbd-verify",
        "--ioengine=nbd",
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=16",
        "--size=4m",
        "--verify=crc32c",
        "--do_verify=1",
        // No verify-state file in the working directory (it would land in the source tree).
        "--verify_state_save=0",
        "--output-format=terse",
    ];
    let mut args: Vec<String> = args.map(String::from).to_vec();
    args.push(format!("--uri={}", server.uri("disk")));
    let output = run("fio", args).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("verify"),
        "fio reported verify problems: {stderr}"
    );
}
