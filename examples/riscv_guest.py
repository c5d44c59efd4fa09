"""A real RISC-V kernel under QEMU: the remote-fence counts and times of the swap benchmark.

Boots Debian's current riscv64 kernel (trixie's linux-image-riscv64, 6.12) on QEMU's `virt`
machine under TCG (4 harts, OpenSBI, no AIA: remote fences are SBI calls) with a RAM disk for
swap, and runs python/ipisim/native/swap_bench.c, cross-compiled:
- 100 passes of the RISC-V changelog's program (4 sleeping threads, so every fence is remote)
  with ftrace's function tracer counting `__flush_tlb_range()` and `arch_tlbbatch_flush()`, and
  OpenSBI's PMU firmware events counting the remote fences sent and the harts they reached,
  which `ipisim run swap-bench --kernel linux-6.12-riscv` predicts
  (tests `riscv_remote_fences_as_the_6_12_kernel_counts_them` and
  `riscv_a_hart_exec_left_keeps_getting_fences`);
- the time of a pass with and without the sleepers, and of a one-page MADV_DONTNEED (one fence)
  with and without them, at 0, 150 and 3000 us between calls.

    python3 examples/riscv_guest.py [--harts N] [--counts] [--costs]

--harts boots N harts (4). --counts boots them as two NUMA nodes and runs only the counted passes,
twice, in four placements (the sleepers; alone after exec ran it on the last hart, with and
without a process of its own spinning there; alone where exec ran it), then validate --qemu's
migrate job (native/migrate.c --sbi 1: N-1 threads, 16 MiB, 4 passes, 3 repeats), and prints
OpenSBI's counts beside the model's (`linux-6.12-riscv` on `qemu-virt-riscv`). --costs also runs
`ipisim probe`'s program, native/costs.c `--local-only`, five times in the guest (ext4 on a second
RAM disk at /var/tmp) and prints each measurement's median.

Needs qemu-system-misc, gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross and dpkg-deb (Debian
packages), and deb.debian.org (the kernel and busybox-static packages, cached in
~/.cache/ipisim/riscv). About 5 minutes (--counts: 1).
"""

from __future__ import annotations

import argparse
import lzma
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from importlib import resources
from pathlib import Path
from typing import NoReturn

import ipisim
from ipisim import qemu

MIRROR = "http://deb.debian.org/debian"
SUITE = "trixie"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ipisim" / "riscv"
MODULES = (
    "drivers/block/brd",
    "lib/crc16",
    "fs/mbcache",
    "fs/jbd2/jbd2",
    "crypto/crc32c_generic",
    "fs/ext4/ext4",
)
"""brd for swap and /var/tmp; ext4 and what it needs (its modinfo depends, and crc32c for jbd2)."""
MIGRATE_MIB = 16
"""The migrate job's region, as validate --qemu's (write_percent 50 and 4 passes are both defaults)."""
TRACED = ("__flush_tlb_range", "arch_tlbbatch_flush")
"""Every flush, and the reclaim batch's (arch/riscv/kernel/sbi.c is not traceable: OpenSBI counts
the fences, swap_bench --sbi 1)."""

INIT = (
    qemu.INIT_START
    + r"""mount -t tracefs nodev /sys/kernel/tracing
echo "@start $(nproc) $(uname -r)"
# Automatic NUMA balancing off, as validate --qemu has it: its scans flush the programs' mm.
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
insmod /lib/modules/brd.ko rd_nr=2 rd_size=262144
for m in crc16 mbcache jbd2 crc32c_generic ext4; do insmod /lib/modules/$m.ko; done
mkswap /dev/ram0 >/dev/null && swapon /dev/ram0
mke2fs -q -b 4096 /dev/ram1 >/dev/null && mkdir -p /mnt /var && mount -t ext4 /dev/ram1 /mnt &&
    ln -s /mnt /var/tmp
T=/sys/kernel/tracing
trace_on() {
    for f in $1; do echo $f >> $T/set_ftrace_filter; done
    echo function > $T/current_tracer; echo > $T/trace
}
trace_off() {
    for f in $1; do echo "@calls $f $(grep -c " $f" $T/trace)"; done
    echo nop > $T/current_tracer; echo > $T/set_ftrace_filter
}
run() { echo "@begin $*"; "$@"; echo "@end $?"; }
. /jobs
echo "@done"
poweroff -f
"""
)


def fail(msg: str) -> NoReturn:
    print(f"riscv_guest: {msg}", file=sys.stderr)
    sys.exit(2)


def download(url: str, to: Path) -> None:
    try:
        urllib.request.urlretrieve(url, to)
    except OSError as e:
        to.unlink(missing_ok=True)
        fail(f"{url}: {e}")


