//! The control protocol: one JSON object per line in, one JSON object per line out, over a unix
//! socket, so benchmarks and tests can change a running link.
//!
//! Request fields (all optional, unknown fields rejected): `pair` (index of the relay in
//! command-line order; default all), `direction` (`"both"`, `"forward"`, `"reverse"`: which
//! directions the shape fields change; default both), `delay_ms`, `jitter_ms` (numbers),
//! `rate` (`"100mbit"`, `"12MB"`, `"unlimited"` or a number of bytes/s), `queue` (`"64MiB"` or a
//! number of bytes), `partition` (`"none"`, `"both"`, `"forward"`, `"reverse"`),
//! `on_partition` (`"hold"`, `"reset"`), `stats` (ignored: every reply carries the stats).
//!
//! Reply: `{"ok":true,"pairs":[{"pair":0,"listen":..,"target":..,"link":{..},"stats":{..}}]}`
//! or `{"ok":false,"error":"..."}`.
//!
//! Invariants:
//! - A request is applied to every relay it names or to none: all new links are computed and
//!   checked before the first is set.
//! - A line longer than [`LINE_BYTES_MAX`] is answered with an error and the connection closed;
//!   memory per client is bounded.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::link::{Direction, Link, OnPartition, Partition, Shape};
use crate::relay::{RelayHandle, Stats};
use crate::{parse, LinkError};

/// Longest request line accepted, in bytes.
pub const LINE_BYTES_MAX: u64 = 64 << 10;

/// Which directions a request's shape fields change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Directions {
    /// Forward and reverse.
    #[default]
    Both,
    /// Client to target only.
    Forward,
    /// Target to client only.
    Reverse,
}

impl Directions {
    fn includes(self, direction: Direction) -> bool {
        match self {
            Directions::Both => true,
            Directions::Forward => direction == Direction::Forward,
            Directions::Reverse => direction == Direction::Reverse,
        }
    }
}

/// An amount given either as a number or as text with a unit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Amount {
    /// A plain number (bytes, or bytes per second).
    Number(u64),
    /// Text such as `"64MiB"` or `"100mbit"`.
    Text(String),
}

/// One control request; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlRequest {
    /// The relay to change (index in command-line order); all when absent.
    pub pair: Option<usize>,
    /// Which directions the shape fields change.
    #[serde(default)]
    pub direction: Directions,
    /// New one-way delay in milliseconds.
    pub delay_ms: Option<f64>,
    /// New jitter in milliseconds.
    pub jitter_ms: Option<f64>,
    /// New bandwidth limit.
    pub rate: Option<Amount>,
    /// New queue bound.
    pub queue: Option<Amount>,
    /// New partition state.
    pub partition: Option<Partition>,
    /// New partition behaviour.
    pub on_partition: Option<OnPartition>,
    /// Asks for the stats; every reply carries them, so this changes nothing.
    pub stats: Option<bool>,
}

/// Parses one request line.
pub fn parse_request(line: &str) -> Result<ControlRequest, LinkError> {
    serde_json::from_str(line).map_err(|error| LinkError::Request(error.to_string()))
}

fn milliseconds(field: &str, value: f64) -> Result<Duration, LinkError> {
    if value.is_nan() || value < 0.0 {
        return Err(LinkError::Request(format!(
            "{field} must be a number ≥ 0, not {value}"
        )));
    }
    Duration::try_from_secs_f64(value / 1000.0)
        .map_err(|error| LinkError::Request(format!("{field} {value}: {error}")))
}

/// The link `request` makes of `link`, checked.
pub fn apply(link: Link, request: &ControlRequest) -> Result<Link, LinkError> {
    let delay = request
        .delay_ms
        .map(|ms| milliseconds("delay_ms", ms))
        .transpose()?;
    let jitter = request
        .jitter_ms
        .map(|ms| milliseconds("jitter_ms", ms))
        .transpose()?;
    let rate = match &request.rate {
        None => None,
        Some(Amount::Number(bytes_per_s)) => Some(Some(*bytes_per_s)),
        Some(Amount::Text(text)) => Some(parse::rate_bytes_per_s(text)?),
    };
    let queue = match &request.queue {
        None => None,
        Some(Amount::Number(bytes)) => Some(*bytes),
        Some(Amount::Text(text)) => Some(parse::size_bytes(text)?),
    };
    let mut next = link;
    for direction in Direction::ALL
        .into_iter()
        .filter(|&d| request.direction.includes(d))
    {
        let shape: &mut Shape = next.shape_mut(direction);
        shape.delay = delay.unwrap_or(shape.delay);
        shape.jitter = jitter.unwrap_or(shape.jitter);
        shape.rate_bytes_per_s = rate.unwrap_or(shape.rate_bytes_per_s);
        shape.queue_bytes_max = queue.unwrap_or(shape.queue_bytes_max);
    }
    next.partition = request.partition.unwrap_or(next.partition);
    next.on_partition = request.on_partition.unwrap_or(next.on_partition);
    next.check()?;
    Ok(next)
}

