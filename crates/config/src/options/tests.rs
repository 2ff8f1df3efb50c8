//! Option tables: every option's default, min and max, the errors one below min and one
//! above max (with line:column), unit suffixes, enums, strings and section placement.
//! Expected values are written out by hand from drbd-semantics.md §1 and DRBD's
//! drbd_limits.h so that a typo in the option table cannot hide behind itself.

use std::path::Path;

use super::table::{Class, Kind, OPTIONS};
use super::value::Value;
use super::{DiskOptions, Global, NetOptions, PeerDeviceOptions, ResourceOptions, Startup};
use crate::{parse_str, Config};

/// (option, default, min and max, unit suffix of range errors). Non-numeric options have no
/// min and max.
type Expectation = (
    &'static str,
    &'static str,
    Option<(&'static str, &'static str)>,
    &'static str,
);

const EXPECTED: &[Expectation] = &[
    ("usage-count", "ask", None, ""),
    ("udev-always-use-vnr", "no", None, ""),
    ("disable-ip-verification", "no", None, ""),
    ("dialog-refresh", "1", Some(("0", "600")), " (seconds)"),
    ("minor-count", "32", Some(("1", "255")), ""),
    (
        "cmd-timeout-short",
        "5",
        Some(("0", "4294967295")),
        " (seconds)",
    ),
    (
        "cmd-timeout-medium",
        "121",
        Some(("0", "4294967295")),
        " (seconds)",
    ),
    (
        "cmd-timeout-long",
        "600",
        Some(("0", "4294967295")),
        " (seconds)",
    ),
    ("cpu-mask", "unset", None, ""),
    ("on-no-data-accessible", "io-error", None, ""),
    ("auto-promote", "yes", None, ""),
    (
        "auto-promote-timeout",
        "20",
        Some(("0", "600")),
        " (1/10 seconds)",
    ),
    (
        "peer-ack-window",
        "4096",
        Some(("2048", "204800")),
        " (sectors)",
    ),
    (
        "peer-ack-delay",
        "100",
        Some(("1", "10000")),
        " (milliseconds)",
    ),
    (
        "twopc-timeout",
        "300",
        Some(("50", "600")),
        " (1/10 seconds)",
    ),
    (
        "twopc-retry-timeout",
        "1",
        Some(("1", "50")),
        " (1/10 seconds)",
    ),
    ("max-io-depth", "8000", Some(("4", "4294967295")), ""),
    ("quorum", "off", None, ""),
    ("on-no-quorum", "suspend-io", None, ""),
    ("quorum-minimum-redundancy", "off", None, ""),
    ("on-suspended-primary-outdated", "disconnect", None, ""),
    ("srm", "off", None, ""),
    (
        "srm-interval",
        "500",
        Some(("100", "60000")),
        " (milliseconds)",
    ),
    ("handler-timeout", "120", Some(("1", "3600")), " (seconds)"),
    ("protocol", "C", None, ""),
    ("timeout", "60", Some(("1", "600")), " (1/10 seconds)"),
    ("max-epoch-size", "2048", Some(("1", "20000")), ""),
    ("max-buffers", "2048", Some(("32", "131072")), " (pages)"),
    ("connect-int", "10", Some(("1", "120")), " (seconds)"),
    ("ping-int", "10", Some(("1", "120")), " (seconds)"),
    ("ping-timeout", "5", Some(("1", "300")), " (1/10 seconds)"),
    ("sndbuf-size", "0", Some(("0", "134217728")), " (bytes)"),
    ("rcvbuf-size", "0", Some(("0", "134217728")), " (bytes)"),
    ("ko-count", "7", Some(("0", "200")), ""),
    ("allow-two-primaries", "no", None, ""),
    ("cram-hmac-alg", "unset", None, ""),
    ("shared-secret", "unset", None, ""),
    ("after-sb-0pri", "disconnect", None, ""),
    ("after-sb-1pri", "disconnect", None, ""),
    ("after-sb-2pri", "disconnect", None, ""),
    ("always-asbp", "no", None, ""),
    ("rr-conflict", "disconnect", None, ""),
    ("data-integrity-alg", "unset", None, ""),
    ("tcp-cork", "yes", None, ""),
    ("on-congestion", "block", None, ""),
    (
        "congestion-fill",
        "0",
        Some(("0", "20971520")),
        " (sectors)",
    ),
    ("congestion-extents", "1237", Some(("67", "65534")), ""),
    ("csums-alg", "unset", None, ""),
    ("csums-after-crash-only", "no", None, ""),
    ("verify-alg", "unset", None, ""),
    ("use-rle", "yes", None, ""),
    (
        "socket-check-timeout",
        "0",
        Some(("0", "300")),
        " (1/10 seconds)",
    ),
    ("fencing", "dont-care", None, ""),
    ("allow-remote-read", "yes", None, ""),
    ("tls", "no", None, ""),
    ("transport", "unset", None, ""),
    ("load-balance-paths", "no", None, ""),
    (
        "srm-max-lag-bytes",
        "67108864",
        Some(("0", "68719476736")),
        " (bytes)",
    ),
    (
        "srm-max-lag-time",
        "2000",
        Some(("0", "3600000")),
        " (milliseconds)",
    ),
    (
        "srm-latency-high",
        "5",
        Some(("1", "10000")),
        " (milliseconds)",
    ),
    (
        "srm-latency-low",
        "2",
        Some(("0", "9999")),
        " (milliseconds)",
    ),
    ("srm-fill-high", "80", Some(("1", "100")), " (percent)"),
    ("srm-fill-low", "30", Some(("0", "99")), " (percent)"),
    ("srm-min-dwell", "10", Some(("0", "3600")), " (seconds)"),
    (
        "srm-max-buffers-min",
        "2048",
        Some(("32", "131072")),
        " (pages)",
    ),
    (
        "srm-max-buffers-max",
        "8192",
        Some(("32", "131072")),
        " (pages)",
    ),
    ("srm-max-epoch-size-min", "2048", Some(("1", "20000")), ""),
    ("srm-max-epoch-size-max", "8192", Some(("1", "20000")), ""),
    (
        "srm-sndbuf-size-min",
        "131072",
        Some(("4096", "134217728")),
        " (bytes)",
    ),
    (
        "srm-sndbuf-size-max",
        "2097152",
        Some(("4096", "134217728")),
        " (bytes)",
    ),
    ("async-buffer", "0", Some(("0", "68719476736")), " (bytes)"),
    ("async-buffer-compress", "none", None, ""),
    ("on-io-error", "detach", None, ""),
    ("io", "buffered", None, ""),
    ("resync-after", "unset", None, ""),
    ("al-extents", "1237", Some(("67", "65534")), ""),
    ("al-updates", "yes", None, ""),
    ("disk-barrier", "no", None, ""),
    ("disk-flushes", "yes", None, ""),
    ("disk-drain", "yes", None, ""),
    ("md-flushes", "yes", None, ""),
    ("disk-timeout", "0", Some(("0", "6000")), " (1/10 seconds)"),
    ("read-balancing", "prefer-local", None, ""),
    (
        "rs-discard-granularity",
        "0",
        Some(("0", "1048576")),
        " (bytes)",
    ),
    ("discard-zeroes-if-aligned", "yes", None, ""),
    ("disable-write-same", "no", None, ""),
    ("block-size", "512", Some(("512", "4096")), " (bytes)"),
    ("size", "0", Some(("0", "2199023255552")), " (sectors)"),
    ("resync-rate", "250", Some(("1", "8388608")), " (KiB/s)"),
    ("c-plan-ahead", "20", Some(("0", "300")), " (1/10 seconds)"),
    (
        "c-delay-target",
        "10",
        Some(("1", "100")),
        " (1/10 seconds)",
    ),
    ("c-fill-target", "100", Some(("0", "1048576")), " (sectors)"),
    ("c-max-rate", "102400", Some(("0", "4194304")), " (KiB/s)"),
    ("c-min-rate", "250", Some(("0", "4194304")), " (KiB/s)"),
    ("srm-resync-share", "50", Some(("1", "100")), " (percent)"),
    ("bitmap", "yes", None, ""),
    ("resync-without-replication", "yes", None, ""),
    ("peer-tiebreaker", "yes", None, ""),
    ("wfc-timeout", "0", Some(("0", "300000")), " (seconds)"),
    ("degr-wfc-timeout", "0", Some(("0", "300000")), " (seconds)"),
    (
        "outdated-wfc-timeout",
        "0",
        Some(("0", "300000")),
        " (seconds)",
    ),
    ("wait-after-sb", "no", None, ""),
    ("stacked-timeouts", "no", None, ""),
    ("become-primary-on", "unset", None, ""),
];

