"""ipisim: simulate SMP memory management and IPIs. User mistakes exit with code 2 and one line."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import ipisim
from ipisim.procfs import format_interrupts, format_vmstat


class UsageError(Exception):
    """Bad command-line usage; printed as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _key_value(item: str, expected: str) -> tuple[str, str]:
    """Split key=value; otherwise a UsageError "<expected>, got <item>"."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{expected}, got {item!r}")
    return key.strip(), value.strip()


def _parse_sets(items: Sequence[str]) -> list[tuple[str, str]]:
    return [_key_value(item, "--set: expected key=value") for item in items]


def _seed(text: str) -> int:
    """An argparse type: a seed, an integer in [0, 2^64 - 1]."""
    try:
        return ipisim.check_seed(int(text))
    except (ValueError, ipisim.ConfigError) as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer in [0, {ipisim.SEED_MAX}]") from e


def _writable(option: str, path: str | None, *, directory: bool = False) -> None:
    """Refuse an output path before the run, not after it: it must be creatable and writable."""
    if not path:
        return
    p = Path(path).absolute()
    if directory:
        # The directory may not exist yet; the nearest one that does must take new entries.
        while not p.exists() and p != p.parent:
            p = p.parent
        parent, target = p, p
    else:
        parent, target = p.parent, p
        if p.is_dir():
            raise UsageError(f"{option}: {path}: cannot write: it is a directory")
    if not parent.is_dir():
        raise UsageError(f"{option}: {path}: cannot write: no such directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{option}: {path}: cannot write: permission denied")


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror}") from e


MACHINE_HELP = "built-in machine profile or a .toml file (default: the scenario's, else host-2cpu)"


def _add_target_options(p: argparse.ArgumentParser) -> None:
    """--machine, --kernel and --set: what to simulate."""
    p.add_argument("--machine", help=MACHINE_HELP)
    p.add_argument("--kernel", help="built-in kernel preset or a .toml file (default linux-6.18)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a parameter")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    _add_target_options(p)
    p.add_argument("--seed", type=_seed, default=1, help="random seed, 0 to 2^64-1 (default 1)")


def _no_check(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-check",
        action="store_true",
        help="skip the TLB-coherence checker (the same as --set check.enabled=false)",
    )


def _check_sets(args: argparse.Namespace) -> list[tuple[str, str]]:
    return [("check.enabled", "false")] if args.no_check else []


def _add_trace_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace", metavar="PATH", help="write a Perfetto-loadable trace to PATH and ftrace text to PATH.txt"
    )
    p.add_argument(
        "--trace-window",
        metavar="START:END",
        help="simulated seconds to trace, e.g. 0.05:0.06 (default: all)",
    )


def _trace_window(args: argparse.Namespace) -> tuple[float, float] | None:
    if not args.trace:
        if args.trace_window:
            raise UsageError("--trace-window: needs --trace PATH")
        return None
    if not args.trace_window:
        return (0.0, math.inf)
    start, sep, end = args.trace_window.partition(":")
    try:
        window = (float(start or 0), float(end) if end else math.inf)
    except ValueError:
        window = (-1.0, -1.0)
    if not sep or window[0] < 0 or window[1] <= window[0]:
        raise UsageError(
            f"--trace-window: expected START:END in seconds with START < END, got {args.trace_window!r}"
        )
    return window


def _write_trace(path: str, trace: ipisim.Trace | None) -> None:
    assert trace is not None
    try:
        written = trace.write(path)
    except OSError as e:
        raise UsageError(f"{e.filename}: cannot write: {e.strerror}") from e
    cut = " (cut at the record limit: narrow --trace-window)" if trace.truncated else ""
    print(f"trace: {written[0]} (Perfetto), {written[1]} (ftrace){cut}", file=sys.stderr)


def _summary(r: ipisim.RunResult) -> str:
    d = r.data
    ops = "  ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.ops.items())
    return (
        f"{d['scenario']} on {d['machine']} with {d['kernel']} (seed {d['config']['seed']})\n"
        f"simulated: elapsed {r.elapsed_s:.6f} s  user {r.user_s:.6f} s  system {r.system_s:.6f} s\n"
        f"ops: {ops}\n\n"
        f"{format_interrupts(r.interrupts)}\n"
        f"{format_vmstat(r.vmstat)}"
    )


def cmd_run(args: argparse.Namespace) -> int:
    window = _trace_window(args)
    _writable("--json", args.json)
    if args.trace:
        _writable("--trace", args.trace)
        _writable("--trace", args.trace + ".txt")
    r = ipisim.run(
        args.scenario,
        machine=args.machine,
        kernel=args.kernel,
        sets=_check_sets(args) + _parse_sets(args.set),
        seed=args.seed,
        trace_window=window,
        max_memory=args.max_memory,
    )
    floor = r.config.get("machine.simulated_mem_per_node")
    if floor is not None:
        note = f"scale {r.config['scale']} is under the 64MiB floor: simulated {floor >> 20}MiB per node"
        print(f"ipisim: {note}", file=sys.stderr)
    if window:
        _write_trace(args.trace, r.trace)
    print(_summary(r), end="")
    if args.profile or args.comm:
        print("\n" + r.profile_report(args.comm), end="")
    if args.json:
        _write(args.json, r.to_json())
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    builtins = ipisim.list_builtins()
    for group in ("scenarios", "machines", "kernels"):
        print(f"{group}:")
        width = max(len(x["name"]) for x in builtins[group])
        for x in builtins[group]:
            print(f"  {x['name']:<{width}}  {x['description']}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    d = ipisim.describe(args.thing)
    print(f"{d['kind']} {d['name']}: {d['description']}")
    rows = [(p["key"], p["value"], p["unit"], p["type"], p["description"]) for p in d["params"]]
    width = max(len(r[0]) for r in rows)
    for key, value, unit, typ, desc in rows:
        print(f"  {key:<{width}}  = {value} {unit}".rstrip() + f"    [{typ}] {desc}")
    for c in d.get("costs", []):
        print(f"  {c['key']:<{width}}  = {c['value']:g} cycles    {c['description']}; source: {c['source']}")
    if d.get("machine"):
        print(f"default machine: {d['machine']}")
    if d.get("check"):
        print("`ipisim check` runs it with: " + " ".join(f"{k}={v}" for k, v in d["check"].items()))
    if "note" in d:
        print(d["note"])
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    sets = [("mode", "thread"), ("tasks", str(args.tasks)), ("duration", args.duration)]
    sets += _parse_sets(args.set)
    best = float("inf")
    r = None
    for i in range(args.repeat):
        t0 = time.perf_counter()
        r = ipisim.run(args.scenario, machine=args.machine, kernel=args.kernel, sets=sets, seed=args.seed)
        dt = time.perf_counter() - t0
        best = min(best, dt)
        print(f"run {i + 1}/{args.repeat}: {dt:.3f} s host", file=sys.stderr)
    assert r is not None
    ipis = int(r.data["ipis_sent"])
    tlb = sum(r.interrupts["TLB"])
    head = f"{args.scenario} on {r.data['machine']}, {args.tasks} tasks, {args.duration} simulated"
    print(f"{head}; best of {args.repeat}")
    print(f"  host time {best:.3f} s")
    print(f"  {'':<46}{'simulated':>12}  {'per host second':>16}")
    rows = [
        ("TLB shootdowns received (/proc/interrupts TLB)", tlb),
        ("interrupts delivered (APIC IPIs)", ipis),
        ("events", r.events),
    ]
    for label, n in rows:
        print(f"  {label:<46}{n:>12,d}  {n / best:>16,.0f}")
    return 0


def cmd_validate_qemu(args: argparse.Namespace) -> int:
    from ipisim import qemu

    try:
        guest = qemu.Guest(args.cpus, args.nodes, qemu.parse_size_mib(args.memory))
        guest.check()
        programs = [p.strip() for p in args.programs.split(",") if p.strip()]
        qemu.jobs(guest.cpus, 1, programs, memory_mib=guest.memory_mib, nodes=guest.nodes)
    except ValueError as e:
        raise UsageError(f"validate --qemu: {e}") from e
    args.repeats = 3 if args.repeats is None else args.repeats
    if args.repeats < 1:
        raise UsageError(f"--repeats: must be at least 1, got {args.repeats}")
    machine = args.machine or "host-2cpu"
    try:
        image = Path(args.kernel_image) if args.kernel_image else qemu.default_kernel_image()
        if not image.is_file():
            raise qemu.Unavailable(f"{image}: no such kernel image")
        version = qemu.kernel_version(image)
        preset = args.preset or qemu.preset_for(version)
        ipisim.describe(preset)  # a bad --preset or --machine fails here, before the boot
        ipisim.describe(machine)
        todo = qemu.jobs(guest.cpus, args.repeats, programs, memory_mib=guest.memory_mib, nodes=guest.nodes)
        accel = args.accel or ("kvm" if qemu.kvm_usable() else "tcg")
        qemu.log(
            f"booting {image} ({version or 'version unknown'}) under QEMU/{accel}: {guest.cpus} vCPUs,"
            f" {guest.nodes} node(s), {guest.memory_mib} MiB; {len(todo)} programs"
        )
        b = qemu.boot(image, guest, todo, accel=accel, timeout_s=args.timeout, progress=qemu.log)
        qemu.log(f"guest powered off after {b.wall_s:.1f} s; simulating with {preset} on {machine}")
        rows = list(qemu.compare(b.output, todo, machine=machine, kernel=preset, guest=guest))
    except qemu.Unavailable as e:
        raise UsageError(f"validate --qemu: {e}") from e
    out = b.output
    print(f"real: {image}, Linux {out.release}, QEMU/{accel}, {guest.cpus} vCPUs, {guest.nodes} node(s),")
    print(
        f"      {guest.memory_mib} MiB; kernel boot {out.boot_s:.1f} s (guest clock),"
        f" whole boot {b.wall_s:.1f} s"
    )
    shape = ", ".join(f"{k}={v}" for k, v in guest.sim_shape())
    print(f"simulated: {preset} on {machine} with {shape}")
    print("IPIs: the /proc/interrupts row, all CPUs, median of the repeats inside one boot (min-max);")
    print("times under QEMU are not the hardware's and are not compared\n")
    print(qemu.format_rows(rows), end="")
    print("\n/proc/interrupts over all the programs (guest):")
    print(qemu.format_irq(out), end="")
    bad = [r for r in rows if not r.ok]
    print(
        f"\ncounts: {len(rows) - len(bad)}/{len(rows)} agree (exact where real <= 2, else within 1 %;"
        " lru-file-mmap-read and migrate within 5 %)"
    )
    return 1 if bad else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from ipisim import hw

    if args.qemu:
        return cmd_validate_qemu(args)
    args.repeats = 5 if args.repeats is None else args.repeats
    if args.costs:
        try:
            costs = hw.measure_costs()
        except hw.Unavailable as e:
            raise UsageError(f"validate: cannot measure on this machine: {e}") from e
        print("costs measured on this machine by native/costs.c, in ns (docs/hardware-shootdown.md):")
        for name, ns in costs.items():
            print(f"  {name:<22} {ns:>12.2f}")
        return 0
    if args.repeats < 1:
        raise UsageError(f"--repeats: must be at least 1, got {args.repeats}")
    machine = args.machine or "host-2cpu"
    ipisim.describe(machine)  # a bad --machine fails here, before anything runs
    rows: list[hw.Row] = []
    t0 = time.perf_counter()
    try:
        cells = []
        for cell in hw.grid(machine=machine, kernel=args.kernel, repeats=args.repeats):
            progress = f"shootdown {cell.op} batch={cell.batch} remote={cell.remote}"
            print(f"{progress}: real {cell.real_tlb}, simulated {cell.sim_tlb}", file=sys.stderr)
            cells.append(cell)
        rows += hw.shootdown_rows(cells)
        for row in hw.membarrier_rows(machine=machine, kernel=args.kernel, repeats=args.repeats):
            print(f"{row.bench}: real {row.real_count}, simulated {row.sim_count}", file=sys.stderr)
            rows.append(row)
        for row in hw.tlb_flush_rows(machine=machine, kernel=args.kernel, repeats=args.repeats):
            print(f"{row.bench}: real {row.real_count}, simulated {row.sim_count}", file=sys.stderr)
            rows.append(row)
    except hw.Unavailable as e:
        raise UsageError(f"validate: cannot measure on this machine: {e}") from e
    print(f"this machine vs {machine} with {args.kernel}: IPIs (the /proc/interrupts row, all CPUs, median")
    print("of repeats) and time per operation (syscall, membarrier call, or loop iteration of one thread;")
    print("the best repeat, with the spread of all repeats)\n")
    print(hw.format_rows(rows), end="")
    bad = [r for r in rows if not r.count_ok]
    slow = [r for r in rows if not r.time_ok]
    print(
        f"\nIPI counts: {len(rows) - len(bad)}/{len(rows)} agree (exact where real <= 2, else within 1 %)"
        f"\ntime per op: {len(rows) - len(slow)}/{len(rows)} within {hw.TIME_TOLERANCE:.0%}"
        f"\n({time.perf_counter() - t0:.1f} s)"
    )
    return 1 if bad else 0


def cmd_probe(args: argparse.Namespace) -> int:
    from ipisim import hw, probe

    if args.repeats < 1:
        raise UsageError(f"--repeats: must be at least 1, got {args.repeats}")
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise UsageError(f"{args.out}: cannot write: no such directory")
    t0 = time.perf_counter()
    try:
        p = probe.measure(
            repeats=args.repeats,
            progress=lambda msg: print(f"probe: {msg}", file=sys.stderr, flush=True),
            reclaim=args.reclaim,
        )
    except hw.Unavailable as e:
        raise UsageError(f"probe: cannot measure on this machine: {e}") from e
    fitted = probe.fit(p)
    print(probe.format_table(p), end="")
    print("\nfitted cost table (cycles):")
    print(probe.format_fit(fitted), end="")
    if args.out:
        _write(args.out, probe.profile_toml(p, fitted, name=Path(args.out).stem))
        ipisim.describe(args.out)  # the profile just written must load
        print(f"\nprofile: {args.out} (use --machine {args.out})")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


#: `reproduce --jobs` by default: every usable CPU, at most this many (a full-scale run can take
#: about 1 GB of memory).
MAX_DEFAULT_JOBS = 8


def _jobs(args: argparse.Namespace) -> int:
    """--jobs: simulations at once, at least one; unset: the usable CPUs, at most MAX_DEFAULT_JOBS."""
    if args.jobs is None:
        return max(1, min(len(os.sched_getaffinity(0)), MAX_DEFAULT_JOBS))
    if args.jobs < 1:
        raise UsageError(f"--jobs: must be at least 1, got {args.jobs}")
    return int(args.jobs)


def cmd_compare(args: argparse.Namespace) -> int:
    kernels: dict[str, str] = {}
    for item in args.kernel:
        label, sep, variant = (part.strip() for part in item.partition("="))
        if not sep or not label or not variant:
            raise UsageError(f"--kernel: expected LABEL=PRESET[,key=value...], got {item!r}")
        if label in kernels:
            raise UsageError(f"--kernel: duplicate label {label!r}")
        kernels[label] = variant
    common = [("scale", str(args.scale))] if args.scale is not None else []
    common += _check_sets(args) + _parse_sets(args.set)
    _writable("--json", args.json)
    _writable("--trace", args.trace)
    t0 = time.perf_counter()

    def progress(v: ipisim.Variant, i: int, n: int) -> None:
        if args.trace:
            path = Path(args.trace)
            name = f"{path.stem}-{v.label}{path.suffix or '.json'}"
            _write_trace(str(path.with_name(name)), v.result.trace)
        print(f"variant {i}/{n} {v.label}: done after {time.perf_counter() - t0:.2f} s", file=sys.stderr)

    c = ipisim.compare(
        args.scenario,
        kernels,
        machine=args.machine,
        sets=common,
        seed=args.seed,
        trace_window=_trace_window(args),
        jobs=_jobs(args),
        progress=progress,
    )
    print(c.table(), end="")
    if args.profile or args.comm:
        print("\n" + c.profile_diff(args.comm), end="")
    if args.json:
        _write(args.json, c.to_json())
    return 0


def _violation(r: ipisim.RunResult) -> str:
    """The first violation of a run, with the page's history and the last events, as text."""
    c = r.data["check"]
    v = c["first"][0]
    lines = [
        f"{r.violations}; the first:",
        f"  {v['kind']} at {v['at']}: CPU {v['cpu']}, t={v['time_s'] * 1e3:.6f} ms, address {v['address']}"
        f" (mm {v['mm']}), pfn {v['pfn']}",
    ]
    event = "    {:>12.6f} ms  CPU {:<3} {:<8} {}"
    sections = (("the page's history", v["history"]), ("the last events before it", v["last_events"]))
    for title, events in sections:
        lines.append(f"  {title}:")
        lines += [event.format(e["time_s"] * 1e3, e["cpu"], e.get("pfn", ""), e["event"]) for e in events]
    access = next((a for a in c["first"] if a["at"] in ("read", "write")), None)
    if access is not None and access is not v:
        lines.append(
            f"  the first offending access: {access['kind']}, a {access['at']} by CPU {access['cpu']} at"
            f" t={access['time_s'] * 1e3:.6f} ms, address {access['address']}, pfn {access['pfn']}"
        )
    return "\n".join(lines) + "\n"


