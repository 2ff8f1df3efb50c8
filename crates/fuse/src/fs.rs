//! The file system: a root directory with one regular file per export; every file
//! operation becomes NBD requests to an export opened from the registry.
//!
//! Invariants:
//! - A file handle is an open export: `open` calls `ExportRegistry::open` and fails when it
//!   refuses (so a Secondary never serves data, stale or not); `release` drops it. In-flight
//!   requests keep their export open until they complete.
//! - A write, fsync, flush or fallocate is answered only after the export completed every
//!   request it became, with the first error if any; nothing is acknowledged early.
//! - Replies, follow-up requests and export releases run on the completer thread
//!   (`flow.rs`), never inside an export's completion.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use fuser::{
    Errno as FuseErrno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, ReplyXattr, Request as FuseRequest, WriteFlags,
};
use nbd::{
    CallbackReply, Command, Completion, Errno, Expect, Export, ExportInfo, ExportRegistry, Request,
};

use crate::flow::{Completer, Limiter, Permit};
use crate::{plan, ExportFile};

/// How long the kernel may cache names and attributes (a file's size changes only when its
/// export grows online, `resize`; the kernel sees it within this long).
const ATTRIBUTE_TTL: Duration = Duration::from_secs(1);
/// The inode of the first file; the root directory is 1.
const FIRST_FILE_INODE: u64 = 2;

/// One open file: the export it opened and how it was opened.
struct Handle {
    export: Arc<dyn Export>,
    info: ExportInfo,
    /// Opened with `O_DSYNC`/`O_SYNC`: every write is durable when it completes.
    durable: bool,
}

/// The open file handles, shared with the mount (which reports how many are open).
#[derive(Default)]
pub(crate) struct Handles {
    open: Mutex<BTreeMap<u64, Arc<Handle>>>,
    next: AtomicU64,
}

impl Handles {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Handle>>> {
        // Nothing panics while holding this lock, so a poisoned map is still consistent.
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// File handles open now.
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }
}

/// What the file system is built from.
pub(crate) struct Parts {
    pub(crate) registry: Arc<dyn ExportRegistry>,
    pub(crate) files: Vec<ExportFile>,
    pub(crate) handles: Arc<Handles>,
    pub(crate) limiter: Arc<Limiter>,
    pub(crate) completer: Completer,
    /// Owner of every file (the mounting user).
    pub(crate) owner: (u32, u32),
    /// The files' timestamps: when the mount was made.
    pub(crate) mounted_at: SystemTime,
}

/// The fuser file system.
pub(crate) struct ExportFs {
    parts: Parts,
    /// File names, parallel to `parts.files`.
    names: Vec<String>,
}

impl ExportFs {
    pub(crate) fn new(parts: Parts, names: Vec<String>) -> ExportFs {
        ExportFs { parts, names }
    }

    /// The index of the file with inode `inode`.
    fn file_index(&self, inode: INodeNo) -> Option<usize> {
        let index = usize::try_from(inode.0.checked_sub(FIRST_FILE_INODE)?).ok()?;
        (index < self.parts.files.len()).then_some(index)
    }

