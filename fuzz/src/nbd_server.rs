//! Fuzz target `nbd_server`: the real NBD connection driver ([`nbd::serve_connection`]:
//! negotiation, then pipelined transmission with payload reads, discards and backpressure)
//! over an in-memory stream, with a RAM export behind it.
//!
//! Input: everything a client sends on the connection (flags, options, requests, payloads);
//! the harness then closes its sending side and reads until the server closes.
//!
//! Properties: nothing panics; the server always finishes once the client stopped sending
//! (a hang is a libFuzzer timeout); its first bytes are the greeting; the export only ever
//! sees requests inside the export, non-empty, within `request_bytes_max`, with a write
//! payload of exactly the requested length (the export asserts it, like a real disk would
//! fail).

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use nbd::protocol::GREETING;
use nbd::{
    Command, Completion, Export, ExportInfo, ExportRegistry, OpenError, Request, ServerConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Size of the RAM export.
const EXPORT_BYTES: usize = 256 * 1024;
/// Longest read or write the server accepts in this target.
const REQUEST_BYTES_MAX: u32 = 64 * 1024;
/// Requests in flight per connection.
const IN_FLIGHT_MAX: usize = 4;
/// Bytes the in-memory stream buffers each way.
const STREAM_BUFFER_BYTES: usize = 16 * 1024;

thread_local! {
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// The target's body.
pub fn run(data: &[u8]) {
    exchange(data);
}

/// Runs one connection fed with `input` and returns everything the server sent.
pub fn exchange(input: &[u8]) -> Vec<u8> {
    RUNTIME.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let built = tokio::runtime::Builder::new_current_thread().build();
            let Ok(runtime) = built else {
                panic!("a current-thread runtime builds: {built:?}");
            };
            *slot = Some(runtime);
        }
        match slot.as_ref() {
            Some(runtime) => runtime.block_on(session(input.to_vec())),
            None => Vec::new(),
        }
    })
}

/// One connection: the client sends `input`, then reads until the server closes.
async fn session(input: Vec<u8>) -> Vec<u8> {
    let (client, server) = tokio::io::duplex(STREAM_BUFFER_BYTES);
    let registry: Arc<dyn ExportRegistry> = Arc::new(Registry(Arc::new(Ram::new())));
    let config = ServerConfig {
        request_bytes_max: REQUEST_BYTES_MAX,
        in_flight_max_per_connection: IN_FLIGHT_MAX,
        pool: bufpool::BufPool::new(bufpool::PoolConfig::default()),
        payload_budget: ServerConfig::budget(32),
    };
    assert!(config.validate().is_ok());
    let serving = tokio::spawn(nbd::serve_connection(server, registry, Arc::new(config)));
    let (mut read, mut write) = tokio::io::split(client);
    let sending = async move {
        // The server may close early (a bad option, a wrong magic): then writing fails.
        let _ = write.write_all(&input).await;
        let _ = write.shutdown().await;
    };
    let receiving = async move {
        let mut out = Vec::new();
        let _ = read.read_to_end(&mut out).await;
        out
    };
    let ((), out) = tokio::join!(sending, receiving);
    let finished = serving.await;
    assert!(
        finished.is_ok(),
        "the connection task did not panic: {finished:?}"
    );
    assert_eq!(
        out.get(..GREETING.len()),
        Some(&GREETING[..]),
        "the greeting comes first"
    );
    out
}

/// An export in memory that checks every request against what the server promises.
struct Ram {
    data: Mutex<Vec<u8>>,
}

impl Ram {
    fn new() -> Ram {
        Ram {
            data: Mutex::new(vec![0; EXPORT_BYTES]),
        }
    }
}

/// The byte range of a request, asserting the server's promises about it.
fn range(offset: u64, length: usize, payload: bool) -> std::ops::Range<usize> {
    assert!(length > 0, "an admitted request is not empty");
    if payload {
        let max = usize::try_from(REQUEST_BYTES_MAX).unwrap_or(usize::MAX);
        assert!(length <= max, "within request_bytes_max");
    }
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = start.checked_add(length);
    assert!(
        end.is_some_and(|end| end <= EXPORT_BYTES),
        "inside the export"
    );
    start..start.saturating_add(length)
}

impl Export for Ram {
    fn info(&self) -> ExportInfo {
        ExportInfo {
            size: u64::try_from(EXPORT_BYTES).unwrap_or(0),
            read_only: false,
            can_flush: true,
            can_fua: true,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
        }
    }

    fn submit(&self, request: Request, completion: Completion) {
        let Ok(mut data) = self.data.lock() else {
            return completion.error(nbd::Errno::Io);
        };
        match request.command {
            Command::Read { offset, length } => {
                let length = usize::try_from(length).unwrap_or(usize::MAX);
                let bytes = data.get(range(offset, length, true)).unwrap_or_default();
                let bytes = Bytes::copy_from_slice(bytes);
                drop(data);
                completion.read_data(bytes);
            }
            Command::Write {
                offset,
                data: payload,
            } => {
                if let Some(target) = data.get_mut(range(offset, payload.len(), true)) {
                    target.copy_from_slice(&payload);
                }
                completion.ok();
            }
            Command::WriteStreaming { .. } => {
                panic!("no streaming write: this export never asks for one")
            }
            Command::Trim { offset, length } | Command::WriteZeroes { offset, length, .. } => {
                let length = usize::try_from(length).unwrap_or(usize::MAX);
                if let Some(target) = data.get_mut(range(offset, length, false)) {
                    target.fill(0);
                }
                completion.ok();
            }
            Command::Flush => completion.ok(),
        }
    }
}

/// One export, `ram`, also the default.
struct Registry(Arc<Ram>);

impl ExportRegistry for Registry {
    fn list(&self) -> Vec<String> {
        vec!["ram".to_owned()]
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        match name {
            "ram" | "" => Ok(Arc::clone(&self.0) as Arc<dyn Export>),
            _ => Err(OpenError::Unknown),
        }
    }
}