const HOST: &str = "    on a { volume 0 { device minor 0; disk /dev/x; meta-disk internal; } }\n";

/// What an option needs beside it so that every value in its range is valid on its own:
/// the other end of a tandem threshold or bound pair at its extreme, or the protocol the
/// async buffer is for (resolve/srm.rs refuses the contradictions).
fn companion(name: &str) -> &'static str {
    match name {
        "srm-latency-high" => " srm-latency-low 0;",
        "srm-latency-low" => " srm-latency-high 10000;",
        "srm-fill-high" => " srm-fill-low 0;",
        "srm-fill-low" => " srm-fill-high 100;",
        "srm-max-buffers-min" => " srm-max-buffers-max 131072;",
        "srm-max-buffers-max" => " srm-max-buffers-min 32;",
        "srm-max-epoch-size-min" => " srm-max-epoch-size-max 20000;",
        "srm-max-epoch-size-max" => " srm-max-epoch-size-min 1;",
        "srm-sndbuf-size-min" => " srm-sndbuf-size-max 128M;",
        "srm-sndbuf-size-max" => " srm-sndbuf-size-min 4096;",
        "async-buffer" => " protocol A;",
        _ => "",
    }
}

/// A configuration with `name value;` in the option's home section, and the line and
/// column where `value` starts.
fn config_with(name: &str, value: &str) -> (String, usize, usize) {
    let class = super::table::find(name).map_or(Class::Net, |spec| spec.class);
    let statement = if value.is_empty() {
        format!("{name};{}", companion(name))
    } else {
        format!("{name} {value};{}", companion(name))
    };
    if class == Class::Global {
        let text = format!("global {{\n    {statement}\n}}\nresource r0 {{\n{HOST}}}\n");
        return (text, 2, 6 + name.len());
    }
    let section = match class {
        Class::Resource => "options",
        Class::Net => "net",
        Class::Startup => "startup",
        Class::Global | Class::Disk | Class::PeerDevice => "disk",
    };
    let text = format!("resource r0 {{\n    {section} {{\n        {statement}\n    }}\n{HOST}}}\n");
    (text, 3, 10 + name.len())
}

