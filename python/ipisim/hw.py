"""Real-hardware validation: run the `shootdown` scenario for real and compare with the simulator.

The native program (native/shootdown.c) does the same mmap, touch and madvise/munmap/mprotect
calls as the simulated scenario, with real threads pinned to CPUs, and reports the per-CPU
deltas of the TLB and CAL rows of the real /proc/interrupts.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import ipisim

OPS = ("madvise", "munmap", "mprotect")
BATCHES = (1, 33, 34, 512)
REMOTES = ("busy", "sleeping", "none")


class Unavailable(Exception):
    """This machine cannot run the real-hardware comparison (one-line reason)."""


@dataclass(frozen=True)
class Sample:
    """One real run of the op loop: per-CPU interrupt deltas and its wall time."""

    syscalls: int
    ns: float
    tlb: list[int]
    cal: list[int]
    cpu_ns: float = 0.0
    """CPU time of the thread(s) doing the operations: time other tasks or the host took is not in it."""


@dataclass(frozen=True)
class Cell:
    """One grid cell: the real samples next to the simulated result."""

    op: str
    batch: int
    remote: str
    real: list[Sample]
    sim: ipisim.RunResult

    @property
    def real_tlb(self) -> int:
        """The TLB shootdowns received on all CPUs, over repeats (see real_count)."""
        return real_count([sum(s.tlb) for s in self.real], busy=self.remote == "busy")

    @property
    def sim_tlb(self) -> int:
        return int(self.sim.ops["tlb_shootdowns"])

    @property
    def real_us_per_call(self) -> float:
        return statistics.median(s.ns / s.syscalls for s in self.real) / 1000

    @property
    def sim_us_per_call(self) -> float:
        return float(self.sim.ops["ns_per_syscall"]) / 1000

    @property
    def agrees(self) -> bool:
        return counts_agree(self.real_tlb, self.sim_tlb)


def real_count(counts: Sequence[int], *, busy: bool) -> int:
    """The count the repeats agree on: their median; where the IPIs go to busy remote threads, the
    largest count two repeats show. Such a repeat loses the IPIs sent while a KVM host had the
    remote vCPU preempted (kvm_flush_tlb_multi() leaves it a flush for its next entry instead),
    and a stray kernel-range flush can add one to any repeat."""
    twice = [c for c in set(counts) if counts.count(c) >= 2]
    return max(twice) if busy and twice else int(statistics.median_low(counts))


def busy_repeats_settled(totals: Sequence[int]) -> bool:
    """A busy cell's repeats have settled once two of them show the largest count and it is not 0:
    every repeat can lose every IPI when the host holds the remote vCPU through each window (a CI
    run saw [0, 0, 0, 0, 0] where 16 was due), so none at all is measured again, up to the cap."""
    return max(totals) > 0 and totals.count(max(totals)) >= 2


def counts_agree(real: int, sim: int) -> bool:
    """Exact where the real count is 0, 1 or 2; otherwise within 1 % of it."""
    return sim == real if real <= 2 else abs(sim - real) <= 0.01 * real


def irq_rows(text: str) -> dict[str, list[int]]:
    """The per-CPU counts of every row of /proc/interrupts text, keyed by row name."""
    lines = text.splitlines()
    ncpus = len(lines[0].split()) if lines else 0
    rows = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        fields = rest.split()[:ncpus]
        if len(fields) == ncpus and all(f.isdigit() for f in fields):
            rows[name.strip()] = [int(f) for f in fields]
    return rows


def check_available() -> None:
    """Raise Unavailable unless this machine has 2+ CPUs, a TLB row and a C compiler."""
    try:
        rows = irq_rows(Path("/proc/interrupts").read_text())
    except OSError as e:
        raise Unavailable(f"/proc/interrupts: {e.strerror}") from e
    if "TLB" not in rows:
        raise Unavailable("/proc/interrupts has no TLB row (not x86?)")
    if len(os.sched_getaffinity(0)) < 2 or 0 not in os.sched_getaffinity(0):
        raise Unavailable("need CPU 0 and at least one other CPU in this process's affinity")
    if not shutil.which(os.environ.get("CC", "cc")):
        raise Unavailable("no C compiler (set CC or install cc)")


def unavailable_reason() -> str:
    """Why this machine cannot run the real-hardware programs, or "" if it can."""
    try:
        check_available()
    except Unavailable as e:
        return str(e)
    return ""


def build(program: str = "shootdown", *, static: bool = False) -> Path:
    """Compile native/<program>.c (with native/common.h) once per source version into the user's
    cache; `static` links it statically (for a guest with no C library: `validate --qemu`)."""
    native = resources.files("ipisim").joinpath("native")
    src = native.joinpath(f"{program}.c").read_bytes()
    header = native.joinpath("common.h").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ipisim"
    flags = ["-O2", "-pthread", *(["-static"] if static else [])]
    key = hashlib.sha256(src + header + " ".join(flags[2:]).encode()).hexdigest()[:16]
    exe = cache / f"{program}{'-static' if static else ''}-{key}"
    if exe.exists():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        c_file = Path(tmp) / f"{program}.c"
        c_file.write_bytes(src)
        (Path(tmp) / "common.h").write_bytes(header)
        out = Path(tmp) / program
        cc = os.environ.get("CC", "cc")
        proc = subprocess.run(
            [cc, *flags, "-o", str(out), str(c_file)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise Unavailable(f"{cc} failed on {program}.c: {proc.stderr.strip().splitlines()[-1:]}")
        out.replace(exe)
    return exe


def _pin_to_cpu0() -> None:
    # Before exec, so CPU 0 is the only CPU the program's fresh mm ever runs on (no stale
    # mm_cpumask bits, as in the simulated scenario).
    os.sched_setaffinity(0, {0})


def parse_sample(line: str) -> Sample:
    fields = dict(f.split("=", 1) for f in line.split())
    return Sample(
        syscalls=int(fields.get("syscalls") or fields["loops"]),
        ns=float(fields["ns"]),
        tlb=[int(x) for x in fields["tlb"].split(",")],
        cal=[int(x) for x in fields["cal"].split(",")],
        cpu_ns=float(fields.get("cpu_ns", fields["ns"])),
    )


def _run(program: str, args: list[str]) -> list[Sample]:
    """Run native/<program>.c pinned to CPU 0; one Sample per output line."""
    exe = build(program)
    proc = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, check=False, preexec_fn=_pin_to_cpu0
    )
    if proc.returncode != 0:
        raise Unavailable(f"{program} {' '.join(args)}: {proc.stderr.strip()}")
    return [parse_sample(line) for line in proc.stdout.splitlines()]


def measure(
    op: str, batch: int, remote: str, *, pages: int = 512, threads: int = 1, repeats: int = 5
) -> list[Sample]:
    """Run the real program `repeats` times (one process) and return every sample."""
    args = ["--op", op, "--batch", str(batch), "--remote", remote, "--pages", str(pages)]
    return _run("shootdown", [*args, "--threads", str(threads), "--repeats", str(repeats)])


def measure_costs() -> dict[str, float]:
    """Run native/costs.c pinned to CPU 0: the user-visible costs behind the host-2cpu profile, in ns."""
    check_available()
    proc = subprocess.run(
        [str(build("costs"))], capture_output=True, text=True, check=False, preexec_fn=_pin_to_cpu0
    )
    if proc.returncode != 0:
        raise Unavailable(f"costs: {proc.stderr.strip()}")
    return {name: float(value) for name, value in (line.split() for line in proc.stdout.splitlines())}


def grid(
    *,
    machine: str = "host-2cpu",
    kernel: str = "linux-6.18",
    ops: Sequence[str] = OPS,
    batches: Sequence[int] = BATCHES,
    remotes: Sequence[str] = REMOTES,
    repeats: int = 5,
) -> Iterator[Cell]:
    """Every cell of op x batch x remote, measured for real and simulated."""
    check_available()
    for op in ops:
        for batch in batches:
            for remote in remotes:
                sets = {"op": op, "batch": batch, "remote": remote, "pages": 512, "remote_threads": 1}
                sim = ipisim.run("shootdown", machine=machine, kernel=kernel, sets=sets)
                real = measure(op, batch, remote, repeats=repeats)
                # A busy cell's repeats only ever lose IPIs (real_count): measure on, up to 5 times
                # as many, until they settle.
                for _ in range(4):
                    if remote != "busy" or busy_repeats_settled([sum(s.tlb) for s in real]):
                        break
                    real += measure(op, batch, remote, repeats=repeats)
                yield Cell(op, batch, remote, real, sim)


def format_table(cells: Sequence[Cell]) -> str:
    head = f"{'op':<9} {'batch':>5} {'remote':<8} {'real TLB':>9} {'(min-max)':>11} {'sim TLB':>8}"
    head += f" {'real us/call':>12} {'sim us/call':>11}  agree"
    lines = [head]
    for c in cells:
        totals = [sum(s.tlb) for s in c.real]
        spread = f"({min(totals)}-{max(totals)})"
        lines.append(
            f"{c.op:<9} {c.batch:>5} {c.remote:<8} {c.real_tlb:>9} {spread:>11} {c.sim_tlb:>8}"
            f" {c.real_us_per_call:>12.2f} {c.sim_us_per_call:>11.2f}  {'yes' if c.agrees else 'NO'}"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Row:
    """One microbenchmark of `ipisim validate`: real samples next to the simulated numbers."""

    bench: str
    counter: str
    """The /proc/interrupts row compared: TLB or CAL (summed over CPUs)."""
    real: list[Sample]
    sim_count: int
    sim_ns: float
    """Simulated ns per operation (syscall, call or loop iteration)."""
    busy: bool = False
    """The TLB IPIs go to busy remote threads (see real_count)."""

    @property
    def real_counts(self) -> list[int]:
        return [sum(s.tlb if self.counter == "TLB" else s.cal) for s in self.real]

    @property
    def real_count(self) -> int:
        return real_count(self.real_counts, busy=self.busy)

    @property
    def real_ns(self) -> float:
        """The best repeat's CPU time per operation (= wall time on an idle machine): other tenants
        only ever slow a run down, and the model has none (probe's costs are best-of chunks too)."""
        return float(min(s.cpu_ns / s.syscalls for s in self.real))

    @property
    def ns_spread(self) -> float:
        v = [s.cpu_ns / s.syscalls for s in self.real]
        return (max(v) - min(v)) / statistics.median(v)

    @property
    def count_ok(self) -> bool:
        return counts_agree(self.real_count, self.sim_count)

    @property
    def time_ratio(self) -> float:
        return self.sim_ns / self.real_ns if self.real_ns else float("inf")

    @property
    def time_ok(self) -> bool:
        return abs(self.time_ratio - 1) <= TIME_TOLERANCE


TIME_TOLERANCE = 0.25


def shootdown_rows(cells: Sequence[Cell]) -> list[Row]:
    return [
        Row(
            f"shootdown {c.op} b={c.batch} {c.remote}",
            "TLB",
            c.real,
            c.sim_tlb,
            1000 * c.sim_us_per_call,
            busy=c.remote == "busy",
        )
        for c in cells
    ]


def membarrier_rows(
    *, machine: str, kernel: str, repeats: int = 5, busy_calls: int = 10000, idle_calls: int = 1000
) -> Iterator[Row]:
    """membarrier(PRIVATE_EXPEDITED) with one remote thread busy, sleeping, or none.

    Without a busy thread the window is kept short (idle_calls): an idle CPU takes a few
    scheduler IPIs per second (nohz idle-balance kicks) that would show up in its CAL row.
    """
    check_available()
    for remote in REMOTES:
        calls = busy_calls if remote == "busy" else idle_calls
        real = _run(
            "membarrier",
            ["--remote", remote, "--threads", "1", "--calls", str(calls), "--repeats", str(repeats)],
        )
        sets = {"remote": remote, "remote_threads": 1, "calls": calls}
        sim = ipisim.run("membarrier", machine=machine, kernel=kernel, sets=sets)
        count = int(sim.ops["call_function_interrupts"])
        yield Row(f"membarrier {remote}", "CAL", real, count, float(sim.ops["ns_per_call"]))


def tlb_flush_rows(
    *, machine: str, kernel: str, repeats: int = 3, loops: int = 5120, threads: Sequence[int] = (1, 2)
) -> Iterator[Row]:
    """will-it-scale tlb_flush1/2/3, thread mode, `loops` iterations per thread."""
    check_available()
    for test in (1, 2, 3):
        for n in threads:
            if n > len(os.sched_getaffinity(0)):
                continue
            args = [
                "--test",
                str(test),
                "--threads",
                str(n),
                "--loops",
                str(loops),
                "--repeats",
                str(repeats),
            ]
            real = _run("tlb_flush", args)
            sets = {"mode": "thread", "tasks": n, "loops": loops}
            sim = ipisim.run(f"will-it-scale/tlb_flush{test}", machine=machine, kernel=kernel, sets=sets)
            ns = float(sim.ops["elapsed_s"]) * 1e9 / loops
            yield Row(f"tlb_flush{test} threads={n}", "TLB", real, sum(sim.interrupts["TLB"]), ns)


def format_rows(rows: Sequence[Row]) -> str:
    head = f"{'microbenchmark':<32} {'row':<4} {'real':>7} {'(min-max)':>13} {'sim':>7} {'count':<5}"
    head += f" {'real ns/op':>11} {'(spread)':>8} {'sim ns/op':>10} {'ratio':>6}  time"
    lines = [head]
    for r in rows:
        counts = r.real_counts
        spread = f"({min(counts)}-{max(counts)})"
        lines.append(
            f"{r.bench:<32} {r.counter:<4} {r.real_count:>7} {spread:>13} {r.sim_count:>7}"
            f" {'ok' if r.count_ok else 'DIFF':<5} {r.real_ns:>11.0f} {f'{100 * r.ns_spread:.0f}%':>8}"
            f" {r.sim_ns:>10.0f} {r.time_ratio:>6.2f}  {'ok' if r.time_ok else 'off'}"
        )
    return "\n".join(lines) + "\n"
