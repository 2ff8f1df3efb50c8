//! systemd's service notification protocol (sd_notify(3)), without libsystemd: one datagram
//! per state change to the unix socket named by `NOTIFY_SOCKET` (a path, or `@NAME` for an
//! abstract socket), and `WATCHDOG=1` every half `WATCHDOG_USEC` when the unit sets
//! `WatchdogSec=`.
//!
//! Invariants:
//! - Without `NOTIFY_SOCKET` nothing is sent and nothing fails: a node run by hand or by
//!   Pacemaker's agent behaves as before.
//! - A failed send is logged, never fatal: systemd's readiness is advice about the node, not
//!   part of serving it.
//! - Handlers do not inherit `NOTIFY_SOCKET` (`handlers` removes it), so only the node
//!   itself speaks for the service.

use std::ffi::OsStr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The variable systemd sets for `Type=notify` services.
pub(crate) const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// Shortest watchdog ping interval the node accepts, whatever `WATCHDOG_USEC` says.
const WATCHDOG_INTERVAL_MIN: Duration = Duration::from_millis(100);

/// Sends `state` (e.g. `READY=1`) to the service manager, if there is one.
pub(crate) fn notify(state: &str) {
    let Some(socket) = std::env::var_os(NOTIFY_SOCKET) else {
        return;
    };
    if let Err(error) = send(&socket, state) {
        tracing::warn!(
            "cannot notify the service manager ({NOTIFY_SOCKET}={}): {error}",
            socket.to_string_lossy()
        );
    }
}

fn send(socket: &OsStr, state: &str) -> std::io::Result<()> {
    let sender = UnixDatagram::unbound()?;
    let address = match socket.as_bytes() {
        [b'@', name @ ..] => SocketAddr::from_abstract_name(name)?,
        path @ [b'/', ..] => {
            SocketAddr::from_pathname(std::path::Path::new(OsStr::from_bytes(path)))?
        }
        _ => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "neither an absolute path nor @NAME",
            ))
        }
    };
    let sent = sender.send_to_addr(state.as_bytes(), &address)?;
    assert_eq!(sent, state.len(), "a datagram is sent whole or not at all");
    Ok(())
}

/// The watchdog ping interval the service manager asks for (half `WATCHDOG_USEC`), if it
/// asks this process (`WATCHDOG_PID`, when set, must be ours).
pub(crate) fn watchdog_interval() -> Option<Duration> {
    std::env::var_os(NOTIFY_SOCKET)?;
    let microseconds: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    Some((Duration::from_micros(microseconds) / 2).max(WATCHDOG_INTERVAL_MIN))
}

/// Pings the watchdog from the runtime for as long as the node serves: a runtime that stops
/// scheduling tasks stops the pings, and systemd restarts the node.
pub(crate) async fn ping_watchdog(interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    loop {
        ticks.tick().await;
        notify("WATCHDOG=1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_reach_a_path_socket_and_bad_names_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).expect("bind");
        send(path.as_os_str(), "READY=1").expect("send to a path");
        let mut buffer = [0u8; 64];
        let length = receiver.recv(&mut buffer).expect("recv");
        assert_eq!(&buffer[..length], b"READY=1");
        assert!(send(OsStr::new("relative/path"), "READY=1").is_err());
        assert!(send(OsStr::new(""), "READY=1").is_err());
    }

    #[test]
    fn states_reach_an_abstract_socket() {
        let name = format!("tandem-sd-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
        let receiver = UnixDatagram::bind_addr(&address).expect("bind");
        send(OsStr::new(&format!("@{name}")), "STOPPING=1").expect("send to @name");
        let mut buffer = [0u8; 64];
        let length = receiver.recv(&mut buffer).expect("recv");
        assert_eq!(&buffer[..length], b"STOPPING=1");
    }
}
