//! `drbdadm` and `drbdsetup` entry points: the tandem binary invoked through a link of one of
//! those names (argv[0]) accepts the part of their command lines that scripts around DRBD
//! use, and refuses the rest naming what it refused (exit status 2, like a usage error).
//!
//! Accepted:
//! - `drbdsetup events2 [--now] [--poll] [--statistics|-s] [--full] [--timestamps] [RES|all]`
//! - `drbdsetup status [--json] [--verbose|-v] [--statistics|-s] [RES|all]` (`--json`
//!   prints drbdsetup's schema, as `tandem status --drbd-json`), `drbdsetup role RES`,
//!   `drbdsetup wait-connect-resource RES [--wfc-timeout=S]` (as `tandem wait-connect`; the
//!   OCF agent's `--degr-wfc-timeout=S --outdated-wfc-timeout=S` are accepted and ignored)
//! - `drbdadm status [...]` as `drbdsetup status`; `drbdadm role|cstate|dstate RES`;
//!   `drbdadm up|down|adjust|attach|detach|invalidate|suspend-io|resume-io RES`,
//!   `drbdadm primary [--force] RES`, `secondary [--force] RES`,
//!   `connect [--discard-my-data] RES[:PEER]`, `disconnect|invalidate-remote|verify|
//!   pause-sync|resume-sync RES[:PEER]`, `new-current-uuid [--clear-bitmap] RES`;
//!   `drbdadm forget-peer RES:PEER`; `drbdadm outdate RES` and `get-gi|show-gi
//!   RES[:PEER][/VOL]`, which read the metadata
//!   on disk when no node runs;
//!   `drbdadm sh-resources`, `sh-dev|sh-minor|sh-ll-dev|sh-md-dev RES`, which read the
//!   configuration instead of the node.
//!
//! `drbdadm -V` (or `--version`) prints drbdadm's shell-assignable version variables
//! ([`version_text`]), naming the DRBD versions whose behaviour tandem follows; `drbdadm
//! adjust --skip-net` leaves the connections' options alone.
//!
//! Where the node and the configuration are (one rule for both tools, as for tandem's own
//! verbs): the node's run directory is `TANDEM_RUN_DIR`, else `/run/tandem`; the
//! configuration (`sh-*` only) is `-c FILE` / `--config-file FILE`, else
//! `/etc/tandem/tandem.conf`; this node's `on` section (`sh-ll-dev`, `sh-md-dev`) is
//! `__DRBD_NODE__` (drbdadm's own override), else the host name.
//!
//! Output of the query verbs (DRBD 9's drbdadm): `role` prints this node's role; `cstate`
//! one connection state per line, peers sorted by name; `dstate` one line per volume,
//! `LOCAL/PEER...` (peers sorted by name). `RES:PEER` restricts `cstate`/`dstate` to a
//! peer, `RES/VOL` restricts `dstate` to a volume; verbs that change state act on whole
//! resources, so they refuse `/VOL`.
//!
//! Invariant: parsing ([`parse`]) is pure and never panics; a command line it does not
//! understand is a [`CompatError`], never a guess.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use admin::{Request, StatusReport};

use crate::cli::{EventsArgs, Target, CONFIG_PATH_DEFAULT, RUN_DIR_DEFAULT};
use crate::commands::{self, StatusFormat, StatusStyle};
use crate::error::CliError;
use crate::terminal;

/// Which DRBD tool the binary was invoked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `drbdadm`.
    Drbdadm,
    /// `drbdsetup`.
    Drbdsetup,
}

impl Tool {
    /// The tool whose name is the file name of `arg0`, if any.
    pub fn from_argv0(arg0: &OsStr) -> Option<Self> {
        match Path::new(arg0).file_name()?.to_str()? {
            "drbdadm" => Some(Self::Drbdadm),
            "drbdsetup" => Some(Self::Drbdsetup),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Drbdadm => "drbdadm",
            Self::Drbdsetup => "drbdsetup",
        }
    }

    fn supported(self) -> &'static str {
        match self {
            Self::Drbdadm => DRBDADM_SUPPORTED,
            Self::Drbdsetup => DRBDSETUP_SUPPORTED,
        }
    }
}

