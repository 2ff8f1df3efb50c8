//! Resolution tables: hosts, volumes (with per-host overrides), node ids, implicit and mesh
//! connections, paths, inheritance common < resource < connection, `skip`, and the errors
//! with their line:column (drbd.conf(5) "Sections"; drbd-semantics.md §5).

use std::fmt::Write as _;
use std::path::Path;

use crate::model::{Config, Connection, Host, MetaDisk};
use crate::parse_str;

/// A compact rendering of what the daemon sees.
fn summary(config: &Config) -> String {
    let mut out = String::new();
    for resource in &config.resources {
        let ping_int = resource.net.ping_int;
        let _ = writeln!(out, "resource {} ping-int={ping_int:?}", resource.name);
        for host in &resource.hosts {
            out.push_str(&host_line(host));
        }
        for connection in &resource.connections {
            out.push_str(&connection_line(connection));
        }
    }
    out
}

fn host_line(host: &Host) -> String {
    let dash = || "-".to_string();
    let address = host
        .address
        .map_or_else(dash, |address| address.to_string());
    let nbd = host
        .nbd_address
        .map_or_else(dash, |address| address.to_string());
    let mut out = format!(
        "  on {} id={} addr={address} nbd={nbd}",
        host.name, host.node_id
    );
    for volume in &host.volumes {
        let device = volume.device.clone().unwrap_or_else(dash);
        let minor = volume.minor.map_or_else(dash, |minor| minor.to_string());
        let disk = volume.disk.as_ref();
        let disk = disk.map_or("none".to_string(), |disk| disk.display().to_string());
        let meta = match &volume.meta_disk {
            MetaDisk::Internal => "internal".to_string(),
            MetaDisk::External { path, index: None } => path.display().to_string(),
            MetaDisk::External {
                path,
                index: Some(index),
            } => {
                format!("{}[{index}]", path.display())
            }
        };
        let al = volume.disk_options.al_extents;
        let number = volume.number;
        let _ = write!(out, " v{number}={device}({minor}):{disk}:{meta}:al={al}");
    }
    out + "\n"
}

fn connection_line(connection: &Connection) -> String {
    let name = connection.name.as_ref();
    let name = name.map_or(String::new(), |name| format!(" '{name}'"));
    let paths: Vec<String> = connection
        .paths
        .iter()
        .map(|[a, b]| format!("{a}>{b}"))
        .collect();
    let [first, second] = &connection.hosts;
    let mut out = format!("  conn{name} {first}-{second} {}", paths.join(","));
    let net = &connection.net;
    let _ = write!(out, " proto={} ping-int={:?}", net.protocol, net.ping_int);
    let _ = write!(
        out,
        " c-max-rate={}",
        connection.peer_device.c_max_rate_kib_per_s
    );
    for volume in &connection.volumes {
        let rate = volume.peer_device.c_max_rate_kib_per_s;
        let _ = write!(out, " v{}:c-max-rate={rate}", volume.number);
    }
    out + "\n"
}

