//! powerpc Book3S-64 with the radix MMU (arch/powerpc/mm/book3s64): TLB flushes are broadcast
//! `tlbie` instructions, not IPIs, and mm_cpumask only grows until the mm exits. Clearing a huge
//! PMD used to serialize against lockless page-table walkers with an IPI (seed 002).

use crate::config::named_enum;
use crate::engine::{CpuId, TaskId};
use crate::smp::{self, CallFunc};
use crate::step::Outcome;

named_enum! {
    /// What radix__pmdp_huge_get_and_clear(_full) does besides clearing the PMD.
    PmdClear {
        /// To 5.7: serialize_against_pte_lookup(), an empty IPI to mm_cpumask, waiting for all
        /// (13bd817bb884), so that no __find_linux_pte()/GUP-fast walk with IRQs off still reads it.
        SerializeIpi = "serialize_ipi",
        /// The seed's series without its last patch: walkers tolerate a stale PMD, no IPI.
        Lockless = "lockless",
        /// As merged in 5.8: no IPI, but flush_pmd_tlb_range() at once unless the whole mm is being
        /// torn down, as a parallel fault may turn the PMD into a table pointer (93a98695f2f9).
        LocklessFlush = "lockless_flush",
    }
}

/// What clearing one huge PMD asks of the CPU after the clear itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterPmdClear {
    Nothing,
    /// radix__flush_pmd_tlb_range(): one broadcast tlbie.
    Tlbie,
    /// serialize_against_pte_lookup().
    SerializeIpi,
}

/// radix__pmdp_huge_get_and_clear() under the kernel's `pmd_clear` policy; `full` is the
/// mmu_gather's fullmm (exit_mmap), when nothing can fault the range back in.
pub fn pmdp_huge_get_and_clear_full(policy: PmdClear, full: bool) -> AfterPmdClear {
    match policy {
        PmdClear::SerializeIpi => AfterPmdClear::SerializeIpi,
        PmdClear::Lockless => AfterPmdClear::Nothing,
        PmdClear::LocklessFlush if full => AfterPmdClear::Nothing,
        PmdClear::LocklessFlush => AfterPmdClear::Tlbie,
    }
}

/// serialize_against_pte_lookup(mm): smp_mb(); smp_call_function_many(mm_cpumask(mm),
/// do_serialize, mm, 1). Every other CPU of the mask takes an empty interrupt; the caller waits.
pub fn serialize_against_pte_lookup(s: &mut impl super::Host, cpu: CpuId, t: TaskId) -> Outcome {
    let mask = s.arch_view().0.mm[s.task_mm(t)].cpumask;
    smp::smp_call_function_many(s, cpu, t, &mask, CallFunc::DoSerialize)
}