const DRBDADM_SUPPORTED: &str = "status role cstate dstate up down primary secondary adjust \
connect disconnect attach detach invalidate invalidate-remote verify pause-sync resume-sync \
suspend-io resume-io new-current-uuid outdate forget-peer get-gi show-gi resize sh-resources \
sh-dev sh-minor sh-ll-dev sh-md-dev";
const DRBDSETUP_SUPPORTED: &str = "events2 status role wait-connect-resource";

/// A command line of either tool, understood.
#[derive(Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `drbdsetup events2`.
    Events(EventsArgs),
    /// `drbdsetup wait-connect-resource RES [--wfc-timeout=S]`.
    WaitConnect {
        /// The resource.
        spec: Spec,
        /// `--wfc-timeout` in seconds; `None` (or 0) waits as long as it takes.
        timeout_seconds: Option<u64>,
    },
    /// `drbdsetup status`, `drbdadm status`.
    Status {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// How to print it.
        style: StatusStyle,
        /// `--verbose`.
        verbose: bool,
        /// `--statistics`.
        statistics: bool,
    },
    /// `role`, `cstate` or `dstate`: one state, read from the node's status report.
    Query {
        /// Which state.
        state: QueriedState,
        /// Which resource, peer and volume.
        spec: Spec,
    },
    /// A verb tandem's node carries out (`primary`, `up`, ...).
    Request(Request),
    /// `drbdadm -V`: the version variables.
    Version,
    /// `drbdadm outdate RES`: the running node, else the metadata on disk.
    Outdate {
        /// The resource.
        resource: String,
        /// The configuration, for the metadata when no node runs.
        config: PathBuf,
    },
    /// `drbdadm get-gi|show-gi RES[:PEER][/VOL]`.
    Gi {
        /// Which resource, peer and volume.
        spec: Spec,
        /// `show-gi`: every value explained.
        explained: bool,
        /// The configuration, for reading the metadata when no node runs.
        config: PathBuf,
    },
    /// An `sh-*` verb, answered from the configuration.
    Sh {
        /// Which one.
        verb: ShVerb,
        /// The configuration file.
        config: PathBuf,
        /// The resource, for every verb but `sh-resources`.
        resource: Option<String>,
    },
}

/// The state a query verb prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueriedState {
    /// `role`: this node's role.
    Role,
    /// `cstate`: the connection states.
    Connection,
    /// `dstate`: the disk states, local then peers.
    Disk,
}

/// The `sh-*` verbs tandem answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShVerb {
    /// Every resource name, on one line.
    Resources,
    /// The device path of each volume.
    Dev,
    /// The minor of each volume.
    Minor,
    /// This node's backing disk of each volume (`none` without one).
    LowerDev,
    /// Where this node keeps each volume's metadata (the backing disk when internal).
    MetaDev,
}

/// drbdadm's `RES[:PEER][/VOL]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    /// The resource; `None` for `all`.
    pub resource: Option<String>,
    /// The connection (peer host) name.
    pub peer: Option<String>,
    /// The volume number.
    pub volume: Option<u16>,
}

/// Why a command line was not accepted.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompatError {
    /// No command was given.
    #[error("no command given; tandem's {tool} accepts: {supported}")]
    NoCommand {
        /// The tool's name.
        tool: &'static str,
        /// The commands it accepts.
        supported: &'static str,
    },
    /// The command exists in DRBD's tool but not in tandem's.
    #[error("'{command}' is not supported by tandem's {tool}; it accepts: {supported}")]
    Unsupported {
        /// The tool's name.
        tool: &'static str,
        /// The refused command.
        command: String,
        /// The commands it accepts.
        supported: &'static str,
    },
    /// A tool option is malformed (`-c` without a file name).
    #[error("{0}")]
    BadOption(String),
    /// The command is known, its arguments are not.
    #[error("{command}: {problem}")]
    Usage {
        /// The command.
        command: String,
        /// What is wrong.
        problem: String,
    },
}

/// The arguments after the command name: flags, values of `-c`, positionals.
#[derive(Debug, Default)]
struct Words {
    flags: Vec<String>,
    config: Option<String>,
    positionals: Vec<String>,
}

