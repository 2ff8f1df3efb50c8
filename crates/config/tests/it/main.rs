//! Integration tests through the public API: the reference configurations, includes on a
//! real file system, input bounds, and "no input panics" properties.
//!
//! This test deliberately reads the reference files in `shared/reference/configs/` beside
//! the workspace (see shared/README.md): tandem must load a DRBD user's files unchanged
//! (drbd-semantics.md §5).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use config::{
    dump, load, parse_str, parse_str_isolated, AfterSb0Pri, AfterSb1Pri, Config, ConfigError,
    Fencing, MetaDisk, OnNoQuorum, Protocol, Quorum,
};
use proptest::prelude::*;

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/configs")
        .join(name)
}

/// One line per host and connection: what the daemon will act on.
fn outline(config: &Config) -> String {
    let mut out = String::new();
    for resource in &config.resources {
        let _ = writeln!(out, "{}", resource.name);
        for host in &resource.hosts {
            let address = host
                .address
                .map(|address| address.to_string())
                .unwrap_or_default();
            let disks: Vec<String> = host
                .volumes
                .iter()
                .map(|volume| {
                    format!(
                        "{}:{:?}",
                        volume.number,
                        volume.disk.as_ref().map(|disk| disk.display().to_string())
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  {}#{} {address} {}",
                host.name,
                host.node_id,
                disks.join(",")
            );
        }
        for connection in &resource.connections {
            let _ = writeln!(
                out,
                "  {}-{} {:?}",
                connection.hosts[0], connection.hosts[1], connection.paths
            );
        }
    }
    out
}

#[track_caller]
fn check_reference(name: &str, expected: &str) -> Config {
    let config = load(&reference(name)).map_err(|error| error.to_string());
    assert_eq!(
        config.as_ref().map(outline).map_err(Clone::clone),
        Ok(expected.to_string())
    );
    let config = config.unwrap_or_default();
    let again =
        parse_str(&dump(&config, None), &reference(name)).map_err(|error| error.to_string());
    assert_eq!(
        again,
        Ok(config.clone()),
        "dump of {name} parses back equal"
    );
    config
}

#[test]
fn reference_two_nodes() {
    let config = check_reference(
        "r2.res",
        "r0\n  alice#0 10.0.0.1:7789 0:Some(\"/dev/vg0/r0\")\n  bob#1 10.0.0.2:7789 \
         0:Some(\"/dev/vg0/r0\")\n  alice-bob [[10.0.0.1:7789, 10.0.0.2:7789]]\n",
    );
    let Some(resource) = config.resource("r0") else {
        return assert!(config.resource("r0").is_some());
    };
    assert_eq!(config.global.usage_count, config::UsageCount::No);
    assert!(config.global.udev_always_use_vnr);
    assert!(resource.options.auto_promote);
    let net = &resource.connections[0].net;
    assert_eq!(net.protocol, Protocol::C);
    assert_eq!(net.cram_hmac_alg.as_deref(), Some("sha256"));
    assert_eq!(net.shared_secret.as_deref(), Some("s3cr3t"));
    assert_eq!(net.verify_alg.as_deref(), Some("crc32c"));
    assert_eq!(net.csums_alg.as_deref(), Some("crc32c"));
    assert_eq!(
        (net.max_buffers, net.max_epoch_size, net.sndbuf_size_bytes),
        (8000, 8000, 0)
    );
    assert_eq!(
        (net.ping_int, net.ping_timeout, net.timeout),
        (
            Duration::from_secs(10),
            Duration::from_millis(500),
            Duration::from_secs(6)
        )
    );
    assert_eq!((net.ko_count, net.fencing), (7, Fencing::ResourceOnly));
    assert_eq!(
        (net.after_sb_0pri.clone(), net.after_sb_1pri),
        (
            AfterSb0Pri::DiscardZeroChanges,
            AfterSb1Pri::DiscardSecondary
        )
    );
    assert_eq!(resource.disk.al_extents, 6433);
    let peer = &resource.connections[0].peer_device;
    assert_eq!(
        (peer.c_plan_ahead, peer.c_fill_target_sectors),
        (Duration::from_secs(2), 100)
    );
    assert_eq!(
        (peer.c_max_rate_kib_per_s, peer.c_min_rate_kib_per_s),
        (102_400, 250)
    );
    assert_eq!(
        resource.handlers.get("split-brain").map(String::as_str),
        Some("/usr/lib/drbd/notify-split-brain.sh root")
    );
    let volume = resource.host("bob").and_then(|host| host.volume(0));
    assert_eq!(
        volume.map(|volume| (volume.device.as_deref(), volume.minor, &volume.meta_disk)),
        Some((Some("/dev/drbd0"), Some(0), &MetaDisk::Internal))
    );
    assert_eq!(
        resource.host_by_node_id(1).map(|host| host.name.as_str()),
        Some("bob")
    );
    assert_eq!(resource.connections_of("alice").count(), 1);
}

#[test]
fn reference_three_nodes_with_tiebreaker() {
    let config = check_reference(
        "r3.res",
        "r1\n  alice#0 10.0.0.1:7790 0:Some(\"/dev/vg0/r1\")\n  \
         bob#1 10.0.0.2:7790 0:Some(\"/dev/vg0/r1\")\n  \
         charlie#2 10.0.0.3:7790 0:None\n  alice-bob [[10.0.0.1:7790, 10.0.0.2:7790]]\n  \
         alice-charlie [[10.0.0.1:7790, 10.0.0.3:7790]]\n  \
         bob-charlie [[10.0.0.2:7790, 10.0.0.3:7790]]\n",
    );
    let Some(resource) = config.resource("r1") else {
        return assert!(config.resource("r1").is_some());
    };
    assert_eq!(
        (resource.options.quorum, resource.options.on_no_quorum),
        (Quorum::Majority, OnNoQuorum::IoError)
    );
    assert!(resource
        .host("charlie")
        .is_some_and(|host| host.is_diskless()));
    assert_eq!(
        resource
            .connections_of("charlie")
            .filter_map(|link| link.peer_of("charlie"))
            .collect::<Vec<_>>(),
        ["alice", "bob"]
    );
}

#[test]
fn both_references_in_one_file_set() {
    let directory = tempfile::tempdir().ok();
    let Some(directory) = directory else {
        return assert!(tempfile::tempdir().is_ok());
    };
    let conf = directory.path().join("drbd.conf");
    let shared = reference("");
    let text = format!("include \"{}/*.res\";\n", glob_escape(&shared));
    let written = fs::write(&conf, text);
    assert!(written.is_ok());
    let names: Vec<String> = load(&conf)
        .map(|config| {
            config
                .resources
                .iter()
                .map(|resource| resource.name.clone())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["r0", "r1"]);
}

/// Escapes glob metacharacters in `path` (the checkout may live anywhere).
fn glob_escape(path: &Path) -> String {
    let text = path.to_string_lossy();
    text.chars()
        .map(|character| {
            if "[]*?".contains(character) {
                format!("[{character}]")
            } else {
                character.to_string()
            }
        })
        .collect()
}

/// The bytes of `text` with each `@FF@` replaced by the byte 0xFF (never valid UTF-8).
fn with_raw_bytes(text: &str) -> Vec<u8> {
    let marked = text.replace("@FF@", "\u{1}").into_bytes();
    marked
        .into_iter()
        .map(|byte| if byte == 1 { 0xFF } else { byte })
        .collect()
}

/// Writes `files` (relative path, contents) under a fresh directory and loads `main.conf`;
/// the result is the resource names in order, or the error with the directory as `$D`.
fn load_tree(files: &[(&str, String)]) -> String {
    let Ok(directory) = tempfile::tempdir() else {
        return "no tempdir".to_string();
    };
    for (path, contents) in files {
        let path = directory.path().join(path);
        let created = path.parent().map(fs::create_dir_all).unwrap_or(Ok(()));
        if created
            .and_then(|()| fs::write(&path, with_raw_bytes(contents)))
            .is_err()
        {
            return format!("cannot write {}", path.display());
        }
    }
    let result = load(&directory.path().join("main.conf"));
    let rendered = match result {
        Ok(config) => config
            .resources
            .iter()
            .map(|resource| resource.name.clone())
            .collect::<Vec<_>>()
            .join(" "),
        Err(error) => error.to_string(),
    };
    rendered.replace(&directory.path().display().to_string(), "$D")
}

fn resource(name: &str) -> String {
    format!(
        "resource {name} {{ volume 0 {{ device minor 0; disk /x; meta-disk internal; }} on a {{ \
         }} }}\n"
    )
}

/// Compares `actual` with `expected`; an expectation ending in `...` matches as a prefix.
#[track_caller]
fn check(actual: &str, expected: &str) {
    match expected.strip_suffix("...") {
        Some(prefix) => assert!(
            actual.starts_with(prefix),
            "{actual:?} starts with {prefix:?}"
        ),
        None => assert_eq!(actual, expected),
    }
}

#[test]
fn includes() {
    let table: Vec<(Vec<(&str, String)>, &str)> = vec![
        // Globs are expanded relative to the including file and read in sorted order.
        (
            vec![
                ("main.conf", "include \"d/*.res\";\n".into()),
                ("d/b.res", resource("b")),
                ("d/a.res", resource("a")),
                ("d/.a.res.swp", "x".into()),
            ],
            "a b",
        ),
        // A pattern that matches nothing is fine, as in drbdadm.
        (
            vec![(
                "main.conf",
                format!("include \"none/*.res\";\n{}", resource("m")),
            )],
            "m",
        ),
        // Nested includes are relative to the nested file's directory.
        (
            vec![
                ("main.conf", "include d/inner.conf;\n".into()),
                ("d/inner.conf", "include \"e/*\";\n".into()),
                ("d/e/x", resource("x")),
            ],
            "x",
        ),
        // A file that includes itself stops at the depth bound.
        (
            vec![("main.conf", "include \"main.conf\";\n".into())],
            "$D/main.conf:1:1: includes are nested deeper than 8 levels",
        ),
        (
            vec![
                ("main.conf", "include \"d\";\n".into()),
                ("d/x", String::new()),
            ],
            "$D/main.conf:1:9: included path '$D/d' is not a regular file",
        ),
        (
            vec![("main.conf", "include \"[\";\n".into())],
            "$D/main.conf:1:9: invalid include pattern '[': ...",
        ),
        (
            vec![
                ("main.conf", "include \"d/*\";\n".into()),
                ("d/bin", "resource r { on a {\n @FF@ } }".into()),
            ],
            "$D/d/bin:2:2: ...",
        ),
        (
            vec![("main.conf", "include;\n".into())],
            "$D/main.conf:1:1: include expects one file pattern",
        ),
        (
            vec![
                ("main.conf", "include \"d/*\";\n".into()),
                ("d/bad", "}".into()),
            ],
            "$D/d/bad:1:1: expected a statement, found '}'",
        ),
        (
            vec![
                ("main.conf", "include \"d/*\";\n".into()),
                ("d/bad", "resource r {".into()),
            ],
            "$D/d/bad:1:13: expected '}', found end of file",
        ),
        (
            vec![("main.conf", "resource r {\n  include \"x\";\n}".into())],
            "$D/main.conf:2:3: expected a section (include is only allowed at top level), found \
             'include'",
        ),
    ];
    for (files, expected) in table {
        check(&load_tree(&files), expected);
    }
}

/// `parse_str_isolated` refuses `include` even when the pattern matches a readable file, and
/// otherwise parses exactly as `parse_str` does.
#[test]
fn isolated_parsing_never_reads_files() {
    let Ok(directory) = tempfile::tempdir() else {
        return assert!(tempfile::tempdir().is_ok());
    };
    let included = directory.path().join("x.res");
    assert!(fs::write(&included, resource("x")).is_ok());
    let main = directory.path().join("main.conf");
    let text = format!("include \"{}\";\n{}", glob_escape(&included), resource("m"));
    let names = |config: Config| -> Vec<String> {
        config
            .resources
            .into_iter()
            .map(|resource| resource.name)
            .collect()
    };
    assert_eq!(
        parse_str(&text, &main).map(names).ok(),
        Some(vec!["x".to_string(), "m".to_string()])
    );
    let refused = parse_str_isolated(&text, &main)
        .map(names)
        .map_err(|error| error.to_string());
    let expected = format!(
        "{}:1:1: include is not allowed in text parsed without file access",
        main.display()
    );
    assert_eq!(refused, Err(expected));
    let plain = resource("m");
    assert_eq!(
        parse_str_isolated(&plain, &main).ok(),
        parse_str(&plain, &main).ok()
    );
    assert!(parse_str_isolated(&plain, &main).is_ok());
}

#[test]
fn bounds_and_io_errors() {
    let Ok(directory) = tempfile::tempdir() else {
        return assert!(tempfile::tempdir().is_ok());
    };
    let missing = directory.path().join("missing.conf");
    check(
        &load(&missing)
            .map(|_| String::new())
            .unwrap_or_else(|error| error.to_string()),
        &format!("{}: cannot read: ...", missing.display()),
    );
    assert!(matches!(load(&missing), Err(ConfigError::Io { .. })));
    // Not UTF-8: the location is the first bad byte.
    let binary = directory.path().join("binary.conf");
    assert!(fs::write(&binary, b"global {\n  usage-count \xff;\n}").is_ok());
    check(
        &load(&binary)
            .map(|_| String::new())
            .unwrap_or_else(|error| error.to_string()),
        &format!("{}:2:15: file is not valid UTF-8", binary.display()),
    );
    // Over 16 MiB, on disk (sparse) and in memory.
    let large = directory.path().join("large.conf");
    assert!(fs::File::create(&large)
        .and_then(|file| file.set_len(config::MAX_FILE_BYTES + 1))
        .is_ok());
    check(
        &load(&large)
            .map(|_| String::new())
            .unwrap_or_else(|error| error.to_string()),
        &format!(
            "{}:1:1: file is larger than 16777216 bytes",
            large.display()
        ),
    );
    let text = " ".repeat(usize::try_from(config::MAX_FILE_BYTES).unwrap_or(usize::MAX) + 1);
    check(
        &parse_str(&text, Path::new("big.conf"))
            .map(|_| String::new())
            .unwrap_or_else(|error| error.to_string()),
        "big.conf:1:1: file is larger than 16777216 bytes",
    );
    // More than 1024 files.
    let many = directory.path().join("many");
    assert!(fs::create_dir(&many).is_ok());
    for index in 0..config::MAX_FILES {
        assert!(fs::write(many.join(format!("{index:04}.conf")), "").is_ok());
    }
    let main = directory.path().join("main.conf");
    assert!(fs::write(&main, "include \"many/*.conf\";\n").is_ok());
    check(
        &load(&main)
            .map(|_| String::new())
            .unwrap_or_else(|error| error.to_string()),
        &format!("{}:1:1: more than 1024 files are included", main.display()),
    );
}

/// Words, punctuation and fragments that make up drbd.conf, for token soups.
const VOCABULARY: &[&str] = &[
    "resource",
    "r0",
    "on",
    "alice",
    "bob",
    "volume",
    "0",
    "1",
    "connection",
    "connection-mesh",
    "hosts",
    "host",
    "path",
    "net",
    "disk",
    "options",
    "handlers",
    "startup",
    "common",
    "global",
    "skip",
    "address",
    "ipv6",
    "10.0.0.1:7000",
    "[::1]:7000",
    "port",
    "7001",
    "node-id",
    "device",
    "minor",
    "/dev/drbd0",
    "meta-disk",
    "internal",
    "none",
    "/dev/md[0]",
    "[",
    "]",
    "protocol",
    "C",
    "ping-int",
    "c-max-rate",
    "100M",
    "5G",
    "-1",
    "quorum",
    "majority",
    "shared-secret",
    "\"s e c\"",
    "\"unterminated",
    "nbd-address",
    "10809",
    "fuse-mount",
    "/mnt/t",
    "{",
    "}",
    ";",
    "#c\n",
    "\n",
    "floating",
    "include",
    "become-primary-on",
    "split-brain",
    "yes",
    "no",
    "65535",
    "99999999999999999999999",
];

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = parse_str(&text, Path::new("/nonexistent/fuzz.res"));
    }

    #[test]
    fn token_soup_never_panics(
        words in proptest::collection::vec(proptest::sample::select(VOCABULARY), 0..300),
    ) {
        let text = words.join(" ");
        if let Err(error) = parse_str(&text, Path::new("/nonexistent/soup.res")) {
            let shown = error.to_string();
            prop_assert!(shown.starts_with("/nonexistent/soup.res:"), "{}", shown);
            prop_assert!(error.location().is_some());
        }
    }
}