/// The effective value of option `name` in resource r0 (or global), as text.
fn effective(config: &Config, name: &str) -> String {
    let mut values = config.global.values();
    if let Some(resource) = config.resource("r0") {
        values.extend(resource.options.values());
        values.extend(resource.net.values());
        values.extend(resource.disk.values());
        values.extend(resource.peer_device.values());
        values.extend(resource.startup.values());
    }
    let value = values
        .into_iter()
        .find(|(spec, _)| spec.name == name)
        .and_then(|(_, value)| value);
    match value {
        None => "unset".to_string(),
        Some(Value::Flag(flag)) => (if flag { "yes" } else { "no" }).to_string(),
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::Text(text)) => text,
        Some(Value::Words(words)) => words.join(" "),
    }
}

/// Parses `name value;` in its home section and compares the effective value (or the
/// error, where `{at}` stands for `t.res:LINE:COLUMN` of the value) with `expected`.
#[track_caller]
fn check(name: &str, value: &str, expected: &str) {
    let (text, line, column) = config_with(name, value);
    let expected = expected.replace("{at}", &format!("t.res:{line}:{column}"));
    let actual = match parse_str(&text, Path::new("t.res")) {
        Ok(config) => effective(&config, name),
        Err(error) => error.to_string(),
    };
    assert_eq!(actual, expected, "{name} {value}");
}

