//! A kernel preset: one choice per mechanism. The declared defaults are the current kernel
//! (linux-6.18); older presets state only what differs.

use crate::arch::powerpc::PmdClear;
use crate::arch::x86::{LazyTlb, MmCpumask};
use crate::arch::ArchConfig;
use crate::config::{params, Kind};
use crate::mm::drain::PcpDrain;
use crate::mm::migrate::MigrateFlush;
use crate::mm::rmap::{ReclaimFlush, TlbBatchFlush};
use crate::mm::vmscan::IsolatedThrottle;
use crate::smp::{CallFunction, CallSingleQueue, SmpConfig};

params! {
    /// The resolved kernel preset.
    #[derive(Debug, Clone)]
    pub struct KernelConfig;
    pub const PARAMS = {
        name: String = "kernel.name", Kind::Str, "", "linux-6.18", "preset name, shown in results";
        description: String = "kernel.description", Kind::Str, "", "", "one line about the kernel this preset models";
        hz: u64 = "kernel.hz", Kind::Int { min: 100, max: 1000 }, "Hz", "250", "CONFIG_HZ: the jiffy that times the mm_cpumask trim";
        tlb_single_page_flush_ceiling: u64 = "kernel.tlb_single_page_flush_ceiling", Kind::Int { min: 0, max: 1 << 20 }, "pages", "33", "flush_tlb_mm_range flushes page by page up to this many pages, else the whole TLB (a5102476a2, 3.15)";
        mm_cpumask: MmCpumask = "kernel.mm_cpumask", Kind::Choice(MmCpumask::NAMES), "", "lazy_trim", "clear_on_switch: switch_mm clears the old mm's bit (to 6.12); lazy_trim: bits stay until a flush IPI finds the CPU on another mm, trimmed at most once per second (209954cbc7d0, 6.13)";
        lazy_tlb: LazyTlb = "kernel.lazy_tlb", Kind::Choice(LazyTlb::NAMES), "", "skip_lazy_cpus", "leave_mm_on_ipi: lazy CPUs get flush IPIs and leave the mm (to 4.18); skip_lazy_cpus: no IPI to lazy CPUs unless page tables were freed (4.19)";
        pcid: bool = "kernel.pcid", Kind::Bool, "", "true", "PCID with 6 dynamic ASIDs and per-mm tlb_gen (4.14); false: every mm switch flushes the TLB";
        concurrent_local_flush: bool = "kernel.concurrent_local_flush", Kind::Bool, "", "true", "flush the local TLB after sending the IPIs, overlapping them (4ce94eabac16, 5.13); false: local flush first";
        call_function: CallFunction = "kernel.call_function", Kind::Choice(CallFunction::NAMES), "", "percpu_csd", "smp_call_function_many: `global_cfd` (to 3.8: one global queue under one lock, every handler walks it) or `percpu_csd` (per-CPU queues and a csd per (sender, target), 9a46ad6d6df3, 3.9)";
        call_single_queue: CallSingleQueue = "kernel.call_single_queue", Kind::Choice(CallSingleQueue::NAMES), "", "llist", "each CPU's call queue: `spinlock` (a list under call_single_queue.lock that every sender and the handler take, to 3.13) or `llist` (lock-free llist_add / llist_del_all, 6897fc22ea01, 3.14)";
        skip_ipi_if_queued: bool = "kernel.skip_ipi_if_queued", Kind::Bool, "", "true", "smp_call_function_many sends no IPI to a CPU whose call queue already holds work (3fc5b3b6a80b, 4.13)";
        ipi_poll_elision: bool = "kernel.ipi_poll_elision", Kind::Bool, "", "true", "a single-target call IPI to an idle CPU that is polling sets NEED_RESCHED instead (call_function_single_prep_ipi)";
        pt_reclaim: bool = "kernel.pt_reclaim", Kind::Bool, "", "true", "CONFIG_PT_RECLAIM: MADV_DONTNEED over a whole PMD frees the empty PTE table (6.14)";
        reclaim_flush: ReclaimFlush = "kernel.reclaim_flush", Kind::Choice(ReclaimFlush::NAMES), "", "batch_full", "how reclaim flushes unmapped pages: immediate (flush_tlb_page per page, to 4.2), batch_full (one IPI per CPU per batch, full flush; 72b252aed506, 4.3), batch_pfn (the v1-v5 series: a PFN list, INVLPG each), none (a debug policy that never flushes; the checker catches it)";
        tlbbatch_flush: TlbBatchFlush = "kernel.tlbbatch_flush", Kind::Choice(TlbBatchFlush::NAMES), "", "flush_tlb_func", "how batch_full sends its flush: percpu_batch_pages (mm/rmap.c's own handler on every CPU of the mask, each run counted in TLB, the sender's too, no lazy check; 4.3 to 4.5) or flush_tlb_func (the arch's full flush with no mm: TLB counted on remote CPUs only, lazy CPUs as kernel.lazy_tlb says; 858eaaa7, 4.6; arch_tlbbatch_flush, 4.13)";
        batch_pfn_size: usize = "kernel.batch_pfn_size", Kind::Int { min: 1, max: 4096 }, "pages", "32", "batch_pfn: PFNs per batch before a flush (BATCH_TLBFLUSH_SIZE, 32 = SWAP_CLUSTER_MAX; a page's worth is about 500)";
        defer_writable: bool = "kernel.defer_writable", Kind::Bool, "", "true", "batch dirty PTEs too and flush them before pageout (try_to_unmap_flush_dirty; seed 001 patch 3); false: flush dirty PTEs at once";
        young_flush: bool = "kernel.young_flush", Kind::Bool, "", "false", "reclaim's ptep_clear_flush_young() flushes the TLB when it clears a set accessed bit (x86 until b13b1d2d8692, 3.15)";
        flush_dirty_before_pageout: bool = "kernel.flush_dirty_before_pageout", Kind::Bool, "", "true", "try_to_unmap_flush_dirty() before pageout() of a page whose writable PTE was unmapped in the batch, as every kernel does; false is an unsafe what-if that the checker reports (lost-write at pageout)";
        flush_before_free: bool = "kernel.flush_before_free", Kind::Bool, "", "true", "try_to_unmap_flush() before the reclaimed pages are freed, as every kernel does; false is an unsafe what-if that the checker reports (use-after-free at free)";
        migrate_flush: MigrateFlush = "kernel.migrate_flush", Kind::Choice(MigrateFlush::NAMES), "", "batched", "how migrate_pages flushes the pages it unmaps: immediate (ptep_clear_flush per page, to 6.3), batched (unmap up to 512 pages, one try_to_unmap_flush, then copy; 7e12beb8ca2a, 6.4), batched_unsafe (a what-if that copies, restores and frees before the flush; the checker catches it)";
        pmd_clear: PmdClear = "kernel.pmd_clear", Kind::Choice(PmdClear::NAMES), "", "lockless_flush", "powerpc radix huge-PMD clear: serialize_ipi (serialize_against_pte_lookup, an empty waiting IPI to mm_cpumask per PMD, to 5.7), lockless (walkers tolerate a stale PMD, no IPI), lockless_flush (as merged in 5.8: also flush_pmd_tlb_range unless fullmm); x86 never did either";
        table_batch_alloc_fails: bool = "kernel.table_batch_alloc_fails", Kind::Bool, "", "false", "what-if: tlb_remove_table() cannot allocate its mmu_table_batch page (GFP_NOWAIT), so each freed page-table page goes through tlb_remove_table_one() -> tlb_remove_table_sync_one(): an empty IPI to every online CPU, waiting (mm/mmu_gather.c)";
        pagevec_size: usize = "kernel.pagevec_size", Kind::Int { min: 1, max: 64 }, "pages", "31", "PAGEVEC_SIZE: per-CPU LRU-add batch (14 in 4.x, 15 later, 31 today)";
        pcp_batch: usize = "kernel.pcp_batch", Kind::Int { min: 1, max: 1024 }, "pages", "63", "per-CPU page list refill/drain batch (zone_batchsize)";
        pcp_high: usize = "kernel.pcp_high", Kind::Int { min: 1, max: 65536 }, "pages", "378", "per-CPU page list high mark: above it, free a batch back to the buddy allocator";
        fault_around_pages: u64 = "kernel.fault_around_bytes", Kind::Size, "bytes", "64KiB", "do_fault_around(): map this much of the page cache around a read fault (3.15)" => |b: u64| (b >> 12).max(1);
        readahead_pages: u64 = "kernel.readahead_pages", Kind::Int { min: 1, max: 4096 }, "pages", "32", "mmap read-around / readahead window (ra_pages, 128 KiB)";
        pcp_drain: PcpDrain = "kernel.pcp_drain", Kind::Choice(PcpDrain::NAMES), "", "remote_no_ipi", "drain_all_pages: all_cpus (an IPI to every CPU, to 3.3), cpus_with_pages (IPIs only to CPUs holding pcp pages, 74046494ea68, 3.4), workqueue (per-CPU work items under pcpu_drain_mutex, 4.11), remote_no_ipi (the caller drains under pcp->lock, 6.0)";
        zone_reclaimable_progress: bool = "kernel.zone_reclaimable_progress", Kind::Bool, "", "false", "try_to_free_pages() that freed nothing still reports progress while a zone is reclaimable (pages_scanned < 6 x its LRU pages), so the allocator retries and drains instead of calling the OOM killer, and kswapd gives such a zone up (all_unreclaimable() / zone_reclaimable(), to 4.6; gone with the OOM-detection rework 0a0337e0d1d1, 4.7)";
        smp_call_function_many_cond: bool = "kernel.smp_call_function_many_cond", Kind::Bool, "", "true", "the worker that queues and sends cross-CPU calls is smp_call_function_many_cond() (Sebastian Andrzej Siewior, 5.6), as perf names it; false: smp_call_function_many() itself, before";
        isolated_throttle: IsolatedThrottle = "kernel.isolated_throttle", Kind::Choice(IsolatedThrottle::NAMES), "", "reclaim_throttle", "a direct reclaimer finding more pages isolated than left on the inactive list (too_many_isolated): congestion_wait (sleep HZ/10 and check again: Rik van Riel, 2.6.32, to 5.15) or reclaim_throttle (sleep once, up to HZ/50, woken when a reclaimer sees the node below the limit, then scan nothing: Mel Gorman, 5.16)";
        cal_counts_tlb: bool = "kernel.cal_counts_tlb", Kind::Bool, "", "true", "/proc/interrupts CAL includes TLB shootdowns (since 4.8); false: CAL = calls - TLB, as before";
    }
}

impl KernelConfig {
    /// The preset's choices that smp keeps.
    pub fn smp_config(&self) -> SmpConfig {
        SmpConfig {
            call_function: self.call_function,
            call_single_queue: self.call_single_queue,
            skip_ipi_if_queued: self.skip_ipi_if_queued,
            ipi_poll_elision: self.ipi_poll_elision,
            smp_call_function_many_cond: self.smp_call_function_many_cond,
        }
    }

    /// The preset's choices that arch keeps.
    pub fn arch_config(&self) -> ArchConfig {
        ArchConfig {
            hz: self.hz,
            pcid: self.pcid,
            mm_cpumask: self.mm_cpumask,
            lazy_tlb: self.lazy_tlb,
            tlb_single_page_flush_ceiling: self.tlb_single_page_flush_ceiling,
            concurrent_local_flush: self.concurrent_local_flush,
            pmd_clear: self.pmd_clear,
        }
    }
}
