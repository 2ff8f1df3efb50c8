//! Peer links: the listener, the handshake (with optional HMAC challenge-response), the four
//! tasks of an established link, and the per-peer supervisor that reconnects.
//!
//! Each connection is two TCP sockets: *data* (writes, barriers) and *control* (acks, pings,
//! state), so acknowledgements never queue behind bulk data. The node with the higher node id
//! connects; the other accepts. Both sockets of one connection carry the same random session
//! id, by which the acceptor pairs them.
//!
//! Invariants:
//! - A listener reads nothing from a connection whose source is not a peer's configured
//!   address, and runs at most `edge::HANDSHAKES_IN_PROGRESS_MAX` unauthenticated handshakes
//!   at once, each within `HANDSHAKE_TIMEOUT` (see `edge`).
//! - With a shared secret, the acceptor sends its MAC only after the initiator's verified.
//! - Nothing from a peer reaches the engine before both sockets passed `check_hello` and, with
//!   a shared secret, both directions of the challenge-response.
//! - Every frame is decoded by `wire` into a typed message before it is acted on; a frame that
//!   does not decode, or arrives on the wrong socket, ends the link as a ProtocolError.
//! - Received write payloads are bounded by `max-buffers` (4 KiB pages) through a semaphore
//!   whose permits travel with the payload until its disk write is done.
//! - Large payloads are cut through: sent while they still arrive from the NBD client, and
//!   (protocols A and C) handed to the engine and written while they still arrive from the
//!   peer. Under protocol B the engine acknowledges receipt on hand-over, so there the whole
//!   payload is read first: a receipt ack always means every byte is here.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bufpool::{Filler, Incoming};
use hmac::{Hmac, Mac};
use rand::RngCore;
use repl::{ConnState, DiskOp, PeerMessage, Protocol};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use wire::{
    auth_mac_input, check_hello, DataHeader, FrameHeader, Hello, HelloExpect, HelloNonces, Message,
    RangeHeader, SocketKind, FRAME_HEADER_LEN, MAC_LEN, PROTOCOL_VERSION,
};

use crate::edge::{
    self, HandshakeSlots, Refusal, RefusalLog, SourceFilter, Stage, Summary, Ticket,
    HANDSHAKES_IN_PROGRESS_MAX, REFUSAL_ADDRESSES_MAX, REFUSAL_LOG_INTERVAL,
};
use crate::link_stream::{LinkReader, LinkStream, LinkWriter};
use crate::link_tuning::AsyncBuffer;
use crate::resource::{Outgoing, Payload, PeerInfo, Resource};
use crate::wire_map::{control_from_wire, control_to_wire, sync_from_wire, sync_to_wire};

/// How long a link dropped by the engine may take to send what was queued before the drop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// How a link is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Not told.
    Running,
    /// Send what is queued up to the `Close` marker, then stop (the engine dropped the peer).
    Drain,
    /// Stop at once (replaced by a new link, or shutting down).
    Now,
}

/// How long a handshake may take before the attempt is abandoned.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Accepted data sockets waiting for their control socket, at most.
const PENDING_SOCKETS_MAX: usize = 16;
/// Socket buffer sizes of the userspace reader and writer.
const STREAM_BUFFER_BYTES: usize = 256 * 1024;
/// Page size of the `max-buffers` accounting.
const PAGE_BYTES: u32 = 4096;

/// A pair of handshaken sockets for one peer.
pub(crate) type SocketPair = (LinkStream, LinkStream);

/// Why a link attempt or an established link ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// Socket error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer sent something that is not valid protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The handshake found a configuration mismatch (ours or theirs).
    #[error("{0}")]
    Refused(String),
    /// Authentication failed.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Closed,
    /// The peer said goodbye.
    #[error("peer disconnected: {0}")]
    PeerDisconnected(String),
    /// The handshake took too long.
    #[error("handshake timed out")]
    Timeout,
    /// A listener closed this unauthenticated handshake to make room for a newer connection.
    #[error(
        "closed to make room: {HANDSHAKES_IN_PROGRESS_MAX} handshakes in progress, this one the \
         oldest"
    )]
    Evicted,
    /// This node ended the link (the engine dropped the peer, or the link was replaced).
    #[error("closed locally")]
    ClosedLocally,
}

impl LinkError {
    fn conn_state(&self) -> ConnState {
        match self {
            LinkError::Protocol(_) | LinkError::Refused(_) | LinkError::Auth(_) => {
                ConnState::ProtocolError
            }
            LinkError::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ConnState::BrokenPipe,
            LinkError::Timeout => ConnState::Timeout,
            _ => ConnState::NetworkFailure,
        }
    }
}

impl From<wire::WireError> for LinkError {
    fn from(error: wire::WireError) -> Self {
        LinkError::Protocol(error.to_string())
    }
}

// ----- frames ---------------------------------------------------------------------------

async fn read_header<R: AsyncRead + Unpin>(reader: &mut R) -> Result<FrameHeader, LinkError> {
    let mut bytes = [0u8; FRAME_HEADER_LEN];
    match reader.read_exact(&mut bytes).await {
        Ok(_) => Ok(FrameHeader::decode(&bytes)?),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(LinkError::Closed),
        Err(e) => Err(e.into()),
    }
}

async fn read_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    header: &FrameHeader,
) -> Result<Message, LinkError> {
    header.check()?;
    let mut body = vec![0u8; header.message_len()];
    reader.read_exact(&mut body).await?;
    Ok(Message::decode(header, &body)?)
}

/// Read a frame that has no payload (handshake and control socket).
async fn read_message<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Message, LinkError> {
    let header = read_header(reader).await?;
    if header.payload_len() > 0 {
        return Err(LinkError::Protocol("unexpected data frame".into()));
    }
    read_body(reader, &header).await
}

async fn write_message<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &Message,
) -> Result<(), LinkError> {
    let mut bytes = Vec::with_capacity(64);
    message.encode(0, &mut bytes)?;
    writer.write_all(&bytes).await?;
    Ok(())
}

// ----- handshake ------------------------------------------------------------------------

fn hello_expect(resource: &Resource, peer: &PeerInfo) -> HelloExpect {
    // Every volume of the engine; a diskless one (no disk here) announces
    // `DISKLESS_VOLUME_BYTES`, which matches any size.
    let mut volumes: BTreeMap<u16, u64> = resource.with_engine(|engine| {
        engine
            .status()
            .volumes
            .iter()
            .map(|v| (v.volume, wire::DISKLESS_VOLUME_BYTES))
            .collect()
    });
    volumes.extend(resource.volumes.iter().map(|(n, d)| (*n, d.size_bytes())));
    HelloExpect {
        version_min: PROTOCOL_VERSION,
        version_max: PROTOCOL_VERSION,
        resource: resource.name.clone(),
        local_node: resource.node_id,
        peer_node: peer.node_id,
        volumes,
        auth_required: peer.net.shared_secret.is_some(),
    }
}

fn fresh_nonces(session: [u8; 16]) -> HelloNonces {
    let mut challenge = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut challenge);
    HelloNonces { session, challenge }
}

/// HMAC of `input` with the configured `cram-hmac-alg`, cut or zero-padded to [`MAC_LEN`].
fn mac(algorithm: &str, secret: &str, input: &[u8]) -> [u8; MAC_LEN] {
    fn compute<M: Mac + hmac::digest::KeyInit>(secret: &str, input: &[u8]) -> Vec<u8> {
        // HMAC accepts keys of any length, so this cannot fail.
        match <M as hmac::digest::KeyInit>::new_from_slice(secret.as_bytes()) {
            Ok(mut mac) => {
                mac.update(input);
                mac.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        }
    }
    let full = match algorithm {
        "sha1" => compute::<Hmac<sha1::Sha1>>(secret, input),
        "sha512" => compute::<Hmac<sha2::Sha512>>(secret, input),
        _ => compute::<Hmac<sha2::Sha256>>(secret, input),
    };
    let mut out = [0u8; MAC_LEN];
    let n = full.len().min(MAC_LEN);
    out[..n].copy_from_slice(&full[..n]);
    out
}

/// Which end of a connection this node is: the side that dialled, or the listener's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Initiator,
    Acceptor,
}

