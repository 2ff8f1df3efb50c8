"""tandem nodes on loopback for one measurement: a generated drbd.conf resource, preallocated
backing files, one node alone (standalone) or two connected nodes, alice made Primary.

Invariants: every node runs the private copy of the binary set with use_binary (other jobs may
rebuild target/ meanwhile) and is started through the Reaper; ports are picked free at run
time; a Cluster is used as a context manager, so its nodes are stopped and its backing files
deleted whatever happens inside; measurements only start once alice is Primary and, for a pair,
the peer is Connected / Established / UpToDate.

With Setup.link_rtt_ms set, the peers do not talk directly: one tandem-linkemu process relays
alice -> bob and bob -> alice, each direction delayed by half the round trip, and each node gets
its own drbd.conf in which the peer's address is the relay in front of it. The emulator is
stopped with the nodes. Its control socket (`--control`, bench/linkemu.md) lets an experiment
change the running link (Cluster.set_link), e.g. step the delay while fio runs.
"""

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field

from . import procs
from .errors import SetupError

CATCH_UP_DEADLINE_S = 120.0
NODE_START_DEADLINE_S = 20.0
CONNECT_DEADLINE_S = 30.0
ADMIN_TIMEOUT_S = 30.0
DEFAULT_NET = (("max-buffers", "8000"), ("max-epoch-size", "8000"))

LINKEMU_START_DEADLINE_S = 20.0
LINKEMU_CONTROL_TIMEOUT_S = 5.0
_binary = {"path": None, "linkemu": None}


def use_binary(path, linkemu=None):
    """Sets the tandem binary every node and admin command runs, and the link emulator."""
    _binary["path"] = path
    _binary["linkemu"] = linkemu


def binary():
    """The tandem binary in use; SetupError if use_binary was not called."""
    if not _binary["path"]:
        raise SetupError("no tandem binary selected (cluster.use_binary)")
    return _binary["path"]


@dataclass(frozen=True)
class Setup:
    """What to start: kind 'standalone' (alice alone, link dropped) or 'pair' (alice + bob).
    net: extra `net { }` options as (name, value) pairs, in order; disk: `disk { }` options
    (resync and activity-log options) likewise, none by default; options: the resource's
    `options { }` lines (e.g. `srm on`) likewise, none by default; fuse_mount: an absolute
    directory for alice's `fuse-mount` line (her FUSE export), none by default; throttle_us:
    (alice, bob) `disk-throttle-latency` in microseconds, 0 for a node at full speed; metrics:
    alice serves Prometheus metrics on a free loopback port (`metrics-address`, Cluster.metrics_url)."""

    kind: str
    protocol: str = "C"
    net: tuple = DEFAULT_NET
    size_bytes: int = 1 << 30
    link_rtt_ms: float = None
    label: str = field(default="", compare=False)
    disk: tuple = ()
    options: tuple = ()
    fuse_mount: str = None
    throttle_us: tuple = (0, 0)
    metrics: bool = False

    def name(self):
        """'standalone' or 'proto-C' unless a label was given."""
        return self.label or ("standalone" if self.kind == "standalone" else f"proto-{self.protocol}")


def meta_path(disk):
    """The external metadata file of a backing file (beside it, `.md`): external metadata keeps
    the backing files pure data, so replicas compare with `cmp`."""
    return os.path.splitext(disk)[0] + ".md"


def _section(name, pairs):
    """A `name { k v; ... }` block of a resource, or '' when pairs is empty."""
    body = "".join(f"    {k} {v};\n" for k, v in pairs)
    return f"  {name} {{\n{body}  }}\n" if pairs else ""


