//! Unmapping pages for reclaim (mm/rmap.c try_to_unmap_one) and the three ways of flushing the
//! TLB for them: at once per page (to 4.2), batched into one full flush per CPU (4.3,
//! 72b252aed506), or batched as a PFN list flushed page by page (the v1-v5 series).

use super::filemap::{PG_DIRTY, PTE_DIRTY, PTE_MAPPED, PTE_YOUNG};
use crate::arch::x86::{FlushInfo, FlushRange, LazyTlb, TLB_FLUSH_ALL};
use crate::engine::{CpuMask, Time};
use crate::machine::Cost;
use crate::observe::check::{self, PageEvent, Site, Violation};
use crate::observe::{Func, Irq, Vm};
use crate::sched::{self, Outcome, Step};
use crate::sim::{CpuId, Sim, TaskId};
use crate::smp::{self, CallFunc, Cond};

/// trace_tlb_flush(TLB_REMOTE_SEND_IPI, ...) (include/linux/mm_types.h).
const TLB_REMOTE_SEND_IPI: u8 = 4;

/// `kernel.reclaim_flush`: what try_to_unmap_one does about the TLB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReclaimFlush {
    /// ptep_clear_flush(): flush_tlb_page(), an IPI to the mm's other CPUs for every page.
    Immediate,
    /// TTU_BATCH_FLUSH: collect the CPUs, one IPI each per batch, each doing a full flush.
    BatchFull,
    /// TTU_BATCH_FLUSH with a list of `batch_pfn_size` PFNs, each target INVLPGs every one.
    BatchPfn,
    /// Debug only: clear the PTE and never flush, so the checker has something to catch.
    None,
}

impl ReclaimFlush {
    pub const NAMES: &'static [&'static str] = &["immediate", "batch_full", "batch_pfn", "none"];
    pub fn from_name(n: &str) -> ReclaimFlush {
        match n {
            "immediate" => ReclaimFlush::Immediate,
            "batch_pfn" => ReclaimFlush::BatchPfn,
            "none" => ReclaimFlush::None,
            _ => ReclaimFlush::BatchFull,
        }
    }
}

/// `kernel.tlbbatch_flush`: how a `batch_full` batch is flushed, and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlbBatchFlush {
    /// mm/rmap.c's own percpu_flush_tlb_batch_pages() through smp_call_function_many(), on
    /// every CPU of the batch's mask; x86's flush_tlb_local() counted irq_tlb_count, the
    /// sender's own run too (72b252aed506, 4.3, to 4.5).
    PercpuBatchPages,
    /// The arch's remote flush with a full, mm-less flush_tlb_info (flush_tlb_others(), 858eaaa7,
    /// 4.6; arch_tlbbatch_flush() -> flush_tlb_multi(), 4.13): flush_tlb_func() counts TLB on
    /// remote CPUs only, and lazy CPUs are skipped or not as `kernel.lazy_tlb` says.
    FlushTlbFunc,
}

impl TlbBatchFlush {
    pub const NAMES: &'static [&'static str] = &["percpu_batch_pages", "flush_tlb_func"];
    pub fn from_name(n: &str) -> TlbBatchFlush {
        match n {
            "percpu_batch_pages" => TlbBatchFlush::PercpuBatchPages,
            _ => TlbBatchFlush::FlushTlbFunc,
        }
    }
}

/// `struct tlbflush_unmap_batch` (current->tlb_ubc): owned by the reclaiming task.
#[derive(Debug, Default)]
pub struct TlbUbc {
    pub cpumask: CpuMask,
    pub flush_required: bool,
    /// A deferred PTE was dirty: flush before pageout (try_to_unmap_flush_dirty).
    pub writable: bool,
    /// batch_pfn: (mm, vpn) of each deferred page, in order.
    pub pages: Vec<(u32, u64)>,
    /// The checker's number for this batch (observe/check.rs).
    pub batch: u32,
}

/// The mm and address of the one mapping of a page-cache page.
pub fn mapping_of(s: &Sim, pfn: u32) -> (usize, u64) {
    let p = s.mem.page[pfn as usize];
    let (mm, start) = s.mem.files[p.file as usize]
        .mapper
        .expect("mapped page of an unmapped file");
    (mm, start + p.index as u64)
}

