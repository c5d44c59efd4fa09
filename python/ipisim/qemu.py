"""`ipisim validate --qemu`: boot a real kernel under QEMU at any CPU count and compare its counts.

An initramfs holds busybox-static, the validation programs of native/*.c compiled statically and
a small /init. The guest turns RT throttling off, runs each program pinned to CPU 0 (as
`ipisim validate` does on the host), writes the programs' per-CPU TLB and CAL deltas and the
/proc/vmstat deltas to its second serial port and powers off. The same programs are then
simulated on a machine of the guest's shape with the kernel preset matching the image. Counts
are the kernel's own under TCG too; times under QEMU mean nothing and are not compared.
docs/qemu-validate.md describes it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ipisim
from ipisim import hw

PROGRAMS = ("shootdown", "membarrier", "tlb_flush", "lru_file_mmap_read", "reclaim", "migrate")
DEFAULT_PROGRAMS = ("shootdown", "membarrier", "tlb_flush")
"""What `--programs` runs by default: lru_file_mmap_read and reclaim take minutes under TCG, migrate needs
2 nodes."""
TOOLS = ("costs",)
"""Also in the guest, not validation jobs: native/costs.c, `ipisim probe`'s measurements, for a cost
table measured under the guest's accelerator (examples/tcg_costs.py)."""
FILE_PROGRAMS = ("lru_file_mmap_read", "reclaim", "costs")
"""Programs whose files must be on a filesystem reclaim can unmap and drop pages of (not tmpfs)."""
VMSTAT_PREFIXES = ("nr_tlb", "pgscan", "pgsteal", "pgmigrate")
VMSTAT_COUNTS = {
    # With the reclaim cgroup's memory.stat (memory.reclaim counts there only); its processes are
    # not reclaimed globally, so nothing is counted twice.
    "pgscan": ("pgscan_kswapd", "pgscan_direct", "pgscan_khugepaged", "memcg_pgscan_direct"),
    "pgsteal": ("pgsteal_kswapd", "pgsteal_direct", "pgsteal_khugepaged", "memcg_pgsteal_direct"),
    "pgmigrate": ("pgmigrate_success",),
}
"""The /proc/vmstat sums a job may compare: pages scanned, reclaimed, migrated."""
FS_MODULES = ("kernel/crypto/crc32c_generic.ko", "kernel/drivers/block/brd.ko", "kernel/fs/ext4/ext4.ko")
"""For FILE_PROGRAMS: a RAM disk and ext4 (modules in Debian's kernel), with what modules.dep says
they need; ext4's mount wants crc32c (a soft dependency, not in modules.dep). Sparse files on it
take no blocks, and their page cache is reclaimable."""

INIT_START = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
"""
"""How every guest's /init begins: busybox's applets, /proc, /sys and /dev."""

MNTFS = r"""# The filesystem of the file programs: the modules appended to the initramfs (one per line of
# /lib/modules/order, dependencies first, with their parameters), then ext4 on the RAM disk at /mnt.
mntfs() {
    while read -r m args; do insmod "/lib/modules/$m" $args || return 1; done < /lib/modules/order
    mke2fs -q -b 4096 /dev/ram0 >/dev/null && mkdir -p /mnt && mount -t ext4 /dev/ram0 /mnt &&
        mkdir -p /var && ln -sfn /mnt /var/tmp  # costs' sparse files: page cache MADV_PAGEOUT can drop
}
"""
"""A shell function for /init: the FS_MODULES that modules_cpio() appends, and ext4 on /dev/ram0 at
/mnt."""

# PID 1 of the guest. Results go to the second serial port (ttyS1), away from kernel messages on
# the console (ttyS0). Each job: "@begin ID", vmstat, the program's output, vmstat, "@end ID rc".
INIT = (
    INIT_START
    + r"""mount -t tmpfs tmpfs /tmp