def package(name: str) -> Path:
    """The riscv64 package `name` of SUITE (a metapackage: the one it depends on), unpacked."""
    index = CACHE / "Packages.xz"
    if not index.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        download(f"{MIRROR}/dists/{SUITE}/main/binary-riscv64/Packages.xz", index)
    stanzas = {}
    for text in lzma.decompress(index.read_bytes()).decode().split("\n\n"):
        fields = dict(re.findall(r"^(\S+): (.*)$", text, re.M))
        if "Package" in fields:
            stanzas[fields["Package"]] = fields
    if name not in stanzas:
        fail(f"{SUITE} riscv64 has no package {name}")
    if name.startswith("linux-image-riscv64"):
        name = stanzas[name]["Depends"].split()[0]
    out = CACHE / name
    if not out.exists():
        deb = CACHE / Path(stanzas[name]["Filename"]).name
        download(f"{MIRROR}/{stanzas[name]['Filename']}", deb)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(out)], check=True)
        deb.unlink()
    return out


def cross_build(program: str, dest: Path) -> bytes:
    native = resources.files("ipisim").joinpath("native")
    for f in (f"{program}.c", "common.h"):
        (dest / f).write_bytes(native.joinpath(f).read_bytes())
    exe = dest / program
    cc = ["riscv64-linux-gnu-gcc", "-O2", "-static", "-pthread", "-o", str(exe), str(dest / f"{program}.c")]
    subprocess.run(cc, check=True)
    return exe.read_bytes()


def boot(jobs: str, harts: int, nodes: int = 1) -> str:
    kernel, busybox = package("linux-image-riscv64"), package("busybox-static")
    image = next((kernel / "boot").glob("vmlinux-*"))
    mods = next((kernel / "usr/lib/modules").iterdir()) / "kernel"
    with tempfile.TemporaryDirectory(prefix="ipisim-riscv-") as tmp:
        files = [(d, 0o040755, b"") for d in ("bin", "dev", "proc", "sys", "tmp", "lib", "lib/modules")]
        files += [("init", 0o100755, INIT.encode()), ("jobs", 0o100644, jobs.encode())]
        files += [("bin/busybox", 0o100755, (busybox / "usr/bin/busybox").read_bytes())]
        programs = ("swap_bench", "costs", "migrate")
        files += [(f"bin/{p}", 0o100755, cross_build(p, Path(tmp))) for p in programs]
        for m in MODULES:
            ko = lzma.decompress((mods / f"{m}.ko.xz").read_bytes())
            files.append((f"lib/modules/{Path(m).name}.ko", 0o100644, ko))
        initrd, console = Path(tmp) / "initrd.cpio", Path(tmp) / "console.log"
        initrd.write_bytes(qemu.cpio(files, devices=[("dev/console", 0o020600, 5, 1)]))
        cmd = ["qemu-system-riscv64", "-M", "virt", "-smp", str(harts), "-m", "2560M", "-nographic"]
        for n in range(nodes if nodes > 1 else 0):
            # Equal NUMA nodes, harts in order (2560 MiB divides by 2, 4 and 5).
            first, per = n * harts // nodes, harts // nodes
            cmd += ["-object", f"memory-backend-ram,id=m{n},size={2560 // nodes}M"]
            cmd += ["-numa", f"node,nodeid={n},cpus={first}-{first + per - 1},memdev=m{n}"]
        cmd += ["-no-reboot", "-bios", "default", "-kernel", str(image), "-initrd", str(initrd)]
        cmd += ["-append", "console=ttyS0 loglevel=1 quiet panic=-1 rdinit=/init"]
        cmd += ["-serial", f"file:{console}", "-monitor", "none"]
        subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=3600, check=True)
        return console.read_text(errors="replace")


def main() -> int:
    try:
        return run()
    except subprocess.CalledProcessError as e:
        fail(f"{e.cmd[0]} exited with {e.returncode}")
    except subprocess.TimeoutExpired:
        fail("the guest did not power off within an hour")


