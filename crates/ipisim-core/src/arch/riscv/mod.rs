//! RISC-V (arch/riscv/mm/tlbflush.c, Linux 6.7 and 6.8): a hart flushes its own TLB with
//! `sfence.vma`; there is no broadcast invalidation. __flush_tlb_range() flushes locally when
//! mm_cpumask holds no other hart, else asks the firmware: sbi_remote_sfence_vma_asid() ->
//! __sbi_rfence_v02() -> __sbi_rfence_v02_call(), one `ecall` per 64 harts. The firmware
//! (OpenSBI sbi_tlb_request()) flushes the calling hart itself, sends every other hart of the
//! mask an M-mode IPI, and returns only when each of them has run its `sfence.vma` and
//! acknowledged. The kernel's own IPIs (on_each_cpu_mask(__ipi_flush_tlb_range_asid)) are used
//! only when riscv_use_ipi_for_rfence() is true: when the IPI driver can send S-mode IPIs
//! without the firmware (the AIA IMSIC), not with the SBI IPI driver that HiFive Unmatched,
//! TH1520 and QEMU virt without AIA use (riscv_ipi_set_virq_range(virq, nr, false) in
//! arch/riscv/kernel/sbi-ipi.c). So the model has the SBI path only.
//!
//! The firmware's IPIs are real interrupts on the targets, counted as IPIs sent and received, but
//! the kernel does not see them (no /proc/interrupts row, no tracepoint). The model charges the
//! whole call to the caller, in `__sbi_rfence_v02_call` (what perf shows: firmware time is
//! invisible to it): ecall, one IPI a target, then the wait; the targets' TLBs drop the entries
//! when the call returns. The time the targets spend in M-mode is not taken from their tasks.
//!
//! TLB state reuses x86's per-CPU context tracking (which mm and ASID a hart has loaded, and the
//! mm's tlb_gen, bumped by every flush so a hart that left the mm flushes when it comes back) and
//! its mm_cpumask. set_mm() clears the old mm's bit only when the ASID allocator is off: with ASIDs
//! a hart that left an mm still holds entries tagged with its ASID, so it stays in the mask for
//! good (82dd33fde026 "riscv: asid: Fixup stale TLB entry cause application crash", 6.3).
//!
//! Harts with fewer than twice as many ASIDs as harts (`machine.asid_bits`; the FU740 has none)
//! run without the ASID allocator: every mm switch is set_mm_noasid() -> local_flush_tlb_all()
//! and every flush passes FLUSH_TLB_NO_ASID. On those, SiFive's CIP-1200 erratum
//! (`machine.sifive_cip_1200`) makes each page of a local flush a full sfence.vma
//! (local_flush_tlb_page() is ALT_FLUSH_TLB_PAGE, arch/riscv/include/asm/errata_list.h).
//!
//! The batched unmap flush (54d7431af73e, 6.8): arch_tlbbatch_should_defer() is true,
//! arch_tlbbatch_add_pending() is cpumask_or() of the mm's cpumask into the batch (no flush, not
//! even locally), arch_tlbbatch_flush() is __flush_tlb_range(&batch->cpumask, FLUSH_TLB_NO_ASID,
//! 0, FLUSH_TLB_MAX_SIZE, PAGE_SIZE): one remote fence of everything, every ASID, on the batch's
//! harts (or one local sfence.vma when the batch holds only this hart).

use super::{ArchState, FlushRange, Parts, TLB_FLUSH_ALL};
use crate::engine::{CpuId, CpuMask, TaskId, Time};
use crate::machine::Cost;
use crate::observe::Func;
use crate::step::Outcome;

/// tlb_flush_all_threshold (arch/riscv/mm/tlbflush.c, 6.7 and 6.8): a local range of more than
/// this many strides is one sfence.vma of the whole ASID instead of one a stride.
pub const TLB_FLUSH_ALL_THRESHOLD: u64 = 64;

/// The hart ids one SBI RFENCE call can name: its hart_mask is an unsigned long from hart_mask_base
/// (__sbi_rfence_v02(), BITS_PER_LONG on rv64).
const SBI_HART_WINDOW: CpuId = 64;

/// What one hart's flush drops: one page of an mm, a whole mm (its ASID), or everything
/// (FLUSH_TLB_NO_ASID with FLUSH_TLB_MAX_SIZE: sfence.vma x0, x0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Pages { mm: usize, start: u64, end: u64 },
    Asid(usize),
    All,
}

