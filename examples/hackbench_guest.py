"""A real kernel's per-CPU page drains under hackbench's OOM, counted by kprobes under QEMU.

Boots the installed Debian x86 kernel (6.1) under QEMU with busybox and
python/ipisim/native/hackbench.c, compiled statically and run from ext4 on a RAM disk (its text
is page cache, which reclaim can drop, so direct reclaim makes progress and drains, as on a disk),
and no swap. kprobes on `__drain_all_pages()` (entry and return), `drain_pages_zone()` (its `cpu`)
and `mutex_unlock(&pcpu_drain_mutex)` count every drain_all_pages() call, the calls that took the
mutex, and how many CPUs' lists each one drained (`cpus_with_pcps`: 6.0's caller drains them
itself, one drain_pages_zone() a populated zone). It prints them beside what `ipisim run hackbench`
gives for the same shape with the kernel preset matching the image (docs/hackbench-seed004.md,
"A real 6.1 kernel under QEMU").

    python3 examples/hackbench_guest.py [--groups 400] [--loops 100] [--cpus 8] [--memory 1024]

Needs qemu-system-x86, linux-image-amd64, busybox-static and a static C library (libc6-dev).
Under TCG on 2 host CPUs 2 to 6 minutes (the boot) and 2 (the model).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import ipisim
from ipisim import hw, qemu

PROBES = r"""
T=/sys/kernel/tracing
mount -t tracefs nodev $T
MUTEX=$(printf %u 0x$(grep ' pcpu_drain_mutex$' /proc/kallsyms | cut -d' ' -f1))
echo 'p:da __drain_all_pages' >> $T/kprobe_events
echo 'r:dar __drain_all_pages' >> $T/kprobe_events
echo 'p:dz drain_pages_zone cpu=%di:u32' >> $T/kprobe_events
echo 'p:mu mutex_unlock addr=%di:u64' >> $T/kprobe_events
echo "addr == $MUTEX" > $T/events/kprobes/mu/filter
echo 4096 > $T/buffer_size_kb
echo 0 > $T/options/overwrite
echo 1 > $T/events/kprobes/enable
echo 1 > $T/events/oom/mark_victim/enable
"""
"""The kprobes; the trace buffer keeps the first 4 MiB a CPU (each stats line says if any were lost)."""

INIT = (
    qemu.INIT_START
    + qemu.MNTFS
    + r"""stty -F /dev/ttyS1 raw -echo 2>/dev/null
exec 3>/dev/ttyS1
mntfs && cp /bin/hackbench /mnt/hackbench && sync && echo 3 > /proc/sys/vm/drop_caches
vm() {
    grep -E '^(oom_kill|allocstall_normal|allocstall_movable|pgsteal_direct|pgsteal_kswapd) ' /proc/vmstat |
        sed "s/^/@vm$1 /"
}
# 16000 processes: threads-max of a 1 GiB guest (max_threads_from_mem(): memory / 32 KiB) is 7656.
echo 40000 > /proc/sys/kernel/threads-max
"""
    + PROBES
    + r"""vm 0 >&3
