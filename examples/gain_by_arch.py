"""The batched unmap flush's gain against CPU count on three architectures, on one workload.

The batched-unmap changelogs' swap benchmark (`swap-bench`: swap a 1 MiB shared region in by
reading it and out by MADV_PAGEOUT), with the RISC-V changelog's sleeping threads on every other
CPU "to force the usage of IPI", on 4 to 128 CPUs of one node:

- x86 (`xeon-4n-48c-64g`): linux-6.1 with `kernel.reclaim_flush=immediate` (a flush a page, as to
  4.2) against linux-6.1 (one flush a batch);
- arm64 (`kunpeng920-96c-calibrated`): linux-6.4-arm64 (TLBI + DSB ISH a page) against
  linux-6.5-arm64 (43b3dfdd0455: one DSB a batch);
- RISC-V (`hifive-unmatched`): linux-6.7-riscv (an SBI remote fence a page) against
  linux-6.8-riscv (54d7431af73e: one remote fence of everything a batch).

    python3 examples/gain_by_arch.py docs/gain-by-arch.png

prints the table (ms per pass and gain) and writes the plot.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import ipisim

CPUS = [4, 8, 16, 32, 64, 128]
LOOPS = 100
ARCHES = {
    "x86 IPIs": ("xeon-4n-48c-64g", ("linux-6.1", {"kernel.reclaim_flush": "immediate"}), ("linux-6.1", {})),
    "arm64 TLBI + DSB": ("kunpeng920-96c-calibrated", ("linux-6.4-arm64", {}), ("linux-6.5-arm64", {})),
    "RISC-V SBI rfence": ("hifive-unmatched", ("linux-6.7-riscv", {}), ("linux-6.8-riscv", {})),
}


def ms_per_pass(machine: str, kernel: str, sets: dict[str, str], cpus: int) -> float:
    shape = {"machine.nodes": "1", "machine.cpus_per_node": str(cpus)}
    run = ipisim.run(
        "swap-bench",
        machine=machine,
        kernel=kernel,
        sets={"loops": str(LOOPS), "sleepers": str(cpus - 1), **shape, **sets},
    )
    return float(run.ops["ms_per_loop"])


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "gain-by-arch.png"
    if len(sys.argv) > 2 or out.startswith("-"):
        print("usage: python3 examples/gain_by_arch.py [PNG]  (default gain-by-arch.png)", file=sys.stderr)
        sys.exit(2)
    todo = [
        (arch, cpus, which, machine, kernel, sets)
        for arch, (machine, *pair) in ARCHES.items()
        for cpus in CPUS
        for which, (kernel, sets) in zip(("before", "after"), pair, strict=True)
    ]
    # The native runs release the GIL: two threads run two simulations at once.
    with ThreadPoolExecutor(max_workers=2) as pool:
        times = list(pool.map(lambda t: ms_per_pass(*t[3:], t[1]), todo))
    ms = {(arch, cpus, which): t for (arch, cpus, which, *_), t in zip(todo, times, strict=True)}
    gain = {a: [ms[a, c, "before"] / ms[a, c, "after"] - 1 for c in CPUS] for a in ARCHES}
    print("| CPUs | " + " | ".join(f"{a}: before / after ms, gain" for a in ARCHES) + " |")
    print("|---:|" + "---|" * len(ARCHES))
    for i, c in enumerate(CPUS):
        cells = [
            f"{ms[a, c, 'before']:.3f} / {ms[a, c, 'after']:.3f}, {100 * gain[a][i]:+.1f} %" for a in ARCHES
        ]
        print(f"| {c} | " + " | ".join(cells) + " |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for a in ARCHES:
        ax.plot(CPUS, [100 * g for g in gain[a]], marker="o", label=a)
    ax.set_xscale("log", base=2)
    ax.set_xticks(CPUS, [str(c) for c in CPUS])
    ax.set_xlabel("CPUs (one node; a sleeping thread of the process on each but the first)")
    ax.set_ylabel("batched unmap flush: gain in passes/s (%)")
    ax.set_title(f"swap-bench ({LOOPS} passes over 1 MiB): per-page flush against one flush a batch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