# RT throttling off: under TCG the SCHED_FIFO spinners would be throttled and go lazy.
echo -1 > /proc/sys/kernel/sched_rt_runtime_us
# Automatic NUMA balancing off (on by default with 2+ nodes): its scans (task_numa_work ->
# change_prot_numa) flush the programs' mm from the spinners' CPUs; the scenarios model none.
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
stty -F /dev/ttyS1 raw -echo 2>/dev/null
exec 3>/dev/ttyS1
# memory.reclaim's scans count in its cgroup's memory.stat only (6.1 shrink_inactive_list():
# `if (!cgroup_reclaim(sc)) __count_vm_events(item, nr_scanned)`): read both.
vm() {
    { grep -E '^(nr_tlb|pgscan|pgsteal|pgmigrate)' /proc/vmstat
      grep -E '^(pgscan|pgsteal)_' /sys/fs/cgroup/reclaim/memory.stat 2>/dev/null | sed 's/^/memcg_/'
    } | sed "s/^/@vm$1 /"
}
irq() { grep -E '^ *(TLB|CAL):' /proc/interrupts | sed "s/^ */@irq$1 /"; }
"""
    + MNTFS
    + r"""# The reclaim program's memory cgroup (v2), whose memory.reclaim it writes.
memcg() {
    mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup &&
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control && mkdir -p /sys/fs/cgroup/reclaim
}
# Swap on the second RAM disk, for the anonymous-memory runs (after the file ones).
swap() { mkswap /dev/ram1 >/dev/null && swapon /dev/ram1; }
job() {
    id=$1; shift
    echo "@begin $id" >&3
    vm 0 >&3
    taskset -c 0 "$@" >&3 2>&1
    rc=$?
    vm 1 >&3
    echo "@end $id $rc" >&3
}
echo "@start $(nproc) $(uname -r) $(cut -d' ' -f1 /proc/uptime)" >&3
# How idle CPUs wait (no cpuidle driver: the default idle, hlt or mwait): IPIs to a polling CPU
# are elided.
echo "@idle $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)" \
    "$(grep -c -w monitor /proc/cpuinfo) of $(nproc) CPUs with monitor/mwait;" \
    "$(dmesg | grep -o 'using [a-z]* in idle threads' || echo 'default idle: hlt')" >&3
irq 0 >&3
. /jobs
irq 1 >&3
echo "@done $(cut -d' ' -f1 /proc/uptime)" >&3
exec 3>&-
sleep 0.2
poweroff -f
"""
)


class Unavailable(Exception):
    """This machine cannot boot the guest (one-line reason)."""


# --- the initramfs -----------------------------------------------------------------------------


def _cpio_entry(
    name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0), ino: int = 0
) -> bytes:
    """One "newc" cpio entry (the format the kernel unpacks into its rootfs)."""
    fields = [ino, mode, 0, 0, 2 if mode & 0o040000 else 1, 0, len(data), 0, 0, *rdev, len(name) + 1, 0]
    head = b"070701" + b"".join(b"%08x" % f for f in fields) + name.encode() + b"\0"
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def cpio(files: Iterable[tuple[str, int, bytes]], devices: Iterable[tuple[str, int, int, int]] = ()) -> bytes:
    """A newc archive of (path, mode, contents) and (path, mode, major, minor) device nodes."""
    out = []
    ino = 1
    for name, mode, data in files:
        out.append(_cpio_entry(name, mode, data, ino=ino))
        ino += 1
    for name, mode, major, minor in devices:
        out.append(_cpio_entry(name, mode, rdev=(major, minor), ino=ino))
        ino += 1
    out.append(_cpio_entry("TRAILER!!!", 0))
    return b"".join(out)


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ipisim"


def _is_static(path: Path) -> bool:
    """An ELF file with no PT_INTERP program header (no dynamic loader needed)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3A], "little")
    types = (
        int.from_bytes(data[phoff + i * phentsize : phoff + i * phentsize + 4], "little")
        for i in range(phnum)
    )
    return 3 not in types  # PT_INTERP


def find_busybox() -> Path:
    """A statically linked busybox (Debian: busybox-static), or Unavailable."""
    for cand in (os.environ.get("IPISIM_BUSYBOX"), shutil.which("busybox"), "/bin/busybox"):
        if cand and Path(cand).is_file() and _is_static(Path(cand)):
            return Path(cand)
    raise Unavailable("no statically linked busybox (install busybox-static or set IPISIM_BUSYBOX)")