/// local_flush_tlb_range_asid() on `cpu`: its sfence.vma instructions; their time, and whether
/// they emptied the hart's whole TLB. `errata`: the kernel's own page flushes on a CIP-1200 hart,
/// each a full sfence.vma (ALT_FLUSH_TLB_PAGE). Under QEMU's TCG (`machine.sfence_vma_flushes_all`)
/// every sfence.vma is a full one.
fn local_flush(p: &mut Parts, cpu: CpuId, what: What, errata: bool) -> (Time, bool) {
    let full = p.m.sfence_vma_flushes_all;
    let a = &mut *p.arch;
    match what {
        What::Pages { mm, start, end } => {
            let n = end - start;
            if n > TLB_FLUSH_ALL_THRESHOLD {
                return local_flush(p, cpu, What::Asid(mm), errata);
            }
            p.obs.stats.sfences += n;
            if errata || full {
                a.tlb[cpu].flush_all();
                p.obs.stats.sfences_all += n;
                return (n * p.m.cost[Cost::SfenceVmaAll], true);
            }
            if let Some(slot) = super::arm64::asid_slot(a, cpu, mm) {
                for vpn in start..end {
                    a.tlb[cpu].flush_one(slot, vpn);
                }
            }
            (n * p.m.cost[Cost::SfenceVma], false)
        }
        // Without the ASID allocator the ASID is FLUSH_TLB_NO_ASID: local_flush_tlb_all().
        What::Asid(_) if !a.cfg.pcid || full => local_flush(p, cpu, What::All, errata),
        What::Asid(mm) => {
            if let Some(slot) = super::arm64::asid_slot(a, cpu, mm) {
                a.tlb[cpu].flush_asid(slot);
            }
            p.obs.stats.sfences += 1;
            p.obs.stats.sfences_all += 1;
            (p.m.cost[Cost::SfenceVmaAll], false)
        }
        What::All => {
            a.tlb[cpu].flush_all();
            p.obs.stats.sfences += 1;
            p.obs.stats.sfences_all += 1;
            (p.m.cost[Cost::SfenceVmaAll], true)
        }
    }
}

/// The flush the firmware runs on each hart for a request of `what`: above the platform's
/// tlb_range_flush_limit (`machine.sbi_tlb_range_flush_limit` pages; OpenSBI's default is 4 KiB,
/// the FU740's 0 for its CIP-1200 erratum) a request is the whole ASID.
fn firmware_what(what: What, limit: u64) -> What {
    match what {
        What::Pages { mm, start, end } if end - start > limit => What::Asid(mm),
        w => w,
    }
}

/// The caller's refill after its own TLB was emptied (`tlb_refill_all`), once a flush however many
/// fences it took: time spent after the fence returns, so in `__flush_tlb_range`, not the SBI call.
fn refill(p: &mut Parts, t: TaskId) -> Time {
    let ps = p.m.cost[Cost::TlbRefillAll];
    if ps > 0 {
        p.obs.stats.charge(Some(t), Func::Arm64FlushTlbRange, ps);
    }
    ps
}

/// One SBI call's M-mode IPIs to its `targets` other harts and the wait for their fences.
fn sbi_fence_others(p: &mut Parts, targets: u64) -> Time {
    p.obs.stats.ipis_sent += targets;
    p.obs.stats.ipis_received += targets;
    targets * p.m.cost[Cost::SbiIpiSend] + p.m.cost[Cost::SbiRfenceWait]
}

/// __flush_tlb_range(cmask, asid, start, size, stride) with 4 KiB strides: nothing with an empty
/// mask; a local flush when no other hart is in it; else sbi_remote_sfence_vma_asid(). Its time,
/// charged to `t` (`__flush_tlb_range` locally, `__sbi_rfence_v02_call` for the SBI call), with
/// the caller's refill when the flush emptied its TLB.
fn flush_range(p: &mut Parts, cpu: CpuId, t: TaskId, mask: &CpuMask, what: What) -> Time {
    if mask.is_empty() {
        return 0;
    }
    if !mask.any_but(cpu) {
        // 6.7/6.8 apply the erratum only to flushes without an ASID (local_flush_tlb_page()).
        let errata = p.m.sifive_cip_1200 && !p.arch.cfg.pcid;
        let (ps, emptied) = local_flush(p, cpu, what, errata);
        p.obs.stats.charge(Some(t), Func::Arm64FlushTlbRange, ps);
        return ps + if emptied { refill(p, t) } else { 0 };
    }
    // __sbi_rfence_v02(): one ecall per window of SBI_HART_WINDOW hart ids, opened by the lowest
    // hart not yet covered (hart id = CPU number here); the firmware fences a window's harts and
    // waits for them before the kernel makes the next call.
    let fw = firmware_what(what, p.m.sbi_tlb_range_flush_limit);
    let (mut ps, mut caller_emptied) = (0, false);
    // The open window: the first hart id past it, and its harts other than the caller.
    let mut open: Option<(CpuId, u64)> = None;
    for c in mask.iter() {
        if open.is_none_or(|(end, _)| c >= end) {
            if let Some((_, targets)) = open {
                ps += sbi_fence_others(p, targets);
            }
            p.obs.stats.sbi_rfences += 1;
            ps += p.m.cost[Cost::SbiEcall];
            open = Some((c + SBI_HART_WINDOW, 0));
        }
        // OpenSBI's own fences (the FU740's flush limit of 0 keeps them free of addresses).
        p.obs.stats.sbi_fenced += 1;
        let (fence, emptied) = local_flush(p, c, fw, false);
        if c == cpu {
            // The firmware flushes the calling hart itself: no IPI, the caller's time.
            ps += fence;
            caller_emptied = emptied;
        } else if let Some((_, targets)) = open.as_mut() {
            *targets += 1;
        }
    }
    if let Some((_, targets)) = open {
        ps += sbi_fence_others(p, targets);
    }
    p.obs.stats.charge(Some(t), Func::SbiRfenceV02Call, ps);
    // The remote harts' refills fall on whatever they run next, like their M-mode time: not taken.
    if caller_emptied {
        ps += refill(p, t);
    }
    ps
}

