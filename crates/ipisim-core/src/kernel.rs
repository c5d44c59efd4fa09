//! A kernel preset: one choice per mechanism. The declared defaults are the current kernel
//! (linux-6.18); older presets state only what differs.

use crate::arch::powerpc::PmdClear;
use crate::arch::x86::{LazyTlb, MmCpumask};
use crate::config::{ConfigError, Kind, Param, Resolved};
use crate::mm::drain::PcpDrain;
use crate::mm::migrate::MigrateFlush;
use crate::mm::rmap::{ReclaimFlush, TlbBatchFlush};
use crate::mm::vmscan::IsolatedThrottle;
use crate::smp::{CallFunction, CallSingleQueue};

pub const PARAMS: &[Param] = &[
    Param { key: "kernel.name", kind: Kind::Str, unit: "", default: "linux-6.18", doc: "preset name, shown in results" },
    Param { key: "kernel.description", kind: Kind::Str, unit: "", default: "", doc: "one line about the kernel this preset models" },
    Param { key: "kernel.hz", kind: Kind::Int { min: 100, max: 1000 }, unit: "Hz", default: "250", doc: "CONFIG_HZ: the jiffy that times the mm_cpumask trim" },
    Param { key: "kernel.tlb_single_page_flush_ceiling", kind: Kind::Int { min: 0, max: 1 << 20 }, unit: "pages", default: "33", doc: "flush_tlb_mm_range flushes page by page up to this many pages, else the whole TLB (a5102476a2, 3.15)" },
    Param { key: "kernel.mm_cpumask", kind: Kind::Choice(MmCpumask::NAMES), unit: "", default: "lazy_trim", doc: "clear_on_switch: switch_mm clears the old mm's bit (to 6.12); lazy_trim: bits stay until a flush IPI finds the CPU on another mm, trimmed at most once per second (209954cbc7d0, 6.13)" },
    Param { key: "kernel.lazy_tlb", kind: Kind::Choice(LazyTlb::NAMES), unit: "", default: "skip_lazy_cpus", doc: "leave_mm_on_ipi: lazy CPUs get flush IPIs and leave the mm (to 4.18); skip_lazy_cpus: no IPI to lazy CPUs unless page tables were freed (4.19)" },
    Param { key: "kernel.pcid", kind: Kind::Bool, unit: "", default: "true", doc: "PCID with 6 dynamic ASIDs and per-mm tlb_gen (4.14); false: every mm switch flushes the TLB" },
    Param { key: "kernel.concurrent_local_flush", kind: Kind::Bool, unit: "", default: "true", doc: "flush the local TLB after sending the IPIs, overlapping them (4ce94eabac16, 5.13); false: local flush first" },
    Param { key: "kernel.call_function", kind: Kind::Choice(CallFunction::NAMES), unit: "", default: "percpu_csd", doc: "smp_call_function_many: `global_cfd` (to 3.8: one global queue under one lock, every handler walks it) or `percpu_csd` (per-CPU queues and a csd per (sender, target), 9a46ad6d6df3, 3.9)" },
    Param { key: "kernel.call_single_queue", kind: Kind::Choice(CallSingleQueue::NAMES), unit: "", default: "llist", doc: "each CPU's call queue: `spinlock` (a list under call_single_queue.lock that every sender and the handler take, to 3.13) or `llist` (lock-free llist_add / llist_del_all, 6897fc22ea01, 3.14)" },
    Param { key: "kernel.skip_ipi_if_queued", kind: Kind::Bool, unit: "", default: "true", doc: "smp_call_function_many sends no IPI to a CPU whose call queue already holds work (3fc5b3b6a80b, 4.13)" },
    Param { key: "kernel.ipi_poll_elision", kind: Kind::Bool, unit: "", default: "true", doc: "a single-target call IPI to an idle CPU that is polling sets NEED_RESCHED instead (call_function_single_prep_ipi)" },
    Param { key: "kernel.pt_reclaim", kind: Kind::Bool, unit: "", default: "true", doc: "CONFIG_PT_RECLAIM: MADV_DONTNEED over a whole PMD frees the empty PTE table (6.14)" },
    Param { key: "kernel.reclaim_flush", kind: Kind::Choice(ReclaimFlush::NAMES), unit: "", default: "batch_full", doc: "how reclaim flushes unmapped pages: immediate (flush_tlb_page per page, to 4.2), batch_full (one IPI per CPU per batch, full flush; 72b252aed506, 4.3), batch_pfn (the v1-v5 series: a PFN list, INVLPG each), none (a debug policy that never flushes; the checker catches it)" },
    Param { key: "kernel.tlbbatch_flush", kind: Kind::Choice(TlbBatchFlush::NAMES), unit: "", default: "flush_tlb_func", doc: "how batch_full sends its flush: percpu_batch_pages (mm/rmap.c's own handler on every CPU of the mask, each run counted in TLB, the sender's too, no lazy check; 4.3 to 4.5) or flush_tlb_func (the arch's full flush with no mm: TLB counted on remote CPUs only, lazy CPUs as kernel.lazy_tlb says; 858eaaa7, 4.6; arch_tlbbatch_flush, 4.13)" },
    Param { key: "kernel.batch_pfn_size", kind: Kind::Int { min: 1, max: 4096 }, unit: "pages", default: "32", doc: "batch_pfn: PFNs per batch before a flush (BATCH_TLBFLUSH_SIZE, 32 = SWAP_CLUSTER_MAX; a page's worth is about 500)" },
    Param { key: "kernel.defer_writable", kind: Kind::Bool, unit: "", default: "true", doc: "batch dirty PTEs too and flush them before pageout (try_to_unmap_flush_dirty; seed 001 patch 3); false: flush dirty PTEs at once" },
    Param { key: "kernel.young_flush", kind: Kind::Bool, unit: "", default: "false", doc: "reclaim's ptep_clear_flush_young() flushes the TLB when it clears a set accessed bit (x86 until b13b1d2d8692, 3.15)" },
    Param { key: "kernel.flush_dirty_before_pageout", kind: Kind::Bool, unit: "", default: "true", doc: "try_to_unmap_flush_dirty() before pageout() of a page whose writable PTE was unmapped in the batch, as every kernel does; false is an unsafe what-if that the checker reports (lost-write at pageout)" },
    Param { key: "kernel.flush_before_free", kind: Kind::Bool, unit: "", default: "true", doc: "try_to_unmap_flush() before the reclaimed pages are freed, as every kernel does; false is an unsafe what-if that the checker reports (use-after-free at free)" },
    Param { key: "kernel.migrate_flush", kind: Kind::Choice(MigrateFlush::NAMES), unit: "", default: "batched", doc: "how migrate_pages flushes the pages it unmaps: immediate (ptep_clear_flush per page, to 6.3), batched (unmap up to 512 pages, one try_to_unmap_flush, then copy; 7e12beb8ca2a, 6.4), batched_unsafe (a what-if that copies, restores and frees before the flush; the checker catches it)" },
    Param { key: "kernel.pmd_clear", kind: Kind::Choice(PmdClear::NAMES), unit: "", default: "lockless_flush", doc: "powerpc radix huge-PMD clear: serialize_ipi (serialize_against_pte_lookup, an empty waiting IPI to mm_cpumask per PMD, to 5.7), lockless (walkers tolerate a stale PMD, no IPI), lockless_flush (as merged in 5.8: also flush_pmd_tlb_range unless fullmm); x86 never did either" },
    Param { key: "kernel.table_batch_alloc_fails", kind: Kind::Bool, unit: "", default: "false", doc: "what-if: tlb_remove_table() cannot allocate its mmu_table_batch page (GFP_NOWAIT), so each freed page-table page goes through tlb_remove_table_one() -> tlb_remove_table_sync_one(): an empty IPI to every online CPU, waiting (mm/mmu_gather.c)" },
    Param { key: "kernel.pagevec_size", kind: Kind::Int { min: 1, max: 64 }, unit: "pages", default: "31", doc: "PAGEVEC_SIZE: per-CPU LRU-add batch (14 in 4.x, 15 later, 31 today)" },
    Param { key: "kernel.pcp_batch", kind: Kind::Int { min: 1, max: 1024 }, unit: "pages", default: "63", doc: "per-CPU page list refill/drain batch (zone_batchsize)" },
    Param { key: "kernel.pcp_high", kind: Kind::Int { min: 1, max: 65536 }, unit: "pages", default: "378", doc: "per-CPU page list high mark: above it, free a batch back to the buddy allocator" },
    Param { key: "kernel.fault_around_bytes", kind: Kind::Size, unit: "bytes", default: "64KiB", doc: "do_fault_around(): map this much of the page cache around a read fault (3.15)" },
    Param { key: "kernel.readahead_pages", kind: Kind::Int { min: 1, max: 4096 }, unit: "pages", default: "32", doc: "mmap read-around / readahead window (ra_pages, 128 KiB)" },
    Param { key: "kernel.pcp_drain", kind: Kind::Choice(PcpDrain::NAMES), unit: "", default: "remote_no_ipi", doc: "drain_all_pages: all_cpus (an IPI to every CPU, to 3.3), cpus_with_pages (IPIs only to CPUs holding pcp pages, 74046494ea68, 3.4), workqueue (per-CPU work items under pcpu_drain_mutex, 4.11), remote_no_ipi (the caller drains under pcp->lock, 6.0)" },
    Param { key: "kernel.zone_reclaimable_progress", kind: Kind::Bool, unit: "", default: "false", doc: "try_to_free_pages() that freed nothing still reports progress while a zone is reclaimable (pages_scanned < 6 x its LRU pages), so the allocator retries and drains instead of calling the OOM killer, and kswapd gives such a zone up (all_unreclaimable() / zone_reclaimable(), to 4.6; gone with the OOM-detection rework 0a0337e0d1d1, 4.7)" },
    Param { key: "kernel.smp_call_function_many_cond", kind: Kind::Bool, unit: "", default: "true", doc: "the worker that queues and sends cross-CPU calls is smp_call_function_many_cond() (Sebastian Andrzej Siewior, 5.6), as perf names it; false: smp_call_function_many() itself, before" },
    Param { key: "kernel.isolated_throttle", kind: Kind::Choice(IsolatedThrottle::NAMES), unit: "", default: "reclaim_throttle", doc: "a direct reclaimer finding more pages isolated than left on the inactive list (too_many_isolated): congestion_wait (sleep HZ/10 and check again: Rik van Riel, 2.6.32, to 5.15) or reclaim_throttle (sleep once, up to HZ/50, woken when a reclaimer sees the node below the limit, then scan nothing: Mel Gorman, 5.16)" },
    Param { key: "kernel.cal_counts_tlb", kind: Kind::Bool, unit: "", default: "true", doc: "/proc/interrupts CAL includes TLB shootdowns (since 4.8); false: CAL = calls - TLB, as before" },
];