/// try_to_unmap_one(): clear the page's PTE and deal with the TLB as the policy says. Pushes the
/// steps of a flush that must happen now (and returns true); returns the time of the rmap work.
pub fn try_to_unmap_one(s: &mut Sim, cpu: CpuId, t: TaskId, pfn: u32, dirty: bool) -> (Time, bool) {
    let (mm, vpn) = mapping_of(s, pfn);
    let p = &mut s.mem.page[pfn as usize];
    // "Move the dirty bit to the physical page now the pte is gone" (set_page_dirty).
    if dirty {
        p.flags |= PG_DIRTY;
    }
    p.flags &= !(PTE_MAPPED | PTE_YOUNG | PTE_DIRTY);
    let cost = s.m.cost[Cost::RmapWalk];
    sched::charge(s, Some(t), Func::TryToUnmap, cost);
    if s.k.reclaim_flush == ReclaimFlush::None {
        check::record(s, cpu, pfn, PageEvent::UnmapNoFlush);
        return (cost, false);
    }
    // should_defer_flush(): only worth it when another CPU may hold the translation.
    let defer = s.k.reclaim_flush != ReclaimFlush::Immediate
        && s.mem.mms[mm].cpumask.any_but(cpu)
        && (!dirty || s.k.defer_writable);
    if !defer {
        // ptep_clear_flush() -> flush_tlb_page().
        check::record(s, cpu, pfn, PageEvent::Unmap { batch: 0 });
        s.tasks[t].steps.push(flush_tlb_page(mm, vpn));
        return (cost, true);
    }
    set_tlb_ubc_flush_pending(s, cpu, t, mm, pfn, dirty);
    if s.k.reclaim_flush == ReclaimFlush::BatchPfn {
        let ubc = &mut s.tasks[t].reclaim.ubc;
        ubc.pages.push((mm as u32, vpn));
        if ubc.pages.len() >= s.k.batch_pfn_size {
            s.tasks[t].steps.push(Step::TryToUnmapFlush);
            return (cost, true);
        }
    }
    (cost, false)
}

