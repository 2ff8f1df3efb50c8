"""The machine description every report ends with: CPU, cores, memory, kernel, hypervisor, the
filesystem and device under the temporary directory (where every backing file lives), and the
versions of the tools measured against.

Invariant: describe() never fails; a value it cannot find reads '(unknown)'.
"""

import os

from .procs import sh

TOOLS = (("fio", "fio --version"), ("qemu_storage_daemon", "qemu-storage-daemon --version | head -1"),
         ("nbdkit", "nbdkit --version"), ("rustc", "rustc --version"))


def describe(tmp_dir):
    """An ordered list of (label, value)."""
    mem = sh("grep MemTotal /proc/meminfo").split(":", 1)[-1].strip()
    items = [
        ("CPU model", sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-").strip()),
        ("cores", str(os.cpu_count())),
        ("memory", mem),
        ("hypervisor", sh("lscpu | grep -i 'hypervisor vendor' | cut -d: -f2-").strip()),
        ("kernel", sh("uname -srm")),
        ("OS", sh(". /etc/os-release && echo $PRETTY_NAME")),
        ("backing storage (temp dir)", sh(f"df -T {tmp_dir} | tail -1 | awk '{{print $1\" \"$2\" mounted on \"$7}}'")),
        ("backing device", _device_of(tmp_dir)),
    ]
    items += [(name.replace("_", " "), sh(cmd)) for name, cmd in TOOLS]
    return [(k, v or "(unknown)") for k, v in items]


def _device_of(path):
    """'vda: virtual disk, rotational 0, scheduler [none] ...' for the block device under path."""
    dev = sh(f"df --output=source {path} | tail -1")
    base = os.path.basename(dev)
    for name in (base, base.rstrip("0123456789")):
        sysfs = f"/sys/class/block/{name}"
        if os.path.isdir(sysfs):
            rot = sh(f"cat {sysfs}/queue/rotational 2>/dev/null")
            sched = sh(f"cat {sysfs}/queue/scheduler 2>/dev/null")
            model = sh(f"cat {sysfs}/device/model 2>/dev/null")
            return f"{dev} (rotational {rot or '?'}, scheduler {sched or '?'}{', model ' + model if model else ''})"
    return dev