def cmd_check(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise UsageError(f"--seeds: must be at least 1, got {args.seeds}")
    if args.first_seed + args.seeds - 1 > ipisim.SEED_MAX:
        last = args.first_seed + args.seeds - 1
        raise UsageError(f"--first-seed + --seeds - 1: {last} is out of range [0, {ipisim.SEED_MAX}]")
    if not 0 <= args.jitter <= 1:
        raise UsageError(f"--jitter: must be in [0, 1], got {args.jitter}")
    t0 = time.perf_counter()

    def progress(done: int, total: int) -> None:
        print(f"seed {done}/{total}: clean ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)

    res = ipisim.check(
        args.scenario,
        seeds=args.seeds,
        first_seed=args.first_seed,
        machine=args.machine,
        kernel=args.kernel,
        sets=_parse_sets(args.set),
        jitter=args.jitter,
        jobs=_jobs(args),
        progress=progress,
    )
    where = f"{args.scenario} on {args.machine or 'its default machine'} with {args.kernel or 'linux-6.18'}"
    if res.clean:
        print(f"clean: {res.seeds_run} seeds of {where}, no TLB-coherence violation")
        return 0
    assert res.failure is not None
    print(f"VIOLATION: seed {res.failing_seed} of {where} (after {res.seeds_run} seeds)")
    print(_violation(res.failure), end="")
    print(f"reproduce: {res.reproduce()}")
    return 1


def cmd_reproduce(args: argparse.Namespace) -> int:
    from ipisim import reproduce

    def progress(msg: str) -> None:
        print(f"reproduce: {msg}", file=sys.stderr, flush=True)

    out = Path(args.out)
    _writable("--out", args.out, directory=True)
    _writable("--json", args.json)
    _writable("--markdown", args.markdown)
    t0 = time.perf_counter()
    try:
        entries = reproduce.reproduce(
            quick=args.quick,
            out_dir=out,
            json_path=Path(args.json) if args.json else None,
            progress=progress,
            jobs=_jobs(args),
            markdown=Path(args.markdown) if args.markdown else None,
            only=args.experiment or (),
        )
    except OSError as e:
        raise UsageError(f"{e.filename}: cannot write: {e.strerror}") from e
    print(reproduce.render_table(entries))
    ran = {e.experiment for e in entries}
    print(reproduce.score(entries, [c for c in reproduce.load_calibrations() if c.experiment in ran]), end="")
    print(f"took {time.perf_counter() - t0:.0f} s with {_jobs(args)} job(s); report: {out / 'report.html'}")
    missed = any(e.calibrated_pass is False for e in entries)
    return 1 if args.strict and missed else 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ipisim import calibration, reproduce

    def progress(msg: str) -> None:
        print(f"calibrate: {msg}", file=sys.stderr, flush=True)

    if args.experiment:
        given = [args.scenario, args.measured, args.free, args.machine, args.kernel, args.set]
        if any(given) or args.starts is not None:
            raise UsageError("calibrate: --experiment takes scenario, costs and figures from published.json")
        spec = reproduce.calibration_spec(args.experiment)
        scenario, machine, kernel, sets = spec.scenario, spec.machine_profile, spec.kernel, spec.sets
        measured, free, scale, starts = spec.measured, spec.free, spec.inner_scale, spec.starts
        variants = spec.variant_sets or None
        command = f"ipisim calibrate --experiment {args.experiment}"
    else:
        if not args.scenario or not args.measured or not args.free:
            raise UsageError("calibrate: needs SCENARIO, --measured FILE and --free (or --experiment ID)")
        scenario, machine, kernel = args.scenario, args.machine, args.kernel
        sets = _parse_sets(args.set)
        measured = calibration.load_measured(Path(args.measured))
        free = [calibration.parse_free(f) for f in args.free]
        scale = args.scale
        starts = 1 if args.starts is None else args.starts
        variants = None
        command = calibration.command_line(
            scenario, machine, kernel, sets, free, scale, args.measured, starts
        )
    _writable("--out", args.out)
    t0 = time.perf_counter()
    cal = calibration.calibrate(
        scenario,
        measured=measured,
        free=free,
        machine=machine,
        kernel=kernel,
        sets=sets,
        inner_scale=scale,
        jobs=_jobs(args),
        scheduler=args.scheduler,
        command=command,
        progress=progress,
        variants=variants,
        starts=starts,
    )
    _write(args.out, cal.profile_toml)
    print(cal.table(), end="")
    print(f"profile: {args.out} ({time.perf_counter() - t0:.0f} s)")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from ipisim import grid

    open_line = False

    def progress(done: int, total: int) -> None:
        nonlocal open_line
        bar = "#" * (30 * done // max(total, 1))
        open_line = done < total
        print(
            f"\rsweep: [{bar:<30}] {done}/{total}", end="" if open_line else "\n", file=sys.stderr, flush=True
        )

    out = Path(args.out)
    _writable("--out", args.out, directory=True)
    try:
        g = grid.load_grid(Path(args.grid))
        result = ipisim.sweep(g, out, scheduler=args.scheduler, workers=args.workers, progress=progress)
        print(f"results: {result.table} ({len(g.points)} runs)")
        if g.plot_x and g.plot_y:
            print(f"plot: {result.plot(g.plot_x, g.plot_y, out / 'plot.png')}")
    except ImportError as e:  # pragma: no cover - only without the extras
        raise UsageError(f"sweep: needs {e.name}: pip install 'ipisim[sweep]'") from e
    except grid.GridError as e:
        if open_line:
            print(file=sys.stderr)
        raise UsageError(str(e)) from e
    except OSError as e:
        raise UsageError(f"{e.filename or args.scheduler}: {e.strerror or e}") from e
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ipisim", description=__doc__)
    p.add_argument("--version", action="version", version=f"ipisim {ipisim.__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run one scenario and print a summary")
    r.add_argument("scenario")
    _add_run_options(r)
    r.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    r.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="refuse a run that would need more host memory than this, e.g. 4GiB (default: MemAvailable)",
    )
    r.add_argument("--profile", action="store_true", help="print CPU time by kernel function")
    r.add_argument("--comm", metavar="NAME", help="--profile of one command's tasks, as perf report --comm")
    _no_check(r)
    _add_trace_options(r)
    r.set_defaults(func=cmd_run)

    ck = sub.add_parser("check", help="search seeds for a TLB-coherence violation; exit 1 at the first")
    ck.add_argument("scenario")
    _add_target_options(ck)
    ck.add_argument("--seeds", type=int, default=1000, help="seeds to try (default 1000)")
    ck.add_argument("--first-seed", type=_seed, default=1, help="the first seed (default 1)")
    ck.add_argument(
        "--jitter", type=float, default=0.05, help="stretch busy steps by up to this fraction (default 0.05)"
    )
    ck.add_argument("--jobs", type=int, default=2, help="seeds run at once (default 2)")
    ck.set_defaults(func=cmd_check)

    rp = sub.add_parser("reproduce", help="run every seed experiment and compare with the published figures")
    rp.add_argument("--quick", action="store_true", help="scaled down, for CI (figures will not match)")
    rp.add_argument(
        "--out", default="ipisim-report", help="directory for report.html (default ipisim-report)"
    )
    rp.add_argument("--json", metavar="PATH", help="write the entries here (default OUT/reproduce.json)")
    rp.add_argument(
        "--jobs",
        type=int,
        default=None,
        help=f"simulations run at once (default: the usable CPUs, at most {MAX_DEFAULT_JOBS})",
    )
    rp.add_argument("--markdown", metavar="PATH", help="also write the table as Markdown (docs/fidelity.md)")
    rp.add_argument(
        "--strict", action="store_true", help="exit 1 unless every prediction is within tolerance"
    )
    rp.add_argument(
        "--experiment",
        action="append",
        metavar="ID",
        help="only this experiment of published.json (repeatable)",
    )
    rp.set_defaults(func=cmd_reproduce)

    ca = sub.add_parser(
        "calibrate", help="fit at most 3 machine costs to measured figures of a baseline run; write a profile"
    )
    ca.add_argument("scenario", nargs="?")
    _add_target_options(ca)
    ca.add_argument("--experiment", metavar="ID", help="the calibration published.json declares for ID")
    ca.add_argument("--measured", metavar="FILE", help="TOML/JSON: result path = value")
    ca.add_argument(
        "--free",
        action="append",
        default=[],
        metavar="machine.cost.NAME[=LO:HI|>=OTHER]",
        help="a cost to fit (>=OTHER: at least the free cost OTHER)",
    )
    ca.add_argument("--scale", help="run the fit's inner runs at this scale; confirmed at full scale")
    ca.add_argument(
        "--starts",
        type=int,
        metavar="N",
        help="fit from N starting points (the profile's costs, then spread over the bounds); keep the best",
    )
    ca.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    ca.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on a Dask scheduler, e.g. tcp://127.0.0.1:8786"
    )
    ca.add_argument("--out", required=True, metavar="PROFILE.toml", help="write the calibrated profile here")
    ca.set_defaults(func=cmd_calibrate)

    sw = sub.add_parser(
        "sweep", help="run a grid of runs locally or on a Dask cluster; Parquet table and plot"
    )
    sw.add_argument("grid", help="GRID.toml: scenario, machine, kernels, seeds, [axes], [plot]")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler, e.g. tcp://127.0.0.1:8786")
    sw.add_argument("--out", default="ipisim-sweep", help="output directory (default ipisim-sweep)")
    sw.add_argument("--workers", type=int, help="local processes (default: one per CPU)")
    sw.set_defaults(func=cmd_sweep)

    ls = sub.add_parser("list", help="list scenarios, machines and kernel presets")
    ls.set_defaults(func=cmd_list)

    d = sub.add_parser("describe", help="every parameter of a scenario, machine or kernel, with units")
    d.add_argument("thing")
    d.set_defaults(func=cmd_describe)

    b = sub.add_parser("bench", help="simulated IPIs per host second (default: tlb_flush2, 48 threads)")
    b.add_argument("scenario", nargs="?", default="will-it-scale/tlb_flush2")
    _add_run_options(b)
    b.set_defaults(machine="xeon-4n-48c-64g")
    b.add_argument("--tasks", type=int, default=48)
    b.add_argument("--duration", default="20ms", help="simulated time per run")
    b.add_argument("--repeat", type=int, default=3)
    b.set_defaults(func=cmd_bench)

    c = sub.add_parser("compare", help="run kernel variants and print an mmtests compare-kernels table")
    c.add_argument("scenario")
    c.add_argument("--machine", help=MACHINE_HELP)
    c.add_argument(
        "--kernel",
        action="append",
        required=True,
        metavar="LABEL=PRESET[,KEY=VALUE...]",
        help="a variant: label, kernel preset and its own overrides; repeatable, the first is the baseline",
    )
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override, all variants")
    c.add_argument("--scale", type=float, help="the same as --set scale=F")
    c.add_argument("--seed", type=_seed, default=1, help="random seed, 0 to 2^64-1 (default 1)")
    c.add_argument("--jobs", type=int, default=2, help="variants run at once (default 2)")
    c.add_argument("--json", metavar="PATH", help="write every variant's full result as JSON")
    c.add_argument("--profile", action="store_true", help="print the variants' profiles as perf diff does")
    c.add_argument("--comm", metavar="NAME", help="--profile of one command's tasks, as perf diff --comms")
    _no_check(c)
    _add_trace_options(c)
    c.set_defaults(func=cmd_compare)

    v = sub.add_parser("validate", help="run microbenchmarks for real and simulated; compare IPIs and times")
    v.add_argument(
        "--machine", help="profile to simulate, e.g. host.toml from `ipisim probe` (default host-2cpu)"
    )
    v.add_argument("--kernel", default="linux-6.18", help="kernel preset to simulate (default linux-6.18)")
    v.add_argument(
        "--repeats", type=int, help="real runs per cell; the median counts (default 5; 3 with --qemu)"
    )
    v.add_argument("--costs", action="store_true", help="measure this machine's per-operation costs instead")
    q = v.add_argument_group("--qemu: boot a real kernel under QEMU instead (docs/qemu-validate.md)")
    q.add_argument("--qemu", action="store_true", help="run the programs in a QEMU guest of the shape below")
    q.add_argument(
        "--kernel-image", metavar="PATH", help="bzImage to boot (default: the installed /boot/vmlinuz-*)"
    )
    q.add_argument("--cpus", type=int, default=4, help="vCPUs (default 4)")
    q.add_argument("--nodes", type=int, default=1, help="NUMA nodes; must divide --cpus (default 1)")
    q.add_argument("--memory", default="1G", help="guest memory, e.g. 512M or 2G (default 1G)")
    q.add_argument(
        "--preset", help="kernel preset to simulate (default: the newest not newer than the image)"
    )
    q.add_argument(
        "--programs",
        default="shootdown,membarrier,tlb_flush",
        help="comma-separated native programs to run (default shootdown,membarrier,tlb_flush;"
        " also lru_file_mmap_read, reclaim and, with 2+ nodes, migrate)",
    )
    q.add_argument("--accel", choices=["kvm", "tcg"], help="default: kvm where /dev/kvm opens, else tcg")
    q.add_argument(
        "--timeout", type=float, default=3600, help="seconds before the guest is killed (default 3600)"
    )
    v.set_defaults(func=cmd_validate)

    pr = sub.add_parser(
        "probe", help="measure this machine's costs with pinned threads; write a machine profile"
    )
    pr.add_argument("--out", metavar="PATH", help="write the fitted profile here (a .toml for --machine)")
    pr.add_argument("--repeats", type=int, default=5, help="runs of the measurement program (default 5)")
    pr.add_argument(
        "--reclaim",
        action="store_true",
        help="also time a direct reclaim that frees nothing (reclaim_empty): needs root, a memory cgroup"
        " and tracefs; dd fills a 64 MiB cgroup until the OOM killer ends it",
    )
    pr.set_defaults(func=cmd_probe)
    return p


def _one_line(message: str) -> str:
    """The message with control characters escaped: a value echoed from the user cannot break it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code: int = args.func(args)
        return code
    except (ipisim.ConfigError, UsageError) as e:
        print(f"ipisim: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ipisim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
