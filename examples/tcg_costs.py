"""What the kernel's per-page work costs under QEMU's TCG: the source of `qemu-virt-riscv`'s
fault, page-cache, reclaim and page-table costs.

Boots the installed Linux (2 vCPUs, 2.5 GiB, always TCG, ext4 on a RAM disk at /var/tmp) and
runs `ipisim probe`'s own measurements, python/ipisim/native/costs.c with `--local-only`, RUNS
times a boot; the runs of all boots are pooled and fitted by `ipisim probe`'s arithmetic
(ipisim.probe.fit) at the profile's nominal 1 GHz, so a cost in cycles is its time in ns. The
guest is x86: TCG translates every target's code to host code and emulates its MMU in the same
softmmu (accel/tcg), so an x86 guest's kernel under TCG stands in for a riscv guest's.

    python3 examples/tcg_costs.py [BOOTS] [RUNS]

BOOTS defaults to 3 and RUNS to 5. Prints each measurement's median and spread, then the fitted
entries the measurements set, as `[cost]` lines of a machine profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ipisim
from ipisim import probe, qemu

GHZ = 1.0
"""qemu-virt-riscv's nominal clock: TCG has none."""
MEMORY_MIB = 2560
"""Room for costs.c's largest mapping, 1 GiB of THP-backed memory, beside its 64 MiB buffers."""
TEMPLATE = "qemu-virt-riscv"


def one_boot(image: Path, runs: int) -> dict[str, list[float]]:
    """Each measurement's values from one boot of `runs` runs of costs.c."""
    job = qemu.Job("costs", "TLB", "costs", ("--local-only",), "swap-bench", ())
    boot = qemu.boot(image, qemu.Guest(cpus=2, memory_mib=MEMORY_MIB), [job] * runs, accel="tcg")
    out: dict[str, list[float]] = {}
    for i in range(runs):
        rc = boot.output.rc.get(i)
        if rc != 0:
            raise qemu.Unavailable(f"costs exited with {rc}: {boot.output.messages[i][-1:]}")
        for line in boot.output.messages[i]:
            name, value = line.split()
            out.setdefault(name, []).append(float(value))
    print(f"  boot: {runs} runs in {boot.wall_s:.0f} s")
    return out


def main() -> int:
    boots = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    image = qemu.default_kernel_image()
    print(f"{qemu.kernel_version(image).split()[0]} under TCG, {boots} boots of {runs} runs")
    pooled: dict[str, list[float]] = {}
    for _ in range(boots):
        for name, values in one_boot(image, runs).items():
            pooled.setdefault(name, []).extend(values)
    topo = probe.Topology(2, 1, 2, 1, MEMORY_MIB, GHZ, "hlt", 0)
    p = probe.Probe(topo, pooled, ["--local-only: no IPI, cache-line or idle-wakeup measurement"])
    print(probe.format_table(p), end="")
    tail = f" (x86 guest under QEMU TCG, {boots * runs} runs in {boots} boots; python3 examples/tcg_costs.py)"
    # The template's own entries come back marked "not measured here"; those it calls not
    # applicable (x86's INVLPG on riscv) stay so.
    moot = {
        str(c["key"]).removeprefix("machine.cost.")
        for c in ipisim.describe(TEMPLATE)["costs"]
        if str(c["source"]).startswith("not applicable")
    }
    for f in probe.fit(p, template=TEMPLATE):
        ours = f.source.startswith(("measured:", "fitted:")) and not f.source.endswith("here)")
        if ours and f.key not in moot:
            source = (f.source + tail).replace('"', "'")
            print(f'{f.key} = {{ cycles = {f.cycles:g}, source = "{source}" }}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