def resource_text(protocol, net, disks, ports, disk_options=(), options=(), fuse_mount=None, throttle_us=(0, 0),
                  metrics_address=None):
    """The drbd.conf text of resource r0 for alice (disks[0], ports[0]) and bob, with external
    metadata beside each backing file (meta_path); a `disk { }` section only if disk_options,
    an `options { }` section (before `net`) only if options; `fuse-mount "DIR";` in alice's
    `on` section only if fuse_mount; `metrics-address ADDR;` there only if metrics_address."""
    opts = "".join(f"    {k} {v};\n" for k, v in net)
    disk = _section("disk", disk_options)
    fuse = f'    fuse-mount "{fuse_mount}";\n' if fuse_mount else ""
    fuse += f"    metrics-address {metrics_address};\n" if metrics_address else ""
    slow = [f"    disk-throttle-latency {us};\n" if us else "" for us in throttle_us]
    return f"""# written by bench/run
resource r0 {{
{_section("options", options)}  net {{
    protocol {protocol};
    connect-int 1;
{opts}  }}
{disk}  volume 0 {{
    device    /dev/drbd0;
    disk      {disks[0]};
    meta-disk {meta_path(disks[0])};
  }}
  on alice {{
    node-id 0;
    address 127.0.0.1:{ports[0]};
{fuse}{slow[0]}  }}
  on bob {{
    node-id 1;
    address 127.0.0.1:{ports[1]};
{slow[1]}    volume 0 {{
      disk {disks[1]};
      meta-disk {meta_path(disks[1])};
    }}
  }}
}}
"""


