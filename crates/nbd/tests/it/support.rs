//! Test support: an in-memory export with controllable completion, a registry, a server on a
//! unix socket in a temporary directory, and a raw NBD client that speaks bytes.
//!
//! The in-memory export completes every request from a spawned task (after yielding, so always
//! after `submit` returned), except requests the test asked it to park or to drop; parked
//! requests complete when the test calls `release_parked`, on the test's own thread.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use nbd::protocol::{
    parse_option_reply, parse_simple_reply_header, ClientOption, ExportQuery, InfoType,
    OptionReply, OptionReplyBody, RequestHeader, OPTION_REPLY_HEADER_LEN, SIMPLE_REPLY_HEADER_LEN,
};
use nbd::{
    Command, Completion, Errno, Export, ExportInfo, ExportRegistry, OpenError, Request,
    ServerConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// How long any single wait in these tests may take before it counts as a hang.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Polls `condition` until it holds, failing the test after [`DEADLINE`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Awaits `future`, failing the test after [`DEADLINE`].
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out: {what}"),
    }
}

/// A deterministic, non-repeating-looking byte pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|index| {
            (index as u64)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(u64::from(seed)) as u8
        })
        .collect()
}

/// Which requests the export holds back.
#[derive(Debug, Default, Clone, Copy)]
pub struct Behaviour {
    /// Reads at this offset wait for `release_parked`.
    pub park_reads_at: Option<u64>,
    /// Reads at this offset have their completion dropped unanswered.
    pub drop_reads_at: Option<u64>,
    /// Writes at least this long are asked for as streaming writes.
    pub stream_writes_from: Option<usize>,
}

/// An export backed by a `Vec<u8>`.
pub struct MemExport {
    info: ExportInfo,
    data: Arc<Mutex<Vec<u8>>>,
    behaviour: Mutex<Behaviour>,
    parked: Mutex<Vec<(Request, Completion)>>,
    submitted: AtomicUsize,
    fua_requests: AtomicUsize,
    streamed: AtomicUsize,
    aborted: Arc<AtomicUsize>,
}

impl MemExport {
    /// An export with `info`, filled with `fill`.
    pub fn new(info: ExportInfo, fill: u8) -> Arc<MemExport> {
        let size = usize::try_from(info.size).unwrap();
        Arc::new(MemExport {
            info,
            data: Arc::new(Mutex::new(vec![fill; size])),
            behaviour: Mutex::new(Behaviour::default()),
            parked: Mutex::new(Vec::new()),
            submitted: AtomicUsize::new(0),
            fua_requests: AtomicUsize::new(0),
            streamed: AtomicUsize::new(0),
            aborted: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A writable export that can do everything.
    pub fn full(size: u64) -> Arc<MemExport> {
        let info = ExportInfo {
            size,
            read_only: false,
            can_flush: true,
            can_fua: true,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
        };
        MemExport::new(info, 0)
    }

    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
    }

    /// Requests handed to `submit` so far.
    pub fn submitted(&self) -> usize {
        self.submitted.load(Ordering::SeqCst)
    }

    /// Requests submitted with FUA set.
    pub fn fua_requests(&self) -> usize {
        self.fua_requests.load(Ordering::SeqCst)
    }

    /// Streaming writes submitted, and how many of those never completed arriving.
    pub fn streamed(&self) -> (usize, usize) {
        (
            self.streamed.load(Ordering::SeqCst),
            self.aborted.load(Ordering::SeqCst),
        )
    }

    pub fn parked(&self) -> usize {
        self.parked.lock().unwrap().len()
    }

    /// Completes every parked request, on the calling thread.
    pub fn release_parked(&self) {
        let parked = std::mem::take(&mut *self.parked.lock().unwrap());
        for (request, completion) in parked {
            execute(&self.data, request, completion);
        }
    }

    pub fn contents(&self) -> Vec<u8> {
        self.data.lock().unwrap().clone()
    }

    pub fn fill_with(&self, contents: &[u8]) {
        self.data.lock().unwrap().copy_from_slice(contents);
    }
}

fn read_offset(request: &Request) -> Option<u64> {
    match request.command {
        Command::Read { offset, .. } => Some(offset),
        _ => None,
    }
}

fn range(offset: u64, length: usize) -> std::ops::Range<usize> {
    let start = usize::try_from(offset).unwrap();
    start..start + length
}

fn execute(data: &Mutex<Vec<u8>>, request: Request, completion: Completion) {
    let mut data = data.lock().unwrap();
    match request.command {
        Command::Read { offset, length } => {
            let bytes = Bytes::copy_from_slice(&data[range(offset, length as usize)]);
            drop(data);
            completion.read_data(bytes);
        }
        Command::Write {
            offset,
            data: payload,
        } => {
            data[range(offset, payload.len())].copy_from_slice(&payload);
            completion.ok();
        }
        Command::WriteStreaming {
            offset,
            data: payload,
        } => match payload.as_complete() {
            Some(bytes) => {
                data[range(offset, bytes.len())].copy_from_slice(bytes);
                completion.ok();
            }
            None => completion.error(Errno::Io),
        },
        Command::Flush => completion.ok(),
        Command::Trim { offset, length } | Command::WriteZeroes { offset, length, .. } => {
            data[range(offset, length as usize)].fill(0);
            completion.ok();
        }
    }
}

impl Export for MemExport {
    fn info(&self) -> ExportInfo {
        self.info
    }

    fn submit(&self, request: Request, completion: Completion) {
        self.submitted.fetch_add(1, Ordering::SeqCst);
        if request.fua {
            self.fua_requests.fetch_add(1, Ordering::SeqCst);
        }
        let behaviour = *self.behaviour.lock().unwrap();
        let offset = read_offset(&request);
        if offset.is_some() && offset == behaviour.park_reads_at {
            self.parked.lock().unwrap().push((request, completion));
            return;
        }
        if offset.is_some() && offset == behaviour.drop_reads_at {
            drop(completion);
            return;
        }
        let data = Arc::clone(&self.data);
        if let Command::WriteStreaming { data: payload, .. } = &request.command {
            // Executed once the whole payload arrived; it is being read after this returns.
            self.streamed.fetch_add(1, Ordering::SeqCst);
            let payload = payload.clone();
            let aborted = Arc::clone(&self.aborted);
            tokio::spawn(async move {
                if payload.wait(payload.len()).await.is_err() {
                    aborted.fetch_add(1, Ordering::SeqCst);
                }
                execute(&data, request, completion);
            });
            return;
        }
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            execute(&data, request, completion);
        });
    }