/// What one side of the challenge-response needs: the configured algorithm and secret, and
/// what the MACs bind (the resource, and which node answers).
struct Credentials<'a> {
    algorithm: &'a str,
    secret: &'a str,
    resource: &'a str,
    local_node: u8,
    peer_node: u8,
    peer_name: &'a str,
}

impl Credentials<'_> {
    /// Our answer to the peer's challenge.
    fn answer(&self, their_challenge: &[u8; 32]) -> [u8; MAC_LEN] {
        mac(
            self.algorithm,
            self.secret,
            &auth_mac_input(their_challenge, self.local_node, self.resource),
        )
    }

    /// Whether the peer's answer to our challenge is right.
    fn verifies(&self, our_challenge: &[u8; 32], their_answer: &[u8]) -> bool {
        answer_is_valid(
            self.algorithm,
            self.secret,
            our_challenge,
            self.peer_node,
            self.resource,
            their_answer,
        )
    }

    fn wrong_mac(&self) -> LinkError {
        LinkError::Auth(format!(
            "peer {} answered with a wrong MAC (shared-secret differs)",
            self.peer_name
        ))
    }

    fn rejected(&self) -> LinkError {
        LinkError::Auth(format!(
            "peer {} rejected our MAC (shared-secret differs)",
            self.peer_name
        ))
    }
}

/// Both directions of the challenge-response, after the Hellos were exchanged.
async fn authenticate(
    stream: &mut LinkStream,
    resource: &Resource,
    peer: &PeerInfo,
    (ours, theirs): (&Hello, &Hello),
    side: Side,
) -> Result<(), LinkError> {
    let Some(secret) = peer.net.shared_secret.as_deref() else {
        return Ok(());
    };
    let credentials = Credentials {
        algorithm: peer.net.cram_hmac_alg.as_deref().unwrap_or("sha256"),
        secret,
        resource: &resource.name,
        local_node: resource.node_id,
        peer_node: peer.node_id,
        peer_name: &peer.name,
    };
    match side {
        Side::Initiator => {
            authenticate_initiator(stream, &credentials, &ours.challenge, &theirs.challenge).await
        }
        Side::Acceptor => {
            authenticate_acceptor(stream, &credentials, &ours.challenge, &theirs.challenge).await
        }
    }
}

/// The dialling side answers first: it reached the address configured for the peer, and the
/// listener proves itself next, before anything else happens. An acceptor that refuses our
/// answer says so in place of its own (`AuthResult` false): it never reveals an answer first.
async fn authenticate_initiator<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    credentials: &Credentials<'_>,
    our_challenge: &[u8; 32],
    their_challenge: &[u8; 32],
) -> Result<(), LinkError> {
    write_message(
        stream,
        &Message::AuthResponse {
            mac: credentials.answer(their_challenge),
        },
    )
    .await?;
    let their_answer = match read_message(stream).await? {
        Message::AuthResponse { mac } => mac,
        Message::AuthResult { ok: false } => return Err(credentials.rejected()),
        _ => return Err(LinkError::Protocol("expected AuthResponse".into())),
    };
    let ok = credentials.verifies(our_challenge, &their_answer);
    write_message(stream, &Message::AuthResult { ok }).await?;
    if !ok {
        return Err(credentials.wrong_mac());
    }
    match read_message(stream).await? {
        Message::AuthResult { ok: true } => Ok(()),
        Message::AuthResult { ok: false } => Err(credentials.rejected()),
        _ => Err(LinkError::Protocol("expected AuthResult".into())),
    }
}

/// The listening side verifies the initiator's answer before it sends its own. Anyone who can
/// reach the port can open a connection and send a challenge; if the listener answered first,
/// it would compute for them a MAC they could relay to another node that expects this node's
/// answer to the same challenge (with a third node, a relay between two listeners). Answering
/// only a peer that already proved the secret makes the listener useless as such an oracle.
/// The frames on the wire are those of the older order (`AuthResponse`, then `AuthResult`), so
/// peers of the same protocol version interoperate.
async fn authenticate_acceptor<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    credentials: &Credentials<'_>,
    our_challenge: &[u8; 32],
    their_challenge: &[u8; 32],
) -> Result<(), LinkError> {
    let Message::AuthResponse { mac: their_answer } = read_message(stream).await? else {
        return Err(LinkError::Protocol("expected AuthResponse".into()));
    };
    if !credentials.verifies(our_challenge, &their_answer) {
        let _ = write_message(stream, &Message::AuthResult { ok: false }).await;
        return Err(credentials.wrong_mac());
    }
    write_message(
        stream,
        &Message::AuthResponse {
            mac: credentials.answer(their_challenge),
        },
    )
    .await?;
    write_message(stream, &Message::AuthResult { ok: true }).await?;
    match read_message(stream).await? {
        Message::AuthResult { ok: true } => Ok(()),
        Message::AuthResult { ok: false } => Err(credentials.rejected()),
        _ => Err(LinkError::Protocol("expected AuthResult".into())),
    }
}

/// Whether `answer` proves the peer (`peer_node_id`) knows the secret for *our* fresh
/// `challenge`: an answer recorded from an earlier handshake (another challenge) or reflected
/// from us (another node id) fails.
fn answer_is_valid(
    algorithm: &str,
    secret: &str,
    challenge: &[u8; 32],
    peer_node_id: u8,
    resource: &str,
    answer: &[u8],
) -> bool {
    let expected = mac(
        algorithm,
        secret,
        &auth_mac_input(challenge, peer_node_id, resource),
    );
    constant_time_eq(&expected, answer)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Check their Hello; on a mismatch tell them why before failing.
async fn check_or_refuse(
    stream: &mut LinkStream,
    expect: &HelloExpect,
    theirs: &Hello,
) -> Result<(), LinkError> {
    if let Err(error) = check_hello(expect, theirs) {
        let _ = write_message(stream, &error.refuse()).await;
        return Err(LinkError::Refused(error.to_string()));
    }
    Ok(())
}

/// A TCP connection to `peer` from this node's address on that connection, as DRBD makes it:
/// the peer accepts connections only from the address it has configured for us, which need
/// not be the one the routing table would pick (a host with several addresses).
async fn dial(peer: &PeerInfo) -> Result<TcpStream, LinkError> {
    let socket = if peer.address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    let local = peer.local_address.ip();
    if !local.is_unspecified() && local.is_ipv4() == peer.address.is_ipv4() {
        socket.bind(SocketAddr::new(local, 0))?;
    }
    Ok(socket.connect(peer.address).await?)
}

/// Connect one socket of a pair as the initiator.
async fn initiate_socket(
    resource: &Resource,
    peer: &PeerInfo,
    kind: SocketKind,
    session: [u8; 16],
) -> Result<LinkStream, LinkError> {
    let tcp = dial(peer).await?;
    tune_socket(&tcp, &peer.net);
    let mut stream = match &resource.tls {
        Some(tls) => LinkStream::Client(Box::new(
            tls.connect(peer.node_id, tcp)
                .await
                .map_err(LinkError::Auth)?,
        )),
        None => LinkStream::Plain(tcp),
    };
    let expect = hello_expect(resource, peer);
    let ours = expect.to_hello(kind, fresh_nonces(session));
    write_message(&mut stream, &Message::Hello(ours.clone())).await?;
    let theirs = match read_message(&mut stream).await? {
        Message::Hello(hello) => hello,
        Message::Refuse { reason } => {
            return Err(LinkError::Refused(format!("peer refused: {reason}")))
        }
        _ => return Err(LinkError::Protocol("expected Hello".into())),
    };
    check_or_refuse(&mut stream, &expect, &theirs).await?;
    if theirs.socket != kind || theirs.session != session {
        return Err(LinkError::Protocol(
            "peer answered for another socket or session".into(),
        ));
    }
    authenticate(
        &mut stream,
        resource,
        peer,
        (&ours, &theirs),
        Side::Initiator,
    )
    .await?;
    Ok(stream)
}

/// Connect both sockets to `peer`.
pub(crate) async fn connect_pair(
    resource: &Resource,
    peer: &PeerInfo,
) -> Result<SocketPair, LinkError> {
    let mut session = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut session);
    let attempt = async {
        let data = initiate_socket(resource, peer, SocketKind::Data, session).await?;
        let control = initiate_socket(resource, peer, SocketKind::Control, session).await?;
        Ok((data, control))
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt)
        .await
        .map_err(|_| LinkError::Timeout)?
}

