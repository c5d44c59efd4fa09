"""`ipisim probe`: measure this Linux host with real pinned threads and fit a machine profile.

The measurements come from native/costs.c (run `repeats` times, pinned to CPU 0) and from
/sys/devices/system/{cpu,node}. Each cost entry of the written profile names the measurement it
came from (median over the runs) and the arithmetic; entries user space cannot see keep the
template profile's value and source. docs/probe-and-validate.md explains every formula.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ipisim
from ipisim import hw


@dataclass(frozen=True)
class Topology:
    """What /sys says about the CPUs and memory."""

    cpus: int
    nodes: int
    cpus_per_node: int
    smt: int
    mem_per_node_mib: int
    ghz: float
    idle: str
    idle_poll_ns: int
    apic: str = "phys"
    notes: tuple[str, ...] = ()


@dataclass
class Probe:
    """Every measurement (ns, one value per run) and the topology."""

    topology: Topology
    runs: dict[str, list[float]]
    skipped: list[str] = field(default_factory=list)

    def median(self, name: str) -> float:
        return float(statistics.median(self.runs[name]))

    def spread(self, name: str) -> float:
        """(max - min) / median over the runs, as a fraction."""
        v = self.runs[name]
        m = statistics.median(v)
        return (max(v) - min(v)) / m if m else 0.0


@dataclass(frozen=True)
class Fitted:
    key: str
    cycles: float
    source: str


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def apic_mode(kernel_log: str) -> str | None:
    """machine.apic from the boot log's APIC lines, or None if it does not say."""
    # kvm_setup_pv_ipi(): "kvm-guest: setup PV IPIs" (4.19+), or the static-call message of 6.x.
    if "setup PV IPIs" in kernel_log or "replaced with kvm_send_ipi_mask" in kernel_log:
        return "kvm_pv"
    # "Switched APIC routing to[:] cluster x2apic / physical x2apic / physical flat / flat".
    routing = re.findall(r"Switched APIC routing to:? ([\w ]+)", kernel_log)
    if not routing:
        return None
    if "x2apic" in routing[-1]:
        # x2apic_cluster.c and x2apic_phys.c both send through __x2apic_send_IPI_mask().
        return "x2apic_cluster"
    return "phys"


def _kernel_log() -> str:
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout if out.returncode == 0 else ""


