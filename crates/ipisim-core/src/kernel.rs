//! A kernel preset: one choice per mechanism. The declared defaults are the current kernel
//! (linux-6.18); older presets state only what differs. smp and arch declare their own keys
//! (`smp::PARAMS`, `arch::PARAMS`) where they are used; these are the rest.

use crate::config::{params, Kind};
use crate::mm::drain::PcpDrain;
use crate::mm::migrate::MigrateFlush;
use crate::mm::rmap::{ReclaimFlush, TlbBatchFlush};
use crate::mm::vmscan::IsolatedThrottle;

params! {
    /// The resolved kernel preset.
    #[derive(Debug, Clone)]
    pub struct KernelConfig;
    pub const PARAMS = {
        name: String = "kernel.name", Kind::Str, "", "linux-6.18", "preset name, shown in results";
        description: String = "kernel.description", Kind::Str, "", "", "one line about the kernel this preset models";
        pt_reclaim: bool = "kernel.pt_reclaim", Kind::Bool, "", "true", "CONFIG_PT_RECLAIM: MADV_DONTNEED over a whole PMD frees the empty PTE table (6.14)";
        reclaim_flush: ReclaimFlush = "kernel.reclaim_flush", Kind::Choice(ReclaimFlush::NAMES), "", "batch_full", "how reclaim flushes unmapped pages: immediate (flush_tlb_page per page, to 4.2), batch_full (one IPI per CPU per batch, full flush; 72b252aed506, 4.3), batch_pfn (the v1-v5 series: a PFN list, INVLPG each), none (a debug policy that never flushes; the checker catches it)";
        tlbbatch_flush: TlbBatchFlush = "kernel.tlbbatch_flush", Kind::Choice(TlbBatchFlush::NAMES), "", "flush_tlb_func", "how batch_full sends its flush: percpu_batch_pages (mm/rmap.c's own handler on every CPU of the mask, each run counted in TLB, the sender's too, no lazy check; 4.3 to 4.5) or flush_tlb_func (the arch's full flush with no mm: TLB counted on remote CPUs only, lazy CPUs as kernel.lazy_tlb says; 858eaaa7, 4.6; arch_tlbbatch_flush, 4.13)";
        batch_pfn_size: usize = "kernel.batch_pfn_size", Kind::Int { min: 1, max: 4096 }, "pages", "32", "batch_pfn: PFNs per batch before a flush (BATCH_TLBFLUSH_SIZE, 32 = SWAP_CLUSTER_MAX; a page's worth is about 500)";
        defer_writable: bool = "kernel.defer_writable", Kind::Bool, "", "true", "batch dirty PTEs too and flush them before pageout (try_to_unmap_flush_dirty; seed 001 patch 3); false: flush dirty PTEs at once";
        young_flush: bool = "kernel.young_flush", Kind::Bool, "", "false", "reclaim's ptep_clear_flush_young() flushes the TLB when it clears a set accessed bit (x86 until b13b1d2d8692, 3.15)";
        flush_dirty_before_pageout: bool = "kernel.flush_dirty_before_pageout", Kind::Bool, "", "true", "try_to_unmap_flush_dirty() before pageout() of a page whose writable PTE was unmapped in the batch, as every kernel does; false is an unsafe what-if that the checker reports (lost-write at pageout)";
        flush_before_free: bool = "kernel.flush_before_free", Kind::Bool, "", "true", "try_to_unmap_flush() before the reclaimed pages are freed, as every kernel does; false is an unsafe what-if that the checker reports (use-after-free at free)";
        migrate_flush: MigrateFlush = "kernel.migrate_flush", Kind::Choice(MigrateFlush::NAMES), "", "batched", "how migrate_pages flushes the pages it unmaps: immediate (ptep_clear_flush per page, to 6.3), batched (unmap up to 512 pages, one try_to_unmap_flush, then copy; 7e12beb8ca2a, 6.4), batched_unsafe (a what-if that copies, restores and frees before the flush; the checker catches it)";
        table_batch_alloc_fails: bool = "kernel.table_batch_alloc_fails", Kind::Bool, "", "false", "what-if: tlb_remove_table() cannot allocate its mmu_table_batch page (GFP_NOWAIT), so each freed page-table page goes through tlb_remove_table_one() -> tlb_remove_table_sync_one(): an empty IPI to every online CPU, waiting (mm/mmu_gather.c)";
        pagevec_size: usize = "kernel.pagevec_size", Kind::Int { min: 1, max: 64 }, "pages", "31", "PAGEVEC_SIZE: per-CPU LRU-add batch (14 in 4.x, 15 later, 31 today)";
        pcp_batch: usize = "kernel.pcp_batch", Kind::Int { min: 1, max: 1024 }, "pages", "63", "per-CPU page list refill/drain batch (zone_batchsize)";
        pcp_high: usize = "kernel.pcp_high", Kind::Int { min: 1, max: 65536 }, "pages", "378", "per-CPU page list high mark: above it, free a batch back to the buddy allocator";
        fault_around_pages: u64 = "kernel.fault_around_bytes", Kind::Size, "bytes", "64KiB", "do_fault_around(): map this much of the page cache around a read fault (3.15)" => |b: u64| (b >> 12).max(1);
        readahead_pages: u64 = "kernel.readahead_pages", Kind::Int { min: 1, max: 4096 }, "pages", "32", "mmap read-around / readahead window (ra_pages, 128 KiB)";
        pcp_drain: PcpDrain = "kernel.pcp_drain", Kind::Choice(PcpDrain::NAMES), "", "remote_no_ipi", "drain_all_pages: all_cpus (an IPI to every CPU, to 3.3), cpus_with_pages (IPIs only to CPUs holding pcp pages, 74046494ea68, 3.4), workqueue (per-CPU work items under pcpu_drain_mutex, 4.11), remote_no_ipi (the caller drains under pcp->lock, 6.0)";
        zone_reclaimable_progress: bool = "kernel.zone_reclaimable_progress", Kind::Bool, "", "false", "try_to_free_pages() that freed nothing still reports progress while a zone is reclaimable (pages_scanned < 6 x its LRU pages), so the allocator retries and drains instead of calling the OOM killer, and kswapd gives such a zone up (all_unreclaimable() / zone_reclaimable(), to 4.6; gone with the OOM-detection rework 0a0337e0d1d1, 4.7)";
        isolated_throttle: IsolatedThrottle = "kernel.isolated_throttle", Kind::Choice(IsolatedThrottle::NAMES), "", "reclaim_throttle", "a direct reclaimer finding more pages isolated than left on the inactive list (too_many_isolated): congestion_wait (sleep HZ/10 and check again: Rik van Riel, 2.6.32, to 5.15) or reclaim_throttle (sleep once, up to HZ/50, woken when a reclaimer sees the node below the limit, then scan nothing: Mel Gorman, 5.16)";
        cal_counts_tlb: bool = "kernel.cal_counts_tlb", Kind::Bool, "", "true", "/proc/interrupts CAL includes TLB shootdowns (since 4.8); false: CAL = calls - TLB, as before";
    }
}