#[test]
fn defaults() {
    let config = parse_str(&format!("resource r0 {{\n{HOST}}}\n"), Path::new("t.res"));
    let config = config.unwrap_or_default();
    for (name, default, _, _) in EXPECTED {
        assert_eq!(effective(&config, name), *default, "default of {name}");
    }
}

#[test]
fn min_max_and_one_beyond() {
    for (name, _, range, unit) in EXPECTED {
        let Some((min, max)) = range else { continue };
        check(name, min, min);
        check(name, max, max);
        let above = max.parse::<u64>().map_or(0, |max| max + 1).to_string();
        check(
            name,
            &above,
            &format!("{{at}}: {name} {above} is out of range {min}..={max}{unit}"),
        );
        if let Some(below) = min.parse::<u64>().ok().and_then(|min| min.checked_sub(1)) {
            check(
                name,
                &below.to_string(),
                &format!("{{at}}: {name} {below} is out of range {min}..={max}{unit}"),
            );
        }
    }
}

#[test]
fn values_of_numbers() {
    let not_number = |name: &str, value: &str, reason: &str| {
        format!("{{at}}: {name}: '{value}' is not a valid number: {reason}")
    };
    let table: &[(&str, &str, &str)] = &[
        // Suffixes convert into the option's unit (drbd.conf(5): K = 1024, M = 1024 K, G = 1024 M).
        ("c-max-rate", "100M", "102400"),
        ("c-max-rate", "100m", "102400"),
        ("sndbuf-size", "512k", "524288"),
        ("sndbuf-size", "2s", "1024"),
        ("rcvbuf-size", "128M", "134217728"),
        ("c-fill-target", "1M", "2048"),
        ("c-fill-target", "1s", "1"),
        ("congestion-fill", "1G", "2097152"),
        ("peer-ack-window", "2M", "4096"),
        ("max-buffers", "8k", "8192"),
        ("resync-rate", "1G", "1048576"),
        ("resync-rate", "8G", "8388608"),
        ("rs-discard-granularity", "1M", "1048576"),
        (
            "c-max-rate",
            "5G",
            "{at}: c-max-rate 5G (= 5242880) is out of range 0..=4194304 (KiB/s)",
        ),
        (
            "sndbuf-size",
            "129M",
            "{at}: sndbuf-size 129M (= 135266304) is out of range 0..=134217728 (bytes)",
        ),
        (
            "max-io-depth",
            "99999999999999999999",
            "{at}: max-io-depth 99999999999999999999 is out of range 4..=4294967295",
        ),
        (
            "c-max-rate",
            "99999999999G",
            "{at}: c-max-rate 99999999999G is out of range 0..=4194304 (KiB/s)",
        ),
        (
            "c-max-rate",
            "1s",
            &not_number("c-max-rate", "1s", "not a whole number of KiB/s"),
        ),
        (
            "ping-int",
            "5s",
            &not_number("ping-int", "5s", "no unit suffix is allowed for seconds"),
        ),
        (
            "ko-count",
            "1s",
            &not_number("ko-count", "1s", "unknown suffix 's' (use K, M, G or s)"),
        ),
        (
            "ko-count",
            "1T",
            &not_number("ko-count", "1T", "unknown suffix 'T' (use K, M, G or s)"),
        ),
        (
            "ping-int",
            "ten",
            &not_number("ping-int", "ten", "expected decimal digits"),
        ),
        (
            "ping-int",
            "-1",
            &not_number("ping-int", "-1", "expected decimal digits"),
        ),
        ("ping-int", "\"7\"", "7"),
    ];
    for (name, value, expected) in table {
        check(name, value, expected);
    }
}

