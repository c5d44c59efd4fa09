"""Results rendered the way the kernel prints them: /proc/interrupts and /proc/vmstat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# arch/x86/kernel/irq.c: arch_show_interrupts() descriptions.
IRQ_DESCRIPTIONS = {"CAL": "Function call interrupts", "TLB": "TLB shootdowns"}


def format_interrupts(rows: Mapping[str, Sequence[int]]) -> str:
    """/proc/interrupts arch rows: a `%*s` header, then `%*s: ` + `%10u ` per CPU + description."""
    prec = 3
    ncpus = len(next(iter(rows.values()), []))
    lines = [" " * (prec + 8) + "".join(f"CPU{c:<8d}" for c in range(ncpus)).rstrip()]
    for name, counts in rows.items():
        cells = "".join(f"{n:10d} " for n in counts)
        lines.append(f"{name:>{prec}}: {cells}  {IRQ_DESCRIPTIONS.get(name, '')}".rstrip())
    return "\n".join(lines) + "\n"


def format_vmstat(counters: Mapping[str, int], prefix: str = "nr_tlb_") -> str:
    """/proc/vmstat lines (`name value`) for the counters starting with `prefix`."""
    return "".join(f"{k} {v}\n" for k, v in counters.items() if k.startswith(prefix))
