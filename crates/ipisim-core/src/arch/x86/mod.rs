//! x86: TLB flushes by IPI (arch/x86/mm/tlb.c). Per-CPU `cpu_tlbstate`, the per-CPU
//! `flush_tlb_info`, and the policies that changed between kernel eras.

mod broadcast;
mod rar;
mod tlb;

pub use broadcast::{
    consider_global_asid, finish_asid_transition, invlpgb_done, mm_free_global_asid, tlbsync_step,
    BroadcastStats, GlobalAsids, Invlpgb,
};
pub use tlb::{
    arch_tlbbatch_flush, cpumask_read, enter_lazy_tlb, flush_tlb_batch_pages, flush_tlb_func,
    flush_tlb_mm_range, flush_tlb_multi, flush_tlb_pfns, inc_mm_tlb_gen, jiffies, should_flush_tlb,
    switch_mm_irqs_off,
};

use crate::arch::tlb::NR_ASID_SLOTS;
pub use crate::arch::{FlushRange, INIT_MM_CTX_ID, TLB_FLUSH_ALL};
use crate::config::named_enum;

named_enum! {
    /// When a CPU leaves an mm's `mm_cpumask`.
    MmCpumask {
        /// switch_mm_irqs_off clears the CPU's bit in the previous mm (up to 6.12).
        ClearOnSwitch = "clear_on_switch",
        /// Bits stay set; flush_tlb_func clears a CPU found on another mm, and flush_tlb_mm_range
        /// asks those CPUs at most once per second (209954cbc7d0 + 6db2526c1d69, 6.13).
        LazyTrim = "lazy_trim",
        /// 209954cbc7d0 alone (tip x86/mm, 2024-11-19): bits stay set, and every flush still IPIs
        /// every non-lazy CPU of the mask (tlb_is_not_lazy), so the first flush after a CPU left
        /// the mm reaches it and it clears its bit on the wrong-mm path (remote CPUs only).
        LazyEveryFlush = "lazy_every_flush",
    }
}

named_enum! {
    /// How flushes treat CPUs in lazy TLB mode (idle or a kernel thread, with the old mm loaded).
    LazyTlb {
        /// Lazy CPUs get the IPI and leave the mm (leave_mm / switch to init_mm): up to 4.19.
        LeaveMmOnIpi = "leave_mm_on_ipi",
        /// should_flush_tlb skips lazy CPUs unless page tables were freed (4.20).
        SkipLazyCpus = "skip_lazy_cpus",
    }
}

named_enum! {
    /// Whether flushes of a multi-threaded process use AMD's broadcast invalidation (6.15).
    BroadcastTlbFlush {
        /// Every remote flush is an IPI (to 6.14, or a CPU without INVLPGB).
        None = "none",
        /// Global ASIDs and INVLPGB + TLBSYNC (4afeb0ed1753 and its series, 6.15).
        Invlpgb = "invlpgb",
        /// Unsafe what-if: as invlpgb, but TLBSYNC never waits; the checker catches the frees.
        InvlpgbNoTlbsync = "invlpgb_no_tlbsync",
        /// What-if: Intel RAR with the same global ASIDs (Rik van Riel's RFC v4, June 2025, not
        /// merged): a flush goes to the mm_cpumask's CPUs as a RAR their microcode handles.
        Rar = "rar",
    }
}

/// One of a CPU's dynamic ASID slots: which mm it holds and how fresh its TLB is for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsidCtx {
    pub ctx_id: u64,
    pub tlb_gen: u64,
}

/// `cpu_tlbstate` plus `cpu_tlbstate_shared.is_lazy`.
#[derive(Debug, Clone)]
pub struct TlbState {
    /// None is init_mm.
    pub loaded_mm: Option<usize>,
    pub loaded_asid: u8,
    pub next_asid: u8,
    pub is_lazy: bool,
    pub ctxs: [AsidCtx; NR_ASID_SLOTS],
    /// The global ASID whose translations this CPU's GLOBAL_SLOT holds (0: none).
    pub global_tag: u16,
    /// This CPU issued INVLPGBs its TLBSYNC has not waited for yet (the kernel issues __tlbsync()
    /// right after its INVLPGBs; the unsafe what-if leaves them unwaited).
    pub need_tlbsync: bool,
    /// INVLPGBs this CPU issued since its last TLBSYNC (what the next one waits for).
    pub issued_since_sync: u64,
}

impl Default for TlbState {
    fn default() -> Self {
        // At boot every CPU runs init_mm in ASID slot 0.
        let mut ctxs = [AsidCtx::default(); NR_ASID_SLOTS];
        ctxs[0].ctx_id = INIT_MM_CTX_ID;
        TlbState {
            loaded_mm: None,
            loaded_asid: 0,
            next_asid: 1,
            is_lazy: false,
            ctxs,
            global_tag: 0,
            need_tlbsync: false,
            issued_since_sync: 0,
        }
    }
}

/// `struct flush_tlb_info`: what a flush asks of each CPU. Kept per initiating CPU, as the kernel
/// keeps it in a per-CPU variable while the initiator waits.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlushInfo {
    /// None: flush whatever mm is loaded (batched reclaim flush).
    pub mm: Option<usize>,
    pub start: u64,
    pub end: u64,
    pub stride_shift: u8,
    pub new_tlb_gen: u64,
    pub freed_tables: bool,
    pub trim_cpumask: bool,
    pub initiating_cpu: usize,
}

pub struct X86 {
    pub cpu: Vec<TlbState>,
    pub info: Vec<FlushInfo>,
    /// Per CPU: the INVLPGBs it issued that have not completed everywhere yet, oldest first.
    pub inflight: Vec<Vec<Invlpgb>>,
    /// The global ASID space (global_asid_used/_freed, last_global_asid, global_asid_available).
    pub asids: GlobalAsids,
    pub bstats: BroadcastStats,
    /// Intel RAR's payload table and action vectors (kernel.broadcast_tlb_flush = rar).
    pub rar: rar::RarState,
}

impl X86 {
    pub fn new(n: usize) -> X86 {
        X86 {
            cpu: vec![TlbState::default(); n],
            info: vec![FlushInfo::default(); n],
            // A flush issues at most 33 INVLPGBs before its TLBSYNC (the ceiling); room for a
            // reclaim batch's pages too, so the hot path does not grow these.
            inflight: (0..n).map(|_| Vec::with_capacity(64)).collect(),
            asids: GlobalAsids::new(),
            bstats: BroadcastStats::default(),
            rar: rar::RarState::new(n),
        }
    }
}