#[test]
fn values_of_enums_booleans_and_strings() {
    let table: &[(&str, &str, &str)] = &[
        // Enums.
        ("protocol", "A", "A"),
        ("protocol", "c", "C"),
        (
            "protocol",
            "D",
            "{at}: protocol 'D' is not valid; allowed values are: A | B | C",
        ),
        ("after-sb-0pri", "discard-node-alice", "discard-node-alice"),
        (
            "after-sb-0pri",
            "discard-node-",
            "{at}: after-sb-0pri 'discard-node-' is not valid; allowed values are: disconnect | \
             discard-younger-primary | discard-older-primary | discard-zero-changes | \
             discard-least-changes | discard-node-NAME",
        ),
        ("after-sb-1pri", "violently-as0p", "violently-as0p"),
        ("rr-conflict", "auto-discard", "auto-discard"),
        ("on-io-error", "pass_on", "pass_on"),
        ("on-congestion", "pull-ahead", "pull-ahead"),
        ("read-balancing", "1M-striping", "1M-striping"),
        ("fencing", "resource-and-stonith", "resource-and-stonith"),
        ("usage-count", "no", "no"),
        ("cram-hmac-alg", "sha256", "sha256"),
        ("cram-hmac-alg", "sha1", "sha1"),
        (
            "cram-hmac-alg",
            "md5",
            "{at}: cram-hmac-alg 'md5' is not valid; allowed values are: sha1 | sha256 | sha512",
        ),
        ("quorum", "majority", "majority"),
        ("quorum", "3", "3"),
        ("quorum-minimum-redundancy", "all", "all"),
        ("quorum", "0", "{at}: quorum 0 is out of range 1..=32"),
        ("quorum", "33", "{at}: quorum 33 is out of range 1..=32"),
        (
            "quorum",
            "most",
            "{at}: quorum 'most' is not valid; allowed values are: off | majority | all | 1..=32",
        ),
        // Booleans: the bare keyword means yes.
        ("allow-two-primaries", "", "yes"),
        ("allow-two-primaries", "yes", "yes"),
        ("auto-promote", "no", "no"),
        ("udev-always-use-vnr", "", "yes"),
        (
            "tcp-cork",
            "maybe",
            "{at}: tcp-cork 'maybe' is not valid; allowed values are: yes | no",
        ),
        // Strings.
        (
            "shared-secret",
            "\"s3cr3t with spaces\"",
            "s3cr3t with spaces",
        ),
        ("shared-secret", &"x".repeat(64), &"x".repeat(64)),
        (
            "shared-secret",
            &"x".repeat(65),
            "{at}: shared-secret is longer than 64 characters",
        ),
        ("cpu-mask", "ff", "ff"),
        ("become-primary-on", "alice bob", "alice bob"),
        ("become-primary-on", "both", "both"),
    ];
    for (name, value, expected) in table {
        check(name, value, expected);
    }
}