def build_initramfs() -> Path:
    """busybox-static, the static validation programs and /init as a cpio archive, cached by content."""
    busybox = find_busybox().read_bytes()
    names = PROGRAMS + TOOLS
    try:
        exes = {p: hw.build(p, static=True).read_bytes() for p in names}
    except hw.Unavailable as e:
        raise Unavailable(f"{e} (static linking needs the C library's .a files: libc6-dev)") from e
    digest = hashlib.sha256(busybox + INIT.encode())
    for p in names:
        digest.update(exes[p])
    path = _cache() / f"initramfs-{digest.hexdigest()[:16]}.cpio"
    if path.exists():
        return path
    dirs = ["bin", "dev", "proc", "sys", "tmp"]
    files = [(d, 0o040755, b"") for d in dirs]
    files += [("init", 0o100755, INIT.encode()), ("bin/busybox", 0o100755, busybox)]
    files += [(f"bin/{p}", 0o100755, exes[p]) for p in names]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(cpio(files, devices=[("dev/console", 0o020600, 5, 1)]))
    tmp.replace(path)
    return path


BRD_PARAMS = "rd_nr=2 rd_size=65536"
"""Two 64 MiB RAM disks, their pages allocated as written: ext4 for the sparse files (which take
no blocks, only ext4's metadata does), and swap for `reclaim --memory anon`."""
SWAP_PAGES = 65536 * 1024 // 4096
"""The swap disk's size in pages: `reclaim --memory anon` touches at most 3/4 of it."""


def modules_cpio(release: str) -> bytes:
    """FS_MODULES of kernel `release` and what modules.dep says they need, as a cpio archive to
    append to the initramfs: the .ko files in /lib/modules and their load order in
    /lib/modules/order (brd with BRD_PARAMS)."""
    base = Path("/lib/modules") / release
    dep = base / "modules.dep"
    if not release or not dep.is_file():
        raise Unavailable(
            f"the file programs need the modules of the image's kernel: no {dep}"
            " (install the image's linux-image package, or leave out --programs "
            + ",".join(p for p in FILE_PROGRAMS if p in PROGRAMS)
            + ")"
        )
    deps = {}
    for line in dep.read_text().splitlines():
        name, _, rest = line.partition(":")
        deps[name.strip()] = rest.split()
    order: list[str] = []

    def add(module: str) -> None:
        if module in order:
            return
        if module not in deps:
            raise Unavailable(f"{dep}: no {module} (busybox insmod needs uncompressed .ko files)")
        for d in deps[module]:
            add(d)
        order.append(module)

    for m in FS_MODULES:
        add(m)
    names = [Path(m).name for m in order]
    lines = "".join(f"{n} {BRD_PARAMS}\n" if n == "brd.ko" else f"{n}\n" for n in names)
    files = [("lib", 0o040755, b""), ("lib/modules", 0o040755, b"")]
    files += [
        (f"lib/modules/{n}", 0o100644, (base / m).read_bytes()) for n, m in zip(names, order, strict=True)
    ]
    files.append(("lib/modules/order", 0o100644, lines.encode()))
    return cpio(files)


# --- the kernel image --------------------------------------------------------------------------


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:4])


def default_kernel_image() -> Path:
    """The installed kernel: /boot/vmlinuz-$(uname -r) if there, else the newest /boot/vmlinuz-*."""
    running = Path(f"/boot/vmlinuz-{os.uname().release}")
    if running.is_file():
        return running
    # The newest version; of flavours of one version (-amd64, -cloud-amd64, -rt-amd64) the plain one.
    images = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda p: (_version_key(p.name), -len(p.name)))
    if not images:
        raise Unavailable("no kernel image in /boot (install linux-image-amd64 or pass --kernel-image)")
    return images[-1]


def kernel_version(image: Path) -> str:
    """The version string of an x86 bzImage (its setup header's kernel_version), or ""."""
    try:
        with image.open("rb") as f:
            head = f.read(0x10000)
    except OSError as e:
        raise Unavailable(f"{image}: cannot read: {e.strerror}") from e
    if head[0x202:0x206] != b"HdrS":
        return ""
    off = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    return head[off : head.find(b"\0", off)].decode("ascii", "replace") if off < len(head) else ""


def preset_for(version: str) -> str:
    """The newest built-in kernel preset not newer than `version` ("6.1.0-56-amd64 ..." -> linux-6.1)."""
    want = _version_key(version)[:2]
    # The guest is x86_64: presets of other architectures (linux-6.5-arm64) are not candidates.
    names = [k["name"] for k in ipisim.list_builtins()["kernels"]]
    x86 = [n for n in names if re.fullmatch(r"linux-\d+\.\d+", n)]
    older = [n for n in x86 if _version_key(n)[:2] <= want]
    if not want or not older:
        raise Unavailable(f"no kernel preset for version {version!r}: pass --preset")
    return max(older, key=_version_key)