/// flush_tlb_mm_range() / flush_tlb_page() / flush_tlb_mm() for `r`: __flush_tlb_range() over
/// mm_cpumask(mm) with the mm's ASID. Bumps the mm's tlb_gen (the model's stand-in for a hart
/// that left the mm flushing its ASID when it comes back).
pub fn flush_tlb_range(mut p: Parts, cpu: CpuId, t: TaskId, r: FlushRange) -> Outcome {
    let mm = r.mm as usize;
    p.arch.mm[mm].tlb_gen += 1;
    let stride = 1u64 << (r.stride_shift - 12);
    let what = if r.end == TLB_FLUSH_ALL {
        What::Asid(mm)
    } else if stride > 1 {
        // 2 MiB strides (huge-PMD zaps): the model flushes the ASID, one sfence.vma, instead of
        // one a stride up to the threshold (not a path this architecture's scenarios measure).
        What::Asid(mm)
    } else {
        What::Pages {
            mm,
            start: r.start,
            end: r.end,
        }
    };
    let mask = p.arch.mm[mm].cpumask.copied();
    let ps = flush_range(&mut p, cpu, t, &mask, what);
    match ps {
        0 => Outcome::Next,
        ps => Outcome::Busy {
            ps,
            irqs_off: false,
        },
    }
}

/// arch_tlbbatch_should_defer() (6.8): always true; before 6.8 riscv had no batched flush.
pub fn arch_tlbbatch_should_defer(a: &ArchState) -> bool {
    a.cfg.riscv_batched_unmap
}