/// Statement-level errors. Each body is placed at line 2 of `resource r0 { ... }`.
#[test]
fn statement_errors() {
    let table: &[(&str, &str)] = &[
        (
            "    net {\n        ping-int 1 2;\n    }",
            "t.res:3:9: ping-int expects one value",
        ),
        (
            "    net {\n        ping-int;\n    }",
            "t.res:3:9: ping-int expects one value",
        ),
        (
            "    net {\n        foo 1;\n    }",
            "t.res:3:9: unknown option 'foo' in net section",
        ),
        (
            "    net {\n        al-extents 100;\n    }",
            "t.res:3:9: option 'al-extents' is not allowed in net section \
             (it belongs in a disk section of common, resource, on or volume)",
        ),
        (
            "    disk {\n        ping-int 5;\n    }",
            "t.res:3:9: option 'ping-int' is not allowed in disk section (it belongs in a net \
             section)",
        ),
        (
            "    options {\n        protocol C;\n    }",
            "t.res:3:9: option 'protocol' is not allowed in options section (it belongs in a net \
             section)",
        ),
        (
            "    startup {\n        become-primary-on;\n    }",
            "t.res:3:9: become-primary-on expects one or more values",
        ),
        (
            "    net {\n        protocol A; protocol B;\n    }",
            "t.res:3:21: option 'protocol' is defined twice (first at t.res:3:9)",
        ),
        (
            "    net { max-buffers 100; }\n    net { max-buffers 200; }",
            "t.res:3:11: option 'max-buffers' is defined twice (first at t.res:2:11)",
        ),
        (
            "    net {\n        inner { }\n    }",
            "t.res:3:9: unknown keyword 'inner' in net section",
        ),
        (
            "    global { }",
            "t.res:2:5: unknown keyword 'global' in resource 'r0'",
        ),
    ];
    for (body, expected) in table {
        let text = format!("resource r0 {{\n{body}\n{HOST}}}\n");
        let actual = match parse_str(&text, Path::new("t.res")) {
            Ok(_) => "ok".to_string(),
            Err(error) => error.to_string(),
        };
        assert_eq!(actual, *expected, "{body}");
    }
}

/// tandem's `io` disk option: buffered unless set, per volume overriding the resource, and
/// only its two words.
#[test]
fn disk_io_option() {
    use crate::options::enums::DiskIo;
    let io_of = |resource_disk: &str, volume_disk: &str| {
        let text = format!(
            "resource r0 {{\n    disk {{ {resource_disk} }}\n    on a {{ volume 0 {{ device minor \
             0; disk /dev/x; meta-disk internal; disk {{ {volume_disk} }} }} }}\n}}\n"
        );
        match parse_str(&text, Path::new("t.res")) {
            Ok(config) => Ok(config.resources[0].hosts[0].volumes[0].disk_options.io),
            Err(error) => Err(error.to_string()),
        }
    };
    assert_eq!(io_of("", ""), Ok(DiskIo::Buffered));
    assert_eq!(io_of("io direct;", ""), Ok(DiskIo::Direct));
    assert_eq!(io_of("io direct;", "io buffered;"), Ok(DiskIo::Buffered));
    let error = io_of("io sideways;", "").expect_err("not a value of io");
    assert_eq!(
        error,
        "t.res:2:15: io 'sideways' is not valid; allowed values are: buffered | direct"
    );
}

/// The option table is consistent with itself, with this file's expectations, and with the
/// typed structs: every row is tested, belongs to exactly one struct, and fits its field.
#[test]
fn table_is_consistent() {
    let mut names: Vec<&str> = OPTIONS.iter().map(|spec| spec.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), OPTIONS.len(), "option names are unique");
    let expected: Vec<&str> = EXPECTED.iter().map(|(name, ..)| *name).collect();
    let listed: Vec<&str> = OPTIONS.iter().map(|spec| spec.name).collect();
    assert_eq!(
        listed, expected,
        "EXPECTED lists every option in table order"
    );
    for spec in OPTIONS {
        match spec.kind {
            Kind::Integer {
                min, max, default, ..
            } => assert!(min <= default && default <= max, "{}", spec.name),
            Kind::Enum {
                values,
                default: Some(default),
                ..
            } => assert!(values.contains(&default), "{}", spec.name),
            _ => {}
        }
    }
    let structs = [
        Global::OPTION_NAMES,
        ResourceOptions::OPTION_NAMES,
        NetOptions::OPTION_NAMES,
        DiskOptions::OPTION_NAMES,
        PeerDeviceOptions::OPTION_NAMES,
        Startup::OPTION_NAMES,
    ];
    let mut in_structs: Vec<&str> = structs
        .iter()
        .flat_map(|names| names.iter().copied())
        .collect();
    in_structs.sort_unstable();
    assert_eq!(
        in_structs, names,
        "every option is a field of exactly one struct"
    );
    let fits = [
        Global::field_kinds_fit(),
        ResourceOptions::field_kinds_fit(),
        NetOptions::field_kinds_fit(),
        DiskOptions::field_kinds_fit(),
        PeerDeviceOptions::field_kinds_fit(),
        Startup::field_kinds_fit(),
    ];
    for (name, fit) in fits.iter().flatten() {
        assert!(fit, "the field type of {name} fits its table row");
    }
}