echo -1000 > /proc/self/oom_score_adj
(echo 0 > /proc/self/oom_score_adj; exec /mnt/hackbench GROUPS LOOPS) >&3 2>&3 &
HB=$!
echo "@parent $HB" >&3
n=0
while kill -0 $HB 2>/dev/null && [ $n -lt LIMIT ]; do sleep 10; n=$((n + 10)); done
kill -0 $HB 2>/dev/null && echo "@timeout $n" >&3 && killall -9 hackbench
wait $HB
echo 0 > $T/events/kprobes/enable
vm 1 >&3
grep -h 'dropped events' $T/per_cpu/cpu*/stats | sed 's/^/@lost /' >&3
grep -E ' (dar|da|dz|mu): ' $T/trace | sed 's/^/@ev /' >&3
grep -o 'mark_victim: pid=[0-9]*' $T/trace | sed 's/^mark_victim: pid=/@victim /' >&3
echo "@done" >&3
exec 3>&-
sleep 0.2
poweroff -f
"""
)


def boot(groups: int, loops: int, guest: qemu.Guest, limit_s: int) -> str:
    """Boot the guest, run hackbench, return what it wrote to its result port."""
    image = qemu.default_kernel_image()
    release = qemu.kernel_version(image).partition(" ")[0]
    init = INIT.replace("GROUPS", str(groups)).replace("LOOPS", str(loops)).replace("LIMIT", str(limit_s))
    files = [(d, 0o040755, b"") for d in ("bin", "dev", "proc", "sys", "tmp")]
    files += [("init", 0o100755, init.encode()), ("bin/busybox", 0o100755, qemu.find_busybox().read_bytes())]
    files += [("bin/hackbench", 0o100755, hw.build("hackbench", static=True).read_bytes())]
    with tempfile.TemporaryDirectory(prefix="ipisim-hackbench-") as tmp:
        initrd = Path(tmp) / "initramfs.cpio"
        devices = [("dev/console", 0o020600, 5, 1)]
        initrd.write_bytes(qemu.cpio(files, devices=devices) + qemu.modules_cpio(release))
        console, results = Path(tmp) / "console.log", Path(tmp) / "results.log"
        accel = "kvm" if qemu.kvm_usable() else "tcg"
        cmd = qemu.qemu_command(image, initrd, guest, accel, console, results)
        t0 = time.monotonic()
        subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=limit_s * 4 + 1800, check=False
        )
        print(f"guest: {accel}, {time.monotonic() - t0:.0f} s wall")
        # Each victim's pages, as __oom_kill_process() prints them (KERN_ERR: on the console).
        killed = re.findall(r"Killed process .*", console.read_text(errors="replace"))
        return results.read_text(errors="replace") + "".join(f"@killed {k}\n" for k in killed)


@dataclass
class Real:
    """What the guest counted."""

    calls: int
    """drain_all_pages() calls."""
    cpus: Counter[int]
    """Drains (calls that took pcpu_drain_mutex) by how many CPUs' lists they drained."""
    vm: dict[str, int]
    lost: int
    said: list[str]
    victims: list[int]
    """The OOM killer's victims in order (oom:mark_victim)."""
    timed_out: bool
    """hackbench was still running at --limit and was killed: the counts stop there."""
    parent: int
    """hackbench's parent, which forks the groups."""
    points: dict[int, int]
    """Each victim's oom_badness() when it was killed: rss and page tables in pages, from the
    kernel's "Killed process" line."""


