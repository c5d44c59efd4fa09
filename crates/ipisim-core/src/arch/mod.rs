//! The architecture interface: what the rest of the kernel asks of the MMU and its TLBs. Callers
//! outside `arch/` use only these functions; each matches on the machine's architecture. x86
//! shoots TLBs down by IPI (arch/x86/mm/tlb.c); powerpc radix broadcasts `tlbie` and shares the
//! per-CPU context tracking (which mm and ASID each CPU has loaded, lazy mode).

pub mod powerpc;
mod tlb;
pub mod x86;

pub use powerpc::AfterPmdClear;
pub use tlb::{Tlb, TlbEntry};

use crate::engine::{CpuId, CpuMask, TaskId, Time};
use crate::machine::{Arch, Cost};
use crate::observe::Func;
use crate::sim::Sim;
pub use crate::step::FlushRange;
use crate::step::{Outcome, Step};
use x86::MmCpumask;

/// The MMU state of every CPU: its hardware TLB and what it has loaded (x86's cpu_tlbstate,
/// which powerpc radix shares).
pub struct ArchState {
    pub tlb: Vec<Tlb>,
    pub x86: x86::X86,
}

/// 4 KiB pages per PMD (HPAGE_PMD_NR with 4 KiB pages; the model's page numbers are 4 KiB).
pub const PMD_PAGES: u64 = 512;

/// init_mm's context id; real mms count up from 2 (last_mm_ctx_id starts at 1).
pub const INIT_MM_CTX_ID: u64 = 1;

/// The mm id meaning "flush everything": `flush_tlb_info.end == TLB_FLUSH_ALL`.
pub const TLB_FLUSH_ALL: u64 = u64::MAX;

/// The jiffies counter at the current time (CONFIG_HZ ticks since boot).
pub fn jiffies(s: &Sim) -> u64 {
    x86::jiffies(s)
}

/// Load `mm` on `cpu` as a switch would, without its costs or flushes (unit tests' setup).
#[cfg(test)]
pub fn load_for_test(s: &mut Sim, cpu: CpuId, mm: usize) {
    s.arch.x86.cpu[cpu].loaded_mm = Some(mm);
}

/// The mm `cpu` has loaded (lazy or not), if any.
pub fn loaded_mm(s: &Sim, cpu: CpuId) -> Option<usize> {
    s.arch.x86.cpu[cpu].loaded_mm
}

/// `cpu` is in lazy TLB mode: idle or a kernel thread, with a user mm still loaded.
pub fn is_lazy(s: &Sim, cpu: CpuId) -> bool {
    s.arch.x86.cpu[cpu].is_lazy
}

/// The address-space id `cpu` runs its loaded mm under: the TLB tag of its translations.
pub fn loaded_asid(s: &Sim, cpu: CpuId) -> u8 {
    s.arch.x86.cpu[cpu].loaded_asid
}

/// switch_mm_irqs_off(): load `next` (None: no mm) on `cpu`; the time of the switch.
pub fn switch_mm_irqs_off(s: &mut Sim, cpu: CpuId, next: Option<usize>) -> Time {
    let clear_old = match s.m.arch {
        Arch::X86 => s.k.mm_cpumask == MmCpumask::ClearOnSwitch,
        // powerpc's switch_mm_irqs_off() never clears the old mm's bit (mm/mmu_context.c).
        Arch::PowerpcRadix => false,
    };
    x86::switch_mm_irqs_off(s, cpu, next, clear_old)
}

/// enter_lazy_tlb(): the idle task keeps the old mm loaded, marked lazy.
pub fn enter_lazy_tlb(s: &mut Sim, cpu: CpuId) {
    x86::enter_lazy_tlb(s, cpu)
}

/// flush_tlb_mm_range(): flush `r` on every CPU that may cache it, waiting for them.
pub fn flush_tlb_mm_range(s: &mut Sim, cpu: CpuId, t: TaskId, r: FlushRange) -> Outcome {
    x86::flush_tlb_mm_range(s, cpu, t, r)
}

/// The remote half of a flush whose local half already ran (flush_tlb_others, before 5.13).
pub fn flush_tlb_others(s: &mut Sim, cpu: CpuId, t: TaskId) -> Outcome {
    x86::flush_tlb_multi(s, cpu, t, false)
}

/// flush_tlb_func() on `cpu` for the flush `sender` is making: the handler's time.
pub fn flush_tlb_func(s: &mut Sim, cpu: CpuId, task: Option<TaskId>, sender: CpuId) -> Time {
    x86::flush_tlb_func(s, cpu, task, sender)
}

/// should_flush_tlb(): does `cpu` need the flush `sender` is sending?
pub fn should_flush_tlb(s: &Sim, cpu: CpuId, sender: CpuId) -> bool {
    x86::should_flush_tlb(s, cpu, sender)
}

/// arch_tlbbatch_flush() from 4.6: the batch as one full flush with no mm, through the arch's
/// remote flush (`kernel.tlbbatch_flush = flush_tlb_func`).
pub fn tlbbatch_flush_multi(s: &mut Sim, cpu: CpuId, t: TaskId, mask: &CpuMask) -> Outcome {
    x86::arch_tlbbatch_flush(s, cpu, t, mask)
}

/// arch_tlbbatch_flush() on one CPU of a reclaim batch: the handler's time.
pub fn tlbbatch_flush(s: &mut Sim, cpu: CpuId, task: Option<TaskId>) -> Time {
    x86::flush_tlb_batch_pages(s, cpu, task)
}

/// The PFN-list batch handler of the v1-v5 series: one INVLPG per listed page of `sender`'s batch.
pub fn tlbbatch_flush_pfns(s: &mut Sim, cpu: CpuId, task: Option<TaskId>, sender: CpuId) -> Time {
    x86::flush_tlb_pfns(s, cpu, task, sender)
}

/// What each huge-PMD clear of munmap asks of this architecture and kernel.
pub fn after_huge_pmd_clear(s: &Sim) -> AfterPmdClear {
    match s.m.arch {
        // x86's pmdp_huge_get_and_clear_full() is the generic one: the gather flushes at the end.
        Arch::X86 => AfterPmdClear::Nothing,
        // munmap's gather is never fullmm.
        Arch::PowerpcRadix => powerpc::pmdp_huge_get_and_clear_full(s.k.pmd_clear, false),
    }
}

/// The gather's last flush after munmap zapped huge PMDs [first, end) (2 MiB units) of `mm`.
pub fn flush_huge_range(s: &mut Sim, mm: u32, first: u64, end: u64) -> Step {
    match s.m.arch {
        // tlb_finish_mmu -> flush_tlb_mm_range(2 MiB stride): above the ceiling, a full flush.
        Arch::X86 => Step::FlushTlbMmRange(FlushRange {
            mm,
            start: first * PMD_PAGES,
            end: end * PMD_PAGES,
            stride_shift: 21,
            freed_tables: true,
        }),
        // radix__tlb_flush -> a range above tlb_single_page_flush_ceiling: _tlbie_pid().
        Arch::PowerpcRadix => {
            s.obs.stats.tlbies += 1;
            Step::Work {
                func: Func::FlushTlbMm,
                ps: s.m.cost[Cost::Tlbie],
                irqs_off: false,
            }
        }
    }
}