/// Typed fields carry the unit in their type or name (drbd-semantics.md §1 units).
#[test]
fn typed_units() {
    use std::time::Duration;
    let text =
        "resource r0 {\n    net { ping-int 3; ping-timeout 7; timeout 45; sndbuf-size 1M; }\n    \
                disk { c-max-rate 1G; c-plan-ahead 5; }\n    options { peer-ack-delay 250; }\n";
    let config = parse_str(&format!("{text}{HOST}}}\n"), Path::new("t.res")).unwrap_or_default();
    let resource = config.resource("r0").cloned();
    let net = resource
        .as_ref()
        .map(|resource| resource.net.clone())
        .unwrap_or_default();
    assert_eq!(net.ping_int, Duration::from_secs(3));
    assert_eq!(net.ping_timeout, Duration::from_millis(700));
    assert_eq!(net.timeout, Duration::from_millis(4500));
    assert_eq!(net.sndbuf_size_bytes, 1 << 20);
    let peer = resource
        .as_ref()
        .map(|resource| resource.peer_device.clone())
        .unwrap_or_default();
    assert_eq!(peer.c_max_rate_kib_per_s, 1 << 20);
    assert_eq!(peer.c_plan_ahead, Duration::from_millis(500));
    let options = resource
        .map(|resource| resource.options)
        .unwrap_or_default();
    assert_eq!(options.peer_ack_delay, Duration::from_millis(250));
}

/// `with_overrides` (net-options/disk-options on a command line): the named options change
/// with a file's checks, the others keep their values, and a name outside the allowed ones
/// is refused with the list.
#[test]
fn command_line_overrides_change_only_what_they_name() {
    let allowed = ["protocol", "ping-int", "max-buffers"];
    let base = NetOptions {
        max_buffers: 4096,
        ..NetOptions::default()
    };
    let pairs = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect::<Vec<_>>()
    };
    let changed = base
        .with_overrides(&allowed, &pairs(&[("protocol", "A"), ("ping-int", "5")]))
        .expect("valid");
    assert_eq!(changed.protocol, super::enums::Protocol::A);
    assert_eq!(changed.ping_int, std::time::Duration::from_secs(5));
    assert_eq!(
        changed.max_buffers, 4096,
        "an option not named keeps its value"
    );
    assert_eq!(
        NetOptions {
            protocol: changed.protocol,
            ping_int: changed.ping_int,
            ..base.clone()
        },
        changed
    );
    let unknown = base
        .with_overrides(&allowed, &pairs(&[("shared-secret", "x")]))
        .expect_err("not allowed");
    assert!(
        unknown.contains("'--shared-secret'")
            && unknown.contains("protocol, ping-int, max-buffers"),
        "{unknown}"
    );
    let invalid = base
        .with_overrides(&allowed, &pairs(&[("protocol", "Q")]))
        .expect_err("invalid");
    assert!(
        invalid.contains("command line:1:1") && invalid.contains("protocol"),
        "{invalid}"
    );
    let range = base
        .with_overrides(&allowed, &pairs(&[("max-buffers", "1")]))
        .expect_err("out of range");
    assert!(range.contains("max-buffers"), "{range}");
}