def parse(text: str) -> Real:
    """The guest's counts: kprobe events in each CPU's order, and the /proc/vmstat deltas."""
    vm: dict[str, list[int]] = {}
    for key, name, value in re.findall(r"^@vm([01]) (\S+) (\d+)", text, re.M):
        vm.setdefault(name, [0, 0])[int(key)] = int(value)
    open_calls: dict[str, tuple[set[int], list[bool]]] = {}
    drains: Counter[int] = Counter()
    calls = 0
    # Each CPU's events are in order: da, the dz of every CPU its drain reaches, mu if it took
    # the mutex (a NULL-zone call that finds it taken returns at once), dar.
    event = r"^@ev .*?\[(\d+)\].*?: (dar|da|dz|mu): \([^)]*\)[ \t]*(.*)$"
    for cpu, kind, args in re.findall(event, text, re.M):
        if kind == "da":
            calls += 1
            open_calls[cpu] = (set(), [False])
        elif cpu not in open_calls:
            continue
        elif kind == "dz":
            open_calls[cpu][0].add(int(args.partition("cpu=")[2].split()[0]))
        elif kind == "mu":
            open_calls[cpu][1][0] = True
        else:
            drained, took = open_calls.pop(cpu)
            if took[0]:
                drains[len(drained)] += 1
    return Real(
        calls=calls,
        cpus=drains,
        vm={k: b - a for k, (a, b) in vm.items()},
        lost=sum(int(n) for n in re.findall(r"^@lost .*: (\d+)", text, re.M)),
        said=re.findall(r"^(forked .*|fork: .*)$", text, re.M),
        victims=[int(v) for v in re.findall(r"^@victim (\d+)", text, re.M)],
        timed_out="@timeout" in text,
        parent=int(m[1]) if (m := re.search(r"^@parent (\d+)", text, re.M)) else 0,
        points={
            int(pid): sum(int(kb) for kb in kbs) // 4
            for pid, *kbs in re.findall(
                r"^@killed Killed process (\d+) .*anon-rss:(\d+)kB, file-rss:(\d+)kB, "
                r"shmem-rss:(\d+)kB, UID:\d+ pgtables:(\d+)kB",
                text,
                re.M,
            )
        },
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=400)
    ap.add_argument("--loops", type=int, default=100)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--memory", type=int, default=1024, help="MiB")
    ap.add_argument("--limit", type=int, default=2400, help="guest seconds before hackbench is killed")
    a = ap.parse_args()
    guest = qemu.Guest(cpus=a.cpus, memory_mib=a.memory)
    real = parse(boot(a.groups, a.loops, guest, a.limit))
    kernel = qemu.preset_for(qemu.kernel_version(qemu.default_kernel_image()))
    sets = {"groups": str(a.groups), "loops": str(a.loops), **{k: str(v) for k, v in guest.sim_shape()}}
    sim = ipisim.run("hackbench", machine="kvm-8cpu", kernel=kernel, sets=sets)
    hist, ops = sim.data["drain_cpus_with_pages"], sim.data["ops"]
    half = a.cpus // 2
    print(f"hackbench {a.groups} x {a.loops}, {a.cpus} CPUs, {a.memory} MiB; model: {kernel} on kvm-8cpu")
    print(f"real hackbench: {real.said or 'no output'}; kprobe events lost: {real.lost}")
    if real.timed_out:
        print(f"hackbench was killed at --limit {a.limit} s: the real counts stop there")
    if real.parent in real.victims:
        print(f"its parent was OOM victim {real.victims.index(real.parent) + 1} of {len(real.victims)}")
    fate = "killed" if ops["parent_oom_killed"] else "never killed"
    print(f"the model's parent: {fate}, after forking {ops['forked']} of {a.groups * 40} children")
    children = sorted(p for pid, p in real.points.items() if pid != real.parent)
    if children:
        parent = real.points.get(real.parent, "-")
        print(
            f"victims' points (rss + page tables, pages): parent {parent}; {len(children)} children"
            f" {children[0]} to {children[-1]}, median {children[len(children) // 2]}"
        )
    # A fork phase ends when every child is forked or when the parent is killed; the real counts
    # end with the parent.
    rows = [
        ("drain_all_pages() calls", real.calls, "-", "-"),
        (
            "drains (pcpu_drain_mutex taken)",
            real.cpus.total(),
            ops["pcp_global_drain_fork"],
            ops["pcp_global_drain"],
        ),
        (
            f"  of which fewer than {half} CPUs held pages",
            sum(real.cpus[k] for k in range(half)),
            ops["pcp_global_ipi_saved_fork"],
            ops["pcp_global_ipi_saved"],
        ),
        ("OOM kills", real.vm.get("oom_kill", 0), ops["oom_kills_fork"], ops["oom_kills"]),
    ]
    print(f"{'':40} {'real':>8} {'model: forking':>15} {'whole run':>10}")
    for name, r, f, w in rows:
        print(f"{name:40} {r!s:>8} {f!s:>15} {w!s:>10}")
    print("drains by the CPUs holding pages (real; model, whole run):")
    for k in range(a.cpus + 1):
        print(f"  {k}: {real.cpus[k]:>8} {hist[k]:>8}")


if __name__ == "__main__":
    main()