    fn streaming_write_bytes_min(&self) -> Option<usize> {
        self.behaviour.lock().unwrap().stream_writes_from
    }
}

/// Exports by name, plus names refused by policy.
#[derive(Default)]
pub struct MemRegistry {
    pub exports: Vec<(String, Arc<MemExport>)>,
    pub refused: Vec<(String, String)>,
    /// Names that `open_for_info` (NBD_OPT_INFO) refuses while `open` accepts them.
    pub info_refused: Vec<String>,
}

impl MemRegistry {
    pub fn with(mut self, name: &str, export: &Arc<MemExport>) -> MemRegistry {
        self.exports.push((name.to_owned(), Arc::clone(export)));
        self
    }

    pub fn refusing_info(mut self, name: &str) -> MemRegistry {
        self.info_refused.push(name.to_owned());
        self
    }

    pub fn refusing(mut self, name: &str, message: &str) -> MemRegistry {
        self.refused.push((name.to_owned(), message.to_owned()));
        self
    }
}

impl ExportRegistry for MemRegistry {
    fn list(&self) -> Vec<String> {
        self.exports.iter().map(|(name, _)| name.clone()).collect()
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        if let Some((_, message)) = self.refused.iter().find(|(refused, _)| refused == name) {
            return Err(OpenError::Policy(message.clone()));
        }
        let (_, export) = self
            .exports
            .iter()
            .find(|(known, _)| known == name)
            .ok_or(OpenError::Unknown)?;
        Ok(Arc::clone(export) as Arc<dyn Export>)
    }

    fn open_for_info(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        if self.info_refused.iter().any(|refused| refused == name) {
            return Err(OpenError::Policy("opened for information only".to_owned()));
        }
        self.open(name)
    }
}

/// A server on a unix socket in a temporary directory; stops when dropped.
pub struct Server {
    _dir: tempfile::TempDir,
    pub socket: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start(registry: MemRegistry, config: ServerConfig) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("nbd.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let task = tokio::spawn(nbd::serve_unix(
            listener,
            Arc::new(registry),
            Arc::new(config),
        ));
        Server {
            _dir: dir,
            socket,
            task,
        }
    }

    /// The URI libnbd and qemu use for `export` on this server.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A small config: 1 MiB requests at most.
pub fn small_config() -> ServerConfig {
    ServerConfig {
        request_bytes_max: 1 << 20,
        ..ServerConfig::default()
    }
}

/// One reply as the raw client saw it.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub cookie: u64,
    pub error: Option<Errno>,
    pub data: Vec<u8>,
}

/// A client that speaks the protocol byte by byte.
pub struct RawClient {
    pub stream: UnixStream,
    next_cookie: u64,
}

