//! The admin socket: JSON-line requests from `tandem` commands (the `admin` crate's protocol).
//!
//! Invariants: only root or the daemon's own user may talk to it (SO_PEERCRED, on top of the
//! socket's mode 0600); a request line is bounded (`admin::LINE_BYTES_MAX`); a bad request gets
//! an `Error` reply and never affects other clients.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use admin::{Reply, Request, StatusReport};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::adjust::{self, NodeContext};
use crate::resource::{Promoter, Resource};
use crate::status::resource_status;

/// How often `events` compares the state with what it last printed when nothing signalled a
/// change (counters and resync progress change without one); every state change and helper
/// run wakes it at once.
const EVENTS_TICK: Duration = Duration::from_millis(250);

/// Serve admin clients forever.
pub(crate) async fn serve(
    listener: UnixListener,
    resources: Vec<Arc<Resource>>,
    context: NodeContext,
) {
    let resources = Arc::new(resources);
    let context = Arc::new(context);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let resources = Arc::clone(&resources);
        let context = Arc::clone(&context);
        tokio::spawn(async move {
            if let Err(error) = serve_client(stream, &resources, &context).await {
                tracing::debug!("admin client: {error}");
            }
        });
    }
}

fn caller_allowed(stream: &UnixStream) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = unsafe { libc::geteuid() };
    stream
        .peer_cred()
        .is_ok_and(|cred| cred.uid() == 0 || cred.uid() == own)
}

async fn serve_client(
    stream: UnixStream,
    resources: &[Arc<Resource>],
    context: &NodeContext,
) -> std::io::Result<()> {
    if !caller_allowed(&stream) {
        tracing::warn!("admin socket: refused a caller that is neither root nor the daemon's user");
        return Ok(());
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read).take(admin::LINE_BYTES_MAX as u64 + 1);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).await?;
    let request: Request = match admin::decode_line(&line) {
        Ok(request) => request,
        Err(error) => {
            return send(
                &mut write,
                &Reply::Error {
                    message: format!("bad request: {error}"),
                },
            )
            .await
        }
    };
    if let Request::Events {
        resource,
        statistics,
        full,
    } = request
    {
        let options = admin::EventsOptions { statistics, full };
        return stream_events(&mut write, resources, resource.as_deref(), options).await;
    }
    if let Request::Adjust { resource, skip_net } = request {
        let reply = match select(resources, resource.as_deref()) {
            Ok(selected) => {
                let selected: Vec<Arc<Resource>> = selected.into_iter().cloned().collect();
                let context = context.clone();
                // Reading the configuration is file I/O: off the runtime's threads.
                let result = tokio::task::spawn_blocking(move || {
                    adjust::adjust(&context, &selected, adjust::Scope { net: !skip_net })
                })
                .await;
                match result {
                    Ok(Ok(report)) => Reply::Ok {
                        message: Some(report),
                    },
                    Ok(Err(message)) => Reply::Error { message },
                    Err(error) => Reply::Error {
                        message: format!("adjust failed: {error}"),
                    },
                }
            }
            Err(message) => Reply::Error { message },
        };
        return send(&mut write, &reply).await;
    }
    if matches!(
        request,
        Request::NetOptions { .. } | Request::DiskOptions { .. }
    ) {
        return send(&mut write, &runtime_options(request, resources, context)).await;
    }
    let reply = if matches!(request, Request::Primary { .. } | Request::Resize { .. }) {
        // A promotion may wait for fence-peer (up to its handler-timeout), a resize for every
        // node to grow: off the runtime.
        let resources = resources.to_vec();
        tokio::task::spawn_blocking(move || handle(request, &resources))
            .await
            .unwrap_or_else(|error| Reply::Error {
                message: format!("primary failed: {error}"),
            })
    } else {
        handle(request, resources)
    };
    send(&mut write, &reply).await
}

async fn send<W: AsyncWriteExt + Unpin>(write: &mut W, reply: &Reply) -> std::io::Result<()> {
    write.write_all(&admin::encode_line(reply)).await?;
    write.flush().await
}