impl Words {
    fn split(args: &[String]) -> Result<(Option<String>, Self), String> {
        let mut words = Self::default();
        let mut command = None;
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if let Some(value) = arg.strip_prefix("--config-file=") {
                words.config = Some(value.to_string());
            } else if arg == "-c" || arg == "--config-file" {
                let value = iter
                    .next()
                    .ok_or_else(|| format!("{arg} needs a file name"))?;
                words.config = Some(value.clone());
            } else if arg == "--" {
                continue;
            } else if arg.starts_with('-') && arg.len() > 1 {
                words.flags.push(arg.clone());
            } else if command.is_none() {
                command = Some(arg.clone());
            } else {
                words.positionals.push(arg.clone());
            }
        }
        Ok((command, words))
    }

    /// Whether any of `names` was given; removes them.
    fn take(&mut self, names: &[&str]) -> bool {
        let before = self.flags.len();
        self.flags.retain(|flag| !names.contains(&flag.as_str()));
        self.flags.len() != before
    }

    /// The text of `--NAME=VALUE`, if given; removes it.
    fn take_value(&mut self, name: &str) -> Option<String> {
        let prefix = format!("{name}=");
        let index = self
            .flags
            .iter()
            .position(|flag| flag.starts_with(&prefix))?;
        let flag = self.flags.remove(index);
        Some(flag.get(prefix.len()..).unwrap_or_default().to_string())
    }

    /// The value of `--NAME=VALUE`, if given; removes it. A value that is not a number of
    /// seconds is an error.
    fn take_seconds(&mut self, name: &str) -> Result<Option<u64>, String> {
        let Some(value) = self.take_value(name) else {
            return Ok(None);
        };
        value
            .parse::<u64>()
            .map(Some)
            .map_err(|_| format!("{name}: '{value}' is not a number of seconds"))
    }

    /// Fails on a flag left over after the command took its own.
    fn finish(&self, command: &str) -> Result<(), CompatError> {
        match self.flags.first() {
            None => Ok(()),
            Some(flag) => Err(usage(command, format!("unknown option '{flag}'"))),
        }
    }

    /// The one resource argument (`all` or none: `None`), as drbdadm's spec.
    fn spec(&self, command: &str) -> Result<Spec, CompatError> {
        match self.positionals.as_slice() {
            [] => Ok(Spec::default()),
            [one] => parse_spec(one).map_err(|problem| usage(command, problem)),
            [_, extra, ..] => Err(usage(command, format!("unexpected argument '{extra}'"))),
        }
    }
}

fn usage(command: &str, problem: String) -> CompatError {
    CompatError::Usage {
        command: command.to_string(),
        problem,
    }
}

/// `RES[:PEER][/VOL]`; `all` (or nothing) is every resource.
pub fn parse_spec(text: &str) -> Result<Spec, String> {
    let (rest, volume) = match text.split_once('/') {
        Some((rest, volume)) => {
            let number = volume
                .parse::<u16>()
                .map_err(|_| format!("'{volume}' in '{text}' is not a volume number"))?;
            (rest, Some(number))
        }
        None => (text, None),
    };
    let (resource, peer) = match rest.split_once(':') {
        Some((resource, peer)) if !peer.is_empty() => (resource, Some(peer.to_string())),
        Some(_) => return Err(format!("'{text}' names no peer after ':'")),
        None => (rest, None),
    };
    if resource.is_empty() {
        return Err(format!("'{text}' names no resource"));
    }
    let resource = Some(resource.to_string()).filter(|name| name != "all");
    Ok(Spec {
        resource,
        peer,
        volume,
    })
}

