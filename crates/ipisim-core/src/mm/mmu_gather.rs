//! The mmu_gather (mm/mmu_gather.c, include/asm-generic/tlb.h): collects the range of PTEs cleared
//! and the pages to free, flushes the TLB once for all of them, and only then frees the pages.

use crate::arch::{FlushRange, TLB_FLUSH_ALL};
use crate::engine::{CpuId, TaskId, Time};
use crate::observe::Func;
use crate::step::{Outcome, Step};

use super::syscall::mm_line_access;
use super::Host;

/// Pages one gather holds before zap_pte_range must flush: MMU_GATHER_BUNDLE (8) plus
/// MAX_GATHER_BATCH_COUNT (10000 / 510 = 19) batches of MAX_GATHER_BATCH (510) pointers.
pub const MAX_GATHER_PAGES: usize = 8 + 19 * 510;

#[derive(Debug, Default)]
pub struct MmuGather {
    pub mm: usize,
    /// The range to flush, in pages; empty when start >= end.
    pub start: u64,
    pub end: u64,
    pub freed_tables: bool,
    pub cleared_ptes: bool,
    pub cleared_pmds: bool,
    /// Frames unmapped and waiting for the flush before they may be freed.
    pub pages: Vec<u32>,
    /// tlb_finish_mmu() is flushing: once done, the gather closes (dec_tlb_flush_pending).
    finishing: bool,
}

impl MmuGather {
    /// tlb_gather_mmu().
    pub fn init(&mut self, mm: usize) {
        self.mm = mm;
        self.reset_range();
        self.pages.clear();
    }

    /// __tlb_reset_range().
    fn reset_range(&mut self) {
        self.start = u64::MAX;
        self.end = 0;
        self.freed_tables = false;
        self.cleared_ptes = false;
        self.cleared_pmds = false;
    }

    /// __tlb_adjust_range().
    pub fn adjust_range(&mut self, start: u64, end: u64) {
        self.start = self.start.min(start);
        self.end = self.end.max(end);
    }

    /// __tlb_remove_page(): true when the batch is full and the caller must flush.
    pub fn remove_page(&mut self, pfn: u32) -> bool {
        self.pages.push(pfn);
        self.pages.len() >= MAX_GATHER_PAGES
    }

    /// tlb_get_unmap_shift().
    fn stride_shift(&self) -> u8 {
        if self.cleared_ptes || !self.cleared_pmds {
            12
        } else {
            21
        }
    }
}

/// tlb_flush_mmu() (also the flush of tlb_finish_mmu()): flush the gathered range if any PTE or
/// table was cleared, then free the gathered pages.
pub fn tlb_flush_mmu(s: &mut impl Host, t: TaskId) -> Outcome {
    let g = s.gather(t);
    let flush = (g.start < g.end).then(|| FlushRange {
        mm: g.mm as u32,
        start: g.start,
        end: g.end,
        stride_shift: g.stride_shift(),
        freed_tables: g.freed_tables,
    });
    g.reset_range();
    s.push_step(t, Step::TlbBatchPagesFlush);
    if let Some(r) = flush {
        s.push_step(t, Step::FlushTlbMmRange(r));
    }
    Outcome::Next
}

