//! Unmapping pages for reclaim (mm/rmap.c try_to_unmap_one) and the three ways of flushing the
//! TLB for them: at once per page (to 4.2), batched into one full flush per CPU (4.3,
//! 72b252aed506), or batched as a PFN list flushed page by page (the v1-v6 series, never merged).

use super::filemap::{PG_DIRTY, PTE_DIRTY, PTE_MAPPED, PTE_YOUNG};
use super::{Host, Memory, Parts};
use crate::arch::{self, ArchState, FlushRange};
use crate::config::named_enum;
use crate::engine::{CpuId, CpuMask, TaskId, Time};
use crate::machine::Cost;
use crate::observe::check::{PageEvent, Site, Violation};
use crate::observe::{Func, Vm};
use crate::smp::{self, CallFunc, Cond};
use crate::step::{Outcome, Step};

named_enum! {
    /// `kernel.reclaim_flush`: what try_to_unmap_one does about the TLB.
    ReclaimFlush {
        /// ptep_clear_flush(): flush_tlb_page(), an IPI to the mm's other CPUs for every page.
        Immediate = "immediate",
        /// TTU_BATCH_FLUSH: collect the CPUs, one IPI each per batch, each doing a full flush.
        BatchFull = "batch_full",
        /// TTU_BATCH_FLUSH with a list of `batch_pfn_size` PFNs, as the v1-v6 series posted it
        /// (v6 4/4, linux-mm 2015-06-09): percpu_flush_tlb_batch_pages() does
        /// flush_local_tlb_addr(pfns[i] << PAGE_SHIFT), an INVLPG of the page's physical address
        /// as a linear one, so the reader's translation of the page stays cached.
        BatchPfn = "batch_pfn",
        /// The same list holding each page's mm and user address, INVLPG'd on the CPUs where
        /// that mm is loaded: what the PFN list needed to be safe (never posted).
        BatchAddr = "batch_addr",
        /// Debug only: clear the PTE and never flush, so the checker has something to catch.
        None = "none",
    }
}

named_enum! {
    /// `kernel.tlbbatch_flush`: how a `batch_full` batch is flushed, and counted.
    TlbBatchFlush {
        /// mm/rmap.c's own percpu_flush_tlb_batch_pages() through smp_call_function_many(), on
        /// every CPU of the batch's mask; x86's flush_tlb_local() counted irq_tlb_count, the
        /// sender's own run too (72b252aed506, 4.3, to 4.5).
        PercpuBatchPages = "percpu_batch_pages",
        /// The arch's remote flush with a full, mm-less flush_tlb_info (flush_tlb_others(),
        /// 858eaaa7, 4.6; arch_tlbbatch_flush() -> flush_tlb_multi(), 4.13): flush_tlb_func()
        /// counts TLB on remote CPUs only; lazy CPUs are skipped or not as `kernel.lazy_tlb` says.
        FlushTlbFunc = "flush_tlb_func",
    }
}

/// `struct tlbflush_unmap_batch` (current->tlb_ubc): owned by the reclaiming task.
#[derive(Debug, Default)]
pub struct TlbUbc {
    pub cpumask: CpuMask,
    pub flush_required: bool,
    /// A deferred PTE was dirty: flush before pageout (try_to_unmap_flush_dirty).
    pub writable: bool,
    /// batch_pfn and batch_addr: each deferred page's INVLPG, in order: the mm it is meant for
    /// and the page number (None, pfn: the posted list's physical address, which no user
    /// mapping of the target's loaded mm is at).
    pub pages: Vec<(Option<u32>, u64)>,
    /// The checker's number for this batch (observe/check.rs).
    pub batch: u32,
}

/// The mm and address of the one mapping of a page-cache page.
pub fn mapping_of(mem: &Memory, pfn: u32) -> (usize, u64) {
    let p = mem.page[pfn as usize];
    let (mm, start) = mem.files[p.file as usize]
        .mapper
        .expect("mapped page of an unmapped file");
    (mm, start + p.index as u64)
}