/// Understands `args` (the arguments after argv[0]) as `tool`'s command line.
pub fn parse(tool: Tool, args: &[String]) -> Result<Invocation, CompatError> {
    let (command, mut words) = Words::split(args).map_err(CompatError::BadOption)?;
    let Some(command) = command else {
        if tool == Tool::Drbdadm && words.take(&["-V", "--version"]) {
            words.finish("-V")?;
            return Ok(Invocation::Version);
        }
        return Err(CompatError::NoCommand {
            tool: tool.name(),
            supported: tool.supported(),
        });
    };
    let unsupported = || CompatError::Unsupported {
        tool: tool.name(),
        command: command.clone(),
        supported: tool.supported(),
    };
    let invocation = match (tool, command.as_str()) {
        (Tool::Drbdsetup, "events2") => events(&mut words, &command)?,
        (Tool::Drbdsetup, "wait-connect-resource") => wait_connect(&mut words, &command)?,
        (_, "status") => status(&mut words, &command)?,
        (_, "role") => query(&words, &command, QueriedState::Role)?,
        (Tool::Drbdadm, "cstate") => query(&words, &command, QueriedState::Connection)?,
        (Tool::Drbdadm, "dstate") => query(&words, &command, QueriedState::Disk)?,
        (Tool::Drbdadm, "forget-peer") => {
            let text = words.positionals.first().cloned().unwrap_or_default();
            let spec = words
                .spec(&command)
                .and_then(|_| peer_spec(&text).map_err(|problem| usage(&command, problem)))?;
            Invocation::Request(forget_peer_request(spec))
        }
        (Tool::Drbdadm, "outdate") => {
            let resource = whole_resource(&words, &command)?
                .ok_or_else(|| usage(&command, "needs one resource name".to_string()))?;
            Invocation::Outdate {
                resource,
                config: config_of(&words),
            }
        }
        (Tool::Drbdadm, "resize") => resize(&mut words, &command)?,
        (Tool::Drbdadm, "get-gi" | "show-gi") => {
            let spec = words
                .spec(&command)
                .and_then(|spec| one_resource(spec).map_err(|problem| usage(&command, problem)))?;
            Invocation::Gi {
                spec,
                explained: command == "show-gi",
                config: config_of(&words),
            }
        }
        (Tool::Drbdadm, verb) if verb.starts_with("sh-") => {
            sh(&words, verb).ok_or_else(unsupported)??
        }
        (Tool::Drbdadm, verb) => {
            Invocation::Request(request(&mut words, verb).ok_or_else(unsupported)??)
        }
        (Tool::Drbdsetup, _) => return Err(unsupported()),
    };
    words.finish(&command)?;
    Ok(invocation)
}

/// `drbdadm resize [--size=SIZE] [--assume-clean] [--assume-peer-has-space] RES[/VOL]`.
fn resize(words: &mut Words, command: &str) -> Result<Invocation, CompatError> {
    let assume_clean = words.take(&["--assume-clean"]);
    let assume_peer_has_space = words.take(&["--assume-peer-has-space"]);
    let size_bytes = match words.take_value("--size") {
        Some(text) => {
            Some(crate::cli::parse_size(&text).map_err(|problem| usage(command, problem))?)
        }
        None => None,
    };
    let spec = words.spec(command)?;
    if spec.peer.is_some() {
        return Err(usage(command, "takes no peer".to_string()));
    }
    Ok(Invocation::Request(Request::Resize {
        resource: spec.resource,
        volume: spec.volume,
        size_bytes,
        assume_clean,
        assume_peer_has_space,
    }))
}

fn events(words: &mut Words, command: &str) -> Result<Invocation, CompatError> {
    let args = EventsArgs {
        statistics: words.take(&["--statistics", "-s"]),
        now: words.take(&["--now"]),
        poll: words.take(&["--poll"]),
        full: words.take(&["--full"]),
        timestamps: words.take(&["--timestamps"]),
        target: Target {
            resource: whole_resource(words, command)?,
        },
    };
    if args.now && args.poll {
        return Err(usage(
            command,
            "--now and --poll exclude each other".to_string(),
        ));
    }
    Ok(Invocation::Events(args))
}

/// `wait-connect-resource`: tandem cannot tell a degraded or outdated start from another, so
/// `--degr-wfc-timeout` and `--outdated-wfc-timeout` are accepted and only `--wfc-timeout`
/// bounds the wait (the OCF agent passes all three with one value).
fn wait_connect(words: &mut Words, command: &str) -> Result<Invocation, CompatError> {
    let mut seconds = |name: &str| {
        words
            .take_seconds(name)
            .map_err(|problem| usage(command, problem))
    };
    let timeout_seconds = seconds("--wfc-timeout")?.filter(|seconds| *seconds > 0);
    seconds("--degr-wfc-timeout")?;
    seconds("--outdated-wfc-timeout")?;
    let spec = words.spec(command)?;
    check_query(QueriedState::Connection, &spec).map_err(|problem| usage(command, problem))?;
    if spec.peer.is_some() {
        return Err(usage(
            command,
            "takes a resource name, not a peer".to_string(),
        ));
    }
    Ok(Invocation::WaitConnect {
        spec,
        timeout_seconds,
    })
}