/// The atomic of inc_tlb_flush_pending() (`inc`) or dec_tlb_flush_pending() on `t`'s mm's
/// line, a step at its own time (the count moved with the gather), charged to tlb_gather_mmu or
/// tlb_finish_mmu: nothing for a process of one thread, whose lines stay in its CPU's cache.
pub fn tlb_flush_pending_atomic(s: &mut impl Host, cpu: CpuId, t: TaskId, inc: bool) -> Outcome {
    let Some(ps) = mm_line_access(s, cpu, t, s.now(), true, |mm| &mut mm.flush_pending_line) else {
        return Outcome::Next;
    };
    let func = match inc {
        true => Func::TlbGatherMmu,
        false => Func::TlbFinishMmu,
    };
    s.obs().stats.charge(Some(t), func, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// A load now on `cpu` of the line of `t`'s mm's tlb_flush_pending and tlb_flush_batched, two
/// atomic_ts side by side in mm_struct (mm_tlb_flush_nested(), flush_tlb_batched_pending()),
/// charged to `func`: its time (none for a process of one thread).
pub fn flush_pending_line_read(s: &mut impl Host, cpu: CpuId, t: TaskId, func: Func) -> Time {
    let Some(ps) = mm_line_access(s, cpu, t, s.now(), false, |mm| &mut mm.flush_pending_line)
    else {
        return 0;
    };
    s.obs().stats.charge(Some(t), func, ps);
    ps
}

/// tlb_finish_mmu(): if another thread of the mm has a gather open too (mm_tlb_flush_nested), its
/// flush may not have reached every CPU yet, so flush the whole mm, page tables included (the
/// MADV_DONTNEED race fix, 99baac21e458, 4.13, with kernel.tlb_flush_pending); then flush as
/// tlb_flush_mmu() and close.
pub fn tlb_finish_mmu(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let read = match s.mem().cfg.tlb_flush_pending {
        true => flush_pending_line_read(s, cpu, t, Func::TlbFinishMmu),
        false => 0,
    };
    let mm = s.gather(t).mm;
    let nested = s.mm_view().0.mms[mm].tlb_flush_pending > 1;
    let g = s.gather(t);
    if nested {
        g.reset_range();
        (g.start, g.end, g.freed_tables) = (0, TLB_FLUSH_ALL, true);
    }
    g.finishing = true;
    tlb_flush_mmu(s, t);
    if read == 0 {
        return Outcome::Next;
    }
    Outcome::Busy {
        ps: read,
        irqs_off: false,
    }
}

/// tlb_batch_pages_flush(): the TLB is clean, the gathered pages can go back to the allocator
/// (free_pages_and_swap_cache(): off the LRU first, see mm/lru.rs).
pub fn tlb_batch_pages_flush(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let gathered = !s.gather(t).pages.is_empty();
    let mem = s.mm_parts().mem;
    if gathered && mem.cfg.zap_lru_add_drain && !mem.pagevec[cpu].is_empty() {
        // free_pages_and_swap_cache()'s lru_add_drain() (removed by 1aa43598c03b "mm: remove
        // unnecessary calls to lru_add_drain", 6.14) is a step of its own: its lock rounds end
        // before release_pages() asks for the lock again, behind the CPUs that queued meanwhile
        // (a qspinlock serves its MCS queue in order), so the two rounds are two hand-offs.
        let ps = super::lru::lru_add_drain(s, cpu, t);
        s.push_step(t, Step::TlbBatchPagesFlush);
        return super::lru::lock_first(s, t, Func::LruAdd, ps, ps);
    }
    let g = s.gather(t);
    let (mm, finishing) = (g.mm, std::mem::take(&mut g.finishing));
    let mut pages = std::mem::take(&mut g.pages);
    let ps = if pages.is_empty() {
        0
    } else {
        super::lru::free_pages_and_swap_cache(s, cpu, t, &mut pages)
    };
    pages.clear();
    s.gather(t).pages = pages;
    if finishing && s.mem().cfg.tlb_flush_pending {
        // dec_tlb_flush_pending(), once the pages are freed: its atomic a step of its own.
        s.mem().mms[mm].tlb_flush_pending -= 1;
        s.push_step(t, Step::TlbFlushPending { inc: false });
    }
    if ps == 0 {
        Outcome::Next
    } else {
        // All of it is lru_lock rounds (release_pages(), and the LRU-add drain before it).
        super::lru::lock_first(s, t, Func::ReleasePages, ps, ps)
    }
}

#[cfg(test)]
mod tests {
    use crate::observe::Func;
    use crate::testing::tlb_flush2_threads;

    /// Each madvise's mmu_gather writes mm->tlb_flush_pending's line twice (tlb_gather_mmu()'s
    /// atomic_inc() and tlb_finish_mmu()'s atomic_dec()) and reads it once between
    /// (mm_tlb_flush_nested()); a process of one thread keeps the line in its CPU's cache, and a
    /// kernel before 4.13 has no such count.
    #[test]
    fn each_gather_takes_the_mms_flush_pending_line() {
        // (threads, kernel.tlb_flush_pending, writes): 100 loops a thread, no munmap before 256.
        // Two threads write it 381 times, not 2 x 200, as simulated: the gathers before the second
        // thread exists and after the first exits are a one-thread process's.
        for (n, on, writes) in [(2, "true", 381), (1, "true", 0), (2, "false", 0)] {
            let s = tlb_flush2_threads("linux-6.14", n, 100, &[("kernel.tlb_flush_pending", on)]);
            let mm = &s.mem.mms[0];
            assert_eq!(mm.flush_pending_line.acquisitions, writes, "{n} {on}");
            assert_eq!(mm.tlb_flush_pending, 0, "every gather closed");
            let charged = [Func::TlbGatherMmu, Func::TlbFinishMmu]
                .map(|f| s.obs.stats.profile[f as usize] > 0);
            assert_eq!(charged, [writes > 0; 2], "{n} {on}");
        }
    }
}
