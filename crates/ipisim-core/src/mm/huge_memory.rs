//! PMD-mapped transparent huge pages at scale (mm/huge_memory.c): a region of 2 MiB PMDs is a
//! range of PMD numbers, with no per-4 KiB state, and munmap zaps it one zap_huge_pmd() at a time.
//! What each PMD clear costs besides the clear is the architecture's (arch/powerpc, seed 002).

use crate::arch::{self, AfterPmdClear};
use crate::engine::{CpuId, CpuMask, TaskId};
use crate::machine::Cost;
use crate::observe::Func;
use crate::smp::{self, CallFunc};
use crate::step::{Outcome, Step};

use super::Host;

pub use crate::arch::PMD_PAGES;
/// PMDs per PMD table page: one table maps 1 GiB with 4 KiB or (radix) 64 KiB base pages.
const PMDS_PER_TABLE: u64 = 512;
/// PMDs zapped in one busy step when none needs an IPI (zap_pmd_range's cond_resched granularity).
const PMDS_PER_STEP: u64 = 4096;

/// munmap of huge PMDs [first, end) of the task's mm, after the syscall entry: the zap, the
/// gather's final flush (tlb_finish_mmu) and free_pgtables. Pushes the steps.
pub fn unmap_huge_region(s: &mut impl Host, t: TaskId, first: u64, end: u64) {
    let mm = s.task_mm(t) as u32;
    let free_tables = Step::TlbRemoveTables {
        n: (end - first).div_ceil(PMDS_PER_TABLE),
    };
    let flush = arch::flush_huge_range(s, mm, first, end);
    s.push_step(t, free_tables);
    s.push_step(t, flush);
    s.push_step(t, Step::ZapHugePmds { next: first, end });
}

/// zap_huge_pmd() for PMDs from `next`: clear, free, and whatever the architecture asks per PMD.
pub fn zap_huge_pmds(s: &mut impl Host, t: TaskId, next: u64, end: u64) -> Outcome {
    let after = arch::after_huge_pmd_clear(s);
    // A serializing clear waits for its IPI before the next PMD: one PMD per step then.
    let serialize = after == AfterPmdClear::SerializeIpi;
    let stop = end.min(next + if serialize { 1 } else { PMDS_PER_STEP });
    let n = stop - next;
    let p = s.mm_parts();
    let ps = n * p.m.cost[Cost::PmdZap];
    let mut flush = 0;
    if after == AfterPmdClear::Tlbie {
        p.obs.stats.tlbies += n;
        flush = n * p.m.cost[Cost::Tlbie];
    }
    p.obs.stats.charge(Some(t), Func::ZapHugePmd, ps);
    p.obs.stats.charge(Some(t), Func::FlushPmdTlbRange, flush);
    if stop < end {
        s.push_step(t, Step::ZapHugePmds { next: stop, end });
    }
    if serialize {
        // The IPI goes out from inside the clear; the rest of the zap follows the wait.
        s.push_step(t, Step::SerializeAgainstPteLookup);
    }
    Outcome::Busy {
        ps: ps + flush,
        irqs_off: false,
    }
}

/// free_pgtables() of `n` PMD tables: each goes to tlb_remove_table(), batched for an RCU-delayed
/// free, or (the what-if) freed at once after tlb_remove_table_sync_one() when no batch page can
/// be allocated.
pub fn tlb_remove_tables(s: &mut impl Host, t: TaskId, n: u64) -> Outcome {
    let p = s.mm_parts();
    let mut ps = p.m.cost[Cost::PgtableFree];
    let batched = !p.mem.cfg.table_batch_alloc_fails;
    if batched {
        ps *= n;
    } else {
        if n > 1 {
            s.push_step(t, Step::TlbRemoveTables { n: n - 1 });
        }
        s.push_step(t, Step::TlbRemoveTableSyncOne);
    }
    s.mm_parts()
        .obs
        .stats
        .charge(Some(t), Func::FreePgtables, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// tlb_remove_table_sync_one(): smp_call_function(tlb_remove_table_smp_sync, NULL, 1).
pub fn tlb_remove_table_sync_one(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let online = CpuMask::first_n(s.mm_view().1.ncpus());
    smp::smp_call_function_many(s, cpu, t, &online, CallFunc::TlbRemoveTableSmpSync)
}