def write_res(path, protocol, disks, ports, net=DEFAULT_NET, disk_options=(), options=(), fuse_mount=None,
              throttle_us=(0, 0), metrics_address=None):
    """Writes resource_text to path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(resource_text(protocol, net, disks, ports, disk_options, options, fuse_mount, throttle_us,
                              metrics_address))


def make_image(path, size_bytes=1 << 30):
    """A raw image preallocated and written full of zeros (qemu-img preallocation=full), so every
    measurement overwrites allocated blocks."""
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", "-o", "preallocation=full", path, str(size_bytes)],
                   check=True)


METADATA_FILE_BYTES = 4 << 20


def create_md(res, name, disk):
    """Creates the external metadata file of `disk` and runs `tandem create-md` for node `name`."""
    with open(meta_path(disk), "wb") as f:
        f.truncate(METADATA_FILE_BYTES)
    argv = [binary(), "create-md", "--config", res, "--node", name, "r0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S)
    if proc.returncode != 0:
        raise SetupError(f"tandem create-md for {name}: exit {proc.returncode}: {proc.stderr.strip()}")


def tandem_admin(run_dir, *argv, check=True):
    """Runs `tandem --run-dir run_dir ARGV`; SetupError on failure when check is set."""
    proc = subprocess.run([binary(), "--run-dir", run_dir, *argv], capture_output=True, text=True,
                          timeout=ADMIN_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise SetupError(f"tandem {' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def tandem_status(run_dir):
    """The first resource of `tandem status --json`, or None if the node does not answer."""
    proc = tandem_admin(run_dir, "status", "r0", "--json", check=False)
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)["resources"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def clear_bitmap(run_dir, deadline_s=CONNECT_DEADLINE_S):
    """`tandem new-current-uuid --clear-bitmap r0`, retried while the peer's handshake is still
    in progress (Connected comes a moment before the volumes' handshake ends, and the engine
    refuses the change meanwhile); SetupError on any other failure or at the deadline."""
    t_end = time.monotonic() + deadline_s
    while True:
        proc = tandem_admin(run_dir, "new-current-uuid", "--clear-bitmap", "r0", check=False)
        if proc.returncode == 0:
            return
        if "in progress" not in proc.stderr or time.monotonic() > t_end:
            raise SetupError(f"tandem new-current-uuid --clear-bitmap r0: exit {proc.returncode}: "
                             f"{proc.stderr.strip()}")
        time.sleep(0.1)


def start_node(reaper, workdir, res, name):
    """Starts node `name` of res; returns (Popen, run_dir) once its admin socket answers."""
    run_dir = os.path.join(workdir, f"run-{name}")
    os.makedirs(run_dir, exist_ok=True)
    proc = reaper.spawn([binary(), "node", "--config", res, "--node", name, "--run-dir", run_dir],
                        os.path.join(workdir, f"{name}.log"))
    procs.wait_for(f"node {name} admin socket", lambda: tandem_status(run_dir) is not None,
                   NODE_START_DEADLINE_S, procs=[proc])
    return proc, run_dir


def is_linked(run_dir):
    """True when the first connection is Connected (whatever the disks)."""
    conns = (tandem_status(run_dir) or {}).get("connections") or []
    return bool(conns) and conns[0].get("connection") == "Connected"


def is_connected(run_dir):
    """True when the first connection is Connected and every peer device Established/UpToDate."""
    s = tandem_status(run_dir)
    conns = (s or {}).get("connections") or []
    if not conns or conns[0].get("connection") != "Connected":
        return False
    return all(p.get("replication") == "Established" and p.get("peer_disk") == "UpToDate"
               for p in conns[0].get("peer_devices", []))


def is_drained(run_dir):
    """True when the Primary has nothing in flight, pending or unacknowledged."""
    s = tandem_status(run_dir)
    conns = (s or {}).get("connections") or []
    if not conns:
        return False
    c = conns[0]
    return c.get("ap_in_flight_kib") == 0 and all(
        p.get("pending") == 0 and p.get("unacked") == 0 for p in c.get("peer_devices", []))


class Cluster:
    """The nodes of one Setup. `with Cluster(reaper, workdir, setup) as c:` starts them, makes
    alice Primary and exposes c.uri (the NBD export) and c.watch ({node: pid}); leaving the block
    stops the nodes (recording non-zero exits in c.notes) and deletes the backing files."""

    def __init__(self, reaper, workdir, setup):
        self.reaper, self.setup = reaper, setup
        self.wd = workdir
        self.disks = [os.path.join(workdir, "alice.img"), os.path.join(workdir, "bob.img")]
        self.nodes = []
        self.dirs = {}
        self.notes = []
        self.uri = None
        self.watch = {}
        self.connect_s = None
        self.emulator = None
        self.control_path = None
        self.metrics_url = None

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *_exc):
        self._stop()
        return False

    def _start(self):
        os.makedirs(self.wd, exist_ok=True)
        pair = self.setup.kind == "pair"
        for d in self.disks if pair else self.disks[:1]:
            make_image(d, self.setup.size_bytes)
        configs = self._configs(pair)
        names = ("alice", "bob") if pair else ("alice",)
        for name, disk in zip(names, self.disks):
            create_md(configs[name], name, disk)
        for name in names:
            proc, run_dir = start_node(self.reaper, self.wd, configs[name], name)
            self.nodes.append((name, proc))
            self.dirs[name] = run_dir
            self.watch[name] = proc.pid
        alice = self.dirs["alice"]
        if pair:
            t0 = time.monotonic()
            live = [p for _, p in self.nodes]
            procs.wait_for("alice and bob Connected", lambda: is_linked(alice), CONNECT_DEADLINE_S, procs=live)
            # Fresh (zeroed) disks: skip the initial sync, as DRBD's users do.
            clear_bitmap(alice)
            procs.wait_for("alice and bob Connected/Established/UpToDate", lambda: is_connected(alice),
                           CONNECT_DEADLINE_S, procs=live)
            self.connect_s = time.monotonic() - t0
            tandem_admin(alice, "primary", "r0")
        else:
            tandem_admin(alice, "disconnect", "r0")
            tandem_admin(alice, "primary", "--force", "r0")
        st = tandem_status(alice)
        if not st or st.get("role") != "Primary":
            raise SetupError(f"{self.setup.name()}: alice is not Primary after 'tandem primary r0'")
        self.uri = f"nbd+unix:///r0?socket={alice}/nbd.sock"

    def _configs(self, pair):
        """{node: drbd.conf path}: one shared file, or one per node behind the link emulator."""
        s = self.setup
        metrics = None
        if s.metrics:
            metrics = f"127.0.0.1:{procs.free_ports(1)[0]}"
            self.metrics_url = f"http://{metrics}/metrics"
        if not pair or s.link_rtt_ms is None:
            res = os.path.join(self.wd, "r0.res")
            write_res(res, s.protocol, self.disks, procs.free_ports(2), s.net, s.disk, s.options, s.fuse_mount,
                      s.throttle_us, metrics)
            return {"alice": res, "bob": res}
        if not _binary["linkemu"]:
            raise SetupError("link latency asked for, but no tandem-linkemu binary was selected")
        alice, bob, to_bob, to_alice = procs.free_ports(4)
        self.control_path = os.path.join(self.wd, "linkemu.sock")
        argv = [_binary["linkemu"], "--pair", f"127.0.0.1:{to_bob}=127.0.0.1:{bob}",
                "--pair", f"127.0.0.1:{to_alice}=127.0.0.1:{alice}", "--delay", f"{s.link_rtt_ms / 2:g}ms",
                "--control", self.control_path]
        log = os.path.join(self.wd, "linkemu.log")
        self.emulator = self.reaper.spawn(argv, log)
        procs.wait_for("tandem-linkemu relays listening", lambda: procs.tail(log, 50).count(" -> ") >= 2,
                       LINKEMU_START_DEADLINE_S, procs=[self.emulator])
        out = {"alice": os.path.join(self.wd, "r0-alice.res"), "bob": os.path.join(self.wd, "r0-bob.res")}
        write_res(out["alice"], s.protocol, self.disks, [alice, to_bob], s.net, s.disk, s.options, s.fuse_mount,
                  s.throttle_us, metrics)
        write_res(out["bob"], s.protocol, self.disks, [to_alice, bob], s.net, s.disk, s.options, s.fuse_mount,
                  s.throttle_us, metrics)
        return out

    def set_link(self, request):
        """Sends one request (a dict, bench/linkemu.md's control protocol, e.g. {"delay_ms": 10})
        to the link emulator's control socket; returns its reply. SetupError if there is no
        emulator, it does not answer, or it refuses the request."""
        if self.emulator is None or not self.control_path:
            raise SetupError("set_link: this cluster has no link emulator")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(LINKEMU_CONTROL_TIMEOUT_S)
                sock.connect(self.control_path)
                sock.sendall((json.dumps(request) + "\n").encode())
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
            answer = json.loads(reply.decode())
        except (OSError, ValueError) as exc:
            raise SetupError(f"tandem-linkemu control {request}: {exc}") from exc
        if not answer.get("ok"):
            raise SetupError(f"tandem-linkemu refused {request}: {answer.get('error')}")
        return answer

    def _stop(self):
        for name, proc in self.nodes:
            rc = self.reaper.stop(proc)
            if rc != 0:
                self.notes.append(f"node {name} exited with status {rc} on SIGTERM (expected 0)")
        self.nodes = []
        if self.emulator is not None:
            self.reaper.stop(self.emulator)
            self.emulator = None
        for d in self.disks:
            for path in (d, meta_path(d)):
                if os.path.exists(path):
                    os.remove(path)

    def log_tails(self, lines=30):
        """The last lines of each node's log, for an error report."""
        return {name: procs.tail(os.path.join(self.wd, f"{name}.log"), lines) for name in self.dirs}

    def link_state(self):
        """alice's connection state and last error, or None for standalone."""
        if self.setup.kind != "pair":
            return None
        conns = (tandem_status(self.dirs["alice"]) or {}).get("connections") or [{}]
        return conns[0].get("connection"), conns[0].get("last_error")

    def check_replicas(self):
        """Waits until alice is drained, then until `cmp` finds both backing files equal (with a
        deadline); returns a dict with result IDENTICAL or DIFFERENT and the time it took."""
        t0 = time.monotonic()
        result = {}
        try:
            procs.wait_for("primary to drain", lambda: is_drained(self.dirs["alice"]), CATCH_UP_DEADLINE_S)
        except SetupError as exc:
            result["drain_error"] = str(exc)
        attempts = 0
        while True:
            attempts += 1
            same = subprocess.run(["cmp", "-s", self.disks[0], self.disks[1]]).returncode == 0
            if same or time.monotonic() - t0 > CATCH_UP_DEADLINE_S:
                break
            time.sleep(0.5)
        result.update(result="IDENTICAL" if same else "DIFFERENT", seconds=round(time.monotonic() - t0, 2),
                      cmp_attempts=attempts)
        if not same:
            result["first_difference"] = subprocess.run(["cmp", self.disks[0], self.disks[1]], capture_output=True,
                                                        text=True).stdout.strip()
        sb = tandem_status(self.dirs["bob"]) or {}
        try:
            result["received_kib"] = sb["connections"][0]["peer_devices"][0]["received_kib"]
            result["written_kib"] = sb["devices"][0]["written_kib"]
        except (KeyError, IndexError, TypeError):
            pass
        return result
