//! arm64 (arch/arm64/include/asm/tlbflush.h, Linux 6.4 and 6.5): no IPI flushes a TLB. A
//! `TLBI ... IS` is broadcast by the hardware to every CPU of the inner-shareable domain; the
//! issuing CPU's next `DSB ISH` waits until every CPU has completed the TLBIs it has outstanding.
//! Until then another CPU may still use the old translation, so the simulated TLBs drop the
//! entries when the DSB completes, not when the TLBI issues: a page freed between the two is
//! still reachable, and the checker sees it.
//!
//! TLBs are tagged by ASID and arm64 flushes nothing when a CPU switches back to an mm. The model
//! keeps x86's per-CPU ASID slots (arch/tlb.rs): an mm keeps its slot on a CPU until six other
//! mms have run there, and a TLBI for the mm drops its entries in that slot on every CPU, loaded
//! or not. The mm's tlb_gen never moves on arm64, so a switch back flushes nothing.
//!
//! The batched unmap flush (43b3dfdd0455, 6.5): arch_tlbbatch_add_pending() is
//! __flush_tlb_page_nosync() (dsb(ishst); tlbi vale1is) and arch_tlbbatch_flush() is one
//! dsb(ish). Before it (6.4) arm64 did not select ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH, so
//! try_to_unmap_one() called ptep_clear_flush() -> flush_tlb_page(): TLBI, then dsb(ish), a page.

use super::{ArchConfig, ArchState, FlushRange, Parts, TLB_FLUSH_ALL};
use crate::engine::{CpuId, CpuMask, TaskId, Time};
use crate::machine::{Cost, Machine};
use crate::observe::Func;
use crate::step::Outcome;

/// MAX_TLBI_OPS = PTRS_PER_PTE with 4 KiB pages: from this many strides __flush_tlb_range()
/// flushes the whole ASID instead, when the CPU has no range TLBIs (6.4, 6.5).
pub const MAX_TLBI_OPS: u64 = 512;

/// MAX_TLBI_RANGE_PAGES = __TLBI_RANGE_PAGES(31, 3) = (31 + 1) << (5 * 3 + 1): from this many
/// pages __flush_tlb_range() flushes the whole ASID even with FEAT_TLBIRANGE (6.4, 6.5).
pub const MAX_TLBI_RANGE_PAGES: u64 = 32 << 16;

/// One TLBI ... IS issued by a CPU and not completed yet: pages [start, end) of an mm, or its
/// whole ASID (`end == TLB_FLUSH_ALL`, TLBI ASIDE1IS).
#[derive(Debug, Clone, Copy)]
struct Tlbi {
    mm: u32,
    start: u64,
    end: u64,
}

/// The arm64 part of the MMU state.
pub struct Arm64 {
    /// Per CPU: the TLBIs it issued that no DSB of its own has completed yet, in issue order.
    outstanding: Vec<Vec<Tlbi>>,
    /// Every CPU: any of them may hold an mm's translations.
    pub all: CpuMask,
}

impl Arm64 {
    pub fn new(n: usize) -> Arm64 {
        Arm64 {
            // A batch is at most a shrink_folio_list() pass or a migration batch; the vectors
            // keep their capacity, so the hot path allocates only while they first grow.
            outstanding: (0..n).map(|_| Vec::with_capacity(64)).collect(),
            all: CpuMask::first_n(n),
        }
    }

    /// TLBIs `cpu` has issued that no DSB has completed.
    pub fn outstanding(&self, cpu: CpuId) -> usize {
        self.outstanding[cpu].len()
    }
}

/// The ASID slot `cpu` holds `mm`'s translations under, if it has one.
pub fn asid_slot(a: &ArchState, cpu: CpuId, mm: usize) -> Option<u8> {
    let id = a.mm[mm].ctx_id;
    a.x86.cpu[cpu]
        .ctxs
        .iter()
        .position(|c| c.ctx_id == id)
        .map(|i| i as u8)
}

/// Issue one TLBI ... IS for pages [start, end) of `mm` (or its whole ASID): its time.
fn tlbi(p: &mut Parts, cpu: CpuId, mm: usize, start: u64, end: u64) -> Time {
    p.arch.arm64.outstanding[cpu].push(Tlbi {
        mm: mm as u32,
        start,
        end,
    });
    p.obs.stats.tlbis += 1;
    p.m.cost[Cost::TlbiIs]
}

