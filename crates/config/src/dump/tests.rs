//! Dump tables: the normal form of a small configuration, and the round trip
//! parse → dump → parse giving an equal `Config` for fixed and generated configurations
//! (`drbdadm dump` re-prints a configuration in normal form; drbd-semantics.md §5).

use std::path::Path;

use proptest::prelude::*;

use super::{dump, dump_with, DumpOptions};
use crate::lexer::quote;
use crate::options::table::{Class, Kind, OptionSpec, OPTIONS};
use crate::parse_str;

/// Dumps `text` (or reports its error) and checks that the dump parses back equal.
#[track_caller]
fn check(text: &str, options: DumpOptions, expected: &str) {
    let config = match parse_str(text, Path::new("t.res")) {
        Ok(config) => config,
        Err(error) => return assert_eq!(error.to_string(), expected),
    };
    let dumped = dump_with(&config, None, options);
    assert_eq!(dumped, expected);
    let again = parse_str(&dumped, Path::new("dump.res")).map_err(|error| error.to_string());
    assert_eq!(again, Ok(config), "the dump parses back equal");
}

#[test]
fn normal_form() {
    let text = r#"
        global { usage-count no; }
        common { net { ping-int 3; } disk { c-max-rate 200M; } }
        resource r0 {
            net { shared-secret "a \"b\""; cram-hmac-alg sha1; }
            handlers { split-brain "/bin/true"; }
            volume 0 { device minor 2; disk /dev/x; meta-disk /dev/md [1];
                       disk { al-extents 100; } }
            on a { node-id 3; address 10.0.0.1:7000; nbd-address 10809;
                   fuse-mount "/run/tandem fuse"; }
            on b { node-id 4; address ipv6 [fd00::2]:7000; volume 0 { disk none; } }
            connection { host a port 7001; host b; net { protocol A; } }
        }
    "#;
    let expected = r#"global {
    usage-count no;
}
resource r0 {
    net {
        ping-int 3;
        cram-hmac-alg sha1;
        shared-secret "a \"b\"";
    }
    disk {
        c-max-rate 204800;
    }
    handlers {
        split-brain "/bin/true";
    }
    on a {
        node-id 3;
        address 10.0.0.1:7000;
        nbd-address 127.0.0.1:10809;
        fuse-mount "/run/tandem fuse";
        volume 0 {
            device /dev/drbd2 minor 2;
            disk /dev/x;
            meta-disk /dev/md [1];
            disk {
                al-extents 100;
            }
        }
    }
    on b {
        node-id 4;
        address ipv6 [fd00::2]:7000;
        volume 0 {
            device /dev/drbd2 minor 2;
            disk none;
            meta-disk internal;
            disk {
                al-extents 100;
            }
        }
    }
    connection {
        host a address 10.0.0.1:7001;
        host b address ipv6 [fd00::2]:7000;
        net {
            protocol A;
        }
    }
}
"#;
    check(text, DumpOptions::default(), expected);
}