/// try_to_unmap_one(): clear the page's PTE and deal with the TLB as the policy says. Pushes the
/// steps of a flush that must happen now (and returns true); returns the time of the rmap work.
pub fn try_to_unmap_one(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    pfn: u32,
    dirty: bool,
) -> (Time, bool) {
    let now = s.now();
    let Parts { m, mem, arch, obs } = s.mm_parts();
    let (mm, vpn) = mapping_of(mem, pfn);
    let p = &mut mem.page[pfn as usize];
    // "Move the dirty bit to the physical page now the pte is gone" (set_page_dirty).
    if dirty {
        p.flags |= PG_DIRTY;
    }
    p.flags &= !(PTE_MAPPED | PTE_YOUNG | PTE_DIRTY);
    let cost = m.cost[Cost::RmapWalk];
    obs.stats.charge(Some(t), Func::TryToUnmap, cost);
    if mem.cfg.reclaim_flush == ReclaimFlush::None {
        obs.check.record(now, cpu, pfn, PageEvent::UnmapNoFlush);
        return (cost, false);
    }
    // should_defer_flush() -> arch_tlbbatch_should_defer() (x86: only worth it when another CPU
    // may hold the translation).
    let defer = mem.cfg.reclaim_flush != ReclaimFlush::Immediate
        && arch::tlbbatch_should_defer(arch, m, cpu, mm)
        && (!dirty || mem.cfg.defer_writable);
    if !defer {
        // ptep_clear_flush() -> flush_tlb_page().
        obs.check
            .record(now, cpu, pfn, PageEvent::Unmap { batch: 0 });
        s.push_step(t, flush_tlb_page(mm, vpn));
        return (cost, true);
    }
    let tlbi = set_tlb_ubc_flush_pending(s, cpu, t, (mm, vpn), pfn, dirty);
    if tlbi > 0 {
        // arm64's arch_tlbbatch_add_pending() is inlined into try_to_unmap_one().
        s.mm_parts()
            .obs
            .stats
            .charge(Some(t), Func::TryToUnmap, tlbi);
    }
    let cost = cost + tlbi;
    let mem = s.mm_parts().mem;
    let listed = match mem.cfg.reclaim_flush {
        // tlb_ubc->pfns[] = page_to_pfn(page), later INVLPG'd as an address.
        ReclaimFlush::BatchPfn => Some((None, pfn as u64)),
        ReclaimFlush::BatchAddr => Some((Some(mm as u32), vpn)),
        _ => None,
    };
    if let Some(entry) = listed {
        let ubc = &mut mem.tasks[t].reclaim.ubc;
        ubc.pages.push(entry);
        if ubc.pages.len() >= mem.cfg.batch_pfn_size {
            s.push_step(t, Step::TryToUnmapFlush);
            return (cost, true);
        }
    }
    (cost, false)
}

/// set_tlb_ubc_flush_pending(): the page's flush joins the task's batch. arch_tlbbatch_add_pending()
/// does the architecture's part: from 4.14, with PCID, x86 bumps the mm's tlb_gen, so a CPU that
/// switches back to the mm flushes the ASID it left behind; arm64 (6.5) issues the page's TLBI.
/// Returns the time of that part, for the caller to charge.
pub fn set_tlb_ubc_flush_pending(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    (mm, vpn): (usize, u64),
    pfn: u32,
    dirty: bool,
) -> Time {
    let now = s.now();
    let Parts { m, mem, arch, obs } = s.mm_parts();
    let ps = arch::tlbbatch_add_pending(arch::Parts { m, arch, obs }, cpu, now, mm, vpn);
    let mask = arch.mm[mm].cpumask.copied();
    let ubc = &mut mem.tasks[t].reclaim.ubc;
    ubc.cpumask.or(&mask);
    if !ubc.flush_required {
        obs.check.batches += 1;
        ubc.batch = obs.check.batches;
    }
    ubc.flush_required = true;
    ubc.writable |= dirty;
    mem.mms[mm].tlb_flush_batched = true;
    let batch = ubc.batch;
    obs.check.record(now, cpu, pfn, PageEvent::Unmap { batch });
    ps
}

/// flush_tlb_batched_pending() where a page-table walk of `mm` begins (zap_pte_range(),
/// change_pte_range(), madvise_cold_or_pageout_pte_range()): if reclaim or migration cleared a
/// PTE of `mm` with its flush deferred since the last call, flush the mm now, so no TLB entry
/// this walk cannot see outlives it (3ea277194daa): Err, the walk goes on at `resume` after it.
/// Otherwise Ok: the time its atomic_read() of mm->tlb_flush_batched took, on the line of
/// mm->tlb_flush_pending beside it, charged to the walk's `func` (after a flush, the resumed
/// walk's read).
pub fn flush_tlb_batched_pending(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    mm: usize,
    resume: Step,
    func: Func,
) -> Result<Time, Outcome> {
    let mem = s.mem();
    if !mem.cfg.flush_tlb_batched_pending {
        return Ok(0);
    }
    if !mem.mms[mm].tlb_flush_batched {
        return Ok(super::mmu_gather::flush_pending_line_read(s, cpu, t, func));
    }
    s.mem().mms[mm].tlb_flush_batched = false;
    s.push_step(t, resume);
    Err(arch::flush_tlb_batched_pending(s, cpu, t, mm))
}