/// Parses each text and compares its summary (or `error: message`) with the expectation,
/// whose lines may start with `|` after indentation; reports every mismatch at once.
#[track_caller]
fn check(table: &[(String, &str)]) {
    let mut mismatches = Vec::new();
    for (text, expected) in table {
        let actual = match parse_str(text, Path::new("t.res")) {
            Ok(config) => summary(&config),
            Err(error) => format!("error: {error}\n"),
        };
        let expected: String = expected
            .lines()
            .map(|line| line.trim_start().trim_start_matches('|'))
            .map(|line| format!("{line}\n"))
            .collect();
        if actual != expected {
            mismatches.push(format!(
                "{text}\n  expected: {expected}  actual:   {actual}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

const VOLUME: &str = "volume 0 { device /dev/drbd1; disk /dev/vg/r; meta-disk internal; }";

#[test]
fn structures() {
    let table: Vec<(String, &str)> = vec![
        // Two hosts without connections: one implicit connection (drbd.conf(5) "connection").
        (
            format!(
                "resource r {{ {VOLUME} on a {{ node-id 0; address 10.0.0.1:7000; }} on b {{ \
                 node-id 1; address 10.0.0.2:7000; }} }}"
            ),
            "|resource r ping-int=10s
             |  on a id=0 addr=10.0.0.1:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=1237
             |  on b id=1 addr=10.0.0.2:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=1237
             |  conn a-b 10.0.0.1:7000>10.0.0.2:7000 proto=C ping-int=10s c-max-rate=102400 \
                 v0:c-max-rate=102400",
        ),
        // One host: no connection at all.
        (
            format!("resource r {{ {VOLUME} on a {{ address 10.0.0.1:7000; }} }}"),
            "|resource r ping-int=10s
             |  on a id=0 addr=10.0.0.1:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=1237",
        ),
        // A mesh expands to every pair in listed order; a per-host volume makes c diskless.
        (
            format!(
                "resource r {{ {VOLUME} on a {{ node-id 0; address 10.0.0.1:7000; }} on b {{ \
                 node-id 1; address 10.0.0.2:7000; }}
                 on c {{ node-id 2; address 10.0.0.3:7000; volume 0 {{ disk none; }} }}
                 connection-mesh {{ hosts c a b; net {{ protocol A; }} }} }}"
            ),
            "|resource r ping-int=10s
             |  on a id=0 addr=10.0.0.1:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=1237
             |  on b id=1 addr=10.0.0.2:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=1237
             |  on c id=2 addr=10.0.0.3:7000 nbd=- v0=/dev/drbd1(1):none:internal:al=1237
             |  conn c-a 10.0.0.3:7000>10.0.0.1:7000 proto=A ping-int=10s c-max-rate=102400 \
                 v0:c-max-rate=102400
             |  conn c-b 10.0.0.3:7000>10.0.0.2:7000 proto=A ping-int=10s c-max-rate=102400 \
                 v0:c-max-rate=102400
             |  conn a-b 10.0.0.1:7000>10.0.0.2:7000 proto=A ping-int=10s c-max-rate=102400 \
                 v0:c-max-rate=102400",
        ),
    ];
    check(&table);
}

#[test]
fn structures_inheritance_and_volumes() {
    let table: Vec<(String, &str)> = vec![
        // Inheritance: common < resource < connection < connection volume; port override.
        (
            format!(
                "common {{ net {{ ping-int 3; }} disk {{ c-max-rate 1000; al-extents 100; }} }}
                 resource r {{ net {{ ping-int 4; }} {VOLUME} on a {{ address 10.0.0.1:7000; disk \
                     {{ al-extents 200; }} }}
                 on b {{ address 10.0.0.2:7000; volume 0 {{ disk {{ al-extents 300; }} }} }}
                 connection link {{ host a port 7001; host b; net {{ ping-int 5; }} disk {{ \
                     c-max-rate 2000; }}
                 volume 0 {{ disk {{ c-max-rate 3000; }} }} }} }}
                 resource s {{ {VOLUME} on a {{ }} }}"
            ),
            "|resource r ping-int=4s
             |  on a id=0 addr=10.0.0.1:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=200
             |  on b id=1 addr=10.0.0.2:7000 nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=300
             |  conn 'link' a-b 10.0.0.1:7001>10.0.0.2:7000 proto=C ping-int=5s c-max-rate=2000 \
                 v0:c-max-rate=3000
             |resource s ping-int=3s
             |  on a id=0 addr=- nbd=- v0=/dev/drbd1(1):/dev/vg/r:internal:al=100",
        ),
        // Paths, explicit addresses, IPv6, nbd-address (tandem only), DRBD 8.4 style volume 0.
        (
            "resource r { device minor 3; disk /dev/x; meta-disk /dev/md [2];
               on a { address ipv6 [fd00::1]:7000; nbd-address 10809; }
               on b { address 10.0.0.2:7000; nbd-address 0.0.0.0:10810; meta-disk \"/dev/md b\"; }
               connection { path { host a address ipv6 [fd00::1]:7100; host b address \
                   10.1.0.2:7100; }
                            path { host b; host a; } } }"
                .to_string(),
            "|resource r ping-int=10s
             |  on a id=0 addr=[fd00::1]:7000 nbd=127.0.0.1:10809 \
                 v0=/dev/drbd3(3):/dev/x:/dev/md[2]:al=1237
             |  on b id=1 addr=10.0.0.2:7000 nbd=0.0.0.0:10810 \
                 v0=/dev/drbd3(3):/dev/x:/dev/md b:al=1237
             |  conn a-b [fd00::1]:7100>10.1.0.2:7100,[fd00::1]:7000>10.0.0.2:7000 proto=C \
                 ping-int=10s c-max-rate=102400 v0:c-max-rate=102400",
        ),
        // meta-disk index spellings; device with path and minor; skip in several places.
        (
            "skip resource gone { on x { } }
             skip { anything goes; here { } }
             resource r { volume 1 { device /dev/mine minor 7; disk /dev/x; meta-disk /dev/md[4]; }
               volume 2 { device /dev/drbd9; disk /dev/y; meta-disk /dev/md [ 5 ]; }
               skip on ghost { node-id 9; }
               on a { skip volume 3 { } } }"
                .to_string(),
            "|resource r ping-int=10s
             |  on a id=0 addr=- nbd=- v1=/dev/mine(7):/dev/x:/dev/md[4]:al=1237 \
                 v2=/dev/drbd9(9):/dev/y:/dev/md[5]:al=1237",
        ),
    ];
    check(&table);
}

/// Errors in connections and hosts: each text fails to load with its message.
#[test]
fn errors_in_connections_and_hosts() {
    let two =
        "on a { node-id 0; address 10.0.0.1:7000; }\non b { node-id 1; address 10.0.0.2:7000; }";
    let table: Vec<(String, &str)> = vec![
        (
            format!("resource r {{\n{VOLUME}\n{two}\nconnection {{ host a; host zed; }}\n}}"),
            "t.res:5:27: host 'zed' is not defined in resource 'r'",
        ),
        (
            format!("resource r {{\n{VOLUME}\n{two}\nconnection-mesh {{ hosts a b q; }}\n}}"),
            "t.res:5:29: host 'q' is not defined in resource 'r'",
        ),
        (
            format!("resource r {{\n{VOLUME}\n{two}\nconnection {{ host a; }}\n}}"),
            "t.res:5:1: a connection or path needs exactly two host statements",
        ),
        (
            format!("resource r {{\n{VOLUME}\n{two}\nconnection {{ host a; host a; }}\n}}"),
            "t.res:5:27: a connection needs two different hosts",
        ),
        (
            format!(
                "resource r {{\n{VOLUME}\n{two}\nconnection {{ host a; host b; \
                 }}\nconnection-mesh {{ hosts b a; }}\n}}"
            ),
            "t.res:6:1: connection between 'a' and 'b' is defined twice (first at t.res:5:1)",
        ),
        (
            format!("resource r {{\n{VOLUME}\n{two}\nconnection-mesh {{ hosts a; }}\n}}"),
            "t.res:5:1: a connection-mesh needs a 'hosts' statement with two or more hosts",
        ),
        (
            format!("resource r {{\n{VOLUME}\non a {{ node-id 0; }}\non b {{ node-id 0; }}\n}}"),
            "t.res:4:16: node-id 0 is defined twice (first at t.res:3:16)",
        ),
        (
            format!("resource r {{\n{VOLUME}\non a {{ node-id 32; }}\n}}"),
            "t.res:3:16: node-id 32 is out of range 0..=31",
        ),
        (
            format!("resource r {{\n{VOLUME}\non a {{ }}\non b {{ }}\non c {{ node-id 2; }}\n}}"),
            "t.res:3:4: host 'a' has no node-id",
        ),
        (
            format!("resource r {{\n{VOLUME}\non a {{ }}\non a {{ }}\n}}"),
            "t.res:4:4: host 'a' is defined twice (first at t.res:3:4)",
        ),
        (
            "resource r {\non a { }\n}".to_string(),
            "t.res:2:4: host 'a' has no volumes",
        ),
    ];
    check_errors(table);
}

/// Errors in volumes, resource names, sections and addresses.
#[test]
fn errors_in_volumes_names_and_addresses() {
    let table: Vec<(String, &str)> = vec![
        (
            "resource r {\nvolume 0 { device minor 0; meta-disk internal; }\non a { }\n}"
                .to_string(),
            "t.res:2:1: volume 0 of host 'a' has no disk (write 'disk none;' for diskless)",
        ),
        (
            "resource r {\nvolume 0 { device minor 0; disk /dev/x; }\non a { }\n}".to_string(),
            "t.res:2:1: volume 0 of host 'a' has a disk but no meta-disk",
        ),
        (
            "resource r {\nvolume 65535 { }\n}".to_string(),
            "t.res:2:8: volume 65535 is out of range 0..=65534",
        ),
        (
            format!("resource r {{\n{VOLUME}\nvolume 0 {{ }}\n}}"),
            "t.res:3:1: volume 0 is defined twice (first at t.res:2:1)",
        ),
        (
            format!("resource r {{ device minor 0;\n{VOLUME}\n}}"),
            "t.res:1:1: volume 0 is defined twice (first at t.res:2:1)",
        ),
        (
            "resource r {\nvolume 0 { disk /a; disk /b; }\n}".to_string(),
            "t.res:2:21: 'disk' is defined twice (first at t.res:2:12)",
        ),
        (
            "resource \"r 0\" { }".to_string(),
            "t.res:1:10: invalid resource name 'r 0': use only A-Z a-z 0-9 _ . -",
        ),
        (
            "resource r { }".to_string(),
            "t.res:1:1: resource 'r' has no on sections",
        ),
        (
            format!("resource r {{ {VOLUME} on a {{ }} }}\nresource r {{ {VOLUME} on a {{ }} }}"),
            "t.res:2:1: resource 'r' is defined twice (first at t.res:1:1)",
        ),
        (
            "resource r {\n  include \"x\";\n}".to_string(),
            "t.res:2:3: expected a section (include is only allowed at top level), found 'include'",
        ),
        (
            "resource r {\n  floating 10.0.0.1:7000 { }\n}".to_string(),
            "t.res:2:3: 'floating' section is not supported by tandem",
        ),
        (
            "resource r {\n  on a {\n    address 10.0.0.1;\n  }\n}".to_string(),
            "t.res:3:13: invalid address '10.0.0.1': expected ADDRESS:PORT, e.g. \
             10.0.0.1:7789 or [fd00::1]:7789",
        ),
        (
            "resource r {\n  on a { address 10.0.0.1:0; }\n}".to_string(),
            "t.res:2:18: invalid address '10.0.0.1:0': the port must be 1..=65535",
        ),
        (
            "resource r {\n  on a { address ipv4 [::1]:7000; }\n}".to_string(),
            "t.res:2:23: invalid address '[::1]:7000': not an ipv4 address",
        ),
        (
            "resource r {\n  on a { address sdp 10.0.0.1:7000; }\n}".to_string(),
            "t.res:2:18: address family 'sdp' is not supported by tandem",
        ),
        (
            "resource r {\n  on a { nbd-address 70000; }\n}".to_string(),
            "t.res:2:22: port 70000 is out of range 1..=65535",
        ),
        (
            "resource r {\n  on a { bogus; }\n}".to_string(),
            "t.res:2:10: unknown keyword 'bogus' in on section 'a'",
        ),
    ];
    check_errors(table);
}

/// Options in the wrong section, unsupported settings and syntax errors.
#[test]
fn errors_in_options_and_syntax() {
    let two =
        "on a { node-id 0; address 10.0.0.1:7000; }\non b { node-id 1; address 10.0.0.2:7000; }";
    let table: Vec<(String, &str)> = vec![
        (
            "resource r {\n  on a { disk { c-max-rate 5; } }\n}".to_string(),
            "t.res:2:17: option 'c-max-rate' is not allowed in on disk section (it \
             belongs in a disk section of common, resource, volume or connection)",
        ),
        (
            format!(
                "resource r {{\n{VOLUME}\n{two}\nconnection {{ disk {{ al-extents 100; }} \
                 host a; host b; }}\n}}"
            ),
            "t.res:5:21: option 'al-extents' is not allowed in connection disk section \
             (it belongs in a disk section of common, resource, on or volume)",
        ),
        (
            format!(
                "resource r {{\n{VOLUME}\n{two}\nconnection {{ host a; host b; volume 4 {{ \
                 disk {{ }} }} }}\n}}"
            ),
            "t.res:5:30: volume 4 is not a volume of these hosts",
        ),
        (
            format!(
                "resource r {{\n{VOLUME}\non a {{ }}\non b {{ }}\nconnection {{ host a; host \
                 b; }}\n}}"
            ),
            "t.res:5:19: no address for host 'a': give one here or in its on section",
        ),
        (
            format!("resource r {{\n{VOLUME}\non a {{ }}\non b {{ }}\n}}"),
            "t.res:1:1: host 'a' has no address",
        ),
        (
            format!(
                "resource r {{\n{VOLUME}\n{two}\nconnection {{ host a via proxy; host b; }}\n}}"
            ),
            "t.res:5:21: DRBD Proxy ('via') is not supported by tandem",
        ),
        (
            format!(
                "resource r {{\n{VOLUME}\n{two}\nnet {{ allow-two-primaries; protocol B; }}\n}}"
            ),
            "t.res:5:7: allow-two-primaries requires protocol C",
        ),
        (
            format!(
                "common {{ net {{ on-congestion pull-ahead; }} }}\nresource r \
                 {{\n{VOLUME}\n{two}\n}}"
            ),
            "t.res:1:16: on-congestion pull-ahead requires protocol A (or srm on)",
        ),
        (
            "global { }\nglobal { }".to_string(),
            "t.res:2:1: global section is defined twice (first at t.res:1:1)",
        ),
        (
            "common { }\ncommon { }".to_string(),
            "t.res:2:1: common section is defined twice (first at t.res:1:1)",
        ),
        (
            "frobnicate { }".to_string(),
            "t.res:1:1: unknown keyword 'frobnicate' in the top level",
        ),
        (
            "resource r {\n  net { ping-int 5; }".to_string(),
            "t.res:2:22: expected '}', found end of file",
        ),
        (
            "resource r { }\n}".to_string(),
            "t.res:2:1: expected a statement, found '}'",
        ),
        (
            "resource r { on a }".to_string(),
            "t.res:1:19: expected ';' or '{', found '}'",
        ),
        (
            "\"resource\" r { }".to_string(),
            "t.res:1:1: expected a keyword, found string \"resource\"",
        ),
        (
            "global;".to_string(),
            "t.res:1:1: expected a section with '{ ... }', found 'global' statement",
        ),
        (
            "resource r x { }".to_string(),
            "t.res:1:12: expected '{', found 'x'",
        ),
        (
            "handlers { }".to_string(),
            "t.res:1:1: unknown keyword 'handlers' in the top level",
        ),
        (
            "common { handlers { fence-peer; } }".to_string(),
            "t.res:1:21: fence-peer expects one command string",
        ),
        (
            format!("{}x{}", "a {".repeat(17), "}".repeat(17)),
            "t.res:1:51: sections are nested deeper than 16 levels",
        ),
    ];
    check_errors(table);
}

/// Each text fails to load with its expected message, as `error: ...`.
fn check_errors(table: Vec<(String, &str)>) {
    let table: Vec<(String, String)> = table
        .into_iter()
        .map(|(text, expected)| (text, format!("error: {expected}")))
        .collect();
    let table: Vec<(String, &str)> = table
        .iter()
        .map(|(text, expected)| (text.clone(), expected.as_str()))
        .collect();
    check(&table);
}

#[test]
fn settings_not_in() {
    let text = "global { usage-count no; }\ncommon { net { ping-int 3; } }\nresource r {\n  \
                net { ping-int 4; protocol A; }\n  handlers { split-brain \"x\"; }\n  \
                volume 0 { device minor 0; disk /x; meta-disk internal; \
                disk { c-max-rate 5; } }\n  on a { }\n}";
    let config = parse_str(text, Path::new("t.res"));
    let rendered: Vec<String> = config
        .map(|config| config.settings_not_in(&["protocol"]))
        .unwrap_or_default()
        .iter()
        .map(|setting| {
            format!(
                "{:?} {:?} {} {}",
                setting.resource, setting.section, setting.option, setting.at
            )
        })
        .collect();
    let expected = [
        "None Global usage-count t.res:1:10",
        "Some(\"r\") Net ping-int t.res:2:16",
        "Some(\"r\") PeerDevice c-max-rate t.res:6:66",
        "Some(\"r\") Handlers split-brain t.res:5:14",
    ];
    assert_eq!(rendered, expected);
}

/// tandem's `fuse-mount PATH;` in an `on` section: absolute, at most once, off when absent.
#[test]
fn fuse_mount() {
    let text =
        |a: &str| format!("resource r {{\n{VOLUME}\non a {{ address 10.0.0.1:7000; {a} }}\n}}");
    let config = parse_str(
        &text("fuse-mount \"/run/tandem fuse\";"),
        Path::new("t.res"),
    )
    .expect("valid");
    assert_eq!(
        config.resources[0].hosts[0].fuse_mount.as_deref(),
        Some(Path::new("/run/tandem fuse"))
    );
    let config = parse_str(&text(""), Path::new("t.res")).expect("valid");
    assert_eq!(config.resources[0].hosts[0].fuse_mount, None);
    let errors = [
        (
            "fuse-mount mnt/t;",
            "t.res:3:42: fuse-mount 'mnt/t' is not an absolute path",
        ),
        (
            "fuse-mount /a; fuse-mount /b;",
            "t.res:3:46: fuse-mount is defined twice (first at t.res:3:31)",
        ),
        (
            "fuse-mount;",
            "t.res:3:31: fuse-mount expects an absolute directory path",
        ),
    ];
    for (statement, wanted) in errors {
        let error = parse_str(&text(statement), Path::new("t.res")).expect_err(statement);
        assert_eq!(error.to_string(), wanted, "{statement}");
    }
}

#[test]
fn tls_keywords() {
    let fp_a = format!("sha256:{}", "ab".repeat(32));
    let fp_b = format!("SHA256:{}", ["CD"; 32].join(":"));
    let text = |net: &str, b_fp: &str| {
        format!(
            "resource r {{\n{VOLUME}\nnet {{ {net} }}\non a {{ node-id 0; address 10.0.0.1:7000; \
             tls-certificate /etc/t/a.pem; tls-key /etc/t/a.key; tls-fingerprint {fp_a}; }}\non b \
             {{ node-id 1; address 10.0.0.2:7000; {b_fp} }}\n}}"
        )
    };
    let config = parse_str(
        &text("tls yes;", &format!("tls-fingerprint {fp_b};")),
        Path::new("t.res"),
    )
    .expect("valid");
    let hosts = &config.resources[0].hosts;
    assert_eq!(
        hosts[0].tls_certificate.as_deref(),
        Some(Path::new("/etc/t/a.pem"))
    );
    assert_eq!(hosts[0].tls_fingerprint, Some([0xab; 32]));
    assert_eq!(
        hosts[1].tls_fingerprint,
        Some([0xcd; 32]),
        "colons and upper case are accepted"
    );
    let dumped = crate::dump(&config, None);
    assert!(
        dumped.contains(&format!("tls-fingerprint sha256:{};", "cd".repeat(32))),
        "{dumped}"
    );
    assert!(dumped.contains("tls-key /etc/t/a.key;"), "{dumped}");
    let errors = [
        (
            text("tls yes;", ""),
            "t.res:1:1: tls yes: host 'b' has no tls-fingerprint",
        ),
        (
            text("", "tls-fingerprint sha256:abcd;"),
            "t.res:5:58: tls-fingerprint 'sha256:abcd' is not sha256: followed by 64 hex digits",
        ),
        (
            text("", &format!("tls-fingerprint {};", "zz".repeat(32))),
            "is not sha256: followed by 64 hex digits",
        ),
        (
            text("", "tls-key relative.key;"),
            "t.res:5:50: tls-key 'relative.key' is not an absolute path",
        ),
    ];
    for (text, wanted) in errors {
        let error = parse_str(&text, Path::new("t.res"))
            .expect_err(&text)
            .to_string();
        assert!(error.contains(wanted), "{error} lacks {wanted}");
    }
}

#[test]
fn fingerprints_round_trip() {
    let fingerprint: [u8; 32] = std::array::from_fn(|i| u8::try_from(i * 7).unwrap_or(0));
    assert_eq!(
        crate::parse_fingerprint(&crate::format_fingerprint(&fingerprint)),
        Some(fingerprint)
    );
    assert_eq!(crate::parse_fingerprint("sha1:00"), None);
    assert_eq!(
        crate::parse_fingerprint(&format!("sha256:{}", "é".repeat(32))),
        None
    );
}

#[test]
fn disk_throttle_latency() {
    let text =
        |a: &str| format!("resource r {{\n{VOLUME}\non a {{ address 10.0.0.1:7000; {a} }}\n}}");
    let config =
        parse_str(&text("disk-throttle-latency 2000;"), Path::new("t.res")).expect("valid");
    assert_eq!(
        config.resources[0].hosts[0].disk_throttle_latency_us,
        Some(2000)
    );
    assert!(crate::dump(&config, None).contains("disk-throttle-latency 2000;"));
    let error = parse_str(&text("disk-throttle-latency 2000000;"), Path::new("t.res"))
        .expect_err("too slow")
        .to_string();
    assert!(error.contains("out of range"), "{error}");
}