def run() -> int:
    ap = argparse.ArgumentParser(description="Boot riscv64 Linux under QEMU and run swap_bench in it.")
    ap.add_argument("--harts", type=int, default=4, help="QEMU -smp (4)")
    ap.add_argument("--costs", action="store_true", help="also run costs.c --local-only five times")
    ap.add_argument(
        "--counts", action="store_true", help="only the counted runs: four placements, twice; with the model"
    )
    args = ap.parse_args()
    if not 2 <= args.harts <= 128:
        fail(f"--harts {args.harts}: give 2 to 128 (OpenSBI's hart mask here holds 128)")
    for tool in ("qemu-system-riscv64", "riscv64-linux-gnu-gcc", "dpkg-deb"):
        if not shutil.which(tool):
            fail(f"no {tool} (apt install qemu-system-misc gcc-riscv64-linux-gnu libc6-dev-riscv64-cross)")
    traced = " ".join(TRACED)
    counted = [f"swap_bench --loops 100 --sleepers {args.harts} --pmd-aligned 1 --sbi 1"]
    if args.counts:
        # Alone: exec runs it on the last hart (taskset), then it pins itself to hart 0, with or
        # without a process of its own spinning on the hart it left; and alone where exec ran it.
        alone, last = "swap_bench --loops 100 --pmd-aligned 1 --sbi 1", args.harts - 1
        counted += [f"taskset -c {last} {alone}", f"taskset -c {last} {alone} --neighbour {last}"]
        counted += [f"{alone} --cpu -1"]
        counted *= 2
    jobs = [f'trace_on "{traced}"; run {c}; trace_off "{traced}"' for c in counted]
    if args.counts:
        # The validate --qemu migrate job on two nodes: the first repeat also faults in what the
        # program and its threads use once, so the last two are the ones to read.
        jobs += [f"run migrate --threads {args.harts - 1} --bytes {MIGRATE_MIB << 20} --repeats 3 --sbi 1"]
    # The host is shared and TCG's times move by half from run to run: three of each, alternating.
    for _ in range(0 if args.counts else 3):
        jobs += [f"run swap_bench --loops 200 --sleepers {s}" for s in (args.harts, 0)]
        for gap in (0, 150, 3000):
            jobs += [f"run swap_bench --zap 1000 --sleepers {s} --gap-us {gap}" for s in (args.harts, 0)]
    if args.costs:
        jobs += ["run costs --local-only"] * 5
    log = boot("\n".join(jobs) + "\n", args.harts, nodes=2 if args.counts else 1)
    if "@done" not in log:
        fail("the guest stopped before its programs finished: " + log.strip().splitlines()[-1])
    print(next(line for line in log.splitlines() if line.startswith("@start")))
    label = ""
    fences: dict[str, list[tuple[int, int]]] = {}
    times: dict[str, list[float]] = {}
    costs: dict[str, list[float]] = {}
    for line in log.splitlines():
        if line.startswith("@begin"):
            label = line.removeprefix("@begin ").replace("swap_bench ", "")
        elif line.startswith("@calls"):
            _, func, count = line.split()
            print(f"{label}: {func}() called {count} times")
        elif line.startswith("sbi "):
            _, event, count = line.split()
            print(f"{label}: SBI PMU {event} {count}")
            if event.startswith("sfence_vma"):
                runs = fences.setdefault(label, [])
                if event == "sfence_vma_sent" or not runs:
                    runs.append((0, 0))
                sent, received = runs[-1]
                n = int(count)
                runs[-1] = (sent + n, received) if event.endswith("_sent") else (sent, received + n)
        elif line.startswith("cpus "):
            _, first, last = line.split()
            print(f"{label}: exec ran it on hart {first}, it ended on hart {last}")
        elif line.startswith(("ns_per_loop", "ns_per_call")):
            what, ns = line.split()
            times.setdefault(f"{label}: us {what.removeprefix('ns_')}", []).append(float(ns) / 1000)
        elif label == "costs --local-only" and len(line.split()) == 2 and not line.startswith("@"):
            name, ns = line.split()
            costs.setdefault(name, []).append(float(ns))
    for what, us in times.items():
        print(f"{what}: {' / '.join(f'{u:.1f}' for u in us)}")
    for name, values in costs.items():
        print(f"costs.c {name}: {statistics.median(values):.1f} ns (median of {len(values)})")
    if fences:
        compare(fences, args.harts)
    return 0


def model_sets(label: str, harts: int) -> tuple[str, dict[str, str]]:
    """The scenario and parameters of a counted run: swap-bench's sleepers, the hart exec ran it
    on and its neighbour; migrate's threads on two nodes."""
    words = label.split()
    if words[0] == "migrate":
        shape = {"machine.nodes": "2", "machine.cpus_per_node": str(harts // 2)}
        return "migrate", shape | {"threads": str(harts - 1), "memory": f"{MIGRATE_MIB}MiB", "passes": "4"}
    sets = {"loops": "100", "machine.cpus_per_node": str(harts)}
    for flag, key in (("--sleepers", "sleepers"), ("--neighbour", "neighbour"), ("-c", "exec_cpu")):
        if flag in words:
            sets[key] = words[words.index(flag) + 1]
    return "swap-bench", sets


def compare(fences: dict[str, list[tuple[int, int]]], harts: int) -> None:
    """OpenSBI's remote fence calls sent and harts fenced, each run, beside linux-6.12-riscv's."""
    print("\n| placement | SBI calls, real runs | model | harts fenced, real runs | model |")
    print("|---|---|---:|---|---:|")
    for label, runs in fences.items():
        scenario, sets = model_sets(label, harts)
        r = ipisim.run(scenario, machine="qemu-virt-riscv", kernel="linux-6.12-riscv", sets=sets)
        calls, fenced = r.data["riscv"]["sbi_rfence"], r.data["riscv"]["sbi_fenced"]
        real = " / ".join(f"{sent}" for sent, _ in runs), " / ".join(f"{rcvd}" for _, rcvd in runs)
        print(f"| {label} | {real[0]} | {calls} | {real[1]} | {fenced} |")
    if harts > 4:
        print("(At more than 4 harts the kernel also fences every hart on its own: those calls are in")
        print("the real counts. OpenSBI does not count a call that names only the caller as sent.)")


if __name__ == "__main__":
    sys.exit(main())