/// The resolved kernel preset.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    pub name: String,
    pub hz: u64,
    pub tlb_single_page_flush_ceiling: u64,
    pub mm_cpumask: MmCpumask,
    pub lazy_tlb: LazyTlb,
    pub pcid: bool,
    pub concurrent_local_flush: bool,
    pub call_function: CallFunction,
    pub call_single_queue: CallSingleQueue,
    pub skip_ipi_if_queued: bool,
    pub ipi_poll_elision: bool,
    pub pt_reclaim: bool,
    pub cal_counts_tlb: bool,
    pub reclaim_flush: ReclaimFlush,
    pub tlbbatch_flush: TlbBatchFlush,
    pub batch_pfn_size: usize,
    pub defer_writable: bool,
    pub flush_before_free: bool,
    pub flush_dirty_before_pageout: bool,
    pub young_flush: bool,
    pub pagevec_size: usize,
    pub pcp_batch: usize,
    pub pcp_high: usize,
    pub fault_around_pages: u64,
    pub readahead_pages: u64,
    pub pcp_drain: PcpDrain,
    pub zone_reclaimable_progress: bool,
    pub isolated_throttle: IsolatedThrottle,
    pub smp_call_function_many_cond: bool,
    pub migrate_flush: MigrateFlush,
    pub pmd_clear: PmdClear,
    pub table_batch_alloc_fails: bool,
}

