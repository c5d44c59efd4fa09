"""ipisim: simulate SMP memory management and IPIs. User mistakes exit with code 2 and one line."""

from __future__ import annotations

import argparse
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


def _parse_sets(items: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set: expected key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror}") from e


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--machine", help="built-in machine profile or a .toml file (default host-2cpu)")
    p.add_argument("--kernel", help="built-in kernel preset or a .toml file (default linux-6.18)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a parameter")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")


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


def _profile(r: ipisim.RunResult, top: int = 20) -> str:
    lines = ["# Overhead  Symbol  (simulated CPU time, all CPUs)"]
    for row in r.data["profile"][:top]:
        kind = "" if row["function"].startswith("[") else "[k] "
        lines.append(f"{row['percent']:9.2f}%  {kind}{row['function']}")
    return "\n".join(lines) + "\n"


def cmd_run(args: argparse.Namespace) -> int:
    r = ipisim.run(
        args.scenario, machine=args.machine, kernel=args.kernel, sets=_parse_sets(args.set), seed=args.seed
    )
    print(_summary(r), end="")
    if args.profile:
        print("\n" + _profile(r), end="")
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


def cmd_validate(args: argparse.Namespace) -> int:
    from ipisim import hw

    if args.costs:
        try:
            costs = hw.measure_costs()
        except hw.Unavailable as e:
            raise UsageError(f"validate: cannot measure on this machine: {e}") from e
        print("costs measured on this machine by native/costs.c, in ns (docs/hardware-shootdown.md):")
        for name, ns in costs.items():
            print(f"  {name:<22} {ns:>12.2f}")
        return 0
    cells = []
    try:
        for cell in hw.grid(machine=args.machine, kernel=args.kernel, repeats=args.repeats):
            progress = f"{cell.op} batch={cell.batch} remote={cell.remote}"
            print(f"{progress}: real {cell.real_tlb}, simulated {cell.sim_tlb}", file=sys.stderr)
            cells.append(cell)
    except hw.Unavailable as e:
        raise UsageError(f"validate: cannot measure on this machine: {e}") from e
    print(f"shootdown, 512 pages, 1 remote thread: this machine vs {args.machine} with {args.kernel}")
    print("(TLB = TLB shootdowns received, all CPUs, median of repeats; us/call = wall time per syscall)\n")
    print(hw.format_table(cells), end="")
    bad = sum(not c.agrees for c in cells)
    print(f"\n{len(cells) - bad}/{len(cells)} cells agree (exact where real <= 2, else within 1 %)")
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ipisim", description=__doc__)
    p.add_argument("--version", action="version", version=f"ipisim {ipisim.__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run one scenario and print a summary")
    r.add_argument("scenario")
    _add_run_options(r)
    r.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    r.add_argument("--profile", action="store_true", help="print CPU time by kernel function")
    r.set_defaults(func=cmd_run)

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

    v = sub.add_parser("validate", help="measure the shootdown grid on this machine; compare")
    v.add_argument("--machine", default="host-2cpu", help="profile to simulate (default host-2cpu)")
    v.add_argument("--kernel", default="linux-6.18", help="kernel preset to simulate (default linux-6.18)")
    v.add_argument("--repeats", type=int, default=5, help="real runs per cell; the median counts (default 5)")
    v.add_argument("--costs", action="store_true", help="measure this machine's per-operation costs instead")
    v.set_defaults(func=cmd_validate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        code: int = args.func(args)
        return code
    except (ipisim.ConfigError, UsageError) as e:
        print(f"ipisim: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ipisim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