def topology() -> Topology:
    """CPUs, nodes, SMT, memory per node, clock and idle driver from /sys and /proc."""
    notes = []
    cpus = _cpulist(_read("/sys/devices/system/cpu/online")) or list(range(os.cpu_count() or 1))
    node_dirs = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    per_node = [len(_cpulist(_read(str(d / "cpulist")))) for d in node_dirs] or [len(cpus)]
    per_node = [n for n in per_node if n] or [len(cpus)]
    if len(set(per_node)) > 1:
        notes.append(f"nodes have {per_node} CPUs; the profile uses the smallest")
    smt = len(_cpulist(_read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list"))) or 1
    mem = []
    for d in node_dirs:
        m = re.search(r"MemTotal:\s+(\d+) kB", _read(str(d / "meminfo")))
        if m:
            mem.append(int(m.group(1)) // 1024)
    if not mem:
        m = re.search(r"MemTotal:\s+(\d+) kB", _read("/proc/meminfo"))
        mem = [int(m.group(1)) // 1024 if m else 4096]
    mhz = re.search(r"cpu MHz\s*:\s*([\d.]+)", _read("/proc/cpuinfo"))
    ghz = round(float(mhz.group(1)) / 1000, 3) if mhz else 2.5
    if not mhz:
        notes.append("no 'cpu MHz' in /proc/cpuinfo: 2.5 GHz assumed (cycles only scale time)")
    driver = _read("/sys/devices/system/cpu/cpuidle/current_driver")
    poll = _read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    idle = "haltpoll" if driver == "haltpoll" else "hlt"
    apic = apic_mode(_kernel_log())
    if apic is None:
        notes.append("the kernel log names no APIC routing (dmesg unreadable?): machine.apic = phys assumed")
    return Topology(
        cpus=len(cpus),
        nodes=len(per_node),
        cpus_per_node=min(per_node),
        smt=smt if min(per_node) % smt == 0 else 1,
        mem_per_node_mib=max(64, min(mem)),
        ghz=ghz,
        idle=idle,
        idle_poll_ns=int(poll) if poll.isdigit() else 200_000,
        apic=apic or "phys",
        notes=tuple(notes),
    )


def smt_sibling() -> int | None:
    """CPU 0's other SMT thread, if it has one this process may run on."""
    siblings = _cpulist(_read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list"))
    usable = os.sched_getaffinity(0)
    return next((c for c in siblings if c != 0 and c in usable), None)


def smt_yield(p: Probe) -> float | None:
    """machine.smt_yield from the read loop alone and beside its SMT sibling's (2 x alone / both),
    within the parameter's range [1, 2]; None where it was not measured."""
    if "smt_read_alone" not in p.runs or "smt_read_both" not in p.runs:
        return None
    y = 2 * p.median("smt_read_alone") / p.median("smt_read_both")
    return round(min(2.0, max(1.0, y)), 3)


_RECLAIM_EVENT = re.compile(
    r"^\s*\S+-(\d+)\s+\[\d+\]\s+\S+\s+(\d+\.\d+): mm_vmscan_memcg_reclaim_(begin|end):(.*)$"
)


def empty_reclaims_us(trace: str) -> list[float]:
    """From a trace of the vmscan events mm_vmscan_memcg_reclaim_begin/end: how long (us) each
    call that freed nothing (nr_reclaimed=0) took, a call being one task's begin and next end."""
    begun: dict[str, float] = {}
    out = []
    for line in trace.splitlines():
        m = _RECLAIM_EVENT.match(line)
        if not m:
            continue
        pid, t, kind, rest = m.group(1), float(m.group(2)), m.group(3), m.group(4)
        if kind == "begin":
            begun[pid] = t
        elif pid in begun and re.search(r"\bnr_reclaimed=0\b", rest):
            out.append((t - begun.pop(pid)) * 1e6)
        else:
            begun.pop(pid, None)
    return out


def measure_reclaim_empty(runs: int) -> list[float]:
    """A direct reclaim that frees nothing, ns, the median of each run's calls: `dd` fills a 64 MiB
    memory cgroup without swap until the memcg OOM kills it, and the vmscan tracepoints time each
    reclaim. Needs root, a cgroup memory controller and tracefs; raises hw.Unavailable otherwise.
    It puts the tracing switches back and removes its cgroup."""
    if os.geteuid() != 0:
        raise hw.Unavailable("needs root (a memory cgroup and tracefs)")
    tracing = Path("/sys/kernel/tracing")
    if not (tracing / "trace").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(tracing)], capture_output=True, check=False)
    if not (tracing / "events/vmscan/mm_vmscan_memcg_reclaim_begin").is_dir():
        raise hw.Unavailable(f"{tracing}: no vmscan memcg reclaim events")
    v2 = Path("/sys/fs/cgroup")
    if "memory" in _read(str(v2 / "cgroup.controllers")).split():
        cg, limit = v2 / "ipisim-probe", "memory.max"
        if "memory" not in _read(str(v2 / "cgroup.subtree_control")).split():
            (v2 / "cgroup.subtree_control").write_text("+memory")
    elif (v2 / "memory/tasks").exists():
        swap = re.search(r"SwapTotal:\s+(\d+)", _read("/proc/meminfo"))
        if swap and int(swap.group(1)) > 0:
            raise hw.Unavailable("cgroup v1 with swap: the reclaim would swap the pages out")
        cg, limit = v2 / "memory/ipisim-probe", "memory.limit_in_bytes"
    else:
        raise hw.Unavailable("no cgroup memory controller")
    events = [tracing / f"events/vmscan/mm_vmscan_memcg_reclaim_{k}/enable" for k in ("begin", "end")]
    saved = [(f, f.read_text().strip()) for f in [*events, tracing / "tracing_on"]]
    cg.mkdir(exist_ok=True)
    medians = []
    try:
        (cg / limit).write_text("64M")
        if (cg / "memory.swap.max").exists():
            (cg / "memory.swap.max").write_text("0")
        for f in events:
            f.write_text("1")
        for _ in range(runs):
            (tracing / "trace").write_text("")
            (tracing / "tracing_on").write_text("1")
            fill = f"echo $$ > {cg}/cgroup.procs; exec dd if=/dev/zero of=/dev/null bs=256M count=1"
            subprocess.run(["sh", "-c", fill], capture_output=True, check=False)
            (tracing / "tracing_on").write_text("0")
            calls = empty_reclaims_us((tracing / "trace").read_text())
            if not calls:
                raise hw.Unavailable("no reclaim that freed nothing was traced")
            medians.append(statistics.median(calls) * 1000)
    finally:
        for f, value in saved:
            f.write_text(value)
        cg.rmdir()
    return medians


def measure(repeats: int = 5, progress: Callable[[str], None] | None = None, reclaim: bool = False) -> Probe:
    """Run native/costs.c `repeats` times; every output line is one measurement in ns. With
    `reclaim`, also time a direct reclaim that frees nothing (measure_reclaim_empty)."""
    topo = topology()
    skipped = []
    no_tlb_row = False
    try:
        hw.check_available()
    except hw.Unavailable as e:
        skipped.append(f"TLB-shootdown measurements (irq_entry_exit, remote shootdown cost): {e}")
        no_tlb_row = "TLB row" in str(e)
    exe = hw.build("costs")
    local_cpus = len(os.sched_getaffinity(0))
    sibling = smt_sibling()
    runs: dict[str, list[float]] = {}
    for i in range(repeats):
        if progress:
            progress(f"costs run {i + 1}/{repeats}")
        args = [str(exe)] if local_cpus >= 2 else [str(exe), "--local-only"]
        if sibling is not None:
            args += ["--smt-sibling", str(sibling)]
        proc = subprocess.run(
            args, capture_output=True, text=True, check=False, preexec_fn=lambda: os.sched_setaffinity(0, {0})
        )
        if proc.returncode != 0:
            raise hw.Unavailable(f"costs: {proc.stderr.strip()}")
        for line in proc.stdout.splitlines():
            name, value = line.split()
            runs.setdefault(name, []).append(float(value))
    if no_tlb_row:
        # Without IPIs for TLB shootdowns (not x86) the spinning victim loses nothing to them.
        for name in [n for n in runs if n.startswith(("victim_gap", "fault_zap"))]:
            del runs[name]
    if topo.cpus < 2 or local_cpus < 2:
        skipped.append("one CPU: no remote shootdown, IPI, cache-line or idle-wakeup measurement")
    if reclaim:
        if progress:
            progress("a direct reclaim that frees nothing (dd into a 64 MiB memory cgroup)")
        try:
            runs["reclaim_empty"] = measure_reclaim_empty(repeats)
        except (hw.Unavailable, OSError) as e:
            skipped.append(f"reclaim_empty: {e}")
    return Probe(topo, runs, skipped)


def fit(p: Probe, template: str = "host-2cpu") -> list[Fitted]:
    """The cost table in cycles: measured entries from `p`, the rest from `template`."""
    g = p.topology.ghz
    base = {
        str(c["key"]).removeprefix("machine.cost."): (float(c["value"]), str(c["source"]))
        for c in ipisim.describe(template)["costs"]
    }
    out: dict[str, Fitted] = {}

    def has(*names: str) -> bool:
        return all(n in p.runs for n in names)

    def put(key: str, ns: float, source: str, floor: float = 1.0) -> None:
        if ns * g < floor:
            # A difference of noisy medians went below zero: keep the floor, and say so.
            source += (
                f"; came out {ns:.0f} ns, held at {floor:g} cycle(s): the parts subtracted exceed"
                " the whole (host noise? rerun with more --repeats)"
            )
        out[key] = Fitted(key, round(max(ns * g, floor)), source)

    def ns_of(key: str) -> float:
        f = out.get(key)
        return (f.cycles if f else base[key][0]) / g

    def m(name: str) -> float:
        return p.median(name)

    sc = m("null_syscall")
    put("syscall", sc, f"measured: getppid() {sc:.0f} ns")
    cs = m("context_switch")
    put("context_switch", cs - 2 * sc, f"measured: futex hand-off on one CPU {cs:.0f} ns minus 2 syscalls")
    put("thread_create", m("thread_create"), f"measured: pthread_create + join {m('thread_create'):.0f} ns")
    clear, hot, cold = m("page_clear"), m("touch_hot"), m("touch_cold")
    put("page_clear", clear, f"measured: memset of a 4 KiB page over 64 MiB, {clear:.0f} ns")
    put("page_copy", m("page_copy"), f"measured: memcpy of a 4 KiB page over 64 MiB, {m('page_copy'):.0f} ns")
    if has("page_copy_cold"):
        put(
            "page_copy_cold",
            m("page_copy_cold"),
            f"measured: copy of random 4 KiB pages of 1 GiB to random pages of another, on huge pages,"
            f" {m('page_copy_cold'):.0f} ns",
        )
    if has("reclaim_empty"):
        put(
            "reclaim_empty",
            m("reclaim_empty"),
            "measured: a memory cgroup's direct reclaim that frees nothing (dd into a 64 MiB cgroup"
            f" without swap; vmscan tracepoints), {m('reclaim_empty') / 1000:.1f} us",
        )
    put("user_touch", hot, f"measured: one store per page over 512 present pages, {hot:.2f} ns")
    put(
        "tlb_miss",
        cold - hot,
        f"measured: store per page over 64 MiB ({cold:.2f} ns) minus TLB hit ({hot:.2f} ns)",
    )
    put(
        "user_read_page",
        m("read_page"),
        f"measured: read 8-byte words of a present page, {m('read_page'):.0f} ns",
    )
    ft = m("first_touch")
    put(
        "fault_anon",
        ft - clear - (cold - hot) - hot,
        f"measured: first touch of an anon page {ft:.0f} ns minus page_clear, TLB miss, store",
    )
    if has("cow_fault"):
        cow = m("cow_fault")
        put(
            "fault_cow",
            cow - m("page_copy") - (cold - hot) - hot,
            f"measured: write fault on a private file mapping of a cached page {cow:.0f} ns minus"
            " page_copy, TLB miss, store",
        )
    # A read fault maps its page and fault-around maps up to 15 more cached ones (64 KiB).
    single, seq = m("file_fault_single"), m("file_fault")
    put("fault_file", single, f"measured: read fault mapping one page-cache page, {single:.0f} ns")
    put(
        "fault_around_page",
        (16 * seq - single) / 15,
        f"measured: sequential first reads {seq:.0f} ns per page, 16 pages per fault, minus"
        f" one single-page fault ({single:.0f} ns), per other page",
    )
    # Per-page slopes and per-call intercepts from sweeps over a touched 512-page region in
    # calls of 1 and of 256 pages (native/costs.c sweep_op).
    slope, icpt = {}, {}
    for op in ("madvise", "mprotect", "munmap"):
        one, many = m(f"{op}_sweep_1"), m(f"{op}_sweep_256")
        slope[op] = (many - one) / 255
        icpt[op] = one - slope[op]
    put(
        "pte_zap",
        slope["madvise"],
        f"measured: madvise(MADV_DONTNEED) sweep slope ({m('madvise_sweep_256'):.0f} ns per 256-page call"
        f" - {m('madvise_sweep_1'):.0f} per 1-page call) / 255",
    )
    put(
        "pte_protect",
        slope["mprotect"],
        f"measured: mprotect(PROT_READ) sweep slope ({m('mprotect_sweep_256'):.0f} ns per 256-page call"
        f" - {m('mprotect_sweep_1'):.0f} per 1-page call) / 255",
    )
    if has("mprotect_sweep_32"):
        # 32 pages per call are flushed by INVLPG each; 256 by one CR3 write (over the ceiling).
        m32 = m("mprotect_sweep_32")
        put(
            "invlpg",
            (m32 - icpt["mprotect"]) / 32 - slope["mprotect"],
            f"measured: mprotect sweep, 32-page calls {m32:.0f} ns: per page, minus the per-call intercept"
            " and the 256-page (full flush) slope",
            floor=10,
        )
    put(
        "munmap_vma",
        m("munmap_sweep_1") - m("madvise_sweep_1"),
        f"measured: munmap minus madvise(MADV_DONTNEED) of one page in a 512-page sweep,"
        f" {m('munmap_sweep_1'):.0f} - {m('madvise_sweep_1'):.0f} ns",
    )
    per_call = (icpt["madvise"] + icpt["mprotect"]) / 2
    put(
        "vma_op",
        per_call - sc - ns_of("invlpg") - ns_of("flush_tlb_func"),
        f"measured: mean per-call intercept of the madvise ({icpt['madvise']:.0f} ns) and mprotect"
        f" ({icpt['mprotect']:.0f} ns) sweeps minus syscall, invlpg, flush_tlb_func",
    )
    if has("thp_munmap"):
        # zap_huge_pmd plus freeing the 2 MiB folio, most of it the loop over its struct pages.
        thp = m("thp_munmap")
        put("pmd_zap", thp, f"measured: munmap of 1 GiB of THP-backed anonymous memory, {thp:.0f} ns / 2 MiB")
    # The page-cache composites keep the template's split between their parts.
    if has("sparse_first_touch"):
        comp = m("sparse_first_touch") - m("file_fault") - clear
        parts3 = ("lru_page", "buddy_page", "pagecache_insert")
        total = sum(base[k][0] for k in parts3)
        for k in parts3:
            share = base[k][0] / total
            put(
                k,
                comp * share,
                f"fitted: {share:.0%} of measured alloc+insert+LRU composite {comp:.0f} ns "
                f"(sparse mmap read {m('sparse_first_touch'):.0f} - fault_file - page_clear)",
            )
    if has("pageout"):
        parts = ("pagecache_delete", "rmap_walk")
        total = sum(base[k][0] for k in parts)
        for k in parts:
            share = base[k][0] / total
            put(
                k,
                m("pageout") * share,
                f"fitted: {share:.0%} of measured MADV_PAGEOUT {m('pageout'):.0f} ns per page",
            )
    if has("membarrier_busy0") and "membarrier_alone" in p.runs:
        alone = m("membarrier_alone")
        put("membarrier", alone - sc, f"measured: membarrier alone in its mm {alone:.0f} ns minus getppid()")
        mb0 = m("membarrier_busy0")
        put(
            "membarrier_mask",
            mb0 - alone,
            f"measured: membarrier with a sleeping thread {mb0:.0f} ns minus alone {alone:.0f}",
        )
    if has("victim_gap", "line_round_trip", "membarrier_busy0", "membarrier_busy1", "idle_wakeup"):
        rt = m("line_round_trip")
        put(
            "line_node",
            rt / 2,
            f"measured: cache-line ping-pong CPU 0 <-> CPU 1, {rt:.1f} ns per round trip / 2",
        )
        if p.topology.nodes == 1:
            out["line_remote"] = Fitted("line_remote", out["line_node"].cycles, "one node: same as line_node")
        # The victim's handler also takes its call queue head's line (llist_del_all) and brings the
        # csd's line over from the sender.
        gap = m("victim_gap")
        put(
            "irq_entry_exit",
            gap - ns_of("flush_tlb_func") - ns_of("invlpg") - 2 * ns_of("line_node"),
            f"measured: {gap:.0f} ns taken from a spinning victim per TLB IPI, minus flush_tlb_func, invlpg,"
            " the call queue head's and the csd's lines",
        )
        # The round trip: queue, the head's line (llist_add), send, wire, entry, the head's line
        # back (llist_del_all), the csd's line there and the unlock's line back.
        mb0, mb1 = m("membarrier_busy0"), m("membarrier_busy1")
        ipi = mb1 - mb0 - ns_of("csd_queue") - ns_of("irq_entry_exit") / 2 - 4 * ns_of("line_node")
        share = base["ipi_send"][0] / (base["ipi_send"][0] + base["ipi_wire_node"][0])
        put(
            "ipi_send",
            ipi * share,
            f"fitted: {share:.0%} (template split) of the measured {ipi:.0f} ns from ICR write to handler",
        )
        put(
            "ipi_wire_node",
            ipi * (1 - share),
            f"measured: membarrier IPI round trip {mb1:.0f} - {mb0:.0f} ns minus csd_queue, half "
            "irq_entry_exit, two line_node; minus ipi_send",
        )
        if p.topology.nodes == 1:
            out["ipi_wire_remote"] = Fitted(
                "ipi_wire_remote", out["ipi_wire_node"].cycles, "one node: same as ipi_wire_node"
            )
        wake = m("idle_wakeup")
        rest = ipi + ns_of("irq_entry_exit") / 2 + ns_of("context_switch")
        put(
            "idle_wakeup",
            wake - rest,
            f"measured: futex wake of a thread on a CPU idle 50 ms, {wake:.0f} ns minus IPI, entry, switch",
        )
    if p.topology.smt == 1:
        out["line_smt"] = Fitted("line_smt", base["line_smt"][0], "unused: no SMT siblings on this host")
    return [
        out.get(k) or Fitted(k, base[k][0], f"{base[k][1]} ({template}, not measured here)") for k in base
    ]


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def profile_toml(p: Probe, fitted: list[Fitted], name: str = "host") -> str:
    """A machine profile `--machine` loads: topology from /sys, the fitted cost table."""
    t = p.topology
    lines = [
        "# Written by `ipisim probe` on this host; every [cost] entry names its measurement",
        "# (median of runs of python/ipisim/native/costs.c). See docs/probe-and-validate.md.",
    ]
    lines += [f"# note: {n}" for n in t.notes + tuple(p.skipped)]
    desc = f"measured by ipisim probe: {t.cpus} CPUs, {t.nodes} node(s), {t.ghz} GHz"
    lines += [
        "[machine]",
        f"name = {_toml_str(name)}",
        f"description = {_toml_str(desc)}",
        'arch = "x86"',
        f'apic = "{t.apic}"',
        f"nodes = {t.nodes}",
        f"cpus_per_node = {t.cpus_per_node}",
        f"smt = {t.smt}",
    ]
    y = smt_yield(p)
    if y is not None:
        alone, both = p.median("smt_read_alone"), p.median("smt_read_both")
        lines.append(
            f"smt_yield = {y:g}  # measured: a read loop {alone:.0f} ns a page alone,"
            f" {both:.0f} beside the same loop on its SMT sibling (2 x alone / both)"
        )
    lines += [
        f'mem_per_node = "{t.mem_per_node_mib}MiB"',
        f"ghz = {t.ghz}",
        f'idle = "{t.idle}"',
        f'idle_poll = "{t.idle_poll_ns}ns"',
        "tlb_entries = 3072",
        "tlb_ways = 12",
        "",
        "[cost]",
    ]
    for f in fitted:
        lines.append(f"{f.key} = {{ cycles = {f.cycles:g}, source = {_toml_str(f.source)} }}")
    return "\n".join(lines) + "\n"


# The rows of the printed table: (label, measurement names, what it is).
TABLE = [
    ("getppid()", ["null_syscall"], "syscall"),
    ("anon first touch / page", ["first_touch"], "fault_anon (+clear, miss)"),
    ("file read fault / page", ["file_fault"], "fault_around_page"),
    ("file read fault, one page", ["file_fault_single"], "fault_file"),
    ("private file write fault (COW)", ["cow_fault"], "fault_cow (+copy, miss)"),
    ("madvise sweep: 1 / 256 pages", ["madvise_sweep_1", "madvise_sweep_256"], "pte_zap, vma_op"),
    ("mprotect sweep: 1 / 256 pages", ["mprotect_sweep_1", "mprotect_sweep_256"], "pte_protect, vma_op"),
    ("munmap sweep: 1 / 256 pages", ["munmap_sweep_1", "munmap_sweep_256"], "munmap_vma"),
    ("mprotect sweep: 32 pages", ["mprotect_sweep_32"], "invlpg"),
    ("madvise 1 page, 0 / 1 busy", ["madvise_1_busy0", "madvise_1_busy1"], "remote shootdown marginal"),
    ("mprotect 1 page, 0 / 1 busy", ["mprotect_1_busy0", "mprotect_1_busy1"], "remote shootdown marginal"),
    ("munmap 1 page, 0 / 1 busy", ["munmap_1_busy0", "munmap_1_busy1"], "remote shootdown marginal"),
    ("membarrier alone / sleeping", ["membarrier_alone", "membarrier_busy0"], "membarrier, membarrier_mask"),
    ("membarrier 1 busy thread", ["membarrier_busy1"], "ipi_send + ipi_wire_node"),
    ("TLB IPI: victim's loss", ["victim_gap"], "irq_entry_exit"),
    ("cache line round trip", ["line_round_trip"], "line_node"),
    ("lock hand-off: load / + claim", ["lock_handoff_load", "lock_handoff_claim"], "kernel.spinlock"),
    ("pause (cpu_relax())", ["pause"], "a spinner's reaction (not modelled)"),
    (
        "reader per flush: 1 / 32 / full",
        ["reader_flush_1", "reader_flush_32", "reader_flush_64"],
        "invlpg vs cr3_flush + refill (seed 000/001)",
    ),
    ("read loop: alone / SMT sibling busy", ["smt_read_alone", "smt_read_both"], "machine.smt_yield"),
    ("idle wakeup", ["idle_wakeup"], "idle_wakeup"),
    ("context switch", ["context_switch"], "context_switch"),
]


def format_table(p: Probe) -> str:
    t = p.topology
    head = (
        f"probe: {t.cpus} CPUs, {t.nodes} node(s) x {t.cpus_per_node} CPUs, SMT {t.smt}, "
        f"{t.mem_per_node_mib} MiB per node, {t.ghz} GHz, idle {t.idle} (poll {t.idle_poll_ns} ns); "
        f"{len(next(iter(p.runs.values()), []))} runs\n"
    )
    lines = [head, f"{'measurement':<30} {'median ns':>20} {'spread':>14}  fits"]
    for label, names, fits in TABLE:
        names = [n for n in names if n in p.runs]
        if not names:
            lines.append(f"{label:<30} {'skipped':>20}")
            continue
        vals = " / ".join(f"{p.median(n):.1f}" for n in names)
        spread = " / ".join(f"{100 * p.spread(n):.0f}%" for n in names)
        lines.append(f"{label:<30} {vals:>20} {spread:>14}  {fits}")
    for busy in range(2, t.cpus):
        n = f"madvise_1_busy{busy}"
        if n in p.runs:
            label = f"madvise 1 page, {busy} busy"
            lines.append(f"{label:<30} {p.median(n):>20.1f} {100 * p.spread(n):>13.0f}%")
    for name in ("madvise_1_busy1", "membarrier_busy1"):
        base = name.replace("busy1", "busy0")
        if name in p.runs and base in p.runs:
            what = "remote shootdown" if name.startswith("madvise") else "membarrier IPI"
            lines.append(f"marginal cost of one {what}: {p.median(name) - p.median(base):.0f} ns")
    if all(n in p.runs for n in ("line_round_trip", "lock_handoff_load", "lock_handoff_claim")):
        line = p.median("line_round_trip") / 2
        load, claim = (p.median(n) / line for n in ("lock_handoff_load", "lock_handoff_claim"))
        lines.append(
            f"lock hand-off in line transfers (round trip / 2): load {load:.1f}, + claim {claim:.1f}"
            " (kernel.spinlock charges ticket 2, queued 3)"
        )
    if all(n in p.runs for n in ("reader_flush_1", "reader_flush_32", "reader_flush_64")):
        one, pfn, full = (p.median(f"reader_flush_{n}") for n in (1, 32, 64))
        lines.append(
            f"a streaming reader's loss per flush IPI: full flush {full - one:+.0f} ns against one page"
            f" (the refill after it), 32-page list {pfn - full:+.0f} ns against the full flush"
        )
    lines += [f"skipped: {s}" for s in p.skipped]
    return "\n".join(lines) + "\n"


def format_fit(fitted: list[Fitted]) -> str:
    width = max(len(f.key) for f in fitted)
    return "\n".join(f"  {f.key:<{width}} {f.cycles:>8g} cycles  {f.source}" for f in fitted) + "\n"
