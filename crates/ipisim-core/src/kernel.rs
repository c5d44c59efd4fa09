//! A kernel preset: one choice per mechanism. The declared defaults are the current kernel
//! (linux-6.18); older presets state only what differs. smp, arch, mm and sched declare their
//! keys where they are used (`smp::PARAMS`, `arch::PARAMS`, `mm::PARAMS`,
//! `sched::fair::PARAMS`); these name the preset.

use crate::config::{params, Kind, Param};
use crate::machine::Spinlock;

params! {
    /// The resolved kernel preset.
    #[derive(Debug, Clone)]
    pub struct KernelConfig;
    pub const PARAMS = {
        name: String = "kernel.name", Kind::Str, "", "linux-6.18", "preset name, shown in results";
        description: String = "kernel.description", Kind::Str, "", "", "one line about the kernel this preset models";
        spinlock: Spinlock = "kernel.spinlock", Kind::Choice(Spinlock::NAMES), "", "queued", "how a waiter takes a contended spinlock, in line transfers after the release: ticket (x86 2.6.25 to 4.1, riscv to 6.12: its next load sees its ticket served, one), queued (qspinlock, x86 from 4.2 and arm64 from 4.19: the queue head loads the free lock, then its atomic takes the line back from the releaser's cache, two), test_and_set (powerpc's arch_spin_lock() to 5.8: a load, then lwarx/stwcx., two)";
        cal_counts_tlb: bool = "kernel.cal_counts_tlb", Kind::Bool, "", "true", "/proc/interrupts CAL includes TLB shootdowns (since 4.8); false: CAL = calls - TLB, as before";
    }
}

/// Every key a kernel preset sets, in `describe` order: the preset's own, then arch's, smp's,
/// mm's and the scheduler's, each declared where it is used.
pub fn params() -> impl Iterator<Item = &'static Param> {
    PARAMS
        .iter()
        .chain(crate::arch::PARAMS)
        .chain(crate::smp::PARAMS)
        .chain(crate::mm::PARAMS)
        .chain(crate::sched::fair::PARAMS)
}