impl RawClient {
    /// Connects, checks the greeting, and sends `client_flags`.
    pub async fn connect_with_flags(socket: &Path, client_flags: u32) -> RawClient {
        let mut stream = within("connect", UnixStream::connect(socket))
            .await
            .unwrap();
        let mut greeting = [0; 18];
        within("greeting", stream.read_exact(&mut greeting))
            .await
            .unwrap();
        assert_eq!(&greeting[..8], b"NBDMAGIC");
        assert_eq!(&greeting[8..16], b"IHAVEOPT");
        assert_eq!(greeting[16..], [0, 3], "FIXED_NEWSTYLE | NO_ZEROES");
        stream.write_all(&client_flags.to_be_bytes()).await.unwrap();
        RawClient {
            stream,
            next_cookie: 1,
        }
    }

    /// Connects with `FIXED_NEWSTYLE | NO_ZEROES`.
    pub async fn connect(socket: &Path) -> RawClient {
        RawClient::connect_with_flags(socket, 3).await
    }

    /// Connects and enters transmission on `name` with `NBD_OPT_GO`.
    pub async fn open(socket: &Path, name: &str) -> RawClient {
        let mut client = RawClient::connect(socket).await;
        let replies = client.go(name, &[]).await;
        assert_eq!(
            replies.last().map(|reply| &reply.body),
            Some(&OptionReplyBody::Ack),
            "{replies:?}"
        );
        client
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        within("send", self.stream.write_all(bytes)).await.unwrap();
    }

    pub async fn send_option(&mut self, option: &ClientOption) {
        let mut bytes = Vec::new();
        option.encode(&mut bytes);
        self.send(&bytes).await;
    }

    pub async fn option_reply(&mut self) -> OptionReply {
        let mut bytes = vec![0; OPTION_REPLY_HEADER_LEN];
        within("option reply", self.stream.read_exact(&mut bytes))
            .await
            .unwrap();
        let length = u32::from_be_bytes(bytes[16..20].try_into().unwrap()) as usize;
        bytes.resize(OPTION_REPLY_HEADER_LEN + length, 0);
        within(
            "option data",
            self.stream
                .read_exact(&mut bytes[OPTION_REPLY_HEADER_LEN..]),
        )
        .await
        .unwrap();
        let (reply, used) = parse_option_reply(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        reply
    }

    /// Replies to one option, up to and including the final ACK or error.
    pub async fn final_replies(&mut self) -> Vec<OptionReply> {
        let mut replies = Vec::new();
        loop {
            let reply = self.option_reply().await;
            let last = matches!(
                reply.body,
                OptionReplyBody::Ack | OptionReplyBody::Error { .. }
            );
            replies.push(reply);
            if last {
                return replies;
            }
        }
    }

    pub async fn go(&mut self, name: &str, items: &[InfoType]) -> Vec<OptionReply> {
        let query = ExportQuery {
            name: name.to_owned(),
            items: items.to_vec(),
        };
        self.send_option(&ClientOption::Go(query)).await;
        self.final_replies().await
    }

    /// Sends one request (and its payload) and returns its cookie.
    pub async fn request(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> u64 {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let header = RequestHeader {
            flags,
            kind,
            cookie,
            offset,
            length,
        };
        let mut bytes = header.encode().to_vec();
        bytes.extend_from_slice(payload);
        self.send(&bytes).await;
        cookie
    }

    /// Reads one reply; `data_len` says how much data a successful reply to a cookie carries.
    pub async fn reply(&mut self, data_len: impl Fn(u64) -> usize) -> Reply {
        let mut header = [0; SIMPLE_REPLY_HEADER_LEN];
        within("reply header", self.stream.read_exact(&mut header))
            .await
            .unwrap();
        let header = parse_simple_reply_header(&header).unwrap();
        let mut data = Vec::new();
        if header.error.is_none() {
            data.resize(data_len(header.cookie), 0);
            within("reply data", self.stream.read_exact(&mut data))
                .await
                .unwrap();
        }
        Reply {
            cookie: header.cookie,
            error: header.error,
            data,
        }
    }

    pub async fn read(&mut self, offset: u64, length: u32) -> Result<Vec<u8>, Errno> {
        let cookie = self.request(0, 0, offset, length, &[]).await;
        let reply = self.reply(|_| length as usize).await;
        assert_eq!(reply.cookie, cookie);
        reply.error.map_or(Ok(reply.data), Err)
    }

    /// A command without read data; returns its status.
    pub async fn command(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> Result<(), Errno> {
        let cookie = self.request(kind, flags, offset, length, payload).await;
        let reply = self.reply(|_| 0).await;
        assert_eq!(reply.cookie, cookie);
        reply.error.map_or(Ok(()), Err)
    }

    pub async fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Errno> {
        self.command(1, 0, offset, u32::try_from(data.len()).unwrap(), data)
            .await
    }

    /// Asserts the server closes the connection (EOF or reset) without sending anything more.
    pub async fn expect_closed(&mut self) {
        let mut byte = [0; 1];
        match within("close", self.stream.read(&mut byte)).await {
            Ok(0) | Err(_) => {}
            Ok(_) => panic!("expected the connection to close, got data {byte:?}"),
        }
    }
}