/// The TLBIs `cpu` has outstanding complete on every CPU: their entries leave every TLB.
pub fn complete(p: &mut Parts, cpu: CpuId) {
    let a = &mut *p.arch;
    let mut list = std::mem::take(&mut a.arm64.outstanding[cpu]);
    for t in &list {
        for c in 0..a.tlb.len() {
            let Some(slot) = asid_slot(a, c, t.mm as usize) else {
                continue;
            };
            if t.end == TLB_FLUSH_ALL {
                a.tlb[c].flush_asid(slot);
            } else {
                for vpn in t.start..t.end {
                    a.tlb[c].flush_one(slot, vpn);
                }
            }
        }
    }
    list.clear();
    a.arm64.outstanding[cpu] = list;
}

/// dsb(ish) on `cpu`: wait until every CPU has completed the TLBIs `cpu` issued. Its time: the
/// barrier, and with TLBIs outstanding a wait that grows with the CPUs of the domain and with
/// the TLBIs.
pub fn dsb_ish(p: &mut Parts, cpu: CpuId) -> Time {
    p.obs.stats.dsbs += 1;
    let n = p.arch.arm64.outstanding(cpu) as Time;
    let mut ps = p.m.cost[Cost::DsbIsh];
    if n > 0 {
        let cpus = p.m.ncpus() as Time;
        ps += cpus * p.m.cost[Cost::DsbIshCpu] + n * p.m.cost[Cost::DsbIshTlbi];
        complete(p, cpu);
    }
    ps
}

/// The TLBIs __flush_tlb_range() issues for pages [start, end) with `stride` pages a stride,
/// each passed to `op` as the pages it covers; false when it calls flush_tlb_mm() instead
/// (6.4 and 6.5). No allocation: it runs on every flush.
pub fn for_each_tlbi_op(
    start: u64,
    end: u64,
    stride: u64,
    range: bool,
    mut op: impl FnMut(u64, u64),
) -> bool {
    let (start, end) = (start / stride * stride, end.div_ceil(stride) * stride);
    let mut pages = end - start;
    if (!range && pages >= MAX_TLBI_OPS * stride) || pages >= MAX_TLBI_RANGE_PAGES {
        return false;
    }
    let (mut addr, mut scale) = (start, 0u32);
    while pages > 0 {
        if !range || pages % 2 == 1 {
            // __tlbi_level(vale1is/vae1is): one stride.
            op(addr, addr + 1);
            addr += stride;
            pages -= stride;
            continue;
        }
        // __TLBI_RANGE_NUM(pages, scale): ((pages >> (5 * scale + 1)) & 31) - 1.
        let num = ((pages >> (5 * scale + 1)) & 31) as i64 - 1;
        if num >= 0 {
            let n = ((num + 1) as u64) << (5 * scale + 1);
            op(addr, addr + n);
            addr += n;
            pages -= n;
        }
        scale += 1;
    }
    true
}

/// for_each_tlbi_op() collected (None: flush_tlb_mm()), for tests and tools.
pub fn tlbi_ops(start: u64, end: u64, stride: u64, range: bool) -> Option<Vec<(u64, u64)>> {
    let mut ops = Vec::new();
    for_each_tlbi_op(start, end, stride, range, |a, b| ops.push((a, b))).then_some(ops)
}

/// How many TLBIs __flush_tlb_range() issues for `r` (1: the ASID flush of flush_tlb_mm()).
pub fn tlbis_for(r: &FlushRange, range: bool) -> usize {
    let stride = 1u64 << (r.stride_shift - 12);
    let mut n = 0;
    let ranged =
        r.end != TLB_FLUSH_ALL && for_each_tlbi_op(r.start, r.end, stride, range, |_, _| n += 1);
    if ranged {
        n
    } else {
        1
    }
}

