//! The handshake driver: fixed newstyle negotiation up to the transmission phase.
//!
//! Invariants:
//! - At most [`OPTION_COUNT_MAX`] options, each with at most [`OPTION_DATA_BYTES_MAX`] bytes of
//!   data, are read per connection; beyond either the connection is closed (after an
//!   `NBD_REP_ERR_TOO_BIG` reply for an oversized option other than `NBD_OPT_EXPORT_NAME`).
//! - Every option except `NBD_OPT_EXPORT_NAME` gets a final reply (ACK or error) before the
//!   next option is read; malformed options get `NBD_REP_ERR_INVALID` and negotiation goes on.
//! - Transmission starts only with an opened export, whose info was read exactly once.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::ServerConfig;
use crate::protocol::{
    encode_export_name_reply, option, parse_client_flags, parse_option, parse_option_header,
    BlockSizes, ClientFlags, ClientOption, ExportLimits, ExportQuery, InfoReply, InfoType,
    OptionError, OptionReply, OptionReplyBody, TransmissionFlags, GREETING, OPTION_HEADER_LEN,
};
use crate::{Export, ExportRegistry, NbdError, OpenError};

/// Longest option data accepted.
pub(crate) const OPTION_DATA_BYTES_MAX: u32 = 4096;
/// Most options accepted in one handshake.
pub(crate) const OPTION_COUNT_MAX: usize = 256;
/// Minimum block size advertised: byte-granular requests are fine.
pub(crate) const BLOCK_BYTES_MIN: u32 = 1;
/// Preferred block size advertised.
pub(crate) const BLOCK_BYTES_PREFERRED: u32 = 4096;

/// An export opened for transmission, with the limits its requests are checked against.
pub(crate) struct Session {
    pub(crate) export: Arc<dyn Export>,
    pub(crate) limits: ExportLimits,
}

/// How negotiation ended without an error.
pub(crate) enum Negotiated {
    /// Enter transmission.
    Transmission(Session),
    /// The client sent `NBD_OPT_ABORT`.
    Aborted,
}

/// What to do after answering one option.
enum Step {
    Continue,
    Enter(Session),
    Abort,
}

/// State of one handshake.
struct Haggle<'a> {
    registry: &'a dyn ExportRegistry,
    config: &'a ServerConfig,
    client: ClientFlags,
    /// Encoded replies waiting to be written.
    out: Vec<u8>,
}

/// Runs the handshake on `stream`.
pub(crate) async fn negotiate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    registry: &dyn ExportRegistry,
    config: &ServerConfig,
) -> Result<Negotiated, NbdError> {
    stream.write_all(&GREETING).await?;
    stream.flush().await?;
    let mut flags = [0; 4];
    stream.read_exact(&mut flags).await?;
    let client = parse_client_flags(&flags)?;
    let mut haggle = Haggle {
        registry,
        config,
        client,
        out: Vec::new(),
    };
    let mut data = Vec::new();
    for _ in 0..OPTION_COUNT_MAX {
        let code = haggle.read_option(stream, &mut data).await?;
        let step = haggle.answer(code, &data);
        stream.write_all(&haggle.out).await?;
        stream.flush().await?;
        haggle.out.clear();
        match step? {
            Step::Continue => {}
            Step::Enter(session) => return Ok(Negotiated::Transmission(session)),
            Step::Abort => return Ok(Negotiated::Aborted),
        }
    }
    Err(NbdError::TooManyOptions(OPTION_COUNT_MAX))
}