fn tune_socket(stream: &TcpStream, net: &config::NetOptions) {
    let _ = stream.set_nodelay(true);
    let socket = socket2::SockRef::from(stream);
    if net.sndbuf_size_bytes > 0 {
        let _ = socket
            .set_send_buffer_size(usize::try_from(net.sndbuf_size_bytes).unwrap_or(usize::MAX));
    }
    if net.rcvbuf_size_bytes > 0 {
        let _ = socket
            .set_recv_buffer_size(usize::try_from(net.rcvbuf_size_bytes).unwrap_or(usize::MAX));
    }
}

/// Where accepted pairs go: one channel per peer, and data sockets waiting for their partner.
#[derive(Debug, Default)]
pub(crate) struct Acceptor {
    pub(crate) handoff: HashMap<u8, mpsc::Sender<SocketPair>>,
    pending: Mutex<Vec<([u8; 16], u8, LinkStream)>>,
}

impl Acceptor {
    pub(crate) fn new(handoff: HashMap<u8, mpsc::Sender<SocketPair>>) -> Acceptor {
        Acceptor {
            handoff,
            pending: Mutex::new(Vec::new()),
        }
    }
}

/// How often a listener reports the refusals its log held back (a fraction of the interval,
/// so a summary comes at most this much after its window ended).
const REFUSAL_EXPIRY_TICK: Duration = Duration::from_secs(5);

/// One listener's edge (see `edge`): whom it accepts, its handshakes in progress (each with
/// the sender that stops it), and the rate limit of its refusal lines.
struct Gate {
    resource: String,
    sources: SourceFilter,
    slots: Mutex<HandshakeSlots<oneshot::Sender<()>>>,
    refusals: Mutex<RefusalLog>,
}

impl Gate {
    fn new(resource: &Resource) -> Gate {
        Gate {
            resource: resource.name.clone(),
            sources: SourceFilter::new(resource.peers.iter().map(|peer| peer.address.ip())),
            slots: Mutex::new(HandshakeSlots::new(HANDSHAKES_IN_PROGRESS_MAX)),
            refusals: Mutex::new(RefusalLog::new(REFUSAL_LOG_INTERVAL, REFUSAL_ADDRESSES_MAX)),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HandshakeSlots<oneshot::Sender<()>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Log a refused connection, unless one from the same address was logged within the
    /// interval (then it is counted for the summary).
    fn refused(&self, from: SocketAddr, reason: &str) {
        let verdict = self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .note(from.ip(), reason, Instant::now());
        match verdict {
            Refusal::Log {
                suppressed_before: 0,
            } => {
                tracing::warn!(resource = %self.resource, %from, "refused incoming connection: \
                    {reason} (further refusals from this \
                    address are logged once per {}s)", REFUSAL_LOG_INTERVAL.as_secs());
            }
            Refusal::Log { suppressed_before } => {
                tracing::warn!(
                    resource = %self.resource, %from,
                    "refused incoming connection: {reason} ({suppressed_before} more refused \
                     before from this address)"
                );
            }
            Refusal::Suppress => {}
        }
    }

    /// Log what the refusal log held back in windows that ended.
    fn summarize(&self) {
        let summaries = self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .expire(Instant::now());
        for Summary {
            source,
            suppressed,
            last_reason,
        } in summaries
        {
            let source = source.map_or_else(|| "other addresses".to_owned(), |ip| ip.to_string());
            tracing::warn!(resource = %self.resource, "refused {suppressed} more incoming \
                connections from {source} in the last {}s (the \
                last: {last_reason})", REFUSAL_LOG_INTERVAL.as_secs());
        }
    }
}

/// An admitted handshake's slot, released when the handshake ends however it ends.
struct SlotGuard {
    gate: Arc<Gate>,
    ticket: Ticket,
}

impl SlotGuard {
    fn advance(&self, stage: Stage) {
        self.gate.slots().advance(self.ticket, stage);
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let _ = self.gate.slots().release(self.ticket);
    }
}

/// Accept connections for one resource forever.
///
/// A connection from an address that is no peer's is closed at once, before anything is read
/// from it; the others run their handshake in a slot of the listener's
/// [`HANDSHAKES_IN_PROGRESS_MAX`], within [`HANDSHAKE_TIMEOUT`].
pub(crate) async fn listen(
    resource: Arc<Resource>,
    listener: TcpListener,
    acceptor: Arc<Acceptor>,
) {
    let gate = Arc::new(Gate::new(&resource));
    let mut expiry = tokio::time::interval(REFUSAL_EXPIRY_TICK);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = expiry.tick() => {
                gate.summarize();
                continue;
            }
        };
        let (stream, from) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                tracing::warn!(resource = %resource.name, "accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !gate.sources.allows(from.ip()) {
            drop(stream);
            gate.refused(from, "not the address of a peer of this resource");
            continue;
        }
        let (stop_tx, stop_rx) = oneshot::channel();
        let admitted = gate.slots().admit(stop_tx);
        if let Some(evicted) = admitted.evicted {
            let _ = evicted.send(());
        }
        let slot = SlotGuard {
            gate: Arc::clone(&gate),
            ticket: admitted.ticket,
        };
        tokio::spawn(run_accepted(
            Arc::clone(&resource),
            Arc::clone(&acceptor),
            Accepted {
                tcp: stream,
                from,
                slot,
            },
            stop_rx,
        ));
    }
}

/// A connection admitted by a listener, with its handshake slot.
struct Accepted {
    tcp: TcpStream,
    from: SocketAddr,
    slot: SlotGuard,
}

/// Run one accepted connection's handshake until it succeeds, fails, times out or loses its
/// slot to a newer connection (`stop`); the socket is closed on every failure.
async fn run_accepted(
    resource: Arc<Resource>,
    acceptor: Arc<Acceptor>,
    accepted: Accepted,
    mut stop: oneshot::Receiver<()>,
) {
    let (from, gate) = (accepted.from, Arc::clone(&accepted.slot.gate));
    let handshake = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        accept_socket(&resource, &acceptor, accepted),
    );
    let result = tokio::select! {
        result = handshake => result.unwrap_or(Err(LinkError::Timeout)),
        Ok(()) = &mut stop => Err(LinkError::Evicted),
    };
    if let Err(error) = result {
        gate.refused(from, &error.to_string());
    }
}