fn status(words: &mut Words, command: &str) -> Result<Invocation, CompatError> {
    let json = words.take(&["--json"]);
    let verbose = words.take(&["--verbose", "-v"]);
    let statistics = words.take(&["--statistics", "-s"]);
    let style = if json {
        StatusStyle::DrbdJson
    } else {
        StatusStyle::Text
    };
    Ok(Invocation::Status {
        resource: whole_resource(words, command)?,
        style,
        verbose,
        statistics,
    })
}

/// The resource argument of a command that takes no peer or volume.
fn whole_resource(words: &Words, command: &str) -> Result<Option<String>, CompatError> {
    let spec = words.spec(command)?;
    if spec.peer.is_some() || spec.volume.is_some() {
        return Err(usage(
            command,
            "takes a resource name, not a peer or volume".to_string(),
        ));
    }
    Ok(spec.resource)
}

fn query(words: &Words, command: &str, state: QueriedState) -> Result<Invocation, CompatError> {
    let spec = words.spec(command)?;
    check_query(state, &spec).map_err(|problem| usage(command, problem))?;
    Ok(Invocation::Query { state, spec })
}

/// What a query verb accepts: one resource; a peer for `cstate`/`dstate`; a volume for
/// `dstate`.
fn check_query(state: QueriedState, spec: &Spec) -> Result<(), String> {
    if spec.resource.is_none() {
        return Err("needs one resource name".to_string());
    }
    if state != QueriedState::Disk && spec.volume.is_some() {
        return Err("takes no volume".to_string());
    }
    if state == QueriedState::Role && spec.peer.is_some() {
        return Err("takes no peer".to_string());
    }
    Ok(())
}

/// `RES[:PEER][/VOL]` as `state`'s query verb accepts it (`tandem role|cstate|dstate`).
pub fn query_spec(state: QueriedState, text: &str) -> Result<Spec, String> {
    let spec = parse_spec(text)?;
    check_query(state, &spec)?;
    Ok(spec)
}

/// The configuration file: `-c FILE`, else tandem's default.
fn config_of(words: &Words) -> PathBuf {
    PathBuf::from(
        words
            .config
            .clone()
            .unwrap_or_else(|| CONFIG_PATH_DEFAULT.to_string()),
    )
}

/// `RES:PEER` as forget-peer takes it: one resource, one peer, no volume.
pub fn peer_spec(text: &str) -> Result<Spec, String> {
    let spec = one_resource(parse_spec(text)?)?;
    match (&spec.peer, spec.volume) {
        (Some(_), None) => Ok(spec),
        (None, _) => Err(format!("'{text}' names no peer; write RES:PEER")),
        (Some(_), Some(_)) => {
            Err("takes no volume: a peer is forgotten for every volume".to_string())
        }
    }
}

/// `RES[:PEER]` for net-options (`volume` false) or `RES[/VOL]` for disk-options.
pub fn options_spec(text: &str, volume: bool) -> Result<Spec, String> {
    let spec = one_resource(parse_spec(text)?)?;
    match (volume, &spec.peer, spec.volume) {
        (false, _, Some(_)) => Err("takes a peer, not a volume: RES[:PEER]".to_string()),
        (true, Some(_), _) => Err("takes a volume, not a peer: RES[/VOL]".to_string()),
        _ => Ok(spec),
    }
}

/// `--NAME VALUE` and `--NAME=VALUE` words as `(NAME, VALUE)` pairs.
pub fn option_pairs(words: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut rest = words.iter();
    while let Some(word) = rest.next() {
        let Some(option) = word.strip_prefix("--").filter(|option| !option.is_empty()) else {
            return Err(format!("expected an option --NAME VALUE, found '{word}'"));
        };
        let pair = match option.split_once('=') {
            Some((name, value)) => (name.to_string(), value.to_string()),
            None => {
                let value = rest
                    .next()
                    .ok_or_else(|| format!("--{option} needs a value"))?;
                (option.to_string(), value.clone())
            }
        };
        pairs.push(pair);
    }
    Ok(pairs)
}

/// The request of `forget-peer` for a [`peer_spec`].
pub fn forget_peer_request(spec: Spec) -> Request {
    Request::ForgetPeer {
        resource: spec.resource.unwrap_or_default(),
        peer: spec.peer.unwrap_or_default(),
    }
}