/// flush_tlb_page() (a single 4 KiB page, as ptep_clear_flush() asks) or __flush_tlb_range():
/// the TLBIs, then dsb(ish). Above its limit __flush_tlb_range() is flush_tlb_mm(): one TLBI
/// ASIDE1IS and dsb(ish).
pub fn flush_tlb_range(mut p: Parts, cpu: CpuId, t: TaskId, r: FlushRange) -> Outcome {
    let mm = r.mm as usize;
    let stride = 1u64 << (r.stride_shift - 12);
    // flush_tlb_page() is inlined into ptep_clear_flush(), where perf shows it.
    let func = if r.end == r.start + 1 && stride == 1 && !r.freed_tables {
        Func::PtepClearFlush
    } else {
        Func::Arm64FlushTlbRange
    };
    let mut ps = 0;
    let range = p.m.tlbi_range;
    let ranged = r.end != TLB_FLUSH_ALL
        && for_each_tlbi_op(r.start, r.end, stride, range, |start, end| {
            ps += tlbi(&mut p, cpu, mm, start, end);
        });
    if !ranged {
        // flush_tlb_mm(): tlbi aside1is.
        ps += tlbi(&mut p, cpu, mm, 0, TLB_FLUSH_ALL);
    }
    ps += dsb_ish(&mut p, cpu);
    p.obs.stats.charge(Some(t), func, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// arch_tlbbatch_should_defer() as merged in 6.5: yes, unless the CPU needs
/// ARM64_WORKAROUND_REPEAT_TLBI (not modelled: no profile has such a CPU). The postings before v10
/// also said no below CONFIG_ARM64_NR_CPUS_FOR_BATCHED_TLB online CPUs (`arm64_batch_min_cpus`).
/// Before 6.5 arm64 had no batched unmap flush at all (`arm64_batched_unmap = false`).
pub fn arch_tlbbatch_should_defer(cfg: &ArchConfig, m: &Machine) -> bool {
    cfg.arm64_batched_unmap && (m.ncpus() as u64) >= cfg.arm64_batch_min_cpus
}

/// arch_tlbbatch_add_pending() = __flush_tlb_page_nosync(): dsb(ishst); tlbi vale1is. No DSB
/// ISH: the TLBI stays outstanding. Its time, which the caller charges (it is inlined there).
pub fn arch_tlbbatch_add_pending(mut p: Parts, cpu: CpuId, mm: usize, vpn: u64) -> Time {
    tlbi(&mut p, cpu, mm, vpn, vpn + 1)
}

/// arch_tlbbatch_flush() = dsb(ish): every TLBI of the batch completes. With
/// `arm64_tlbbatch_dsb = false` (the unsafe what-if) nothing happens: the TLBIs stay outstanding
/// until this CPU's next DSB. Its time, charged to try_to_unmap_flush (it is inlined there).
pub fn arch_tlbbatch_flush(mut p: Parts, cpu: CpuId, t: TaskId) -> Time {
    if !p.arch.cfg.arm64_tlbbatch_dsb {
        return 0;
    }
    let ps = dsb_ish(&mut p, cpu);
    p.obs.stats.charge(Some(t), Func::TryToUnmapFlush, ps);
    ps
}

/// arch_flush_tlb_batched_pending() = dsb(ish): the deferred TLBIs of the mm complete (they were
/// issued by arch_tlbbatch_add_pending()). Its time, charged to flush_tlb_batched_pending.
pub fn arch_flush_tlb_batched_pending(mut p: Parts, cpu: CpuId, t: TaskId) -> Time {
    let ps = dsb_ish(&mut p, cpu);
    p.obs
        .stats
        .charge(Some(t), Func::FlushTlbBatchedPending, ps);
    ps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_limits_as_in_6_5() {
        // Without FEAT_TLBIRANGE: one TLBI a page up to 511 pages, then the whole ASID.
        assert_eq!(tlbi_ops(0, 511, 1, false).unwrap().len(), 511);
        assert!(tlbi_ops(0, 512, 1, false).is_none());
        // 2 MiB strides: 511 PMDs, then the ASID.
        assert_eq!(tlbi_ops(0, 511 * 512, 512, false).unwrap().len(), 511);
        assert!(tlbi_ops(0, 512 * 512, 512, false).is_none());
        // With it: 512 pages are one range op at scale 1 (num = (512 >> 6) - 1 = 7).
        let ops = tlbi_ops(0, 512, 1, true).unwrap();
        assert_eq!(ops, vec![(0, 512)]);
        // An odd count: one single-page TLBI first, then range ops.
        let ops = tlbi_ops(0, 3, 1, true).unwrap();
        assert_eq!(ops, vec![(0, 1), (1, 3)]);
        assert!(tlbi_ops(0, MAX_TLBI_RANGE_PAGES, 1, true).is_none());
        assert!(tlbi_ops(0, MAX_TLBI_RANGE_PAGES - 1, 1, true).is_some());
    }
}