async fn accept_socket(
    resource: &Arc<Resource>,
    acceptor: &Acceptor,
    Accepted { tcp, from, slot }: Accepted,
) -> Result<(), LinkError> {
    let mut stream = match &resource.tls {
        // Nothing of tandem's crosses before a pinned certificate did.
        Some(tls) => LinkStream::Server(Box::new(tls.accept(tcp).await.map_err(LinkError::Auth)?)),
        None => LinkStream::Plain(tcp),
    };
    let theirs = match read_message(&mut stream).await? {
        Message::Hello(hello) => hello,
        _ => return Err(LinkError::Protocol("expected Hello".into())),
    };
    let Some(peer) = resource
        .peers
        .iter()
        .find(|p| p.node_id == theirs.from_node)
    else {
        let reason = format!(
            "node {} is not a peer of {} here",
            theirs.from_node, resource.name
        );
        send_refuse(&mut stream, &reason).await;
        return Err(LinkError::Refused(reason));
    };
    if !edge::same_host(from.ip(), peer.address.ip()) {
        // Another peer's host claims to be this one: no answer, not even a Refuse.
        return Err(LinkError::Refused(format!(
            "the Hello claims to be {}, whose address is {}",
            peer.name,
            peer.address.ip()
        )));
    }
    if !wants_link(resource, peer.node_id) {
        // StandAlone towards this peer (or down): a link accepted now would look Connected
        // to the peer while nothing here runs it, and its writes would wait for it.
        let reason = format!("{} is StandAlone towards {} here", resource.name, peer.name);
        send_refuse(&mut stream, &reason).await;
        return Err(LinkError::Refused(reason));
    }
    if let Some(tls) = &resource.tls {
        if let Err(reason) = tls.check_peer(peer.node_id, stream.presented()) {
            send_refuse(&mut stream, &reason).await;
            return Err(LinkError::Auth(format!("peer {}: {reason}", peer.name)));
        }
    }
    tune_socket(stream.tcp(), &peer.net);
    let expect = hello_expect(resource, peer);
    check_or_refuse(&mut stream, &expect, &theirs).await?;
    slot.advance(Stage::Introduced);
    let ours = expect.to_hello(theirs.socket, fresh_nonces(theirs.session));
    write_message(&mut stream, &Message::Hello(ours.clone())).await?;
    authenticate(
        &mut stream,
        resource,
        peer,
        (&ours, &theirs),
        Side::Acceptor,
    )
    .await?;
    hand_off(acceptor, &theirs, peer.node_id, stream)
}

/// Tells the peer why its connection is refused; the link fails either way.
async fn send_refuse(stream: &mut LinkStream, reason: &str) {
    let refuse = Message::Refuse {
        reason: wire::truncate_text(reason),
    };
    let _ = write_message(stream, &refuse).await;
}

/// An accepted, authenticated socket: a data socket waits for its control socket, which hands
/// both to the peer's link.
fn hand_off(
    acceptor: &Acceptor,
    theirs: &Hello,
    node_id: u8,
    stream: LinkStream,
) -> Result<(), LinkError> {
    let mut pending = acceptor.pending.lock().unwrap_or_else(|p| p.into_inner());
    match theirs.socket {
        SocketKind::Data => {
            if pending.len() >= PENDING_SOCKETS_MAX {
                pending.remove(0);
            }
            pending.push((theirs.session, node_id, stream));
        }
        SocketKind::Control => {
            let index = pending
                .iter()
                .position(|(s, p, _)| *s == theirs.session && *p == node_id);
            let Some(index) = index else {
                return Err(LinkError::Protocol(
                    "control socket without a data socket".into(),
                ));
            };
            let (_, _, data) = pending.remove(index);
            if let Some(handoff) = acceptor.handoff.get(&node_id) {
                let _ = handoff.try_send((data, stream));
            }
        }
    }
    Ok(())
}

// ----- an established link --------------------------------------------------------------

/// Run one established link until it fails or is killed; report the end to the engine.
async fn run_link(
    resource: &Arc<Resource>,
    peer: &PeerInfo,
    (data, control): SocketPair,
    mut replaced: Option<&mut mpsc::Receiver<SocketPair>>,
) -> Option<SocketPair> {
    // A duplicate descriptor lets adjust and the manager change sndbuf-size while it runs.
    let socket = std::os::fd::AsFd::as_fd(data.tcp())
        .try_clone_to_owned()
        .ok();
    if let Some(socket) = &socket {
        // The setting may have changed live since the node started.
        let _ =
            crate::link_tuning::apply_sndbuf(socket, resource.tuning(peer.node_id).sndbuf_bytes());
    }
    let (data_read, data_write) = data.into_split();
    let (control_read, control_write) = control.into_split();
    let (data_tx, data_rx) = mpsc::unbounded_channel();
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (kill_tx, mut kill_rx) = watch::channel(Stop::Running);
    let (generation, buffer) = resource.link_up(peer.node_id, data_tx, control_tx, kill_tx, socket);
    resource
        .link_tasks
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    tracing::info!(resource = %resource.name, peer = %peer.name, "connected");
    let mut tasks = JoinSet::new();
    tasks.spawn(send_data(
        Arc::clone(resource),
        peer.clone(),
        data_rx,
        data_write,
        buffer,
    ));
    tasks.spawn(send_control(control_rx, control_write));
    let receivers = [
        tasks.spawn(receive_data(Arc::clone(resource), peer.clone(), data_read)),
        tasks.spawn(receive_control(
            Arc::clone(resource),
            peer.node_id,
            control_read,
        )),
    ];
    let mut next = None;
    let error = tokio::select! {
        Some(result) = tasks.join_next_with_id() => {
            link_task_ended(&mut tasks, &receivers, result).await
        }
        _ = kill_rx.changed() => {
            if *kill_rx.borrow() == Stop::Drain {
                drain_senders(&mut tasks, &receivers).await;
            }
            LinkError::ClosedLocally
        }
        Some(pair) = async {
            match replaced.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        } => {
            next = Some(pair);
            LinkError::PeerDisconnected("peer reconnected".into())
        }
    };
    tasks.abort_all();
    resource.link_down(
        peer.node_id,
        generation,
        error.conn_state(),
        error.to_string(),
    );
    resource
        .link_tasks
        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    next
}

/// One of a link's tasks (`receivers`: the data and control receivers, the others the two
/// senders) ended with `result`: why the link ends, once what still matters has been given
/// its bounded chance (the peer's last messages received, or ours sent).
async fn link_task_ended(
    tasks: &mut JoinSet<LinkError>,
    receivers: &[tokio::task::AbortHandle; 2],
    result: Result<(tokio::task::Id, LinkError), tokio::task::JoinError>,
) -> LinkError {
    let (id, error) = match result {
        Ok(ended) => ended,
        Err(join) => return LinkError::Protocol(format!("link task failed: {join}")),
    };
    if let LinkError::ClosedLocally = error {
        // A sender reached the engine's Close before the kill was seen: the other sender
        // still has what was queued before its own Close (a departure's last disk states,
        // the goodbye), so drain as the kill would.
        drain_senders(tasks, receivers).await;
        return error;
    }
    let closing = matches!(error, LinkError::Closed | LinkError::PeerDisconnected(_));
    let [data, control] = [receivers[0].id(), receivers[1].id()];
    let other = if id == data {
        control
    } else if id == control {
        data
    } else {
        return error;
    };
    if !closing {
        return error;
    }
    // The peer is closing (one of its sockets ended): what it sent on the other socket
    // before (its last handshake, its last disk states, its goodbye) still reaches the
    // engine, within a bound; the goodbye's reason is the one reported.
    let other_ended = async {
        while let Some(done) = tasks.join_next_with_id().await {
            match done {
                Ok((id, error)) if id == other => return Some(error),
                Err(join) if join.id() == other => return None,
                _ => {}
            }
        }
        None
    };
    match tokio::time::timeout(DRAIN_TIMEOUT, other_ended).await {
        Ok(Some(goodbye @ LinkError::PeerDisconnected(_)))
            if !matches!(error, LinkError::PeerDisconnected(_)) =>
        {
            goodbye
        }
        _ => error,
    }
}

/// The engine dropped the peer: nothing more is received, but what it queued before (its
/// last handshake message, a departure's disk states, the goodbye) is sent, within a bound.
async fn drain_senders(tasks: &mut JoinSet<LinkError>, receivers: &[tokio::task::AbortHandle]) {
    receivers.iter().for_each(tokio::task::AbortHandle::abort);
    let drained = async { while tasks.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, drained).await;
}

/// Protocol A's writes waiting for their frames to reach the socket are reported sent at
/// least every this many, even while the queue never runs empty.
const SENT_REPORT_MAX: usize = 16;

