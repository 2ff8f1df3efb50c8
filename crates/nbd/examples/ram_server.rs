//! A RAM-backed NBD server for benchmarking the server alone (no replication, no disk):
//! `cargo run --release -p nbd --example ram_server -- SOCKET_PATH [SIZE_MIB]`, then e.g.
//! `fio --ioengine=nbd --uri='nbd+unix:///ram?socket=SOCKET_PATH' ...`.
//!
//! Requests complete inline in `submit`, so what is measured is the protocol path: parsing,
//! pooled payload reads, the reply channel and vectored reply writes.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use nbd::{
    Command, Completion, Export, ExportInfo, ExportRegistry, OpenError, Request, ServerConfig,
};

struct Ram {
    data: Mutex<Vec<u8>>,
}

impl Export for Ram {
    fn info(&self) -> ExportInfo {
        let size = self.data.lock().map_or(0, |data| data.len() as u64);
        ExportInfo {
            size,
            can_flush: true,
            can_fua: true,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
            read_only: false,
        }
    }

    fn submit(&self, request: Request, completion: Completion) {
        let Ok(mut data) = self.data.lock() else {
            return completion.error(nbd::Errno::Io);
        };
        // The server checked the range against the size, so these conversions fit.
        let range = |offset: u64, length: usize| {
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            start..start.saturating_add(length)
        };
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
            // This export never asks for streaming writes, so they do not arrive.
            Command::WriteStreaming { .. } => completion.error(nbd::Errno::Inval),
            Command::Trim { offset, length } | Command::WriteZeroes { offset, length, .. } => {
                data[range(offset, length as usize)].fill(0);
                completion.ok();
            }
            Command::Flush => completion.ok(),
        }
    }
}

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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let socket = args
        .next()
        .ok_or("usage: ram_server SOCKET_PATH [SIZE_MIB]")?;
    let size_mib: usize = args.next().map_or(Ok(256), |size| size.parse())?;
    let ram = Arc::new(Ram {
        data: Mutex::new(vec![0; size_mib << 20]),
    });
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)?;
    eprintln!("serving {size_mib} MiB as export \"ram\" on {socket}");
    nbd::serve_unix(
        listener,
        Arc::new(Registry(ram)),
        Arc::new(ServerConfig::default()),
    )
    .await;
    Ok(())
}