/// Found by fuzzing (`config_parse`): a handler name with a backslash was dumped quoted, and
/// a quoted keyword does not parse.
#[test]
fn handler_names_dump_as_bare_words() {
    let text = r#"
        resource r0 {
            handlers { a\b "/bin/true"; x\ "z"; }
            volume 0 { device minor 0; disk /x; meta-disk internal; }
            on a { node-id 0; address 10.0.0.1:7000; }
            on b { node-id 1; address 10.0.0.2:7000; }
        }
    "#;
    let config = parse_str(text, Path::new("t.res")).expect("parses");
    let handlers: Vec<&str> = config.resources[0]
        .handlers
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(handlers, [r"a\b", r"x\"]);
    let dumped = dump(&config, None);
    assert!(
        dumped.contains("    handlers {\n        a\\b \"/bin/true\";\n"),
        "{dumped}"
    );
    let again = parse_str(&dumped, Path::new("dump.res")).map_err(|error| error.to_string());
    assert_eq!(again, Ok(config));
}

#[test]
fn show_defaults_and_selection() {
    let text =
        "resource r0 { volume 0 { device minor 0; disk /x; meta-disk internal; } on a { } }\n\
                resource r1 { volume 0 { device minor 1; disk /y; meta-disk internal; } on a { } }";
    let Ok(config) = parse_str(text, Path::new("t.res")) else {
        return assert!(parse_str(text, Path::new("t.res")).is_ok());
    };
    let all = dump_with(
        &config,
        None,
        DumpOptions {
            show_defaults: true,
        },
    );
    for option in OPTIONS.iter().filter(|spec| spec.class != Class::Global) {
        let shown = matches!(option.kind, Kind::Text { .. } | Kind::Words)
            || matches!(option.kind, Kind::Enum { default: None, .. });
        assert_eq!(
            !all.contains(&format!(" {} ", option.name)),
            shown,
            "{} shown with defaults",
            option.name
        );
    }
    assert_eq!(
        parse_str(&all, Path::new("dump.res")).ok(),
        Some(config.clone())
    );
    let one = dump(&config, Some("r1"));
    assert!(
        one.starts_with("resource r1 {\n") && !one.contains("r0"),
        "{one}"
    );
    assert_eq!(dump(&config, Some("nope")), "");
}

/// A drbd.conf spelling of a valid value of `spec`.
///
/// `allow-two-primaries` and `on-congestion` keep their defaults, because their other
/// values are valid only with one particular protocol. Of tandem's manager options, `srm`
/// and the async buffer keep theirs (their other values constrain other options), and the
/// lower ends of threshold and bound pairs stay at their minimum and the upper ends at or
/// above the lower ends' defaults, so every pair is ordered.
fn value_of(spec: &'static OptionSpec) -> BoxedStrategy<String> {
    match spec.name {
        "allow-two-primaries" => return Just("no".to_string()).boxed(),
        "on-congestion" => return Just("block".to_string()).boxed(),
        "srm" => return Just("off".to_string()).boxed(),
        "async-buffer" => return Just("0".to_string()).boxed(),
        "async-buffer-compress" => return Just("none".to_string()).boxed(),
        "srm-latency-low" | "srm-fill-low" => return Just("0".to_string()).boxed(),
        "srm-max-buffers-min" => return Just("32".to_string()).boxed(),
        "srm-max-epoch-size-min" => return Just("1".to_string()).boxed(),
        "srm-sndbuf-size-min" => return Just("4096".to_string()).boxed(),
        _ => {}
    }
    let upper = match spec.name {
        "srm-latency-high" => Some(3u64..=10_000),
        "srm-fill-high" => Some(31..=100),
        "srm-max-buffers-max" | "srm-max-epoch-size-max" => Some(8192..=20_000),
        "srm-sndbuf-size-max" => Some(2 << 20..=128 << 20),
        _ => None,
    };
    if let Some(range) = upper {
        return range.prop_map(|number: u64| number.to_string()).boxed();
    }
    match spec.kind {
        Kind::Bool { .. } => prop_oneof![Just("yes"), Just("no"), Just("")]
            .prop_map(str::to_string)
            .boxed(),
        Kind::Enum { values, .. } => proptest::sample::select(values)
            .prop_map(|value| value.replace("NAME", "b"))
            .boxed(),
        Kind::Integer { min, max, .. } => (min..=max).prop_map(|number| number.to_string()).boxed(),
        Kind::Text { max_len } => {
            proptest::string::string_regex(&format!("[a-z0-9 \"\\\\]{{0,{}}}", max_len.min(12)))
                .map_or_else(
                    |_| Just(String::new()).boxed(),
                    |strategy| strategy.prop_map(|text| quote(&text)).boxed(),
                )
        }
        Kind::Quorum => prop_oneof![
            Just("off".to_string()),
            Just("majority".to_string()),
            Just("all".to_string()),
            (1u8..=32).prop_map(|nodes| nodes.to_string()),
        ]
        .boxed(),
        Kind::Words => proptest::sample::subsequence(vec!["a", "b", "both"], 1..=2)
            .prop_map(|words| words.join(" "))
            .boxed(),
    }
}

/// Up to `count` distinct options of `classes`, each with a valid value, as statements.
fn settings(classes: &'static [Class], count: usize) -> BoxedStrategy<Vec<(Class, String)>> {
    let candidates: Vec<&'static OptionSpec> = OPTIONS
        .iter()
        .filter(|spec| classes.contains(&spec.class))
        .collect();
    proptest::sample::subsequence(candidates, 0..=count)
        .prop_flat_map(|chosen| {
            chosen
                .into_iter()
                .map(|spec| {
                    value_of(spec).prop_map(move |value| {
                        (
                            spec.class,
                            format!("{} {value};", spec.name).replace(" ;", ";"),
                        )
                    })
                })
                .collect::<Vec<_>>()
        })
        .boxed()
}

/// Writes the statements of the given classes as sections (`options`, `net`, `disk`, `startup`).
fn sections(statements: &[(Class, String)]) -> String {
    let mut out = String::new();
    for (class, name) in [
        (Class::Resource, "options"),
        (Class::Net, "net"),
        (Class::Startup, "startup"),
    ] {
        let body: Vec<&str> = statements
            .iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, s)| s.as_str())
            .collect();
        out.push_str(&format!("{name} {{ {} }}\n", body.join(" ")));
    }
    let disk: Vec<&str> = statements
        .iter()
        .filter(|(class, _)| matches!(class, Class::Disk | Class::PeerDevice))
        .map(|(_, statement)| statement.as_str())
        .collect();
    out + &format!("disk {{ {} }}\n", disk.join(" "))
}