async fn send_data(
    resource: Arc<Resource>,
    peer: PeerInfo,
    queue: mpsc::UnboundedReceiver<Outgoing>,
    socket: LinkWriter,
    buffer: Arc<AsyncBuffer>,
) -> LinkError {
    let mut writer = BufWriter::with_capacity(STREAM_BUFFER_BYTES, socket);
    let mut sent = Vec::new();
    let mut header = Vec::with_capacity(64);
    let mut queue = queue;
    loop {
        // Idle for a moment, or protocol A's writes waiting: push out what is buffered (under
        // load frames batch up), then complete those writes: they are in the socket. Waiting
        // for an empty queue alone would hold them as long as a busy client keeps it filled.
        if queue.is_empty() || sent.len() >= SENT_REPORT_MAX {
            if let Err(error) = writer.flush().await {
                return error.into();
            }
            if !sent.is_empty() {
                let seqs = std::mem::take(&mut sent);
                resource.step(|engine, now, out| {
                    seqs.iter()
                        .for_each(|&seq| engine.peer_sent(now, peer.node_id, seq, out))
                });
            }
        }
        let Some(item) = queue.recv().await else {
            return LinkError::ClosedLocally;
        };
        if let Outgoing::Close { .. } = item {
            // The goodbye itself goes on the control socket (its frame kind belongs there);
            // this socket just ends after everything queued before it.
            let _ = writer.flush().await;
            return LinkError::ClosedLocally;
        }
        header.clear();
        let report_sent = matches!(
            item,
            Outgoing::Data {
                report_sent: true,
                ..
            }
        );
        let buffered = match item {
            Outgoing::Data { buffered, .. } => buffered,
            _ => 0,
        };
        let (seq, body) = match encode_outgoing(item, &mut header, buffer.compression()) {
            Ok(pair) => pair,
            Err(error) => return error,
        };
        if let Err(error) = writer.write_all(&header).await {
            return error.into();
        }
        let sent_body = match body {
            Some(Body::Payload(payload)) => send_payload(&mut writer, &payload.data).await,
            Some(Body::Packed(bytes)) => writer.write_all(&bytes).await.map_err(LinkError::from),
            None => Ok(()),
        };
        if let Err(error) = sent_body {
            return error;
        }
        if let (Some(seq), true) = (seq, report_sent) {
            sent.push(seq);
        }
        if buffered > 0 {
            buffer.release(buffered);
        }
    }
}

/// The end of a link the engine dropped: tell the peer why, after everything queued before.
async fn close(writer: &mut BufWriter<LinkWriter>, reason: String) -> LinkError {
    let mut bytes = Vec::new();
    let goodbye = Message::Disconnect {
        reason: wire::truncate_text(&reason),
    };
    if goodbye.encode(0, &mut bytes).is_ok() {
        let _ = writer.write_all(&bytes).await;
    }
    let _ = writer.flush().await;
    LinkError::ClosedLocally
}

/// A payload still arriving is sent in pieces of at least this much (except the last).
const SEND_PIECE_BYTES_MIN: usize = 128 * 1024;
/// Zeroes to complete the frame of a payload that stopped arriving.
static PADDING: [u8; 64 * 1024] = [0; 64 * 1024];

/// Send a write's payload; one still arriving is passed on piece by piece as it arrives
/// (cut-through), straight to the socket rather than through the stream buffer. If it stops
/// arriving, the frame is completed with zeroes: the primary's failed local write then marks
/// the blocks out of sync for this peer, so the zeroes are never taken for data.
async fn send_payload(
    writer: &mut BufWriter<LinkWriter>,
    data: &Incoming,
) -> Result<(), LinkError> {
    if let Some(bytes) = data.as_complete() {
        writer.write_all(bytes).await?;
        return Ok(());
    }
    writer.flush().await?;
    let mut sent = 0;
    while sent < data.len() {
        match data.wait(sent.saturating_add(SEND_PIECE_BYTES_MIN)).await {
            Ok(available) => {
                writer.get_mut().write_all(&available[sent..]).await?;
                sent = available.len();
            }
            Err(_) => {
                let padding = (data.len() - sent).min(PADDING.len());
                writer.get_mut().write_all(&PADDING[..padding]).await?;
                sent += padding;
            }
        }
    }
    Ok(())
}

/// What follows a frame's message part on the wire.
enum Body {
    /// The payload as it is (possibly still arriving).
    Payload(Payload),
    /// A compressed payload (see `wire::compress`).
    Packed(Vec<u8>),
}

/// Encode a data-socket frame; returns its sequence number and body, if any. A write's
/// complete payload is compressed with `compression` when that makes it smaller.
fn encode_outgoing(
    item: Outgoing,
    out: &mut Vec<u8>,
    compression: Option<wire::Compression>,
) -> Result<(Option<u64>, Option<Body>), LinkError> {
    match item {
        Outgoing::Data {
            seq,
            epoch,
            volume,
            op,
            ..
        } => encode_disk_op((seq, epoch, volume), op, out, compression),
        Outgoing::Barrier { epoch, flush } => {
            Message::Barrier { epoch, flush }.encode(0, out)?;
            Ok((None, None))
        }
        Outgoing::OnData(PeerMessage::ResyncReply {
            id,
            volume,
            offset,
            data,
            ..
        }) => {
            let length = u32::try_from(data.data.len())
                .map_err(|_| LinkError::Protocol("resync reply too long".into()))?;
            Message::ResyncReply(wire::ResyncReplyHeader { id, volume, offset })
                .encode(length, out)?;
            Ok((None, Some(Body::Payload(data))))
        }
        Outgoing::OnData(PeerMessage::ReadReply {
            id,
            volume,
            offset,
            data,
            ..
        }) => {
            let length = u32::try_from(data.data.len())
                .map_err(|_| LinkError::Protocol("read reply too long".into()))?;
            Message::ReadReply(wire::ResyncReplyHeader { id, volume, offset })
                .encode(length, out)?;
            Ok((None, Some(Body::Payload(data))))
        }
        Outgoing::OnData(message) => match sync_to_wire(message)? {
            Some(message) => {
                message.encode(0, out)?;
                Ok((None, None))
            }
            None => Err(LinkError::Protocol(
                "control message queued on the data socket".into(),
            )),
        },
        Outgoing::Control(_) | Outgoing::Close { .. } => Err(LinkError::Protocol(
            "control message queued on the data socket".into(),
        )),
    }
}

/// Encode a replicated write, trim or write-zeroes of `volume` (with its `seq` and `epoch`); see
/// [`encode_outgoing`].
fn encode_disk_op(
    (seq, epoch, volume): (u64, u64, u16),
    op: DiskOp<Payload>,
    out: &mut Vec<u8>,
    compression: Option<wire::Compression>,
) -> Result<(Option<u64>, Option<Body>), LinkError> {
    let range = |seq, epoch, volume, offset, length: u64| -> Result<RangeHeader, LinkError> {
        let length =
            u32::try_from(length).map_err(|_| LinkError::Protocol("range too long".into()))?;
        Ok(RangeHeader {
            seq,
            epoch,
            volume,
            offset,
            length,
        })
    };
    match op {
        DiskOp::Write {
            offset, data, fua, ..
        } => {
            let flags = if fua { wire::DATA_FLAG_FUA } else { 0 };
            let packed = compression
                .zip(data.data.as_complete())
                .and_then(|(c, bytes)| Some((c, wire::compress(c, bytes)?)));
            if let Some((compression, packed)) = packed {
                let length = u32::try_from(packed.len())
                    .map_err(|_| LinkError::Protocol("write too long".into()))?;
                Message::Data(DataHeader {
                    seq,
                    epoch,
                    volume,
                    flags: flags | compression.flag(),
                    offset,
                })
                .encode(length, out)?;
                return Ok((Some(seq), Some(Body::Packed(packed))));
            }
            let length = u32::try_from(data.data.len())
                .map_err(|_| LinkError::Protocol("write too long".into()))?;
            Message::Data(DataHeader {
                seq,
                epoch,
                volume,
                flags,
                offset,
            })
            .encode(length, out)?;
            Ok((Some(seq), Some(Body::Payload(data))))
        }
        DiskOp::Trim { offset, length, .. } => {
            Message::Trim(range(seq, epoch, volume, offset, length)?).encode(0, out)?;
            Ok((Some(seq), None))
        }
        DiskOp::WriteZeroes { offset, length, .. } => {
            Message::WriteZeroes(range(seq, epoch, volume, offset, length)?).encode(0, out)?;
            Ok((Some(seq), None))
        }
    }
}

