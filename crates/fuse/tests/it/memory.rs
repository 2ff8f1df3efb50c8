//! An in-memory `ExportRegistry` for the mount tests: byte vectors as exports, a log of the
//! requests they got, an open refusal switch, and a hold switch that keeps requests
//! unanswered. Requests complete on a worker thread while the registry's lock is held, and
//! closing an export takes the same lock (the daemon's export behaves the same way).

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fuse::ExportFile;
use nbd::{Command, Completion, Export, ExportInfo, ExportRegistry, OpenError, Request};

/// What kind of request an export got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Write,
    Flush,
    Trim,
    WriteZeroes,
}

struct Disk {
    data: Vec<u8>,
    /// Every request except reads, with its FUA flag.
    log: Vec<(Kind, bool)>,
    largest_request: usize,
}

type Job = (String, Request, Completion);

#[derive(Default)]
struct State {
    disks: BTreeMap<String, Disk>,
    refusal: Option<String>,
    hold: bool,
    held: Vec<Job>,
    in_flight: usize,
    peak_in_flight: usize,
    open: usize,
    opened_total: usize,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

pub struct MemoryRegistry {
    shared: Arc<Shared>,
    worker: Mutex<Sender<Job>>,
    can_fua: bool,
    sizes: Vec<(String, usize)>,
}

impl MemoryRegistry {
    pub fn new(exports: &[(&str, usize)]) -> MemoryRegistry {
        let mut state = State::default();
        for (name, size) in exports {
            state.disks.insert(
                name.to_string(),
                Disk {
                    data: vec![0; *size],
                    log: Vec::new(),
                    largest_request: 0,
                },
            );
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changed: Condvar::new(),
        });
        let (worker, jobs) = channel::<Job>();
        let for_worker = Arc::clone(&shared);
        std::thread::spawn(move || {
            while let Ok(job) = jobs.recv() {
                let mut state = for_worker.lock();
                if state.hold {
                    state.held.push(job);
                    for_worker.changed.notify_all();
                } else {
                    execute(&mut state, job);
                }
            }
        });
        let sizes = exports
            .iter()
            .map(|(name, size)| (name.to_string(), *size))
            .collect();
        MemoryRegistry {
            shared,
            worker: Mutex::new(worker),
            can_fua: true,
            sizes,
        }
    }

    pub fn with_fua(mut self, can_fua: bool) -> MemoryRegistry {
        self.can_fua = can_fua;
        self
    }

    pub fn files(&self) -> Vec<ExportFile> {
        self.sizes
            .iter()
            .map(|(name, size)| ExportFile {
                export: name.clone(),
                size_bytes: *size as u64,
            })
            .collect()
    }

    pub fn refuse(&self, reason: Option<&str>) {
        self.shared.lock().refusal = reason.map(str::to_string);
    }

    /// Holds requests unanswered (true), or answers every held one and stops holding.
    pub fn hold(&self, hold: bool) {
        let mut state = self.shared.lock();
        state.hold = hold;
        if !hold {
            for job in std::mem::take(&mut state.held) {
                execute(&mut state, job);
            }
        }
    }

    pub fn held(&self) -> usize {
        self.shared.lock().held.len()
    }

    fn wait(&self, what: &str, deadline: Duration, condition: impl Fn(&State) -> bool) {
        let start = Instant::now();
        let mut state = self.shared.lock();
        while !condition(&state) {
            let left = deadline
                .checked_sub(start.elapsed())
                .unwrap_or_else(|| panic!("timed out waiting until {what}"));
            state = self.shared.changed.wait_timeout(state, left).unwrap().0;
        }
    }

    pub fn wait_held(&self, count: usize, deadline: Duration) {
        self.wait(&format!("{count} requests are held"), deadline, |state| {
            state.held.len() >= count
        });
    }

    pub fn wait_closed(&self, deadline: Duration) {
        self.wait("every export is closed", deadline, |state| state.open == 0);
    }

    pub fn opened(&self) -> usize {
        self.shared.lock().opened_total
    }

    pub fn peak_in_flight(&self) -> usize {
        self.shared.lock().peak_in_flight
    }

    pub fn contents(&self, name: &str, offset: u64, length: usize) -> Vec<u8> {
        let state = self.shared.lock();
        let start = offset as usize;
        state.disks[name].data[start..start + length].to_vec()
    }

    pub fn take_log(&self, name: &str) -> Vec<(Kind, bool)> {
        std::mem::take(&mut self.shared.lock().disks.get_mut(name).unwrap().log)
    }

    pub fn largest_request(&self, name: &str) -> usize {
        self.shared.lock().disks[name].largest_request
    }
}

/// Carries out one request and completes it, with the lock held.
fn execute(state: &mut State, (name, request, completion): Job) {
    state.in_flight -= 1;
    let disk = state.disks.get_mut(&name).unwrap();
    let range = |offset: u64, length: usize| offset as usize..offset as usize + length;
    match request.command {
        Command::Read { offset, length } => {
            disk.largest_request = disk.largest_request.max(length as usize);
            let data = Bytes::copy_from_slice(&disk.data[range(offset, length as usize)]);
            completion.read_data(data);
        }
        Command::Write { offset, data } => {
            disk.largest_request = disk.largest_request.max(data.len());
            disk.data[range(offset, data.len())].copy_from_slice(&data);
            disk.log.push((Kind::Write, request.fua));
            completion.ok();
        }
        Command::WriteZeroes { offset, length, .. } => {
            disk.data[range(offset, length as usize)].fill(0);
            disk.log.push((Kind::WriteZeroes, request.fua));
            completion.ok();
        }
        Command::Flush => {
            disk.log.push((Kind::Flush, request.fua));
            completion.ok();
        }
        Command::Trim { .. } => {
            disk.log.push((Kind::Trim, request.fua));
            completion.ok();
        }
        Command::WriteStreaming { .. } => completion.error(nbd::Errno::Inval),
    }
}

impl ExportRegistry for MemoryRegistry {
    fn list(&self) -> Vec<String> {
        self.sizes.iter().map(|(name, _)| name.clone()).collect()
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        let mut state = self.shared.lock();
        if let Some(reason) = &state.refusal {
            return Err(OpenError::Policy(reason.clone()));
        }
        let Some(size) = state.disks.get(name).map(|disk| disk.data.len()) else {
            return Err(OpenError::Unknown);
        };
        state.open += 1;
        state.opened_total += 1;
        let info = ExportInfo {
            size: size as u64,
            can_flush: true,
            can_fua: self.can_fua,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
            read_only: false,
        };
        let worker = self.worker.lock().unwrap().clone();
        Ok(Arc::new(MemoryExport {
            name: name.to_string(),
            info,
            shared: Arc::clone(&self.shared),
            worker: Mutex::new(worker),
        }))
    }
}

struct MemoryExport {
    name: String,
    info: ExportInfo,
    shared: Arc<Shared>,
    worker: Mutex<Sender<Job>>,
}

impl Export for MemoryExport {
    fn info(&self) -> ExportInfo {
        self.info
    }

    fn submit(&self, request: Request, completion: Completion) {
        {
            let mut state = self.shared.lock();
            state.in_flight += 1;
            state.peak_in_flight = state.peak_in_flight.max(state.in_flight);
        }
        self.worker
            .lock()
            .unwrap()
            .send((self.name.clone(), request, completion))
            .unwrap();
    }
}

impl Drop for MemoryExport {
    fn drop(&mut self) {
        // The lock completions run under: dropping the last handle inside a completion
        // would deadlock here.
        let mut state = self.shared.lock();
        state.open -= 1;
        self.shared.changed.notify_all();
    }
}