/// flush_tlb_page(): the step that flushes one page of `mm` on every CPU that may cache it.
pub fn flush_tlb_page(mm: usize, vpn: u64) -> Step {
    Step::FlushTlbMmRange(FlushRange {
        mm: mm as u32,
        start: vpn,
        end: vpn + 1,
        stride_shift: 12,
        freed_tables: false,
    })
}

/// try_to_unmap_flush(): one call to every CPU in the batch's mask (this one runs it directly),
/// waiting for all of them; then the batch is empty. `kernel.tlbbatch_flush` says how.
pub fn try_to_unmap_flush(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let now = s.now();
    let Parts { mem, obs, .. } = s.mm_parts();
    let ubc = &mem.tasks[t].reclaim.ubc;
    if !ubc.flush_required {
        return Outcome::Next;
    }
    let (mask, batch) = (ubc.cpumask.copied(), ubc.batch);
    let func = if ubc.pages.is_empty() {
        CallFunc::FlushTlbBatchPages
    } else {
        CallFunc::FlushTlbPfns
    };
    obs.check
        .record(now, cpu, u32::MAX, PageEvent::BatchFlush { batch });
    // arm64: arch_tlbbatch_flush() is a dsb(ish) on this CPU, no call to the others; riscv:
    // one SBI remote fence, the firmware IPIing the other harts.
    if let Some(ps) = arch::tlbbatch_flush_broadcast(s, cpu, t, &mask) {
        s.push_step(t, Step::TlbUbcClear);
        return match ps {
            0 => Outcome::Next,
            ps => Outcome::Busy {
                ps,
                irqs_off: false,
            },
        };
    }
    let Parts { mem, .. } = s.mm_parts();
    if func == CallFunc::FlushTlbBatchPages && mem.cfg.tlbbatch_flush == TlbBatchFlush::FlushTlbFunc
    {
        s.push_step(t, Step::TlbUbcClear);
        return arch::tlbbatch_flush_multi(s, cpu, t, &mask);
    }
    // 4.3 traced the batch flush as a remote shootdown of every page (-1).
    let at = s.trace_at(cpu);
    let obs = s.mm_parts().obs;
    obs.tlb_flush(at, 1, -1);
    if mask.any_but(cpu) {
        obs.stats.vm(Vm::TlbRemoteFlush, 1);
    }
    // The targets read the batch while the sender waits; it is emptied after the wait.
    s.push_step(t, Step::TlbUbcClear);
    smp::smp_call_function_many_cond(s, cpu, t, &mask, func, Cond::Always, true, true)
}

pub fn tlb_ubc_clear(s: &mut impl Host, t: TaskId) -> Outcome {
    let ubc = &mut s.mm_parts().mem.tasks[t].reclaim.ubc;
    ubc.cpumask = CpuMask::new();
    ubc.flush_required = false;
    ubc.writable = false;
    ubc.pages.clear();
    Outcome::Next
}

/// The invariants at free and at pageout (try_to_unmap_flush): no CPU may still cache a
/// translation to a page being freed, nor one it could write through to a page being written
/// out. Each CPU that does is a violation. Only CPUs with the mm loaded can (without PCID every
/// mm switch flushes; with it, a batch bumps tlb_gen so a switch back flushes).
pub fn check_translations(s: &mut impl Host, pfn: u32, site: Site) {
    let now = s.now();
    let Parts { m, mem, arch, obs } = s.mm_parts();
    if !obs.check.enabled {
        return;
    }
    let (mm, vpn) = mapping_of(mem, pfn);
    let traps = m.clean_write_traps;
    // The violating CPU and kind of a cached translation on CPU `c`, if any.
    let stale = |arch: &ArchState, c: CpuId| {
        let asid = arch::cached_asid(arch, m, c, mm)?;
        let e = arch.tlb[c].probe(asid, vpn).filter(|e| e.pfn == pfn)?;
        match site {
            Site::Pageout if e.dirty || (e.writable && !traps) => Some(Violation::LostWrite),
            Site::Pageout => None,
            _ => Some(Violation::UseAfterFree),
        }
    };
    // The common case, no stale translation, reads the mask in place.
    if !arch::may_cache(arch, m, mm)
        .iter()
        .any(|c| stale(arch, c).is_some())
    {
        return;
    }
    let mask = *arch::may_cache(arch, m, mm);
    for c in mask.iter() {
        if let Some(kind) = stale(arch, c) {
            obs.check.violation(now, kind, site, c, (mm, vpn, pfn));
        }
    }
}