def unavailable_reason() -> str:
    """Why this machine cannot run `validate --qemu` with the installed kernel, or "" if it can."""
    try:
        if not shutil.which("qemu-system-x86_64"):
            raise Unavailable("no qemu-system-x86_64 (install qemu-system-x86)")
        default_kernel_image()
        find_busybox()
        build_initramfs()
    except Unavailable as e:
        return str(e)
    return ""


# --- the jobs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One validation program run in the guest, and the scenario that models it."""

    label: str
    counter: str
    """The /proc/interrupts row compared: TLB or CAL (summed over CPUs)."""
    program: str
    args: tuple[str, ...]
    scenario: str
    sets: tuple[tuple[str, str | int], ...]
    also: tuple[str, ...] = ()
    """Further counts compared, each a row of its own: CAL or TLB, or a VMSTAT_COUNTS sum."""
    tolerance: float = 0.0
    """How far the simulated count may be from the real one (0.05: 5 %); 0: hw.counts_agree."""

    @property
    def counters(self) -> tuple[str, ...]:
        return (self.counter, *self.also)

    def simulate(self, machine: str, kernel: str, shape: Sequence[tuple[str, str | int]]) -> dict[str, int]:
        """The simulated count of each of `counters`."""
        sim = ipisim.run(self.scenario, machine=machine, kernel=kernel, sets=dict(self.sets) | dict(shape))
        out = {}
        for c in self.counters:
            if c in VMSTAT_COUNTS:
                out[c] = sum(int(sim.vmstat.get(k, 0)) for k in VMSTAT_COUNTS[c])
            elif self.program == "migrate" and c == "TLB":
                out[c] = int(sim.ops["tlb_shootdowns"])
            elif self.program == "shootdown":
                out[c] = int(sim.ops["tlb_shootdowns"])
            elif self.program == "membarrier":
                out[c] = int(sim.ops["call_function_interrupts"])
            else:
                out[c] = int(sum(sim.interrupts[c]))
        return out

    def simulated(self, machine: str, kernel: str, shape: Sequence[tuple[str, str | int]]) -> int:
        return self.simulate(machine, kernel, shape)[self.counter]