impl Haggle<'_> {
    /// Reads one option into `data`; returns its code.
    async fn read_option<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        data: &mut Vec<u8>,
    ) -> Result<u32, NbdError> {
        let mut header = [0; OPTION_HEADER_LEN];
        stream.read_exact(&mut header).await?;
        let header = parse_option_header(&header)?;
        if header.length > OPTION_DATA_BYTES_MAX {
            if header.option != option::EXPORT_NAME {
                self.error(header.option, OptionError::TooBig, "option data too long");
                stream.write_all(&self.out).await?;
                stream.flush().await?;
            }
            return Err(NbdError::OptionTooLong {
                option: header.option,
                length: header.length,
            });
        }
        let length = usize::try_from(header.length).map_err(|_| NbdError::OptionTooLong {
            option: header.option,
            length: header.length,
        })?;
        data.resize(length, 0);
        stream.read_exact(data).await?;
        Ok(header.option)
    }

    /// Answers one option (appending replies to `self.out`).
    fn answer(&mut self, code: u32, data: &[u8]) -> Result<Step, NbdError> {
        let parsed = match parse_option(code, data) {
            Ok(parsed) => parsed,
            // EXPORT_NAME cannot carry an error reply: the session ends.
            Err(error) if code == option::EXPORT_NAME => return Err(error),
            Err(error) => {
                self.error(code, OptionError::Invalid, &error.to_string());
                return Ok(Step::Continue);
            }
        };
        tracing::debug!(option = ?parsed, "option");
        match parsed {
            ClientOption::ExportName { name } => self.export_name(&name).map(Step::Enter),
            ClientOption::Abort => {
                self.reply(code, OptionReplyBody::Ack);
                Ok(Step::Abort)
            }
            ClientOption::List => {
                self.list();
                Ok(Step::Continue)
            }
            ClientOption::StartTls => {
                self.error(
                    code,
                    OptionError::Policy,
                    "TLS is not supported by this server",
                );
                Ok(Step::Continue)
            }
            ClientOption::Info(query) => {
                // The export opened for INFO is dropped (closed) right away.
                self.info_or_go(code, &query, true);
                Ok(Step::Continue)
            }
            ClientOption::Go(query) => Ok(self
                .info_or_go(code, &query, false)
                .map_or(Step::Continue, Step::Enter)),
            ClientOption::StructuredReply | ClientOption::Other { .. } => {
                self.error(code, OptionError::Unsup, "option not supported");
                Ok(Step::Continue)
            }
        }
    }

    fn reply(&mut self, option: u32, body: OptionReplyBody) {
        OptionReply { option, body }.encode(&mut self.out);
    }

    fn error(&mut self, option: u32, error: OptionError, message: &str) {
        self.reply(
            option,
            OptionReplyBody::Error {
                error,
                message: message.to_owned(),
            },
        );
    }

    fn list(&mut self) {
        for name in self.registry.list() {
            self.reply(option::LIST, OptionReplyBody::Server { name });
        }
        self.reply(option::LIST, OptionReplyBody::Ack);
    }

    /// `NBD_OPT_EXPORT_NAME`: open or end the session.
    fn export_name(&mut self, name: &str) -> Result<Session, NbdError> {
        let refused = |reason: String| NbdError::ExportRefused {
            name: name.to_owned(),
            reason,
        };
        let canonical = self
            .resolve(name)
            .ok_or_else(|| refused("no such export".to_owned()))?;
        let session = match self.registry.open(&canonical) {
            Ok(export) => self.session(export),
            Err(OpenError::Unknown) => return Err(refused("no such export".to_owned())),
            Err(OpenError::Policy(message)) => return Err(refused(message)),
        };
        encode_export_name_reply(
            session.limits.size,
            session.limits.flags,
            self.client,
            &mut self.out,
        );
        Ok(session)
    }

    /// `NBD_OPT_INFO` / `NBD_OPT_GO`: the session if the export opened.
    fn info_or_go(&mut self, code: u32, query: &ExportQuery, info_only: bool) -> Option<Session> {
        let Some(canonical) = self.resolve(&query.name) else {
            self.error(
                code,
                OptionError::Unknown,
                "no such export (and no single default)",
            );
            return None;
        };
        let opened = if info_only {
            self.registry.open_for_info(&canonical)
        } else {
            self.registry.open(&canonical)
        };
        let session = match opened {
            Ok(export) => self.session(export),
            Err(OpenError::Unknown) => {
                self.error(
                    code,
                    OptionError::Unknown,
                    &format!("no export named {canonical:?}"),
                );
                return None;
            }
            Err(OpenError::Policy(message)) => {
                self.error(code, OptionError::Policy, &message);
                return None;
            }
        };
        let limits = session.limits;
        self.reply(
            code,
            OptionReplyBody::Info(InfoReply::Export {
                size: limits.size,
                flags: limits.flags,
            }),
        );
        let sizes = BlockSizes {
            minimum: BLOCK_BYTES_MIN,
            preferred: BLOCK_BYTES_PREFERRED,
            maximum: limits.request_bytes_max,
        };
        self.reply(code, OptionReplyBody::Info(InfoReply::BlockSize(sizes)));
        if query.items.contains(&InfoType::Name) {
            self.reply(code, OptionReplyBody::Info(InfoReply::Name(canonical)));
        }
        self.reply(code, OptionReplyBody::Ack);
        Some(session)
    }

    /// The export a name means: itself, or for the empty name the only listed export.
    fn resolve(&self, name: &str) -> Option<String> {
        if !name.is_empty() {
            return Some(name.to_owned());
        }
        let mut names = self.registry.list();
        if names.len() == 1 {
            names.pop()
        } else {
            None
        }
    }

    fn session(&self, export: Arc<dyn Export>) -> Session {
        let info = export.info();
        let limits = ExportLimits {
            size: info.size,
            flags: TransmissionFlags::from_info(&info),
            request_bytes_max: self.config.request_bytes_max,
        };
        Session { export, limits }
    }
}
