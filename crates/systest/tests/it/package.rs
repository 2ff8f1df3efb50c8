//! The Debian package (issue 26 item 4): `scripts/deb` builds it from this build's binary,
//! `dpkg -i` installs it on this machine, and what it installed works: `tandem --version`
//! prints the build's version and commit, `man -w tandem` finds the page, the OCF agent
//! answers `meta-data` with its XML, the binary carries no debug sections (they are in
//! tandem-dbgsym) and the completions are in place. The package is purged afterwards, also
//! when the test fails.
//!
//! Needs root and dpkg (a Debian machine); skipped with the reason otherwise, and skipped
//! when a tandem package is installed already (the test would replace it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::cluster::tandem_bin;
use crate::tools::{self, run_with_deadline};

/// How long building the package may take (the binary is built already).
const BUILD_DEADLINE: Duration = Duration::from_secs(300);
/// How long dpkg may take.
const DPKG_DEADLINE: Duration = Duration::from_secs(120);

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository")
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (dpkg -i)".into());
    }
    for program in ["dpkg", "dpkg-deb", "objcopy", "readelf", "man"] {
        if Command::new(program)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            return Some(format!("'{program}' is missing"));
        }
    }
    let status = run(command(
        "dpkg-query",
        &["--show", "--showformat=${Status}", "tandem"],
    ));
    if String::from_utf8_lossy(&status.stdout).contains("installed") {
        return Some("a tandem package is installed on this machine already".into());
    }
    None
}

/// `program ARGS`, not run.
fn command(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    command
}

fn run(command: Command) -> Output {
    run_with_deadline(command, DPKG_DEADLINE)
}

/// Runs a command that must succeed; returns its stdout.
fn run_ok(command: Command) -> String {
    String::from_utf8_lossy(&tools::run_ok(command, DPKG_DEADLINE).stdout).into_owned()
}

/// Whether dpkg is told not to unpack man pages (`path-exclude=/usr/share/man/...` in
/// /etc/dpkg/dpkg.cfg.d, as in slim container images).
fn man_pages_excluded() -> bool {
    let Ok(entries) = std::fs::read_dir("/etc/dpkg/dpkg.cfg.d") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        text.lines().any(|line| {
            line.trim_start().starts_with("path-exclude") && line.contains("/usr/share/man")
        })
    })
}

/// Purges the package when dropped.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let output = run(command("dpkg", &["--purge", "tandem-dbgsym", "tandem"]));
        if !output.status.success() {
            eprintln!(
                "dpkg --purge tandem failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

#[test]
fn the_debian_package_builds_installs_and_works() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped: {reason}");
        return;
    }
    let out = tempfile::tempdir().expect("tempdir");
    let mut build = Command::new(repository().join("scripts/deb"));
    build
        .arg(out.path())
        .env("TANDEM_DEB_BIN", tandem_bin())
        .stdin(Stdio::null());
    let built = run_with_deadline(build, BUILD_DEADLINE);
    assert!(
        built.status.success(),
        "scripts/deb failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let packages: Vec<String> = String::from_utf8_lossy(&built.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        packages.len(),
        2,
        "scripts/deb names the package and its dbgsym: {packages:?}"
    );

    let installed = Installed;
    let mut install = command("dpkg", &["-i"]);
    install.args(&packages);
    run_ok(install);

    let expected = run_ok(command(tandem_bin(), &["--version"]));
    assert_eq!(
        run_ok(command("/usr/sbin/tandem", &["--version"])),
        expected
    );
    assert!(expected.contains("(commit "), "{expected}");
    if man_pages_excluded() {
        // Slim images tell dpkg not to unpack /usr/share/man: the page must be in the package.
        eprintln!("man -w not checked: dpkg excludes /usr/share/man here");
        let contents = run_ok(command("dpkg-deb", &["--contents", &packages[0]]));
        assert!(
            contents.contains("./usr/share/man/man8/tandem.8.gz"),
            "{contents}"
        );
    } else {
        let page = run_ok(command("man", &["-w", "tandem"]));
        assert_eq!(page.trim(), "/usr/share/man/man8/tandem.8.gz");
        run_ok(command("man", &["-w", "tandem-primary"]));
    }
    let meta_data = run_ok(command(
        "/usr/lib/ocf/resource.d/tandem/tandem",
        &["meta-data"],
    ));
    assert!(
        meta_data.contains("<resource-agent name=\"tandem\"")
            && meta_data.contains("</resource-agent>"),
        "{meta_data}"
    );
    let xml_ok = run(command(
        "python3",
        &[
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parseString(sys.argv[1])",
            &meta_data,
        ],
    ));
    assert!(
        xml_ok.status.success(),
        "meta-data is not well-formed XML: {}",
        String::from_utf8_lossy(&xml_ok.stderr)
    );
    let sections = run_ok(command("readelf", &["-S", "/usr/sbin/tandem"]));
    assert!(
        !sections.contains(".debug_info"),
        "/usr/sbin/tandem is not stripped"
    );
    assert!(
        sections.contains(".gnu_debuglink"),
        "/usr/sbin/tandem has no debuglink"
    );
    for path in [
        "/usr/share/bash-completion/completions/tandem",
        "/usr/share/zsh/vendor-completions/_tandem",
        "/usr/share/fish/vendor_completions.d/tandem.fish",
        "/lib/systemd/system/tandem.service",
        "/lib/systemd/system/tandem-promote@.service",
        "/usr/lib/tandem/tandem-fence-peer",
        "/usr/lib/tandem/tandem-unfence-peer",
    ] {
        assert!(Path::new(path).exists(), "{path} is not installed");
    }
    let config =
        std::fs::read_to_string("/etc/tandem/tandem.conf").expect("/etc/tandem/tandem.conf");
    assert!(
        config.contains("include \"/etc/tandem/*.res\";"),
        "{config}"
    );
    let debug_files = run_ok(command("dpkg", &["-L", "tandem-dbgsym"]));
    assert!(
        debug_files
            .lines()
            .any(|line| line.starts_with("/usr/lib/debug/.build-id/") && line.ends_with(".debug")),
        "{debug_files}"
    );
    drop(installed);
}
