"""What one full TLB flush costs a CPU under QEMU's TCG: the source of `qemu-virt-riscv`'s
`tlb_refill_all`.

Boots the installed Linux (`ipisim validate --qemu`'s guest: 2 vCPUs, 512 MiB, always TCG) and
runs the `shootdown` program alone (no remote thread): MADV_DONTNEED over 2048 touched pages in
calls of N pages. Up to 33 pages x86 flushes each page with INVLPG (QEMU's tlb_flush_page());
from 34 it flushes the whole TLB (tlb_single_page_flush_ceiling; QEMU's tlb_flush()). The time
of a call is A + N (z + i) up to 33 pages and A + F + N z from 34: a line through each side
(least squares over the medians of 9 runs) gives F, the full flush with the refill after it, as
the difference of the two intercepts. QEMU's tlb_flush() is the same code for every target
(accel/tcg/cputlb.c), so x86's refill stands in for riscv's.

    python3 examples/tcg_full_flush.py [BOOTS]

boots BOOTS times (default 9; the host is shared: one boot's F ranged from 5 to 42 us) and
prints each boot's lines and F, then the median F.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from ipisim import qemu

PAGE_FLUSHES = [8, 16, 24, 32, 33]
FULL_FLUSHES = [34, 40, 48, 56, 64]
PAGES = 2048


def job(batch: int) -> qemu.Job:
    args = ("--op", "madvise", "--batch", str(batch), "--remote", "none", "--pages", str(PAGES))
    sets = (("op", "madvise"), ("batch", batch), ("remote", "none"), ("pages", PAGES), ("remote_threads", 1))
    return qemu.Job(f"madvise b={batch}", "TLB", "shootdown", (*args, "--repeats", "9"), "shootdown", sets)


def line(t: dict[int, float], ns: list[int]) -> tuple[float, float]:
    """Least-squares intercept and slope of t over the batch sizes `ns`."""
    fit = statistics.linear_regression(ns, [t[n] for n in ns])
    return fit.intercept, fit.slope


def one_boot(image: Path) -> float:
    """F from one boot, in ns; prints the boot's two lines."""
    batches = PAGE_FLUSHES + FULL_FLUSHES
    boot = qemu.boot(image, qemu.Guest(cpus=2, memory_mib=512), [job(b) for b in batches], accel="tcg")
    samples = boot.output.samples
    t = {b: statistics.median(s.ns / s.syscalls for s in samples[i]) for i, b in enumerate(batches)}
    a1, s1 = line(t, PAGE_FLUSHES)
    a2, s2 = line(t, FULL_FLUSHES)
    print(f"page flushes {a1:6.0f} + {s1:4.0f} N ns, full flush {a2:6.0f} + {s2:4.0f} N ns:", end=" ")
    print(f"F = {a2 - a1:6.0f} ns")
    return a2 - a1


def main() -> int:
    boots = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    image = qemu.default_kernel_image()
    print(f"{qemu.kernel_version(image).split()[0]} under TCG, {boots} boots")
    fs = sorted(one_boot(image) for _ in range(boots))
    print(f"full flush and refill F: median {statistics.median(fs):.0f} ns ({fs[0]:.0f} to {fs[-1]:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