async fn send_control(
    mut queue: mpsc::UnboundedReceiver<Outgoing>,
    socket: LinkWriter,
) -> LinkError {
    let mut writer = BufWriter::with_capacity(64 * 1024, socket);
    let mut bytes = Vec::with_capacity(64);
    loop {
        if queue.is_empty() {
            if let Err(error) = writer.flush().await {
                return error.into();
            }
        }
        let Some(item) = queue.recv().await else {
            return LinkError::ClosedLocally;
        };
        if let Outgoing::Close { reason } = item {
            return close(&mut writer, reason).await;
        }
        let Outgoing::Control(message) = item else {
            return LinkError::Protocol("data frame queued on the control socket".into());
        };
        bytes.clear();
        let Some(message) = control_to_wire(message) else {
            return LinkError::Protocol("data-socket message queued on the control socket".into());
        };
        if let Err(error) = message.encode(0, &mut bytes) {
            return error.into();
        }
        if let Err(error) = writer.write_all(&bytes).await {
            return error.into();
        }
    }
}

/// Messages decoded from what is already buffered are handed to the engine together, at most
/// this many at a time (one lock for many acks or writes under load).
const RECEIVE_BATCH_MAX: usize = 64;

async fn receive_data(resource: Arc<Resource>, peer: PeerInfo, socket: LinkReader) -> LinkError {
    let mut reader = BufReader::with_capacity(STREAM_BUFFER_BYTES, socket);
    let pages_max = peer.net.max_buffers.max(1);
    let budget = Arc::new(Semaphore::new(pages_max as usize));
    let mut batch = Vec::with_capacity(RECEIVE_BATCH_MAX);
    // Under protocol B the engine acknowledges receipt when it is handed a write, so the
    // payload must be all here by then; under A and C a large payload is handed over while
    // it still arrives, and written as it does.
    let streaming = peer.net.protocol != config::Protocol::B;
    let frames = Frames {
        resource: &resource,
        peer: peer.node_id,
        budget: &budget,
        pages_max,
        streaming,
    };
    loop {
        let (message, filler) = match frames.receive(&mut reader, &mut batch).await {
            Ok(received) => received,
            Err(error) => {
                // What arrived before the end still counts (the peer's last handshake, say).
                deliver(&resource, peer.node_id, &mut batch);
                return error;
            }
        };
        batch.push(message);
        if let Some(filler) = filler {
            deliver(&resource, peer.node_id, &mut batch);
            if let Err(error) = fill(&mut reader, filler).await {
                return error;
            }
            continue;
        }
        if !whole_frame_buffered(reader.buffer()) || batch.len() >= RECEIVE_BATCH_MAX {
            deliver(&resource, peer.node_id, &mut batch);
        }
    }
}

/// Read the rest of a payload that is being streamed: first what the reader has buffered,
/// then straight from the socket (no copy through the stream buffer).
async fn fill(reader: &mut BufReader<LinkReader>, mut filler: Filler) -> Result<(), LinkError> {
    let buffered = reader.buffer();
    let take = buffered.len().min(filler.remaining());
    filler.spare()[..take].copy_from_slice(&buffered[..take]);
    reader.consume(take);
    filler.advance(take);
    while filler.remaining() > 0 {
        let read = reader.get_mut().read(filler.spare()).await?;
        if read == 0 {
            return Err(LinkError::Closed);
        }
        filler.advance(read);
    }
    Ok(())
}

/// Whether `buffered` starts with a whole frame, so decoding it will not wait for the network.
fn whole_frame_buffered(buffered: &[u8]) -> bool {
    let Some(header) = buffered.first_chunk::<FRAME_HEADER_LEN>() else {
        return false;
    };
    let Ok(header) = FrameHeader::decode(header) else {
        return false;
    };
    let body = usize::try_from(header.body_len).unwrap_or(usize::MAX);
    buffered.len() - FRAME_HEADER_LEN >= body
}

/// Hand a batch of received messages to the engine, in order, under one lock.
fn deliver(resource: &Arc<Resource>, peer: u8, batch: &mut Vec<PeerMessage<Payload>>) {
    if !batch.is_empty() {
        resource.step(|engine, now, out| {
            batch
                .drain(..)
                .for_each(|message| engine.peer_message(now, peer, message, out))
        });
    }
}

/// Payloads this long or longer are streamed (see `receive_data`).
const STREAM_RECEIVE_BYTES_MIN: usize = 128 * 1024;

/// What the data-socket receiver needs to turn frames into engine messages.
struct Frames<'a> {
    resource: &'a Arc<Resource>,
    peer: u8,
    budget: &'a Arc<Semaphore>,
    pages_max: u32,
    streaming: bool,
}