const LEVEL: &[Class] = &[
    Class::Resource,
    Class::Net,
    Class::Disk,
    Class::PeerDevice,
    Class::Startup,
];

fn generated_config() -> impl Strategy<Value = String> {
    (
        settings(&[Class::Global], 4),
        settings(LEVEL, 8),
        settings(LEVEL, 12),
        settings(&[Class::Disk], 4),
        settings(&[Class::Net], 4),
        settings(&[Class::PeerDevice], 4),
        any::<bool>(),
    )
        .prop_map(|(global, common, resource, volume, net, peer, mesh)| {
            let global: Vec<&str> = global
                .iter()
                .map(|(_, statement)| statement.as_str())
                .collect();
            let volume: Vec<&str> = volume
                .iter()
                .map(|(_, statement)| statement.as_str())
                .collect();
            let net: Vec<&str> = net
                .iter()
                .map(|(_, statement)| statement.as_str())
                .collect();
            let peer: Vec<&str> = peer
                .iter()
                .map(|(_, statement)| statement.as_str())
                .collect();
            let link = if mesh {
                format!(
                    "connection-mesh {{ hosts a b c; net {{ {} }} }}",
                    net.join(" ")
                )
            } else {
                format!(
                    "connection {{ host a; host b port 7009; net {{ {} }} disk {{ {} }} }}",
                    net.join(" "),
                    peer.join(" ")
                )
            };
            format!(
                "global {{ {} }}\ncommon {{\n{}}}\nresource r0 {{\n{}\
                 volume 0 {{ device minor 0; disk /dev/x; meta-disk internal; }}\n\
                 on a {{ node-id 0; address 10.0.0.1:7000; tls-fingerprint {FP_A}; volume 0 {{ \
                     disk {{ {} }} }} }}\n\
                 on b {{ node-id 1; address 10.0.0.2:7000; tls-certificate /etc/t/b.crt; tls-key \
                     /etc/t/b.key; tls-fingerprint {FP_B}; }}\n\
                 on c {{ node-id 2; address 10.0.0.3:7000; tls-fingerprint {FP_C}; volume 0 {{ \
                     disk none; }} }}\n{link}\n}}\n",
                global.join(" "),
                sections(&common),
                sections(&resource),
                volume.join(" "),
            )
        })
}

/// Pins for the generated hosts, so a generated `tls yes` is valid (and the keywords are dumped).
const FP_A: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
const FP_B: &str = "sha256:abababababababababababababababababababababababababababababababab";
const FP_C: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

proptest! {
    #[test]
    fn dump_parses_back_equal(text in generated_config()) {
        let config = parse_str(&text, Path::new("gen.res"));
        prop_assert!(config.is_ok(), "{:?}\n{}", config.err().map(|error| error.to_string()), text);
        let config = config.unwrap_or_default();
        let dumped = dump(&config, None);
        let again = parse_str(&dumped, Path::new("dump.res")).map_err(|error| error.to_string());
        prop_assert_eq!(again.as_ref(), Ok(&config), "{}", dumped);
        prop_assert_eq!(dump(&again.unwrap_or_default(), None), dumped.clone());
        let full = dump_with(&config, None, DumpOptions { show_defaults: true });
        prop_assert_eq!(parse_str(&full, Path::new("full.res")).ok(), Some(config));
    }
}