/// `RES[:PEER][/VOL]` as get-gi and show-gi accept it: one resource.
pub fn gi_spec(text: &str) -> Result<Spec, String> {
    one_resource(parse_spec(text)?)
}

fn one_resource(spec: Spec) -> Result<Spec, String> {
    match spec.resource {
        Some(_) => Ok(spec),
        None => Err("needs one resource name".to_string()),
    }
}

/// Prints `state` for `spec`, from the node's status report.
pub fn run_query(run_dir: &Path, state: QueriedState, spec: &Spec) -> Result<(), CliError> {
    let report = commands::fetch_report(run_dir, spec.resource.clone())?;
    let text = query_text(&report, state, spec).map_err(CliError::Refused)?;
    terminal::print(&text).map(|_| ())
}

/// The request of a drbdadm verb tandem's node carries out; `None` for other verbs.
fn request(words: &mut Words, verb: &str) -> Option<Result<Request, CompatError>> {
    let peer_verb = matches!(
        verb,
        "connect" | "disconnect" | "invalidate-remote" | "verify" | "pause-sync" | "resume-sync"
    );
    let known = peer_verb
        || matches!(
            verb,
            "up" | "down"
                | "adjust"
                | "attach"
                | "detach"
                | "invalidate"
                | "suspend-io"
                | "resume-io"
                | "primary"
                | "secondary"
                | "new-current-uuid"
        );
    if !known {
        return None;
    }
    Some(words.spec(verb).and_then(|spec| {
        if spec.volume.is_some() {
            return Err(usage(
                verb,
                "tandem acts on whole resources: name a resource, not a volume".to_string(),
            ));
        }
        if spec.peer.is_some() && !peer_verb {
            return Err(usage(verb, "takes no peer".to_string()));
        }
        Ok(verb_request(words, verb, spec))
    }))
}

fn verb_request(words: &mut Words, verb: &str, spec: Spec) -> Request {
    let Spec { resource, peer, .. } = spec;
    match verb {
        "up" => Request::Up { resource },
        "down" => Request::Down { resource },
        "adjust" => Request::Adjust {
            resource,
            skip_net: words.take(&["--skip-net"]),
        },
        "attach" => Request::Attach { resource },
        "detach" => Request::Detach { resource },
        "invalidate" => Request::Invalidate { resource },
        "resume-io" => Request::ResumeIo { resource },
        "suspend-io" => Request::SuspendIo { resource },
        "primary" => Request::Primary {
            resource,
            force: words.take(&["--force"]),
        },
        "secondary" => Request::Secondary {
            resource,
            force: words.take(&["--force"]),
        },
        "new-current-uuid" => Request::NewCurrentUuid {
            resource,
            clear_bitmap: words.take(&["--clear-bitmap"]),
        },
        "connect" => Request::Connect {
            resource,
            peer,
            discard_my_data: words.take(&["--discard-my-data"]),
        },
        "disconnect" => Request::Disconnect { resource, peer },
        "invalidate-remote" => Request::InvalidateRemote { resource, peer },
        "verify" => Request::Verify { resource, peer },
        "pause-sync" => Request::PauseSync { resource, peer },
        _ => Request::ResumeSync { resource, peer },
    }
}

fn sh(words: &Words, verb: &str) -> Option<Result<Invocation, CompatError>> {
    let sh_verb = match verb {
        "sh-resources" => ShVerb::Resources,
        "sh-dev" => ShVerb::Dev,
        "sh-minor" => ShVerb::Minor,
        "sh-ll-dev" => ShVerb::LowerDev,
        "sh-md-dev" => ShVerb::MetaDev,
        _ => return None,
    };
    let config = config_of(words);
    let resource = match (sh_verb, words.spec(verb)) {
        (_, Err(error)) => return Some(Err(error)),
        (ShVerb::Resources, Ok(spec)) if spec == Spec::default() => None,
        (ShVerb::Resources, Ok(_)) => {
            return Some(Err(usage(verb, "takes no resource".to_string())))
        }
        (
            _,
            Ok(Spec {
                resource: Some(resource),
                peer: None,
                volume: None,
            }),
        ) => Some(resource),
        (_, Ok(_)) => return Some(Err(usage(verb, "needs one resource name".to_string()))),
    };
    Some(Ok(Invocation::Sh {
        verb: sh_verb,
        config,
        resource,
    }))
}