/// arch_tlbbatch_flush() (6.8): __flush_tlb_range() of everything, no ASID, over the batch's
/// cpumask. With `riscv_tlbbatch_flush = false` (the unsafe what-if) nothing. Its time.
pub fn arch_tlbbatch_flush(mut p: Parts, cpu: CpuId, t: TaskId, mask: &CpuMask) -> Time {
    if !p.arch.cfg.riscv_tlbbatch_flush {
        return 0;
    }
    flush_range(&mut p, cpu, t, mask, What::All)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MM;

    /// A linux-6.7-riscv shootdown run on `machine` with `sets`, not started: hart 0 has switched
    /// to MM and holds page 7 (frame 42) in its TLB under the ASID returned.
    fn hart0_on_mm(machine: &str, sets: &[(&str, &str)]) -> (crate::sim::Sim, u8) {
        let req = crate::config::RunRequest::new("shootdown", machine, "linux-6.7-riscv", sets);
        let mut s = crate::sim::Sim::new(&crate::resolve(&req).unwrap()).unwrap();
        let j = crate::arch::jiffies(&s);
        s.arch.init_new_context(j);
        crate::arch::switch_mm_irqs_off(&mut s, 0, Some(MM));
        let asid = s.arch.loaded_asid(0);
        s.arch.tlb[0].fill(asid, 7, 42, true, true);
        (s, asid)
    }

    /// A hart that left MM for another process, then came back. With the ASID allocator (16 bits)
    /// it still held MM's entries under MM's ASID, so set_mm() left it in MM's cpumask
    /// (82dd33fde026) and MM's translation survived; without it (0 bits, the FU740) the switch was
    /// set_mm_noasid() -> local_flush_tlb_all(), which cleared its bit and emptied its TLB.
    #[test]
    fn a_hart_that_left_the_mm_with_and_without_asids() {
        for (bits, asids) in [("16", true), ("0", false)] {
            let (mut s, _) = hart0_on_mm("hifive-unmatched", &[("machine.asid_bits", bits)]);
            let mm2 = s.mem.new_mm();
            crate::arch::switch_mm_irqs_off(&mut s, 0, Some(mm2));
            assert_eq!(s.arch.mm[MM].cpumask.test(0), asids, "{bits} ASID bits");
            assert!(s.arch.mm[mm2].cpumask.test(0), "{bits} ASID bits");
            crate::arch::switch_mm_irqs_off(&mut s, 0, Some(MM));
            let asid = s.arch.loaded_asid(0);
            let kept = s.arch.tlb[0].probe(asid, 7).is_some();
            assert_eq!(kept, asids, "{bits} ASID bits");
        }
    }

    /// Under QEMU's TCG every sfence.vma empties the hart's TLB: a one-page remote fence from hart
    /// 0 drops hart 0's other translations too, and hart 0 pays `tlb_refill_all` once, in
    /// __flush_tlb_range, not in the SBI call. Without `machine.sfence_vma_flushes_all` only the
    /// page goes and nothing is refilled.
    #[test]
    fn under_tcg_every_fence_empties_the_tlb_and_the_caller_refills() {
        for (flag, emptied) in [("true", true), ("false", false)] {
            let sets = [
                ("machine.sfence_vma_flushes_all", flag),
                ("machine.cost.tlb_refill_all", "1000"),
            ];
            let (mut s, asid) = hart0_on_mm("qemu-virt-riscv", &sets);
            s.arch.tlb[0].fill(asid, 8, 43, true, true);
            let mask = CpuMask::first_n(2);
            let one = What::Pages {
                mm: MM,
                start: 7,
                end: 8,
            };
            let mut p = Parts {
                m: &s.m,
                arch: &mut s.arch,
                obs: &mut s.obs,
            };
            let ps = flush_range(&mut p, 0, 0, &mask, one);
            assert!(s.arch.tlb[0].probe(asid, 7).is_none(), "{flag}");
            assert_eq!(s.arch.tlb[0].probe(asid, 8).is_none(), emptied, "{flag}");
            let refill = s.obs.stats.profile[Func::Arm64FlushTlbRange as usize];
            let expected = if emptied {
                s.m.cost[Cost::TlbRefillAll]
            } else {
                0
            };
            assert_eq!(refill, expected, "{flag}");
            let sbi = s.obs.stats.profile[Func::SbiRfenceV02Call as usize];
            assert_eq!(ps, sbi + refill, "{flag}");
        }
    }

    /// __sbi_rfence_v02() names at most 64 hart ids a call, from the lowest hart not yet covered:
    /// a mask over harts 0 and 63 is one call, 0 and 64 two, 5 and 68 one, 0..72 two; each call
    /// pays the ecall and the firmware's wait, and the firmware IPIs every hart but the caller.
    #[test]
    fn one_sbi_call_per_64_hart_ids() {
        let sets = [
            ("machine.cpus_per_node", "72"),
            ("machine.cost.tlb_refill_all", "0"),
        ];
        let (mut s, _) = hart0_on_mm("qemu-virt-riscv", &sets);
        let (ecall, wait) = (s.m.cost[Cost::SbiEcall], s.m.cost[Cost::SbiRfenceWait]);
        let mask = |harts: &[usize]| {
            let mut m = CpuMask::default();
            harts.iter().for_each(|&c| m.set(c));
            m
        };
        let all: Vec<usize> = (0..72).collect();
        for (harts, calls) in [(&[0, 63][..], 1), (&[0, 64], 2), (&[5, 68], 1), (&all, 2)] {
            let mut p = Parts {
                m: &s.m,
                arch: &mut s.arch,
                obs: &mut s.obs,
            };
            let before = (p.obs.stats.sbi_rfences, p.obs.stats.ipis_sent);
            let ps = flush_range(&mut p, harts[0], 0, &mask(harts), What::All);
            let others = harts.len() as u64 - 1;
            assert_eq!(s.obs.stats.sbi_rfences - before.0, calls, "{harts:?}");
            assert_eq!(s.obs.stats.ipis_sent - before.1, others, "{harts:?}");
            // The caller's own fence is its time; the others' are theirs.
            let sends = others * s.m.cost[Cost::SbiIpiSend];
            let own = s.m.cost[Cost::SfenceVmaAll];
            assert_eq!(ps, calls * (ecall + wait) + sends + own, "{harts:?}");
        }
    }

    #[test]
    fn firmware_range_limit() {
        let one = What::Pages {
            mm: 0,
            start: 7,
            end: 8,
        };
        // OpenSBI's default 4 KiB: one page is flushed by address, two are the ASID.
        assert_eq!(firmware_what(one, 1), one);
        let two = What::Pages {
            mm: 0,
            start: 7,
            end: 9,
        };
        assert_eq!(firmware_what(two, 1), What::Asid(0));
        // The FU740's 0 (CIP-1200): every request is the ASID.
        assert_eq!(firmware_what(one, 0), What::Asid(0));
        assert_eq!(firmware_what(What::All, 0), What::All);
    }
}