/// `net-options` / `disk-options` on one resource; the reply lists what changed.
fn runtime_options(request: Request, resources: &[Arc<Resource>], context: &NodeContext) -> Reply {
    let result = match &request {
        Request::NetOptions {
            resource,
            peer,
            options,
        } => select(resources, Some(resource)).and_then(|selected| {
            selected
                .iter()
                .map(|r| {
                    crate::runtime_options::net_options(
                        r,
                        peer.as_deref(),
                        options,
                        &context.node_name,
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        }),
        Request::DiskOptions {
            resource,
            volume,
            options,
        } => select(resources, Some(resource)).and_then(|selected| {
            selected
                .iter()
                .map(|r| crate::runtime_options::disk_options(r, *volume, options))
                .collect::<Result<Vec<_>, _>>()
        }),
        _ => Err("not a runtime options request".into()),
    };
    match result {
        Ok(lines) => Reply::Ok {
            message: Some(lines.concat().join("\n")),
        },
        Err(message) => Reply::Error { message },
    }
}

/// The resources a request names (`None` or `all`: every one).
fn select<'a>(
    resources: &'a [Arc<Resource>],
    name: Option<&str>,
) -> Result<Vec<&'a Arc<Resource>>, String> {
    match name {
        None | Some("all") => Ok(resources.iter().collect()),
        Some(name) => {
            let found: Vec<_> = resources.iter().filter(|r| r.name == name).collect();
            if found.is_empty() {
                Err(format!("no resource named '{name}' on this node"))
            } else {
                Ok(found)
            }
        }
    }
}

fn report(resources: &[&Arc<Resource>]) -> StatusReport {
    StatusReport {
        resources: resources.iter().map(|r| resource_status(r)).collect(),
    }
}

/// What a state-changing request does to one selected resource.
type ResourceAction = dyn Fn(&Arc<Resource>) -> Result<(), String>;

fn handle(request: Request, resources: &[Arc<Resource>]) -> Reply {
    match state_change(request) {
        Ok((name, action)) => apply(resources, name.as_deref(), &*action),
        Err(request) => query(request, resources),
    }
}

/// The error message of a state change the engine refused.
fn change_failed(error: impl std::fmt::Display) -> String {
    format!("State change failed: {error}")
}

/// The resource name and action of a state-changing request, or the request back if it is
/// not one.
fn state_change(request: Request) -> Result<(Option<String>, Box<ResourceAction>), Request> {
    let change: (Option<String>, Box<ResourceAction>) = match request {
        Request::Primary { resource, force } => (resource, Box::new(move |r| promote(r, force))),
        Request::Secondary { resource, force } => (resource, Box::new(move |r| demote(r, force))),
        Request::Connect {
            resource,
            peer,
            discard_my_data,
        } => (
            resource,
            Box::new(move |r| connect(r, peer.as_deref(), discard_my_data)),
        ),
        Request::NewCurrentUuid {
            resource,
            clear_bitmap,
        } => (
            resource,
            Box::new(move |r| new_current_uuid(r, clear_bitmap)),
        ),
        Request::Invalidate { resource } => (
            resource,
            Box::new(|r| {
                r.step(|engine, _, out| engine.invalidate(out))
                    .map_err(change_failed)
            }),
        ),
        Request::InvalidateRemote { resource, peer } => (
            resource,
            Box::new(move |r| invalidate_remote(r, peer.as_deref())),
        ),
        Request::Detach { resource } => (
            resource,
            Box::new(|r| {
                r.step(|engine, now, out| engine.detach(now, out))
                    .map_err(change_failed)
            }),
        ),
        Request::Attach { resource } => (resource, Box::new(|r| r.attach())),
        Request::Verify { resource, peer } => {
            (resource, Box::new(move |r| verify(r, peer.as_deref())))
        }
        Request::Disconnect { resource, peer } => (
            resource,
            Box::new(move |r| set_connect(r, peer.as_deref(), false)),
        ),
        Request::PauseSync { resource, peer } => (
            resource,
            Box::new(move |r| pause_sync(r, peer.as_deref(), true)),
        ),
        Request::ResumeSync { resource, peer } => (
            resource,
            Box::new(move |r| pause_sync(r, peer.as_deref(), false)),
        ),
        Request::ResumeIo { resource } => {
            (resource, Box::new(|r| r.resume_io().map_err(change_failed)))
        }
        Request::SuspendIo { resource } => (
            resource,
            Box::new(|r| {
                r.suspend_io();
                Ok(())
            }),
        ),
        Request::ForgetPeer { resource, peer } => {
            (Some(resource), Box::new(move |r| forget_peer(r, &peer)))
        }
        Request::Outdate { resource } => (
            resource,
            Box::new(|r| {
                r.step(|engine, now, out| engine.outdate(now, out))
                    .map_err(change_failed)
            }),
        ),
        Request::Up { resource } => (resource, Box::new(up)),
        Request::Down { resource } => (resource, Box::new(down)),
        request => return Err(request),
    };
    Ok(change)
}

/// Answers a request that changes no state (or is handled apart).
fn query(request: Request, resources: &[Arc<Resource>]) -> Reply {
    match request {
        Request::Status { resource } => match select(resources, resource.as_deref()) {
            Ok(selected) => Reply::Status(report(&selected)),
            Err(message) => Reply::Error { message },
        },
        Request::GetGi {
            resource,
            peer,
            volume,
        } => {
            let filter = crate::metadata::GiFilter { peer, volume };
            match select(resources, Some(&resource)).and_then(|selected| {
                selected
                    .iter()
                    .map(|r| r.generations(&filter))
                    .collect::<Result<Vec<_>, _>>()
            }) {
                Ok(records) => Reply::Generations {
                    records: records.into_iter().flatten().collect(),
                },
                Err(message) => Reply::Error { message },
            }
        }
        Request::Events { .. } => Reply::Error {
            message: "events is a stream".into(),
        },
        Request::NetOptions { .. } | Request::DiskOptions { .. } => Reply::Error {
            message: "runtime options are handled apart".into(),
        },
        Request::Adjust { .. } => Reply::Error {
            message: "adjust is handled apart".into(),
        },
        Request::Resize {
            resource,
            volume,
            size_bytes,
            assume_clean,
            assume_peer_has_space,
        } => {
            let options = crate::resource::ResizeOptions {
                size_max: size_bytes,
                assume_clean,
                assume_peer_has_space,
            };
            match select(resources, resource.as_deref()) {
                Ok(selected) => resize(&selected, volume, options),
                Err(message) => Reply::Error { message },
            }
        }
        Request::SrmStatus { resource } => match select(resources, resource.as_deref()) {
            Ok(selected) => Reply::Ok {
                message: Some(
                    selected
                        .iter()
                        .map(|r| srm_status(r))
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
            },
            Err(message) => Reply::Error { message },
        },
        _ => unreachable!("state changes are handled by state_change"),
    }
}

/// Runs a state change on each selected resource, gathering their errors.
fn apply(resources: &[Arc<Resource>], name: Option<&str>, action: &ResourceAction) -> Reply {
    let selected = match select(resources, name) {
        Ok(selected) => selected,
        Err(message) => return Reply::Error { message },
    };
    let errors: Vec<String> = selected
        .iter()
        .filter_map(|r| action(r).err().map(|e| format!("{}: {e}", r.name)))
        .collect();
    if errors.is_empty() {
        Reply::Ok { message: None }
    } else {
        Reply::Error {
            message: errors.join("\n"),
        }
    }
}

fn promote(resource: &Arc<Resource>, force: bool) -> Result<(), String> {
    let promotion = match force {
        true => repl::Promotion::Forced,
        false => repl::Promotion::Normal,
    };
    if resource.is_down() {
        return Err("resource is down; run 'tandem up' first".into());
    }
    let mut result = resource
        .promote(promotion, Promoter::Administrator)
        .map(|_| ());
    if let Err(repl::StateError::FencingPeer { .. }) = result {
        // drbdadm primary waits for fence-peer against an absent peer; so does tandem.
        wait_for_fencing(resource);
        result = resource
            .promote(promotion, Promoter::Administrator)
            .map(|_| ());
    }
    result.map_err(|e| format!("State change failed: {e}"))?;
    // An explicit promotion outlives the export's last opener.
    resource
        .auto_promoted
        .store(false, std::sync::atomic::Ordering::Release);
    Ok(())
}

/// Blocks until no `fence-peer` run of the resource is awaited, or a little longer than a
/// handler may run.
fn wait_for_fencing(resource: &Arc<Resource>) {
    const POLL: Duration = Duration::from_millis(50);
    let deadline =
        std::time::Instant::now() + resource.options.handler_timeout + Duration::from_secs(2);
    let running = || {
        resource.with_engine(|engine| {
            resource
                .peers
                .iter()
                .any(|p| engine.fencing_running(p.node_id))
        })
    };
    while running() && std::time::Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
}

fn demote(resource: &Arc<Resource>, force: bool) -> Result<(), String> {
    if !force {
        return resource
            .step(|engine, _, out| engine.demote(out))
            .map_err(|e| format!("State change failed: {e}"));
    }
    resource
        .step(|engine, now, out| engine.demote_forced(now, out))
        .map_err(|e| format!("State change failed: {e}"))?;
    // The open export no longer promotes or demotes this node by itself.
    resource
        .auto_promoted
        .store(false, std::sync::atomic::Ordering::Release);
    Ok(())
}

/// The node ids of the peers a request names (`None`: all).
fn peer_ids(resource: &Resource, peer: Option<&str>) -> Result<Vec<u8>, String> {
    let peers: Vec<u8> = resource
        .peers
        .iter()
        .filter(|p| peer.is_none_or(|name| p.name == name))
        .map(|p| p.node_id)
        .collect();
    if peers.is_empty() {
        return Err(format!("no peer named '{}'", peer.unwrap_or_default()));
    }
    Ok(peers)
}

fn connect(
    resource: &Arc<Resource>,
    peer: Option<&str>,
    discard_my_data: bool,
) -> Result<(), String> {
    if discard_my_data {
        for node_id in peer_ids(resource, peer)? {
            resource
                .step(|engine, _, _| engine.set_discard_my_data(node_id))
                .map_err(|e| e.to_string())?;
        }
    }
    set_connect(resource, peer, true)
}

fn verify(resource: &Arc<Resource>, peer: Option<&str>) -> Result<(), String> {
    for node_id in peer_ids(resource, peer)? {
        let info = resource
            .peers
            .iter()
            .find(|p| p.node_id == node_id)
            .ok_or_else(|| format!("no peer with node-id {node_id}"))?;
        if info.verify_alg.is_none() {
            return Err(format!(
                "no verify-alg is configured for the connection to {}; set one (e.g. `net {{ \
                 verify-alg sha256; }}`) on both nodes",
                info.name
            ));
        }
        resource
            .step(|engine, now, out| engine.start_verify(now, Some(node_id), out))
            .map_err(|e| format!("State change failed: {e}"))?;
    }
    Ok(())
}

fn invalidate_remote(resource: &Arc<Resource>, peer: Option<&str>) -> Result<(), String> {
    for node_id in peer_ids(resource, peer)? {
        resource
            .step(|engine, _, out| engine.invalidate_remote(node_id, out))
            .map_err(|e| format!("State change failed: {e}"))?;
    }
    Ok(())
}

fn forget_peer(resource: &Arc<Resource>, peer: &str) -> Result<(), String> {
    for node_id in peer_ids(resource, Some(peer))? {
        resource
            .step(|engine, now, out| engine.forget_peer(now, node_id, out))
            .map_err(|e| format!("State change failed: {e}"))?;
    }
    Ok(())
}

fn srm_status(resource: &Arc<Resource>) -> String {
    let view = resource
        .srm_view
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match view.as_ref() {
        Some(view) => view.render(&resource.name).trim_end().to_owned(),
        None => format!(
            "{} srm:off (set `srm on;` or `srm advise;` in the resource's options)",
            resource.name
        ),
    }
}

fn resize(
    selected: &[&Arc<Resource>],
    volume: Option<u16>,
    options: crate::resource::ResizeOptions,
) -> Reply {
    let mut lines = Vec::new();
    for resource in selected {
        match resource.resize(volume, options) {
            Ok(text) => lines.push(text),
            Err(error) => {
                return Reply::Error {
                    message: format!("{}: {error}", resource.name),
                }
            }
        }
    }
    Reply::Ok {
        message: Some(lines.join("\n")),
    }
}

fn pause_sync(resource: &Arc<Resource>, peer: Option<&str>, paused: bool) -> Result<(), String> {
    for node_id in peer_ids(resource, peer)? {
        resource
            .step(|engine, now, out| engine.pause_sync(now, Some(node_id), paused, out))
            .map_err(|e| format!("State change failed: {e}"))?;
    }
    Ok(())
}

fn new_current_uuid(resource: &Arc<Resource>, clear_bitmap: bool) -> Result<(), String> {
    resource
        .step(|engine, _, out| engine.new_current_uuid(clear_bitmap, out))
        .map_err(|e| format!("State change failed: {e}"))
}

fn set_connect(resource: &Arc<Resource>, peer: Option<&str>, connect: bool) -> Result<(), String> {
    for node_id in peer_ids(resource, peer)? {
        resource
            .step(|engine, now, out| engine.set_connect(now, node_id, connect, out))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn up(resource: &Arc<Resource>) -> Result<(), String> {
    resource.down.store(false, Ordering::Relaxed);
    set_connect(resource, None, true)
}

fn down(resource: &Arc<Resource>) -> Result<(), String> {
    demote(resource, false)?;
    set_connect(resource, None, false)?;
    resource.down.store(true, Ordering::Relaxed);
    resource.changed.send_modify(|version| *version += 1);
    Ok(())
}

async fn stream_events<W: AsyncWriteExt + Unpin>(
    write: &mut W,
    resources: &[Arc<Resource>],
    name: Option<&str>,
    options: admin::EventsOptions,
) -> std::io::Result<()> {
    let selected = match select(resources, name) {
        Ok(selected) => selected,
        Err(message) => return send(write, &Reply::Error { message }).await,
    };
    let mut last = report(&selected);
    let mut helpers_seen = crate::handlers::latest_event();
    for line in admin::initial_events(&last, options) {
        send(write, &Reply::Event { line }).await?;
    }
    let names: Vec<String> = selected.iter().map(|r| r.name.clone()).collect();
    // One waiter per source of changes, each forwarding a wake-up (coalesced: the channel
    // holds one); they end with the stream (the set aborts them when dropped).
    let (wake_tx, mut wake_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut waiters = tokio::task::JoinSet::new();
    for resource in &selected {
        let mut changed = resource.changed.subscribe();
        let wake = wake_tx.clone();
        waiters.spawn(async move {
            while changed.changed().await.is_ok() {
                let _ = wake.try_send(());
            }
        });
    }
    let mut helper_events = crate::handlers::subscribe_events();
    waiters.spawn(async move {
        while helper_events.changed().await.is_ok() {
            let _ = wake_tx.try_send(());
        }
    });
    loop {
        tokio::select! {
            Some(()) = wake_rx.recv() => {}
            () = tokio::time::sleep(EVENTS_TICK) => {}
        }
        let now = report(&selected);
        for line in admin::change_events(&last, &now, options) {
            send(write, &Reply::Event { line }).await?;
        }
        last = now;
        let (lines, newest) = crate::handlers::events_since(helpers_seen, |resource| {
            names.iter().any(|n| n == resource)
        });
        helpers_seen = newest;
        for line in lines {
            send(write, &Reply::Event { line }).await?;
        }
    }
}