/// Runs `tool` with `args` (after argv[0]); the process's exit status.
pub fn main(tool: Tool, args: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    let args: Result<Vec<String>, _> = args.map(|arg| arg.into_string()).collect();
    let Ok(args) = args else {
        eprintln!("{}: an argument is not valid UTF-8", tool.name());
        return ExitCode::from(2);
    };
    let invocation = match parse(tool, &args) {
        Ok(invocation) => invocation,
        Err(error) => {
            eprintln!("{}: {error}", tool.name());
            return ExitCode::from(2);
        }
    };
    match run(invocation, &run_dir()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}: {error}", tool.name());
            ExitCode::FAILURE
        }
    }
}

/// `TANDEM_RUN_DIR`, else tandem's default, as for tandem's own verbs.
fn run_dir() -> PathBuf {
    std::env::var_os("TANDEM_RUN_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(RUN_DIR_DEFAULT), PathBuf::from)
}

fn run(invocation: Invocation, run_dir: &Path) -> Result<(), CliError> {
    match invocation {
        Invocation::Events(args) => commands::events(run_dir, &args),
        Invocation::WaitConnect {
            spec,
            timeout_seconds,
        } => crate::wait_connect::run(
            run_dir,
            &spec,
            timeout_seconds.map(std::time::Duration::from_secs),
        ),
        Invocation::Status {
            resource,
            style,
            verbose,
            statistics,
        } => commands::status(
            run_dir,
            resource,
            StatusFormat {
                style,
                verbose,
                statistics,
            },
        ),
        Invocation::Query { state, spec } => run_query(run_dir, state, &spec),
        Invocation::Request(request) => commands::simple(run_dir, &request),
        Invocation::Version => terminal::print(&version_text()).map(|_| ()),
        Invocation::Outdate { resource, config } => crate::md::outdate(
            run_dir,
            crate::md::MdArgs {
                config,
                node: Some(node_name()?),
                resource,
            },
        ),
        Invocation::Gi {
            spec,
            explained,
            config,
        } => {
            let on_disk = crate::gi::OnDisk {
                config,
                node: Some(node_name()?),
            };
            crate::gi::run(run_dir, &spec, on_disk, explained)
        }
        Invocation::Sh {
            verb,
            config,
            resource,
        } => {
            let loaded =
                config::load(&config).map_err(|error| CliError::Dump(error.to_string()))?;
            let node = node_name()?;
            let text =
                sh_text(&loaded, verb, resource.as_deref(), &node).map_err(CliError::Refused)?;
            terminal::print(&text).map(|_| ())
        }
    }
}

/// The DRBD kernel module release whose behaviour tandem's node follows (DRBD 9.2), as
/// `(major, minor, sublevel)`.
const DRBD_KERNEL_FOLLOWED: (u8, u8, u8) = (9, 2, 0);
/// The drbd-utils release whose command lines tandem's compat entry points follow.
const DRBD_UTILS_FOLLOWED: (u8, u8, u8) = (9, 22, 0);

/// What `drbdadm -V` prints: drbdadm's `NAME=VALUE` lines, values escaped for a shell's
/// `eval` as drbdadm escapes them (a backslash before each space), so scripts that `eval`
/// the output or grep one variable read tandem as the DRBD versions it follows.
pub fn version_text() -> String {
    let code =
        |(major, minor, sublevel): (u8, u8, u8)| format!("0x{major:02x}{minor:02x}{sublevel:02x}");
    let dotted = |(major, minor, sublevel): (u8, u8, u8)| format!("{major}.{minor}.{sublevel}");
    let buildtag = format!(
        "GIT-hash: {} build by tandem {}",
        env!("TANDEM_COMMIT"),
        env!("CARGO_PKG_VERSION")
    );
    let lines = [
        ("DRBDADM_BUILDTAG", buildtag.replace(' ', "\\ ")),
        ("DRBDADM_API_VERSION", "2".to_string()),
        ("DRBD_KERNEL_VERSION_CODE", code(DRBD_KERNEL_FOLLOWED)),
        ("DRBD_KERNEL_VERSION", dotted(DRBD_KERNEL_FOLLOWED)),
        ("DRBDADM_VERSION_CODE", code(DRBD_UTILS_FOLLOWED)),
        ("DRBDADM_VERSION", dotted(DRBD_UTILS_FOLLOWED)),
    ];
    lines
        .iter()
        .map(|(name, value)| format!("{name}={value}\n"))
        .collect()
}

/// `__DRBD_NODE__`, else the host name.
fn node_name() -> Result<String, CliError> {
    match std::env::var("__DRBD_NODE__") {
        Ok(node) if !node.is_empty() => Ok(node),
        _ => crate::md::host_name(),
    }
}

/// What `role`, `cstate` or `dstate` prints for `spec` from `report`.
pub fn query_text(
    report: &StatusReport,
    state: QueriedState,
    spec: &Spec,
) -> Result<String, String> {
    let name = spec.resource.as_deref().unwrap_or_default();
    let resource = report
        .resources
        .iter()
        .find(|resource| resource.name == name)
        .ok_or_else(|| format!("no resource named '{name}' on this node"))?;
    let mut connections: Vec<_> = resource
        .connections
        .iter()
        .filter(|connection| {
            spec.peer
                .as_ref()
                .is_none_or(|peer| &connection.name == peer)
        })
        .collect();
    if let (Some(peer), true) = (&spec.peer, connections.is_empty()) {
        return Err(format!(
            "resource '{name}' has no connection named '{peer}'"
        ));
    }
    connections.sort_by(|a, b| a.name.cmp(&b.name));
    let lines: Vec<String> = match state {
        QueriedState::Role => vec![resource.role.clone()],
        QueriedState::Connection => connections
            .iter()
            .map(|connection| connection.connection.clone())
            .collect(),
        QueriedState::Disk => {
            let mut devices: Vec<_> = resource
                .devices
                .iter()
                .filter(|device| spec.volume.is_none_or(|volume| device.volume == volume))
                .collect();
            if let (Some(volume), true) = (spec.volume, devices.is_empty()) {
                return Err(format!("resource '{name}' has no volume {volume}"));
            }
            devices.sort_by_key(|device| device.volume);
            devices
                .iter()
                .map(|device| {
                    let peers = connections.iter().map(|connection| {
                        let peer_device = connection
                            .peer_devices
                            .iter()
                            .find(|peer_device| peer_device.volume == device.volume);
                        peer_device.map_or("DUnknown", |peer_device| peer_device.peer_disk.as_str())
                    });
                    std::iter::once(device.disk.as_str())
                        .chain(peers)
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .collect()
        }
    };
    Ok(lines.iter().map(|line| format!("{line}\n")).collect())
}

/// What an `sh-*` verb prints from the configuration, for node `node`.
pub fn sh_text(
    config: &config::Config,
    verb: ShVerb,
    resource: Option<&str>,
    node: &str,
) -> Result<String, String> {
    if verb == ShVerb::Resources {
        let names: Vec<&str> = config
            .resources
            .iter()
            .map(|resource| resource.name.as_str())
            .collect();
        return Ok(format!("{}\n", names.join(" ")));
    }
    let name = resource.unwrap_or_default();
    let resource = config
        .resources
        .iter()
        .find(|candidate| candidate.name == name)
        .ok_or_else(|| format!("'{name}' not defined in the configuration"))?;
    let host = resource
        .hosts
        .iter()
        .find(|host| host.name == node)
        .ok_or_else(|| {
            format!(
                "resource '{name}' has no 'on {node}' section (set __DRBD_NODE__ to this node's \
                 name)"
            )
        })?;
    let lines: Vec<String> = host
        .volumes
        .iter()
        .map(|volume| match verb {
            ShVerb::Dev => volume.device.clone().unwrap_or_else(|| "none".to_string()),
            ShVerb::Minor => volume
                .minor
                .map_or_else(|| "none".to_string(), |minor| minor.to_string()),
            ShVerb::LowerDev => volume
                .disk
                .as_ref()
                .map_or_else(|| "none".to_string(), |disk| disk.display().to_string()),
            _ => match (&volume.meta_disk, &volume.disk) {
                (config::MetaDisk::External { path, .. }, _) => path.display().to_string(),
                (config::MetaDisk::Internal, Some(disk)) => disk.display().to_string(),
                (config::MetaDisk::Internal, None) => "none".to_string(),
            },
        })
        .collect();
    Ok(lines.iter().map(|line| format!("{line}\n")).collect())
}

#[cfg(test)]
mod tests;
