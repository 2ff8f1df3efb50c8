//! The Selective Replication Manager's options (issue 5): where each is written, its typed
//! value, `metrics-address`, and the contradictory combinations refused at load time with
//! `file:line:col` (issue 5, "Bad input: contradictory bounds in the config (min > max, lag
//! bounds of zero with srm on) are rejected with a clear message").

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::options::enums::{AsyncBufferCompress, Srm};
use crate::parse_str;

/// A two-host resource with `body` in front of its hosts (line 2 onwards).
fn resource(body: &str) -> String {
    format!(
        "resource r {{\n{body}\n  volume 0 {{ device minor 0; disk /dev/x; meta-disk internal; \
         }}\n  on a {{ address 10.0.0.1:7000; }}\n  on b {{ address 10.0.0.2:7000; }}\n}}\n"
    )
}

/// Parses `text`; "ok" or the error message.
fn outcome(text: &str) -> String {
    match parse_str(text, Path::new("t.res")) {
        Ok(_) => "ok".to_string(),
        Err(error) => error.to_string(),
    }
}

#[test]
fn options_land_in_their_sections_with_typed_values() {
    let text = resource(
        "  options { srm on; srm-interval 500; }\n  \
         net { protocol C; srm-max-lag-bytes 128M; srm-max-lag-time 3000; srm-latency-high 8; \
         srm-latency-low 3; srm-fill-high 90; srm-fill-low 20; srm-min-dwell 30; \
         async-buffer 64M; async-buffer-compress zstd; }\n  \
         disk { srm-resync-share 30; }",
    );
    let config = parse_str(&text, Path::new("t.res"));
    let Ok(config) = config else {
        panic!("{:?}", config.err().map(|error| error.to_string()));
    };
    let resource = &config.resources[0];
    assert_eq!(resource.options.srm, Srm::On);
    assert_eq!(resource.options.srm_interval, Duration::from_millis(500));
    let net = &resource.connections[0].net;
    assert_eq!(net.srm_max_lag_bytes, 128 << 20);
    assert_eq!(net.srm_max_lag_time, Duration::from_secs(3));
    assert_eq!(
        (net.srm_latency_high, net.srm_latency_low),
        (Duration::from_millis(8), Duration::from_millis(3))
    );
    assert_eq!(
        (net.srm_fill_high_percent, net.srm_fill_low_percent),
        (90, 20)
    );
    assert_eq!(net.srm_min_dwell, Duration::from_secs(30));
    assert_eq!(
        (net.async_buffer_bytes, net.async_buffer_compress),
        (64 << 20, AsyncBufferCompress::Zstd)
    );
    assert_eq!(
        resource.connections[0].peer_device.srm_resync_share_percent,
        30
    );
    let defaults = crate::NetOptions::default();
    assert_eq!(
        (defaults.srm_max_lag_bytes, defaults.srm_max_lag_time),
        (64 << 20, Duration::from_secs(2))
    );
}

#[test]
fn metrics_address_is_per_node_and_loopback_by_default() {
    let text = "resource r {\n  volume 0 { device minor 0; disk /dev/x; meta-disk internal; }\n  \
                on a { node-id 0; address 10.0.0.1:7000; metrics-address 9942; }\n  \
                on b { node-id 1; address 10.0.0.2:7000; metrics-address 0.0.0.0:9100; }\n  \
                on c { node-id 2; address 10.0.0.3:7000; }\n  connection-mesh { hosts a b c; \
                    }\n}\n";
    let config = parse_str(text, Path::new("t.res"));
    let addresses: Vec<Option<SocketAddr>> = config
        .map(|config| {
            config.resources[0]
                .hosts
                .iter()
                .map(|host| host.metrics_address)
                .collect()
        })
        .unwrap_or_default();
    let expected: Vec<Option<SocketAddr>> = vec![
        "127.0.0.1:9942".parse().ok(),
        "0.0.0.0:9100".parse().ok(),
        None,
    ];
    assert_eq!(addresses, expected);
    let table = [
        (
            "on a { metrics-address 0; }",
            "t.res:2:26: port 0 is out of range 1..=65535",
        ),
        (
            "on a { metrics-address 1; metrics-address 2; }",
            "t.res:2:29: metrics-address is defined twice (first at t.res:2:10)",
        ),
        (
            "on a { metrics-address x:1; }",
            "t.res:2:26: invalid address 'x:1': expected ADDRESS:PORT, e.g. 10.0.0.1:7789 or \
             [fd00::1]:7789",
        ),
    ];
    for (host, expected) in table {
        let text = format!(
            "resource r {{\n  {host}\n  volume 0 {{ device minor 0; disk /dev/x; meta-disk \
             internal; }}\n}}\n"
        );
        assert_eq!(outcome(&text), expected, "{host}");
    }
}