    fn attr(&self, inode: INodeNo) -> Option<FileAttr> {
        let (kind, perm, size, nlink) = if inode == INodeNo::ROOT {
            (FileType::Directory, 0o755, 0, 2)
        } else {
            let file = &self.parts.files[self.file_index(inode)?];
            let size = self
                .parts
                .registry
                .size_now(&file.export)
                .unwrap_or(file.size_bytes);
            (FileType::RegularFile, 0o600, size.max(file.size_bytes), 1)
        };
        let time = self.parts.mounted_at;
        Some(FileAttr {
            ino: inode,
            size,
            blocks: size.div_ceil(512),
            atime: time,
            mtime: time,
            ctime: time,
            crtime: time,
            kind,
            perm,
            nlink,
            uid: self.parts.owner.0,
            gid: self.parts.owner.1,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn handle(&self, handle: FileHandle) -> Option<Arc<Handle>> {
        self.parts.handles.lock().get(&handle.0).cloned()
    }

    /// Submits `request` under the in-flight limit; `done` runs on the completer thread with
    /// the reply.
    fn submit(
        &self,
        handle: &Arc<Handle>,
        request: Request,
        done: impl FnOnce(CallbackReply) + Send + 'static,
    ) {
        let permit = self.parts.limiter.acquire();
        submit_holding(
            handle,
            permit,
            &self.parts.completer,
            request,
            Box::new(move |reply, permit| {
                done(reply);
                drop(permit);
            }),
        );
    }

    /// Submits every command and calls `done` once all completed: Ok, or the first error.
    fn submit_all(
        &self,
        handle: &Arc<Handle>,
        commands: Vec<Command>,
        done: impl FnOnce(Result<(), Errno>) + Send + 'static,
    ) {
        let Some(tracker) = Tracker::new(commands.len(), done) else {
            return;
        };
        for command in commands {
            let tracker = Arc::clone(&tracker);
            self.submit(
                handle,
                Request {
                    command,
                    fua: false,
                },
                move |reply| tracker.finished(reply.map(|_| ())),
            );
        }
    }

    /// fsync and flush: a `Flush` if the export can, else nothing to wait for.
    fn flush(&self, handle: FileHandle, reply: ReplyEmpty) {
        let Some(handle) = self.handle(handle) else {
            return reply.error(FuseErrno::EBADF);
        };
        if !handle.info.can_flush {
            return reply.ok();
        }
        self.submit(
            &handle,
            Request {
                command: Command::Flush,
                fua: false,
            },
            move |result| match result {
                Ok(_) => reply.ok(),
                Err(errno) => reply.error(fuse_errno(plan::errno_of(errno))),
            },
        );
    }
}

/// A reply function for the completer thread; it gets the request's permit, to release or to
/// pass on to a follow-up request.
type Done = Box<dyn FnOnce(CallbackReply, Permit) + Send>;

/// Submits `request` to `handle`'s export under `permit`; the export stays open until `done`
/// ran. Callable from the completer thread, since it does not wait for the limit.
fn submit_holding(
    handle: &Arc<Handle>,
    permit: Permit,
    completer: &Completer,
    request: Request,
    done: Done,
) {
    let keep_open = Arc::clone(handle);
    let completer_for_reply = completer.clone();
    let completion = Completion::callback(Expect::of(&request.command), move |reply| {
        completer_for_reply.run(Box::new(move || {
            done(reply, permit);
            drop(keep_open);
        }));
    });
    handle.export.submit(request, completion);
}

/// What runs once every request of a group completed: Ok, or the first error.
type GroupDone = Box<dyn FnOnce(Result<(), Errno>) + Send>;

/// Counts the completions of several requests; calls `done` once, after the last.
struct Tracker {
    /// Requests not yet completed, the result so far, and `done` until it ran.
    state: Mutex<(usize, Result<(), Errno>, Option<GroupDone>)>,
}

impl Tracker {
    /// None (and `done` already called with Ok) when there is nothing to wait for.
    fn new(
        count: usize,
        done: impl FnOnce(Result<(), Errno>) + Send + 'static,
    ) -> Option<Arc<Tracker>> {
        if count == 0 {
            done(Ok(()));
            return None;
        }
        Some(Arc::new(Tracker {
            state: Mutex::new((count, Ok(()), Some(Box::new(done)))),
        }))
    }

    fn finished(&self, result: Result<(), Errno>) {
        let done = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if state.1.is_ok() {
                state.1 = result;
            }
            state.0 = state.0.saturating_sub(1);
            if state.0 > 0 {
                return;
            }
            state.2.take().map(|done| (done, state.1))
        };
        if let Some((done, result)) = done {
            done(result);
        }
    }
}

fn fuse_errno(code: i32) -> FuseErrno {
    FuseErrno::from_i32(code)
}

impl Filesystem for ExportFs {
    fn init(&mut self, _request: &FuseRequest, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(plan::REQUEST_BYTES_MAX);
        let in_flight = u16::try_from(self.parts.limiter.in_flight_max()).unwrap_or(u16::MAX);
        let _ = config.set_max_background(in_flight);
        // Direct I/O from the loop driver is asynchronous; let the kernel send it in parallel.
        if config.add_capabilities(InitFlags::FUSE_ASYNC_DIO).is_err() {
            tracing::debug!("the kernel has no FUSE_ASYNC_DIO");
        }
        Ok(())
    }

    fn lookup(&self, _request: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.names.iter().position(|file| OsStr::new(file) == name);
        let attr = found
            .filter(|_| parent == INodeNo::ROOT)
            .and_then(|index| self.attr(file_inode(index)));
        match attr {
            Some(attr) => reply.entry(&ATTRIBUTE_TTL, &attr, fuser::Generation(0)),
            None => reply.error(FuseErrno::ENOENT),
        }
    }

    fn getattr(
        &self,
        _request: &FuseRequest,
        inode: INodeNo,
        _handle: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        match self.attr(inode) {
            Some(attr) => reply.attr(&ATTRIBUTE_TTL, &attr),
            None => reply.error(FuseErrno::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _request: &FuseRequest,
        inode: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _handle: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The size is the export's: truncating or growing is refused (so is O_TRUNC);
        // owner, mode and times are fixed and a change is ignored.
        match self.attr(inode) {
            Some(attr) if size.is_none_or(|size| size == attr.size) => {
                reply.attr(&ATTRIBUTE_TTL, &attr)
            }
            Some(_) => reply.error(FuseErrno::EPERM),
            None => reply.error(FuseErrno::ENOENT),
        }
    }

    fn open(&self, _request: &FuseRequest, inode: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some(index) = self.file_index(inode) else {
            return reply.error(FuseErrno::EISDIR);
        };
        let export_name = &self.parts.files[index].export;
        let export = match self.parts.registry.open(export_name) {
            Ok(export) => export,
            Err(error) => {
                if let nbd::OpenError::Policy(reason) = &error {
                    tracing::warn!(export = %export_name, "FUSE open refused: {reason}");
                }
                return reply.error(fuse_errno(plan::open_errno(&error)));
            }
        };
        let info = export.info();
        let writing = !matches!(flags.acc_mode(), fuser::OpenAccMode::O_RDONLY);
        if writing && info.read_only {
            return reply.error(FuseErrno::EROFS);
        }
        let handle = Arc::new(Handle {
            export,
            info,
            durable: plan::wants_durable(flags.0),
        });
        let number = self.parts.handles.next.fetch_add(1, Ordering::Relaxed);
        self.parts.handles.lock().insert(number, handle);
        reply.opened(
            FileHandle(number),
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        handle: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(handle) = self.handle(handle) else {
            return reply.error(FuseErrno::EBADF);
        };
        match plan::read(handle.export.size_now(), offset, size) {
            Err(code) => reply.error(fuse_errno(code)),
            Ok(None) => reply.data(&[]),
            Ok(Some(command)) => self.submit(
                &handle,
                Request {
                    command,
                    fua: false,
                },
                move |result| match result {
                    Ok(data) => reply.data(&data),
                    Err(errno) => reply.error(fuse_errno(plan::errno_of(errno))),
                },
            ),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        handle: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(handle) = self.handle(handle) else {
            return reply.error(FuseErrno::EBADF);
        };
        let length = match plan::write(handle.export.size_now(), offset, data.len()) {
            Ok(length) => length,
            Err(code) => return reply.error(fuse_errno(code)),
        };
        let durable = handle.durable || plan::wants_durable(flags.0);
        let fua = durable && handle.info.can_fua;
        let flush_after = durable && !fua && handle.info.can_flush;
        let written = u32::try_from(length).unwrap_or(0);
        let payload = Bytes::copy_from_slice(data.get(..length).unwrap_or_default());
        let request = Request {
            command: Command::Write {
                offset,
                data: payload,
            },
            fua,
        };
        let (completer, follow) = (self.parts.completer.clone(), Arc::clone(&handle));
        let permit = self.parts.limiter.acquire();
        submit_holding(
            &handle,
            permit,
            &self.parts.completer,
            request,
            Box::new(move |result, permit| match result {
                Err(errno) => reply.error(fuse_errno(plan::errno_of(errno))),
                Ok(_) if !flush_after => reply.written(written),
                // On the completer thread, with the write's permit: no wait, no deadlock.
                Ok(_) => submit_holding(
                    &follow,
                    permit,
                    &completer,
                    Request {
                        command: Command::Flush,
                        fua: false,
                    },
                    Box::new(move |result, _permit| match result {
                        Ok(_) => reply.written(written),
                        Err(errno) => reply.error(fuse_errno(plan::errno_of(errno))),
                    }),
                ),
            }),
        );
    }

    fn flush(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        handle: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        ExportFs::flush(self, handle, reply);
    }

    fn fsync(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        handle: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        ExportFs::flush(self, handle, reply);
    }

    fn release(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        handle: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let released = self.parts.handles.lock().remove(&handle.0);
        // Dropped outside the map's lock: closing an export may take the export's own locks.
        drop(released);
        reply.ok();
    }

    fn readdir(
        &self,
        _request: &FuseRequest,
        inode: INodeNo,
        _handle: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if inode != INodeNo::ROOT {
            return reply.error(FuseErrno::ENOTDIR);
        }
        let dots = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
        ];
        let files = self
            .names
            .iter()
            .enumerate()
            .map(|(index, name)| (file_inode(index), FileType::RegularFile, name.as_str()));
        let entries = dots.into_iter().chain(files);
        for (position, (inode, kind, name)) in entries
            .enumerate()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        {
            let next = u64::try_from(position)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            if reply.add(inode, next, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn getxattr(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        // No extended attributes (ls and security modules ask for them on every file).
        reply.error(FuseErrno::NO_XATTR);
    }

    fn listxattr(&self, _request: &FuseRequest, _inode: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(0);
        } else {
            reply.data(&[]);
        }
    }

    fn access(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        _mask: fuser::AccessFlags,
        reply: ReplyEmpty,
    ) {
        // default_permissions: the kernel checks the mode bits itself.
        reply.ok();
    }

    fn fallocate(
        &self,
        _request: &FuseRequest,
        _inode: INodeNo,
        handle: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(handle) = self.handle(handle) else {
            return reply.error(FuseErrno::EBADF);
        };
        let info = ExportInfo {
            size: handle.export.size_now(),
            ..handle.info
        };
        match plan::fallocate(&info, mode, offset, length) {
            Err(code) => reply.error(fuse_errno(code)),
            Ok(commands) => self.submit_all(&handle, commands, move |result| match result {
                Ok(()) => reply.ok(),
                Err(errno) => reply.error(fuse_errno(plan::errno_of(errno))),
            }),
        }
    }
}

/// The inode of the file at `index`.
fn file_inode(index: usize) -> INodeNo {
    INodeNo(
        u64::try_from(index)
            .unwrap_or(u64::MAX)
            .saturating_add(FIRST_FILE_INODE),
    )
}