/// A direction's shape as the control socket reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeView {
    /// One-way delay in milliseconds.
    pub delay_ms: f64,
    /// Jitter in milliseconds.
    pub jitter_ms: f64,
    /// Bandwidth limit, `null` for none.
    pub rate_bytes_per_s: Option<u64>,
    /// Queue bound per connection.
    pub queue_bytes_max: u64,
}

/// A link as the control socket reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkView {
    /// Client-to-target shape.
    pub forward: ShapeView,
    /// Target-to-client shape.
    pub reverse: ShapeView,
    /// Which directions are cut.
    pub partition: Partition,
    /// Whether a partition holds or resets.
    pub on_partition: OnPartition,
}

impl From<&Link> for LinkView {
    fn from(link: &Link) -> Self {
        let view = |shape: &Shape| ShapeView {
            delay_ms: shape.delay.as_secs_f64() * 1000.0,
            jitter_ms: shape.jitter.as_secs_f64() * 1000.0,
            rate_bytes_per_s: shape.rate_bytes_per_s,
            queue_bytes_max: shape.queue_bytes_max,
        };
        LinkView {
            forward: view(&link.forward),
            reverse: view(&link.reverse),
            partition: link.partition,
            on_partition: link.on_partition,
        }
    }
}

/// One relay in a reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairView {
    /// Index in command-line order.
    pub pair: usize,
    /// Listening address.
    pub listen: String,
    /// Target address.
    pub target: String,
    /// The link in force.
    pub link: LinkView,
    /// The counters.
    pub stats: Stats,
}

/// A reply line.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Reply {
    /// The request was applied (or only asked for stats).
    Done {
        /// Always `true`.
        ok: bool,
        /// Every relay the request named.
        pairs: Vec<PairView>,
    },
    /// The request was refused; nothing changed.
    Refused {
        /// Always `false`.
        ok: bool,
        /// Why.
        error: String,
    },
}

/// Applies one request line to `relays` and returns the reply.
pub fn handle_line(relays: &[RelayHandle], line: &str) -> Reply {
    match try_handle(relays, line) {
        Ok(pairs) => Reply::Done { ok: true, pairs },
        Err(error) => Reply::Refused {
            ok: false,
            error: error.to_string(),
        },
    }
}

fn try_handle(relays: &[RelayHandle], line: &str) -> Result<Vec<PairView>, LinkError> {
    let request = parse_request(line)?;
    let chosen: Vec<usize> = match request.pair {
        Some(pair) if pair >= relays.len() => {
            return Err(LinkError::NoSuchPair {
                pair,
                pairs: relays.len(),
            })
        }
        Some(pair) => vec![pair],
        None => (0..relays.len()).collect(),
    };
    let links = chosen
        .iter()
        .map(|&index| apply(relays[index].link(), &request))
        .collect::<Result<Vec<_>, _>>()?;
    for (&index, link) in chosen.iter().zip(links) {
        relays[index].set(link)?;
    }
    Ok(chosen
        .iter()
        .map(|&index| pair_view(index, &relays[index]))
        .collect())
}

fn pair_view(index: usize, relay: &RelayHandle) -> PairView {
    PairView {
        pair: index,
        listen: relay.local_addr().to_string(),
        target: relay.target_addr().to_string(),
        link: LinkView::from(&relay.link()),
        stats: relay.stats(),
    }
}

/// Answers control clients on `listener` until the task is dropped.
pub async fn serve(listener: UnixListener, relays: Arc<Vec<RelayHandle>>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_client(stream, Arc::clone(&relays)));
            }
            Err(error) => {
                tracing::warn!(%error, "control accept failed");
                return;
            }
        }
    }
}

async fn serve_client(stream: UnixStream, relays: Arc<Vec<RelayHandle>>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let count = match (&mut reader)
            .take(LINE_BYTES_MAX + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(count) => count,
        };
        let too_long = u64::try_from(count).map_or(true, |count| count > LINE_BYTES_MAX);
        let reply = if too_long {
            Reply::Refused {
                ok: false,
                error: format!("request line longer than {LINE_BYTES_MAX} bytes"),
            }
        } else {
            handle_line(&relays, String::from_utf8_lossy(&line).trim())
        };
        let mut text = serde_json::to_string(&reply)
            .unwrap_or_else(|error| format!("{{\"ok\":false,\"error\":\"{error}\"}}"));
        text.push('\n');
        if write.write_all(text.as_bytes()).await.is_err() || too_long {
            return;
        }
    }
}