impl Frames<'_> {
    /// Receive-buffer pages (`max-buffers`) for a payload of `length` bytes, waiting for
    /// earlier payloads to be written if the budget is spent.
    async fn permit(
        &self,
        length: u32,
        batch: &mut Vec<PeerMessage<Payload>>,
    ) -> Result<OwnedSemaphorePermit, LinkError> {
        let pages = length.div_ceil(PAGE_BYTES).clamp(1, self.pages_max);
        match Arc::clone(self.budget).try_acquire_many_owned(pages) {
            Ok(permit) => Ok(permit),
            Err(_) => {
                // The budget is spent: the batch must reach the engine first, or the writes
                // holding the budget would never be issued and released.
                deliver(self.resource, self.peer, batch);
                Arc::clone(self.budget)
                    .acquire_many_owned(pages)
                    .await
                    .map_err(|_| LinkError::Closed)
            }
        }
    }

    /// A write whose payload arrives compressed: read it whole, then inflate it into a pool
    /// buffer of the announced length (within the same `max-buffers` budget as a plain one).
    async fn receive_packed(
        &self,
        reader: &mut BufReader<LinkReader>,
        header: &FrameHeader,
        h: DataHeader,
        batch: &mut Vec<PeerMessage<Payload>>,
    ) -> Result<(PeerMessage<Payload>, Option<Filler>), LinkError> {
        let compression = wire::Compression::from_flags(h.flags)?
            .ok_or_else(|| LinkError::Protocol("compressed frame without a compression".into()))?;
        let mut packed = vec![0; header.payload_len() as usize];
        reader.read_exact(&mut packed).await?;
        let length = wire::uncompressed_len(&packed)?;
        let permit = self.permit(length, batch).await?;
        let mut buf = self
            .resource
            .pool
            .take(length as usize)
            .ok_or_else(|| LinkError::Protocol("payload too large".into()))?;
        wire::decompress(compression, &packed, &mut buf)?;
        let data = Payload {
            data: Incoming::complete(buf),
            _permit: Some(Arc::new(permit)),
        };
        Ok((replicated_write(&h, length, data), None))
    }

    /// The next frame as an engine message; for a streamed payload also the filler that the
    /// caller must fill from the socket (after handing the message to the engine).
    async fn receive(
        &self,
        reader: &mut BufReader<LinkReader>,
        batch: &mut Vec<PeerMessage<Payload>>,
    ) -> Result<(PeerMessage<Payload>, Option<Filler>), LinkError> {
        let header = read_header(reader).await?;
        let kind = header.check()?;
        if !kind.allowed_on(SocketKind::Data) {
            return Err(LinkError::Protocol(format!(
                "{kind:?} frame on the data socket"
            )));
        }
        match read_body(reader, &header).await? {
            Message::Data(h) if h.flags & (wire::DATA_FLAG_LZ4 | wire::DATA_FLAG_ZSTD) != 0 => {
                self.receive_packed(reader, &header, h, batch).await
            }
            Message::Data(h) => self.receive_write(reader, &header, h, batch).await,
            Message::ResyncReply(h) => {
                let length = header.payload_len();
                let data = self.read_payload(reader, length, batch).await?;
                Ok((
                    PeerMessage::ResyncReply {
                        id: h.id,
                        volume: h.volume,
                        offset: h.offset,
                        length: u64::from(length),
                        data,
                    },
                    None,
                ))
            }
            Message::ReadReply(h) => {
                let length = header.payload_len();
                let data = self.read_payload(reader, length, batch).await?;
                Ok((
                    PeerMessage::ReadReply {
                        id: h.id,
                        volume: h.volume,
                        offset: h.offset,
                        length: u64::from(length),
                        data,
                    },
                    None,
                ))
            }
            Message::Trim(h) => Ok((range_message(h, false), None)),
            Message::WriteZeroes(h) => Ok((range_message(h, true), None)),
            Message::Barrier { epoch, flush } => Ok((PeerMessage::Barrier { epoch, flush }, None)),
            Message::Disconnect { reason } => Err(LinkError::PeerDisconnected(reason)),
            other => match sync_from_wire(&other)? {
                Some(message) => Ok((message, None)),
                None => Err(LinkError::Protocol(format!(
                    "unexpected {:?} on the data socket",
                    other.kind()
                ))),
            },
        }
    }

    /// A replicated write's payload, read whole or (`streaming`) left to the returned filler.
    async fn receive_write(
        &self,
        reader: &mut BufReader<LinkReader>,
        header: &FrameHeader,
        h: DataHeader,
        batch: &mut Vec<PeerMessage<Payload>>,
    ) -> Result<(PeerMessage<Payload>, Option<Filler>), LinkError> {
        let resource = self.resource;
        let length = header.payload_len();
        let permit = self.permit(length, batch).await?;
        let mut buf = resource
            .pool
            .take(length as usize)
            .ok_or_else(|| LinkError::Protocol("payload too large".into()))?;
        let (data, filler) = if self.streaming && buf.len() >= STREAM_RECEIVE_BYTES_MIN {
            let (filler, data) = Incoming::filling(buf);
            (data, Some(filler))
        } else {
            reader.read_exact(&mut buf).await?;
            (Incoming::complete(buf), None)
        };
        let data = Payload {
            data,
            _permit: Some(Arc::new(permit)),
        };
        Ok((replicated_write(&h, length, data), filler))
    }

    /// A payload of `length` bytes read whole from the socket, under a buffer permit.
    async fn read_payload(
        &self,
        reader: &mut BufReader<LinkReader>,
        length: u32,
        batch: &mut Vec<PeerMessage<Payload>>,
    ) -> Result<Payload, LinkError> {
        let permit = self.permit(length, batch).await?;
        let mut buf = self
            .resource
            .pool
            .take(length as usize)
            .ok_or_else(|| LinkError::Protocol("payload too large".into()))?;
        reader.read_exact(&mut buf).await?;
        Ok(Payload {
            data: Incoming::complete(buf),
            _permit: Some(Arc::new(permit)),
        })
    }
}

/// A replicated write's frame as the engine's message.
fn replicated_write(h: &DataHeader, length: u32, data: Payload) -> PeerMessage<Payload> {
    let op = DiskOp::Write {
        offset: h.offset,
        length: u64::from(length),
        data,
        fua: h.fua(),
    };
    PeerMessage::Data {
        seq: h.seq,
        epoch: h.epoch,
        volume: h.volume,
        offset: h.offset,
        op,
    }
}

/// A trim or write-zeroes frame as the engine's message.
fn range_message(h: RangeHeader, zero: bool) -> PeerMessage<Payload> {
    let (offset, length) = (h.offset, u64::from(h.length));
    let op = if zero {
        DiskOp::WriteZeroes {
            offset,
            length,
            fua: false,
        }
    } else {
        DiskOp::Trim {
            offset,
            length,
            fua: false,
        }
    };
    PeerMessage::Data {
        seq: h.seq,
        epoch: h.epoch,
        volume: h.volume,
        offset,
        op,
    }
}

async fn receive_control(resource: Arc<Resource>, peer: u8, socket: LinkReader) -> LinkError {
    let mut reader = BufReader::with_capacity(64 * 1024, socket);
    let mut batch = Vec::with_capacity(RECEIVE_BATCH_MAX);
    loop {
        let message = match read_message(&mut reader).await.and_then(control_from_wire) {
            Ok(message) => message,
            Err(error) => {
                deliver(&resource, peer, &mut batch);
                return error;
            }
        };
        batch.push(message);
        if !whole_frame_buffered(reader.buffer()) || batch.len() >= RECEIVE_BATCH_MAX {
            deliver(&resource, peer, &mut batch);
        }
    }
}

// ----- supervisor -----------------------------------------------------------------------

/// Whether a link to `node` is wanted: the resource is up and the engine is not
/// StandAlone towards that peer.
fn wants_link(resource: &Resource, node: u8) -> bool {
    resource.with_engine(|e| e.wants_connection(node)) && !resource.is_down()
}

/// Keep the connection to one peer up while the engine wants it.
pub(crate) async fn supervise(
    resource: Arc<Resource>,
    peer: PeerInfo,
    mut accepted: mpsc::Receiver<SocketPair>,
) {
    let initiator = resource.node_id > peer.node_id;
    let mut changed = resource.changed.subscribe();
    let mut last_error = String::new();
    let mut next: Option<SocketPair> = None;
    loop {
        if !wants_link(&resource, peer.node_id) {
            next = None;
            // A pair accepted before the engine stopped wanting this peer is closed.
            while accepted.try_recv().is_ok() {}
            let _ = tokio::time::timeout(Duration::from_secs(1), changed.changed()).await;
            continue;
        }
        let pair = match next.take() {
            Some(pair) => pair,
            None if initiator => match connect_pair(&resource, &peer).await {
                Ok(pair) => pair,
                Err(error) => {
                    let message = error.to_string();
                    if message != last_error {
                        tracing::warn!(
                            resource = %resource.name, peer = %peer.name,
                            "cannot connect: {message}"
                        );
                        last_error = message;
                    }
                    let _ = tokio::time::timeout(peer.net.connect_int, changed.changed()).await;
                    continue;
                }
            },
            None => match tokio::time::timeout(Duration::from_secs(1), accepted.recv()).await {
                Ok(Some(pair)) => pair,
                Ok(None) => return,
                Err(_) => continue,
            },
        };
        last_error.clear();
        next = run_link(
            &resource,
            &peer,
            pair,
            (!initiator).then_some(&mut accepted),
        )
        .await;
        if next.is_none() && initiator {
            let _ = tokio::time::timeout(
                peer.net.connect_int.min(Duration::from_secs(1)),
                std::future::pending::<()>(),
            )
            .await;
        }
    }
}