impl KernelConfig {
    pub fn from_resolved(r: &Resolved) -> Result<KernelConfig, ConfigError> {
        Ok(KernelConfig {
            name: r.str("kernel.name").to_string(),
            hz: r.int("kernel.hz") as u64,
            tlb_single_page_flush_ceiling: r.int("kernel.tlb_single_page_flush_ceiling") as u64,
            mm_cpumask: MmCpumask::from_name(r.str("kernel.mm_cpumask")),
            lazy_tlb: LazyTlb::from_name(r.str("kernel.lazy_tlb")),
            pcid: r.bool("kernel.pcid"),
            concurrent_local_flush: r.bool("kernel.concurrent_local_flush"),
            call_function: CallFunction::from_name(r.str("kernel.call_function")),
            call_single_queue: CallSingleQueue::from_name(r.str("kernel.call_single_queue")),
            skip_ipi_if_queued: r.bool("kernel.skip_ipi_if_queued"),
            ipi_poll_elision: r.bool("kernel.ipi_poll_elision"),
            pt_reclaim: r.bool("kernel.pt_reclaim"),
            cal_counts_tlb: r.bool("kernel.cal_counts_tlb"),
            reclaim_flush: ReclaimFlush::from_name(r.str("kernel.reclaim_flush")),
            tlbbatch_flush: TlbBatchFlush::from_name(r.str("kernel.tlbbatch_flush")),
            batch_pfn_size: r.int("kernel.batch_pfn_size") as usize,
            defer_writable: r.bool("kernel.defer_writable"),
            flush_before_free: r.bool("kernel.flush_before_free"),
            flush_dirty_before_pageout: r.bool("kernel.flush_dirty_before_pageout"),
            young_flush: r.bool("kernel.young_flush"),
            pagevec_size: r.int("kernel.pagevec_size") as usize,
            pcp_batch: r.int("kernel.pcp_batch") as usize,
            pcp_high: r.int("kernel.pcp_high") as usize,
            fault_around_pages: (r.uint("kernel.fault_around_bytes") >> 12).max(1),
            readahead_pages: r.int("kernel.readahead_pages") as u64,
            pcp_drain: PcpDrain::from_name(r.str("kernel.pcp_drain")),
            zone_reclaimable_progress: r.bool("kernel.zone_reclaimable_progress"),
            isolated_throttle: IsolatedThrottle::from_name(r.str("kernel.isolated_throttle")),
            smp_call_function_many_cond: r.bool("kernel.smp_call_function_many_cond"),
            migrate_flush: MigrateFlush::from_name(r.str("kernel.migrate_flush")),
            pmd_clear: PmdClear::from_name(r.str("kernel.pmd_clear")),
            table_batch_alloc_fails: r.bool("kernel.table_batch_alloc_fails"),
        })
    }
}