#[test]
fn contradictions_are_refused_where_they_are_written() {
    let table: &[(&str, &str)] = &[
        ("  options { srm on; }", "ok"),
        (
            "  options { srm advise; }\n  net { srm-max-lag-bytes 0; }",
            "t.res:3:9: srm-max-lag-bytes 0 leaves no room for asynchronous replication with srm \
             advise",
        ),
        (
            "  options { srm on; }\n  net { srm-max-lag-time 0; }",
            "t.res:3:9: srm-max-lag-time 0 leaves no room for asynchronous replication with srm on",
        ),
        ("  net { srm-max-lag-bytes 0; srm-max-lag-time 0; }", "ok"),
        (
            "  options { srm on; srm-interval 5000; }",
            "t.res:2:21: srm-max-lag-time 2000 ms is shorter than srm-interval 5000 ms",
        ),
        (
            "  options { srm on; }\n  net { srm-max-lag-time 400; }",
            "t.res:3:9: srm-max-lag-time 400 ms is shorter than srm-interval 500 ms",
        ),
        (
            "  net { srm-latency-low 5; }",
            "t.res:2:9: srm-latency-low 5 ms must be below srm-latency-high 5 ms",
        ),
        (
            "  net { srm-latency-high 1; }",
            "t.res:2:9: srm-latency-low 2 ms must be below srm-latency-high 1 ms",
        ),
        (
            "  net { srm-fill-low 80; }",
            "t.res:2:9: srm-fill-low 80% must be below srm-fill-high 80%",
        ),
        (
            "  net { srm-max-buffers-min 10000; }",
            "t.res:2:9: srm-max-buffers-min 10000 is larger than srm-max-buffers-max 8192",
        ),
        (
            "  net { srm-max-epoch-size-max 100; }",
            "t.res:2:9: srm-max-epoch-size-min 2048 is larger than srm-max-epoch-size-max 100",
        ),
        (
            "  net { srm-sndbuf-size-min 4M; srm-sndbuf-size-max 1M; }",
            "t.res:2:9: srm-sndbuf-size-min 4194304 is larger than srm-sndbuf-size-max 1048576",
        ),
        (
            "  net { async-buffer-compress lz4; }",
            "t.res:2:9: async-buffer-compress lz4 needs an async-buffer",
        ),
        (
            "  net { async-buffer 1G; }",
            "t.res:2:9: async-buffer is used only by asynchronous replication: it needs protocol \
             A or srm on (not protocol C with srm off)",
        ),
        (
            "  net { async-buffer 1G; protocol A; async-buffer-compress lz4; }",
            "ok",
        ),
        (
            "  options { srm on; }\n  net { async-buffer 1G; }",
            "t.res:3:9: async-buffer 1073741824 is larger than srm-max-lag-bytes 67108864: the \
             lag bound would never let it fill",
        ),
        ("  options { srm on; }\n  net { async-buffer 32M; }", "ok"),
        (
            "  options { srm advise; }\n  net { async-buffer 32M; }",
            "t.res:3:9: async-buffer is used only by asynchronous replication: it needs protocol \
             A or srm on (not protocol C with srm advise)",
        ),
        (
            "  options { srm on; }\n  net { on-congestion pull-ahead; congestion-fill 16M; }",
            "ok",
        ),
        (
            "  options { srm advise; }\n  net { on-congestion pull-ahead; }",
            "t.res:3:9: on-congestion pull-ahead requires protocol A (or srm on)",
        ),
        (
            "  options { srm sometimes; }",
            "t.res:2:17: srm 'sometimes' is not valid; allowed values are: off | advise | on",
        ),
        (
            "  net { srm-fill-high 101; }",
            "t.res:2:23: srm-fill-high 101 is out of range 1..=100 (percent)",
        ),
        (
            "  net { srm-fill-high 5K; }",
            "t.res:2:23: srm-fill-high: '5K' is not a valid number: no unit suffix is allowed for \
             percent",
        ),
        (
            "  disk { srm-resync-share 0; }",
            "t.res:2:27: srm-resync-share 0 is out of range 1..=100 (percent)",
        ),
        (
            "  options { srm-max-lag-bytes 1M; }",
            "t.res:2:13: option 'srm-max-lag-bytes' is not allowed in options section (it belongs \
             in a net section)",
        ),
        (
            "  net { srm on; }",
            "t.res:2:9: option 'srm' is not allowed in net section (it belongs in an options \
             section)",
        ),
    ];
    for (body, expected) in table {
        assert_eq!(outcome(&resource(body)), *expected, "{body}");
    }
}

/// A connection's own net section can contradict the resource's mode, and the error points
/// into the connection.
#[test]
fn connection_settings_meet_the_resource_mode() {
    let text = "resource r {\n  options { srm on; }\n  volume 0 { device minor 0; disk /dev/x; \
        meta-disk internal; }\n  \
                on a { address 10.0.0.1:7000; }\n  on b { address 10.0.0.2:7000; }\n  \
                connection { host a; host b; net { srm-max-lag-bytes 0; } }\n}\n";
    assert_eq!(
        outcome(text),
        "t.res:6:38: srm-max-lag-bytes 0 leaves no room for asynchronous replication with srm on"
    );
    let common =
        "common { options { srm on; } net { srm-max-lag-time 0; } }\n".to_string() + &resource("");
    assert_eq!(
        outcome(&common),
        "t.res:1:36: srm-max-lag-time 0 leaves no room for asynchronous replication with srm on"
    );
}