/// set_tlb_ubc_flush_pending(): the page's flush joins the task's batch. From 4.14, with PCID,
/// arch_tlbbatch_add_pending() also bumps the mm's tlb_gen, so a CPU that switches back to the mm
/// flushes the ASID it left behind.
pub fn set_tlb_ubc_flush_pending(
    s: &mut Sim,
    cpu: CpuId,
    t: TaskId,
    mm: usize,
    pfn: u32,
    dirty: bool,
) {
    if s.k.pcid {
        s.mem.mms[mm].tlb_gen += 1;
    }
    let mask = s.mem.mms[mm].cpumask;
    let ubc = &mut s.tasks[t].reclaim.ubc;
    ubc.cpumask.or(&mask);
    if !ubc.flush_required {
        s.check.batches += 1;
        ubc.batch = s.check.batches;
    }
    ubc.flush_required = true;
    ubc.writable |= dirty;
    let batch = ubc.batch;
    check::record(s, cpu, pfn, PageEvent::Unmap { batch });
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
pub fn try_to_unmap_flush(s: &mut Sim, cpu: CpuId, t: TaskId) -> Outcome {
    let ubc = &s.tasks[t].reclaim.ubc;
    if !ubc.flush_required {
        return Outcome::Next;
    }
    let (mask, batch) = (ubc.cpumask, ubc.batch);
    let func = if ubc.pages.is_empty() {
        CallFunc::FlushTlbBatchPages
    } else {
        CallFunc::FlushTlbPfns
    };
    check::record(s, cpu, u32::MAX, PageEvent::BatchFlush { batch });
    if func == CallFunc::FlushTlbBatchPages && s.k.tlbbatch_flush == TlbBatchFlush::FlushTlbFunc {
        s.tasks[t].steps.push(Step::TlbUbcClear);
        return arch_tlbbatch_flush(s, cpu, t, &mask);
    }
    // 4.3 traced the batch flush as a remote shootdown of every page (-1).
    crate::observe::tracelog::tlb_flush(s, cpu, 1, -1);
    if mask.any_but(cpu) {
        s.stats.vm(Vm::TlbRemoteFlush, 1);
    }
    // The targets read the batch while the sender waits; it is emptied after the wait.
    s.tasks[t].steps.push(Step::TlbUbcClear);
    smp::smp_call_function_many_cond(s, cpu, t, &mask, func, Cond::Always, true, true)
}

/// arch_tlbbatch_flush() (6.1 arch/x86/mm/tlb.c): a full flush with no mm. With another CPU in
/// the mask, flush_tlb_multi() -> native_flush_tlb_multi(): no page tables were freed, so
/// on_each_cpu_cond_mask(tlb_is_not_lazy, flush_tlb_func, ...) skips lazy CPUs (4.19; before,
/// every CPU got it), this CPU included; else flush_tlb_func() here alone. flush_tlb_func()
/// counts the TLB row only `if (!local)`.
fn arch_tlbbatch_flush(s: &mut Sim, cpu: CpuId, t: TaskId, mask: &CpuMask) -> Outcome {
    s.x86.info[cpu] = FlushInfo {
        mm: None,
        start: 0,
        end: TLB_FLUSH_ALL,
        stride_shift: 12,
        new_tlb_gen: 0, // TLB_GENERATION_INVALID
        freed_tables: false,
        trim_cpumask: false,
        initiating_cpu: cpu,
    };
    if mask.any_but(cpu) {
        s.stats.vm(Vm::TlbRemoteFlush, 1);
        crate::observe::tracelog::tlb_flush(s, cpu, TLB_REMOTE_SEND_IPI, -1);
        let cond = match s.k.lazy_tlb {
            LazyTlb::LeaveMmOnIpi => Cond::Always,
            LazyTlb::SkipLazyCpus => Cond::ShouldFlushTlb,
        };
        return smp::smp_call_function_many_cond(
            s,
            cpu,
            t,
            mask,
            CallFunc::FlushTlbFunc,
            cond,
            true,
            true,
        );
    }
    if mask.test(cpu) {
        return smp::run_local(s, cpu, t, CallFunc::FlushTlbFunc);
    }
    Outcome::Next
}

pub fn tlb_ubc_clear(s: &mut Sim, t: TaskId) -> Outcome {
    let ubc = &mut s.tasks[t].reclaim.ubc;
    ubc.cpumask = CpuMask::new();
    ubc.flush_required = false;
    ubc.writable = false;
    ubc.pages.clear();
    Outcome::Next
}

/// percpu_flush_tlb_batch_pages() (4.3 to 4.5): count, then flush_tlb_local(), a full flush of whatever
/// mm is loaded, lazy or not. 4.3 counted the sender's own run as received too.
pub fn flush_tlb_batch_pages(s: &mut Sim, cpu: CpuId, task: Option<TaskId>) -> Time {
    s.stats.vm(Vm::TlbRemoteFlushReceived, 1);
    s.stats.irq(Irq::Tlb, cpu);
    let asid = s.x86.cpu[cpu].loaded_asid;
    let mut ps = s.m.cost[Cost::FlushTlbFunc];
    // With PCID (arch_tlbbatch_flush -> flush_tlb_func): nothing to do if this ASID has caught
    // up with its mm's tlb_gen; else a full flush brings it there.
    let behind = match s.x86.cpu[cpu].loaded_mm {
        Some(mm) if s.k.pcid => {
            let gen = s.mem.mms[mm].tlb_gen;
            let ctx = &mut s.x86.cpu[cpu].ctxs[asid as usize];
            std::mem::replace(&mut ctx.tlb_gen, gen) < gen
        }
        _ => true,
    };
    if behind {
        s.tlb[cpu].flush_asid(asid);
        ps += s.m.cost[Cost::Cr3Flush];
    }
    sched::charge(s, task, Func::FlushTlbBatchPages, ps);
    ps
}

/// The PFN-list handler (v5 percpu_flush_tlb_batch_pages): one INVLPG per listed page. It flushes
/// the pages' user addresses (what the series meant; see docs/kernel/reclaim-4.x.md).
pub fn flush_tlb_pfns(s: &mut Sim, cpu: CpuId, task: Option<TaskId>, sender: CpuId) -> Time {
    s.stats.vm(Vm::TlbRemoteFlushReceived, 1);
    s.stats.irq(Irq::Tlb, cpu);
    let owner = s.cpus[sender].task.expect("batch flush sender runs a task");
    let (asid, loaded) = (s.x86.cpu[cpu].loaded_asid, s.x86.cpu[cpu].loaded_mm);
    let n = s.tasks[owner].reclaim.ubc.pages.len();
    for i in 0..n {
        let (mm, vpn) = s.tasks[owner].reclaim.ubc.pages[i];
        if loaded == Some(mm as usize) {
            s.tlb[cpu].flush_one(asid, vpn);
        }
    }
    let ps = s.m.cost[Cost::FlushTlbFunc] + n as Time * s.m.cost[Cost::Invlpg];
    sched::charge(s, task, Func::FlushTlbBatchPages, ps);
    ps
}

/// The invariants at free and at pageout (try_to_unmap_flush): no CPU may still cache a
/// translation to a page being freed, nor one it could write through to a page being written
/// out. Each CPU that does is a violation. Only CPUs with the mm loaded can (without PCID every
/// mm switch flushes; with it, a batch bumps tlb_gen so a switch back flushes).
pub fn check_translations(s: &mut Sim, pfn: u32, site: Site) {
    if !s.check.enabled {
        return;
    }
    let (mm, vpn) = mapping_of(s, pfn);
    let traps = s.m.clean_write_traps;
    // The violating CPU and kind of a cached translation on CPU `c`, if any.
    let stale = |s: &Sim, c: CpuId| {
        let st = &s.x86.cpu[c];
        // A lazy CPU runs no user code of the mm until switch_mm_irqs_off() takes it back, which
        // flushes the ASID if the mm's tlb_gen moved on (with PCID every batch bumps it): why
        // 4.19's flush may skip it (tlb_is_not_lazy). A use before that is caught at the access.
        if st.loaded_mm != Some(mm) || (st.is_lazy && s.k.pcid) {
            return None;
        }
        let e = s.tlb[c]
            .probe(st.loaded_asid, vpn)
            .filter(|e| e.pfn == pfn)?;
        match site {
            Site::Pageout if e.dirty || (e.writable && !traps) => Some(Violation::LostWrite),
            Site::Pageout => None,
            _ => Some(Violation::UseAfterFree),
        }
    };
    // The common case, no stale translation, reads the mask in place.
    if !s.mem.mms[mm].cpumask.iter().any(|c| stale(s, c).is_some()) {
        return;
    }
    let mask = s.mem.mms[mm].cpumask;
    for c in mask.iter() {
        if let Some(kind) = stale(s, c) {
            check::violation(s, kind, site, c, mm, vpn, pfn);
        }
    }
}
