//! The byte stream under one replication socket: plain TCP, or TLS over TCP (`tls yes`), so the
//! handshake and the link tasks are written once for both.
//!
//! Invariant: the TCP socket under a stream is the one its settings (`sndbuf-size`, TCP_INFO)
//! are read from and applied to, whether or not TLS runs over it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The reading half of a link's socket.
pub(crate) type LinkReader = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half of a link's socket.
pub(crate) type LinkWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// One socket of a link.
#[derive(Debug)]
pub(crate) enum LinkStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS, this node having connected.
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// TLS, this node having accepted.
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl LinkStream {
    /// The TCP socket underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            LinkStream::Plain(stream) => stream,
            LinkStream::Client(stream) => stream.get_ref().0,
            LinkStream::Server(stream) => stream.get_ref().0,
        }
    }

    /// The fingerprint of the certificate the peer presented (None without TLS).
    pub(crate) fn presented(&self) -> Option<[u8; 32]> {
        match self {
            LinkStream::Plain(_) => None,
            LinkStream::Client(stream) => crate::tls::presented(stream.get_ref().1),
            LinkStream::Server(stream) => crate::tls::presented(stream.get_ref().1),
        }
    }

    /// Splits the stream for the link's reader and writer tasks (plain TCP without a lock).
    pub(crate) fn into_split(self) -> (LinkReader, LinkWriter) {
        match self {
            LinkStream::Plain(stream) => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            tls => {
                let (read, write) = tokio::io::split(tls);
                (Box::new(read), Box::new(write))
            }
        }
    }
}

impl AsyncRead for LinkStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            LinkStream::Client(stream) => Pin::new(stream).poll_read(cx, buf),
            LinkStream::Server(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for LinkStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            LinkStream::Client(stream) => Pin::new(stream).poll_write(cx, buf),
            LinkStream::Server(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            LinkStream::Client(stream) => Pin::new(stream).poll_flush(cx),
            LinkStream::Server(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkStream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            LinkStream::Client(stream) => Pin::new(stream).poll_shutdown(cx),
            LinkStream::Server(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}