def jobs(
    cpus: int,
    repeats: int = 5,
    programs: Sequence[str] = DEFAULT_PROGRAMS,
    *,
    memory_mib: int = 1024,
    nodes: int = 1,
) -> list[Job]:
    """What `ipisim validate` runs on the host, with N-1 remote threads as well as 1, then
    lru-file-mmap-read and migrate; only the native programs named in `programs`. `memory_mib` is
    the guest's memory (lru_file_mmap_read sizes its files by it, as the scenario does)."""
    unknown = sorted(set(programs) - set(PROGRAMS))
    if unknown:
        raise ValueError(f"--programs: unknown {', '.join(unknown)} (known: {', '.join(PROGRAMS)})")
    if "migrate" in programs and nodes < 2:
        raise ValueError("--programs: migrate needs --nodes 2 or more")
    out = []
    remote_threads = sorted({1, cpus - 1})
    for op in hw.OPS:
        for batch in hw.BATCHES:
            for remote in hw.REMOTES:
                for n in remote_threads if remote != "none" else [1]:
                    out.append(
                        Job(
                            f"shootdown {op} b={batch} {remote}" + (f" x{n}" if remote != "none" else ""),
                            "TLB",
                            "shootdown",
                            (
                                *("--op", op, "--batch", str(batch), "--remote", remote, "--pages", "512"),
                                *("--threads", str(n), "--repeats", str(repeats)),
                            ),
                            "shootdown",
                            (
                                ("op", op),
                                ("batch", batch),
                                ("remote", remote),
                                ("pages", 512),
                                ("remote_threads", n),
                            ),
                        )
                    )
    for remote in hw.REMOTES:
        for n in remote_threads if remote != "none" else [1]:
            # Fewer calls than the host's 10000/1000: under QEMU each IPI to N-1 spinning vCPUs
            # waits for their threads to get a host CPU.
            calls = 1000 if n == 1 else 256
            out.append(
                Job(
                    f"membarrier {remote}" + (f" x{n}" if remote != "none" else ""),
                    "CAL",
                    "membarrier",
                    (
                        "--remote",
                        remote,
                        "--threads",
                        str(n),
                        "--calls",
                        str(calls),
                        "--repeats",
                        str(repeats),
                    ),
                    "membarrier",
                    (("remote", remote), ("remote_threads", n), ("calls", calls)),
                )
            )
    for test in (1, 2, 3):
        for n in (1, 2):
            out.append(
                Job(
                    f"tlb_flush{test} threads={n}",
                    "TLB",
                    "tlb_flush",
                    (
                        "--test",
                        str(test),
                        "--threads",
                        str(n),
                        "--loops",
                        "5120",
                        "--repeats",
                        str(min(repeats, 3)),
                    ),
                    f"will-it-scale/tlb_flush{test}",
                    (("mode", "thread"), ("tasks", n), ("loops", 5120)),
                )
            )
    # vm-scalability's case-lru-file-mmap-read: one reader per CPU, 10 x memory in all.
    file_bytes = 10 * memory_mib * 2**20 // cpus
    out.append(
        Job(
            f"lru-file-mmap-read x{cpus}",
            "TLB",
            "lru_file_mmap_read",
            (
                *("--dir", "/mnt", "--readers", str(cpus), "--bytes", str(file_bytes)),
                *("--repeats", str(min(repeats, 2))),
            ),
            "vm-scalability/lru-file-mmap-read",
            (),
            also=("CAL", "pgscan", "pgsteal"),
            tolerance=0.05,
        )
    )
    # reclaim: processes on CPUs 1..n touch a quarter of memory in all (anonymous memory: what
    # the swap disk holds), one after another, then memory.reclaim on CPU 0 reclaims it (direct),
    # or kswapd, woken by raised watermarks.
    total = memory_mib * 256 // 4
    for memory, remote, n, reclaimer in (
        ("file", "busy", 1, "direct"),
        ("file", "busy", cpus - 1, "direct"),
        ("file", "sleeping", cpus - 1, "direct"),
        ("file", "busy", cpus - 1, "kswapd"),
        ("anon", "busy", cpus - 1, "direct"),
    ):
        pages = (total if memory == "file" else min(total, 3 * SWAP_PAGES // 4)) // n
        out.append(
            Job(
                f"reclaim {memory} {remote} x{n}" + (" kswapd" if reclaimer == "kswapd" else ""),
                "TLB",
                "reclaim",
                (
                    *("--processes", str(n), "--pages", str(pages), "--remote", remote),
                    *("--memory", memory, "--cgroup", "/sys/fs/cgroup/reclaim"),
                    # kswapd gives up after a run that cannot reach the high watermark
                    # (kswapd_failures) and is not woken again: one run per boot.
                    *(
                        "--reclaimer",
                        reclaimer,
                        "--repeats",
                        str(min(repeats, 2 if reclaimer == "direct" else 1)),
                    ),
                ),
                "reclaim",
                (
                    ("processes", n),
                    ("pages", pages),
                    ("remote", remote),
                    ("memory", memory),
                    ("access", "read" if memory == "file" else "write"),
                    ("reclaimer", reclaimer),
                    ("touch", "in_turn"),
                ),
                also=("CAL", "pgscan", "pgsteal"),
                tolerance=0.05,
            )
        )
    # migrate: N-1 threads at random pages of 16 MiB, migrate_pages() 4 times from the last CPU.
    # migrate_pages(2) moves the process's other pages too (its threads' stacks, glibc's: about
    # 150 on the source node); at 16 MiB they are under 4 % of what moves (docs/qemu-validate.md).
    migrate_bytes = 16 << 20
    out.append(
        Job(
            f"migrate x{cpus - 1}",
            "TLB",
            "migrate",
            (
                *("--threads", str(cpus - 1), "--bytes", str(migrate_bytes)),
                *("--write-percent", "50", "--passes", "4", "--repeats", str(min(repeats, 3))),
            ),
            "migrate",
            (
                ("threads", cpus - 1),
                ("memory", f"{migrate_bytes >> 20}MiB"),
                ("passes", 4),
                ("write_percent", 50),
            ),
            also=("CAL", "pgmigrate"),
            tolerance=0.05,
        )
    )
    return [j for j in out if j.program in programs]


def jobs_script(todo: Sequence[Job]) -> str:
    lines = []
    if any(j.program in FILE_PROGRAMS for j in todo):
        lines.append("mntfs >&3 2>&1 || echo '@fs mntfs failed' >&3\n")
    if any(j.program == "reclaim" for j in todo):
        lines.append("memcg >&3 2>&1 || echo '@fs memcg failed' >&3\n")
    swapped = False
    for i, j in enumerate(todo):
        if "anon" in j.args and not swapped:
            # Only now: with swap on, the file runs' reclaim would scan anonymous pages too.
            lines.append("swap >&3 2>&1 || echo '@fs swap failed' >&3\n")
            swapped = True
        lines.append(f"job {i} /bin/{j.program} {' '.join(j.args)}\n")
    return "".join(lines)


# --- the guest's output ------------------------------------------------------------------------


@dataclass
class Output:
    """What the guest wrote to its result port."""

    cpus: int = 0
    release: str = ""
    boot_s: float = 0.0
    """Guest uptime when /init started: the kernel's own boot."""
    done_s: float = 0.0
    samples: dict[int, list[hw.Sample]] = field(default_factory=dict)
    messages: dict[int, list[str]] = field(default_factory=dict)
    rc: dict[int, int] = field(default_factory=dict)
    vmstat: dict[int, dict[str, int]] = field(default_factory=dict)
    """Per job: /proc/vmstat counters (nr_tlb_*, pgscan_*, pgsteal_*, pgmigrate_*) after minus before."""
    irq: dict[str, list[int]] = field(default_factory=dict)
    """The TLB and CAL rows over all the jobs (after minus before)."""
    finished: bool = False


def parse_output(text: str) -> Output:
    out = Output()
    cur = -1
    vm0: dict[str, int] = {}
    irq0: dict[str, list[int]] = {}
    for raw in text.splitlines():
        line = raw.strip("\r\0 ")
        if not line:
            continue
        tag, _, rest = line.partition(" ")
        f = rest.split()
        if tag == "@start" and len(f) >= 3:
            out.cpus, out.release, out.boot_s = int(f[0]), f[1], float(f[2])
        elif tag == "@begin":
            cur, vm0 = int(f[0]), {}
            out.samples[cur], out.messages[cur] = [], []
        elif tag in ("@vm0", "@vm1") and len(f) == 2:
            if tag == "@vm0":
                vm0[f[0]] = int(f[1])
            else:
                out.vmstat.setdefault(cur, {})[f[0]] = int(f[1]) - vm0.get(f[0], 0)
        elif tag == "@end":
            out.rc[int(f[0])] = int(f[1])
            cur = -1
        elif tag in ("@irq0", "@irq1") and f:
            row = [int(x) for x in f[1 : 1 + out.cpus] if x.isdigit()]
            if tag == "@irq0":
                irq0[f[0].rstrip(":")] = row
            else:
                name = f[0].rstrip(":")
                out.irq[name] = [b - a for a, b in zip(irq0.get(name, [0] * len(row)), row, strict=False)]
        elif tag == "@done":
            out.finished, out.done_s = True, float(f[0]) if f else 0.0
        elif cur >= 0:
            try:
                out.samples[cur].append(hw.parse_sample(line))
            except (KeyError, ValueError):
                out.messages[cur].append(line)
    return out


# --- QEMU --------------------------------------------------------------------------------------


def parse_size_mib(text: str) -> int:
    """'1G', '512M', '1536MiB' -> MiB."""
    m = re.fullmatch(r"\s*(\d+)\s*([MG])?(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"expected a size such as 512M or 2G, got {text!r}")
    return int(m.group(1)) * (1024 if (m.group(2) or "M").upper() == "G" else 1)


def kvm_usable() -> bool:
    """/dev/kvm opens and is backed by hardware virtualization (kvm_intel or kvm_amd).

    kvm_pvm (the Pagetable-based VM of some cloud hosts) provides /dev/kvm as well, but boots only
    kernels built as PVM guests: a stock bzImage hangs silently under it.
    """
    modules = Path("/sys/module")
    if modules.is_dir() and not any((modules / m).exists() for m in ("kvm_intel", "kvm_amd")):
        return False
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


@dataclass(frozen=True)
class Guest:
    """The shape of the guest: CPUs, NUMA nodes, memory."""

    cpus: int = 4
    nodes: int = 1
    memory_mib: int = 1024

    def check(self) -> None:
        if self.cpus < 2:
            raise ValueError(f"--cpus: at least 2, got {self.cpus}")
        if self.nodes < 1 or self.cpus % self.nodes:
            raise ValueError(f"--nodes: must divide --cpus {self.cpus}, got {self.nodes}")
        if self.memory_mib < 256 or self.memory_mib % self.nodes:
            raise ValueError(
                f"--memory: at least 256 MiB, a multiple of the {self.nodes} nodes, got {self.memory_mib} MiB"
            )

    def sim_shape(self) -> list[tuple[str, str | int]]:
        """The --set lines that give a machine profile this guest's shape."""
        return [
            ("machine.nodes", self.nodes),
            ("machine.cpus_per_node", self.cpus // self.nodes),
            ("machine.mem_per_node", f"{self.memory_mib // self.nodes}MiB"),
        ]


def qemu_command(
    image: Path, initrd: Path, guest: Guest, accel: str, console: Path, results: Path
) -> list[str]:
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        raise Unavailable("no qemu-system-x86_64 (install qemu-system-x86)")
    cmd = [qemu, "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-accel", accel]
    # KVM's paravirtual TLB flush skips preempted vCPUs (their flush is done at the next entry):
    # off, so the guest sends the IPIs native_flush_tlb_multi() sends on hardware.
    cmd += ["-cpu", "host,kvm-pv-tlb-flush=off" if accel == "kvm" else "max"]
    cmd += ["-smp", str(guest.cpus), "-m", f"{guest.memory_mib}M"]
    per = guest.cpus // guest.nodes
    for n in range(guest.nodes if guest.nodes > 1 else 0):
        cmd += ["-object", f"memory-backend-ram,id=mem{n},size={guest.memory_mib // guest.nodes}M"]
        cmd += ["-numa", f"node,nodeid={n},cpus={n * per}-{(n + 1) * per - 1},memdev=mem{n}"]
    cmd += ["-kernel", str(image), "-initrd", str(initrd)]
    # no_timer_check: on a loaded host TCG's emulated timer can miss the IO-APIC check early in
    # boot, and the kernel panics ("IO-APIC + timer doesn't work!").
    cmd += ["-append", "console=ttyS0 loglevel=4 panic=-1 no_timer_check rdinit=/init"]
    cmd += ["-serial", f"file:{console}", "-serial", f"file:{results}"]
    return cmd


@dataclass
class Boot:
    """One boot of the guest: what it printed and how long it took."""

    output: Output
    accel: str
    wall_s: float
    console: str


def boot(
    image: Path,
    guest: Guest,
    todo: Sequence[Job],
    *,
    accel: str | None = None,
    timeout_s: float = 3600,
    boot_timeout_s: float = 300,
    progress: Callable[[str], None] | None = None,
) -> Boot:
    """Boot `image` with the programs of `todo` and return what the guest reported."""
    guest.check()
    if not image.is_file():
        raise Unavailable(f"{image}: no such kernel image")
    accel = accel or ("kvm" if kvm_usable() else "tcg")
    base = build_initramfs()
    with tempfile.TemporaryDirectory(prefix="ipisim-qemu-") as tmp:
        initrd = Path(tmp) / "initramfs.cpio"
        extra = cpio([("jobs", 0o100644, jobs_script(todo).encode())])
        if any(j.program in FILE_PROGRAMS for j in todo):
            extra += modules_cpio(kernel_version(image).partition(" ")[0])
        initrd.write_bytes(base.read_bytes() + extra)
        console, results = Path(tmp) / "console.log", Path(tmp) / "results.log"
        cmd = qemu_command(image, initrd, guest, accel, console, results)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        seen = 0
        try:
            while proc.poll() is None:
                elapsed = time.monotonic() - t0
                if elapsed > timeout_s:
                    raise Unavailable(f"the guest did not power off within {timeout_s:.0f} s (--timeout)")
                if elapsed > boot_timeout_s and not (results.exists() and results.stat().st_size):
                    raise Unavailable(
                        f"the guest did not reach /init within {boot_timeout_s:.0f} s; console: "
                        + _last_line(console.read_text(errors="replace") if console.exists() else "")
                    )
                time.sleep(0.5)
                if progress and results.exists():
                    text = results.read_text(errors="replace")  # complete lines only
                    done = sorted(parse_output(text[: text.rfind("\n") + 1]).rc)
                    for i in done[seen:]:
                        progress(f"[{time.monotonic() - t0:6.1f} s] {i + 1}/{len(todo)} {todo[i].label}")
                    seen = len(done)
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
        wall = time.monotonic() - t0
        qemu_out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
        text = results.read_text(errors="replace") if results.exists() else ""
        log = console.read_text(errors="replace") if console.exists() else ""
    out = parse_output(text)
    if proc.returncode != 0 and not out.finished:
        raise Unavailable(f"qemu-system-x86_64 exited with {proc.returncode}: {_last_line(qemu_out or log)}")
    if not out.finished:
        raise Unavailable(f"the guest stopped before its programs finished: {_last_line(log)}")
    return Boot(out, accel, wall, log)


def _last_line(text: str) -> str:
    """The kernel's panic message if there is one, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    panic = [ln for ln in lines if "Kernel panic" in ln]
    if panic:
        return panic[0]
    return lines[-1] if lines else "(no output)"


# --- real against simulated --------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One job: the guest's samples next to the simulated count."""

    job: Job
    real: list[hw.Sample]
    sim: int
    vmstat: dict[str, int]
    counter: str = ""
    """Which of the job's counters (default: its first)."""

    @property
    def row(self) -> str:
        return self.counter or self.job.counter

    @property
    def real_counts(self) -> list[int]:
        if self.row in VMSTAT_COUNTS:
            # /proc/vmstat is read around the whole program: the mean over its repeats.
            total = sum(self.vmstat.get(k, 0) for k in VMSTAT_COUNTS[self.row])
            return [round(total / max(1, len(self.real)))]
        return [sum(s.tlb if self.row == "TLB" else s.cal) for s in self.real]

    @property
    def real_count(self) -> int:
        return int(statistics.median_low(self.real_counts))

    @property
    def ratio(self) -> float:
        return self.sim / self.real_count if self.real_count else (1.0 if self.sim == 0 else float("inf"))

    @property
    def ok(self) -> bool:
        if self.job.tolerance:
            return abs(self.sim - self.real_count) <= self.job.tolerance * self.real_count
        return hw.counts_agree(self.real_count, self.sim)


def compare(
    out: Output,
    todo: Sequence[Job],
    *,
    machine: str,
    kernel: str,
    guest: Guest,
    progress: Callable[[str], None] | None = None,
) -> Iterator[Row]:
    """Each job's real samples against its simulation on a machine of the guest's shape."""
    shape = guest.sim_shape()
    for i, job in enumerate(todo):
        if out.rc.get(i) != 0 or not out.samples.get(i):
            msg = "; ".join(out.messages.get(i, [])) or f"exit status {out.rc.get(i)}"
            raise Unavailable(f"{job.label} failed in the guest: {msg}")
        if progress:
            progress(f"simulating {i + 1}/{len(todo)} {job.label}")
        sims = job.simulate(machine, kernel, shape)
        for c in job.counters:
            yield Row(job, out.samples[i], sims[c], out.vmstat.get(i, {}), c)


def format_rows(rows: Sequence[Row]) -> str:
    w = max([len("microbenchmark"), *(len(r.job.label) for r in rows)])
    head = (
        f"{'microbenchmark':<{w}} {'row':<9} {'real':>9} {'(min-max)':>19} {'sim':>9} {'sim/real':>8}  count"
    )
    lines = [head]
    for r in rows:
        c = r.real_counts
        spread = f"({min(c)}-{max(c)})"
        lines.append(
            f"{r.job.label:<{w}} {r.row:<9} {r.real_count:>9} {spread:>19} {r.sim:>9}"
            f" {r.ratio:>8.3f}  {'ok' if r.ok else 'DIFF'}"
        )
    return "\n".join(lines) + "\n"


def format_irq(out: Output) -> str:
    lines = []
    for name, row in out.irq.items():
        lines.append(f"  {name}: {sum(row):,} over all the programs; per CPU {' '.join(map(str, row))}")
    return "\n".join(lines) + ("\n" if lines else "")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