/// The protocol a connection uses, in the engine's terms.
pub(crate) fn protocol_of(net: &config::NetOptions) -> Protocol {
    match net.protocol {
        config::Protocol::A => Protocol::A,
        config::Protocol::B => Protocol::B,
        config::Protocol::C => Protocol::C,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 7: a replayed handshake is refused. Every handshake draws a fresh challenge, and
    /// an answer is bound to the challenge, the answering node and the resource.
    #[test]
    fn a_replayed_or_reflected_answer_is_refused() {
        let (first, second) = (fresh_nonces([1; 16]), fresh_nonces([1; 16]));
        assert_ne!(first.challenge, second.challenge, "challenges are fresh");
        let recorded = mac(
            "sha256",
            "secret",
            &auth_mac_input(&first.challenge, 1, "r0"),
        );
        assert!(
            answer_is_valid("sha256", "secret", &first.challenge, 1, "r0", &recorded),
            "the genuine answer"
        );
        assert!(
            !answer_is_valid("sha256", "secret", &second.challenge, 1, "r0", &recorded),
            "replayed on a new challenge"
        );
        assert!(
            !answer_is_valid("sha256", "secret", &first.challenge, 0, "r0", &recorded),
            "reflected as another node"
        );
        assert!(
            !answer_is_valid("sha256", "secret", &first.challenge, 1, "r1", &recorded),
            "for another resource"
        );
        assert!(
            !answer_is_valid("sha256", "other", &first.challenge, 1, "r0", &recorded),
            "with another secret"
        );
    }

    fn credentials<'a>(secret: &'a str, local_node: u8, peer_node: u8) -> Credentials<'a> {
        Credentials {
            algorithm: "sha256",
            secret,
            resource: "r0",
            local_node,
            peer_node,
            peer_name: "peer",
        }
    }

    /// Every frame the other end sent until it closed.
    async fn frames_until_closed(stream: &mut tokio::io::DuplexStream) -> Vec<Message> {
        let mut frames = Vec::new();
        while let Ok(message) = read_message(stream).await {
            frames.push(message);
        }
        frames
    }

    /// Issue 27: the listener verifies the initiator's answer before it reveals its own, so a
    /// stranger who sends it a challenge (one a third node gave them) gets no MAC to relay:
    /// the only frame back is the refusal.
    #[tokio::test]
    async fn the_acceptor_reveals_nothing_to_a_wrong_answer() {
        let (mut stranger, mut listener) = tokio::io::duplex(4096);
        let (our_challenge, relayed_challenge) = (
            fresh_nonces([0; 16]).challenge,
            fresh_nonces([0; 16]).challenge,
        );
        let acceptor = tokio::spawn(async move {
            let credentials = credentials("secret", 0, 1);
            authenticate_acceptor(
                &mut listener,
                &credentials,
                &our_challenge,
                &relayed_challenge,
            )
            .await
        });
        write_message(&mut stranger, &Message::AuthResponse { mac: [7; MAC_LEN] })
            .await
            .expect("write");
        let frames = frames_until_closed(&mut stranger).await;
        assert_eq!(
            frames,
            vec![Message::AuthResult { ok: false }],
            "no AuthResponse before the peer proved the secret"
        );
        let error = acceptor
            .await
            .expect("task")
            .expect_err("a wrong answer fails");
        assert!(matches!(error, LinkError::Auth(_)), "{error}");
    }

    /// Both ends of the new order connect with equal secrets and refuse with different ones,
    /// each saying which side was wrong.
    #[tokio::test]
    async fn initiator_and_acceptor_agree() {
        for (initiator_secret, ok) in [("secret", true), ("other", false)] {
            let (mut dialler, mut listener) = tokio::io::duplex(4096);
            let (acceptor_challenge, initiator_challenge) = (
                fresh_nonces([0; 16]).challenge,
                fresh_nonces([0; 16]).challenge,
            );
            let initiator = async {
                let credentials = credentials(initiator_secret, 1, 0);
                authenticate_initiator(
                    &mut dialler,
                    &credentials,
                    &initiator_challenge,
                    &acceptor_challenge,
                )
                .await
            };
            let acceptor = async {
                let credentials = credentials("secret", 0, 1);
                let result = authenticate_acceptor(
                    &mut listener,
                    &credentials,
                    &acceptor_challenge,
                    &initiator_challenge,
                )
                .await;
                drop(listener);
                result
            };
            let (initiated, accepted) = tokio::join!(initiator, acceptor);
            assert_eq!(initiated.is_ok(), ok, "initiator: {initiated:?}");
            assert_eq!(accepted.is_ok(), ok, "acceptor: {accepted:?}");
            if !ok {
                assert!(initiated.is_err_and(|e| e.to_string().contains("rejected our MAC")));
            }
        }
    }

    /// Wire compatibility within protocol version 9: an acceptor built before issue 27 answers
    /// first (`AuthResponse`, then reads, then `AuthResult`); today's initiator still connects.
    #[tokio::test]
    async fn the_initiator_accepts_the_older_acceptor_order() {
        let (mut dialler, mut listener) = tokio::io::duplex(4096);
        let (acceptor_challenge, initiator_challenge) = (
            fresh_nonces([0; 16]).challenge,
            fresh_nonces([0; 16]).challenge,
        );
        let older_acceptor = async {
            let credentials = credentials("secret", 0, 1);
            write_message(
                &mut listener,
                &Message::AuthResponse {
                    mac: credentials.answer(&initiator_challenge),
                },
            )
            .await?;
            let Message::AuthResponse { mac } = read_message(&mut listener).await? else {
                return Err(LinkError::Closed);
            };
            let ok = credentials.verifies(&acceptor_challenge, &mac);
            write_message(&mut listener, &Message::AuthResult { ok }).await?;
            read_message(&mut listener).await.map(|_| ok)
        };
        let initiator = async {
            let credentials = credentials("secret", 1, 0);
            authenticate_initiator(
                &mut dialler,
                &credentials,
                &initiator_challenge,
                &acceptor_challenge,
            )
            .await
        };
        let (older, initiated) = tokio::join!(older_acceptor, initiator);
        assert!(initiated.is_ok(), "{initiated:?}");
        assert!(older.is_ok_and(|ok| ok));
    }

    /// A link's four tasks: the two receivers never end by themselves, the data sender ends
    /// at once with `first`, and the control sender records `sent` only after a while (a
    /// goodbye still on its way to the socket).
    fn link_tasks(
        first: LinkError,
        sent: Arc<std::sync::atomic::AtomicBool>,
    ) -> (JoinSet<LinkError>, [tokio::task::AbortHandle; 2]) {
        let mut tasks = JoinSet::new();
        tasks.spawn(async move { first });
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            sent.store(true, std::sync::atomic::Ordering::SeqCst);
            LinkError::ClosedLocally
        });
        let receivers = [
            tasks.spawn(std::future::pending()),
            tasks.spawn(std::future::pending()),
        ];
        (tasks, receivers)
    }

    /// The engine dropped a peer after queueing its last messages (a departure's Outdated
    /// disks, the goodbye); the data sender ends on its Close before the link's kill is seen.
    /// The control sender must still be given its time: the link used to abort it, and the
    /// Primary never heard the departure (a flaky quorum system test found it).
    #[tokio::test]
    async fn a_sender_that_closes_first_lets_the_other_send_what_was_queued() {
        let sent = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (mut tasks, receivers) = link_tasks(LinkError::ClosedLocally, Arc::clone(&sent));
        let first = tasks.join_next_with_id().await.expect("a task ends");
        let error = link_task_ended(&mut tasks, &receivers, first).await;
        assert!(matches!(error, LinkError::ClosedLocally), "{error}");
        assert!(
            sent.load(std::sync::atomic::Ordering::SeqCst),
            "the control sender finished before the link ended"
        );
        assert!(tasks.is_empty(), "every task ended or was aborted");
    }

    /// A sender that fails on its socket ends the link at once: nothing more can be sent.
    #[tokio::test]
    async fn a_sender_that_fails_ends_the_link_at_once() {
        let sent = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let broken = LinkError::Io(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        let (mut tasks, receivers) = link_tasks(broken, Arc::clone(&sent));
        let first = tasks.join_next_with_id().await.expect("a task ends");
        let error = link_task_ended(&mut tasks, &receivers, first).await;
        assert!(matches!(error, LinkError::Io(_)), "{error}");
        assert!(
            !sent.load(std::sync::atomic::Ordering::SeqCst),
            "no waiting for the other sender"
        );
    }
}
