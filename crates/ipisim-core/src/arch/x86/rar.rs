//! Intel Remote Action Request (RAR), a what-if: Rik van Riel's RFC "x86/mm: Intel RAR TLB
//! invalidation" (v1-v4, May-June 2025; not merged, no published performance figure), on top of
//! 6.15's global ASIDs. arch/x86/mm/rar.c smp_call_rar_many(); arch/x86/mm/tlb.c
//! rar_tlb_flush(), broadcast_tlb_flush(), arch_tlbbatch_flush()'s rar_full_flush().
//!
//! A RAR is a signal the APIC delivers like an IPI, but the target's microcode handles it: it
//! reads the payload, invalidates, and writes "done" in its action vector, with no interrupt
//! handler and even with IRQs off (RAR_CTRL_IGNORE_IF). The sender polls every target's action
//! vector. So a flush costs the sender the round trip and the lines, and the targets no handler.
//! Not modelled: the microcode's time on the target (taken from nothing, as riscv's M-mode
//! time), the PTI kernel's second RAR for the user PCID, and RAR's kernel-range flushes.

use super::broadcast::{self, ALL_NONGLOBALS};
use super::TLB_FLUSH_ALL;
use crate::arch::tlb::GLOBAL_SLOT;
use crate::arch::Host;
use crate::engine::{CpuId, CpuMask, SpinLock, TaskId, Time};
use crate::machine::Cost;
use crate::observe::Func;
use crate::smp::CallFunc;
use crate::step::{Outcome, Step};

/// RAR_MAX_PAYLOADS: the payload table's entries; CPU c uses entry c % 64 (cpu_rar_payload_number).
const RAR_MAX_PAYLOADS: usize = 64;

/// RAR_INVLPG_MAX_PAGES: a payload of fewer pages is RAR_INVPCID_ADDR, else the whole PCID.
const RAR_INVLPG_MAX_PAGES: u64 = 63;

/// rar_locks[], rar_payload[] and the per-CPU rar_action vectors, as cache lines.
pub struct RarState {
    /// rar_locks[i].lock: taken for the whole call by the CPUs whose number is i mod 64.
    slot_lock: Vec<SpinLock>,
    /// rar_payload[i]: written by its sender, read by each target's microcode.
    payload: Vec<SpinLock>,
    /// Each CPU's rar_action vector: armed by senders, answered by its microcode.
    action: Vec<SpinLock>,
    /// Per CPU: when its microcode answered the RAR being sent (the sender's scratch).
    answered: Vec<Time>,
}

impl RarState {
    pub fn new(ncpus: usize) -> RarState {
        let slots = RAR_MAX_PAYLOADS.min(ncpus.max(1));
        RarState {
            slot_lock: (0..slots).map(SpinLock::on).collect(),
            payload: (0..slots).map(|_| SpinLock::in_memory()).collect(),
            action: (0..ncpus).map(SpinLock::on).collect(),
            answered: vec![0; ncpus],
        }
    }
}

/// What a RAR payload asks each target to invalidate (set_payload()).
#[derive(Debug, Clone, Copy)]
struct Payload {
    /// The global ASID (its PCID), or ALL_NONGLOBALS for pcid 0 (RAR_INVPCID_ALL).
    asid: u16,
    /// Page numbers [start, end); TLB_FLUSH_ALL: the whole PCID (RAR_INVPCID_PCID).
    start: u64,
    end: u64,
}

/// smp_call_rar_many(mask, pcid, start, end) from `cpu` at `now`: take this CPU's payload slot,
/// fill it, arm each target's action entry, signal them all, and poll each until its microcode
/// answers. Targets are the mask's CPUs but this one (rar_tlb_flush() flushes it with
/// flush_tlb_func(); v4's dest_mask keeps the sender, whose own RAR is not modelled). Returns the
/// sender's time. The lines are timed as if the slot were free; a slot is shared, and its lock
/// contended, only above 64 CPUs.
fn smp_call_rar_many(s: &mut impl Host, cpu: CpuId, mask: &CpuMask, pl: Payload) -> Time {
    let now = s.now();
    let mut dest = *mask;
    dest.clear(cpu);
    if dest.weight() == 0 {
        return 0;
    }
    // A halted idle target wakes first; a polling one sees the signal at once.
    let mut halted = CpuMask::new();
    for c in dest.iter() {
        if s.current(c).is_none() && !s.idle_polling(c) {
            halted.set(c);
        }
    }
    let p = s.arch_parts();
    let (m, a) = (p.m, &mut *p.arch);
    let slot = cpu % a.x86.rar.payload.len();
    let r = &mut a.x86.rar;
    // set_payload() counts (end - start + PAGE_SIZE) / PAGE_SIZE pages, one more than the range
    // (as the RFC's code computes it); from 63 the payload is the whole PCID.
    let pages = match pl.end {
        TLB_FLUSH_ALL => RAR_INVLPG_MAX_PAGES,
        end => end - pl.start + 1,
    };
    let whole = pl.asid == ALL_NONGLOBALS || pages >= RAR_INVLPG_MAX_PAGES;
    let invalidate = match whole {
        true => m.cost[Cost::Cr3Flush],
        false => pages * m.cost[Cost::Invlpg],
    };
    // set_payload(): the entry's line comes back from the targets that read it last.
    let mut t = now + m.line_write(&mut r.payload[slot], cpu, now);
    // set_action_entry(): a store to each target's action vector, last written by its microcode
    // or another sender. The read-for-ownerships overlap; the stores are done when the latest
    // line is here (as smp's llist_add() heads).
    let mut ready = t;
    for c in dest.iter() {
        ready = ready.max(t + m.line_write(&mut r.action[c], cpu, t));
    }
    t = ready;
    // native_send_rar_ipi(): one ICR write a target, as send_IPI_mask.
    let mut done_at = t;
    for c in dest.iter() {
        t += m.cost[Cost::IpiSend];
        let mut at = t + m.ipi_wire(cpu, c);
        if halted.test(c) {
            at += m.cost[Cost::IdleWakeup];
        }
        // The microcode: read the payload, invalidate, answer in the action vector.
        at += m.line_read(&mut r.payload[slot], c, at) + invalidate;
        done_at = done_at.max(at);
        r.answered[c] = at + m.line_write(&mut r.action[c], c, at);
    }
    // wait_for_action_done() target by target: each answer's line comes back to the poll, and
    // the polls of targets that answered already overlap (the loop's loads are independent).
    let sent = t;
    for c in dest.iter() {
        let from = sent.max(r.answered[c]);
        t = t.max(from + m.line_read(&mut r.action[c], cpu, from));
    }
    let body = t - now;
    let spin = m.lock(&mut r.slot_lock[slot], cpu, now, body);
    let st = &mut a.x86.bstats;
    st.rar_calls += 1;
    st.rar_signals += dest.weight() as u64;
    // Every target has invalidated by done_at: the checker sees the translations go then.
    let end = if whole { TLB_FLUSH_ALL } else { pl.end };
    let b = (pl.asid, pl.start, end, 12);
    broadcast::issue_on(s, cpu, b, Some(dest), done_at + spin);
    spin + body
}

/// rar_tlb_flush() from broadcast_tlb_flush(), then finish_asid_transition(): RAR the flush to the
/// mm_cpumask's other CPUs, then flush_tlb_func() here if this CPU is in it.
pub fn rar_tlb_flush(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let a = s.arch_parts().arch;
    let f = a.x86.info[cpu];
    let mm = f.mm.expect("rar_tlb_flush without an mm");
    let pl = Payload {
        asid: a.mm[mm].global_asid,
        start: f.start,
        end: f.end,
    };
    let mask = a.mm[mm].cpumask.copied();
    let transition = a.mm[mm].asid_transition;
    let ps = smp_call_rar_many(s, cpu, &mask, pl);
    let p = s.arch_parts();
    p.arch.x86.bstats.broadcast_flushes += 1;
    p.obs.stats.charge(Some(task), Func::SmpCallRarMany, ps);
    if transition {
        s.push_step(task, Step::FinishAsidTransition);
    }
    if mask.test(cpu) {
        s.push_step(task, Step::LocalCall(CallFunc::FlushTlbFunc));
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// arch_tlbbatch_flush() with RAR: rar_full_flush() of the batch's CPUs (pcid 0: every PCID),
/// then invpcid_flush_all_nonglobals() here if this CPU is in the batch. No IPI.
pub fn rar_full_flush(s: &mut impl Host, cpu: CpuId, task: TaskId, mask: &CpuMask) -> Outcome {
    let pl = Payload {
        asid: ALL_NONGLOBALS,
        start: 0,
        end: TLB_FLUSH_ALL,
    };
    let mut ps = smp_call_rar_many(s, cpu, mask, pl);
    let p = s.arch_parts();
    p.arch.x86.bstats.batch_flushes += 1;
    p.obs.stats.charge(Some(task), Func::SmpCallRarMany, ps);
    if mask.test(cpu) {
        for slot in 0..=GLOBAL_SLOT {
            p.arch.tlb[cpu].flush_asid(slot);
        }
        let local = p.m.cost[Cost::Cr3Flush];
        p.obs
            .stats
            .charge(Some(task), Func::NativeFlushTlbLocal, local);
        ps += local;
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::x86::FlushInfo;
    use crate::observe::Irq;
    use crate::testing::{cost, machine, run_until, Then, MM};

    /// A 4-CPU machine with RAR and the RFC's kernel; MM holds global ASID 6, CPUs 1 and 2 are in
    /// its mm_cpumask and CPU 3 is not, and each of the three caches page 10 under that ASID.
    fn rar_machine() -> crate::sim::Sim {
        let sets = [
            ("machine.rar", "true"),
            ("kernel.broadcast_tlb_flush", "rar"),
        ];
        let mut s = machine(4, "linux-6.15", Then::Sleep, &sets);
        s.arch.mm[MM].global_asid = 6;
        for cpu in 1..4 {
            s.arch.x86.cpu[cpu].global_tag = 6;
            s.arch.tlb[cpu].fill(GLOBAL_SLOT, 10, 1, true, true);
        }
        s.arch.mm[MM].cpumask.set(1);
        s.arch.mm[MM].cpumask.set(2);
        s
    }

    fn cached(s: &crate::sim::Sim, cpu: usize) -> bool {
        s.arch.tlb[cpu].probe(GLOBAL_SLOT, 10).is_some()
    }

    /// rar_tlb_flush() of one page: one RAR call signals the mask's two other CPUs, with no
    /// interrupt on either; both drop the page by the time the sender goes on, CPU 3 (outside the
    /// mask) keeps it; the sender waits at least the wire and the microcode's INVLPGs.
    #[test]
    fn a_rar_flush_reaches_the_masks_cpus_without_an_interrupt() {
        let mut s = rar_machine();
        s.arch.x86.info[0] = FlushInfo {
            mm: Some(MM),
            start: 10,
            end: 11,
            stride_shift: 12,
            ..Default::default()
        };
        let Outcome::Busy { ps, .. } = rar_tlb_flush(&mut s, 0, 0) else {
            panic!("the sender is busy for the round trip");
        };
        let b = s.arch.x86.bstats;
        assert_eq!((b.rar_calls, b.rar_signals, b.broadcast_flushes), (1, 2, 1));
        // The RFC's set_payload() counts end - start + 1 pages: two INVLPGs a target.
        let least = cost(&s, Cost::IpiWireNode) + 2 * cost(&s, Cost::Invlpg);
        assert!(ps > least, "{ps} {least}");
        assert!(
            cached(&s, 1) && cached(&s, 2),
            "not yet handled at the send"
        );
        run_until(&mut s, ps);
        assert!(!cached(&s, 1) && !cached(&s, 2));
        assert!(cached(&s, 3), "a CPU outside the mm_cpumask gets no RAR");
        for row in [Irq::Cal, Irq::Tlb] {
            assert_eq!(s.obs.stats.irqs[row as usize].iter().sum::<u64>(), 0);
        }
        // The sender is not in the mask: no local flush_tlb_func.
        assert!(s.sched.tasks[0].steps.is_empty());
    }

    /// The CPU that was outside the mm_cpumask may hold stale translations of the global ASID:
    /// switching to the mm there flushes it (choose_new_asid's new_cpu); a CPU already in the
    /// mask does not flush. With INVLPGB neither does.
    #[test]
    fn switching_in_from_outside_the_mask_flushes_the_global_asid() {
        for (policy, flushed) in [("rar", true), ("invlpgb", false)] {
            let mut s = rar_machine();
            s.arch.x86.cpu[1].loaded_mm = None;
            s.arch.cfg.broadcast_tlb_flush = match policy {
                "rar" => crate::arch::x86::BroadcastTlbFlush::Rar,
                _ => crate::arch::x86::BroadcastTlbFlush::Invlpgb,
            };
            crate::arch::switch_mm_irqs_off(&mut s, 3, Some(MM));
            crate::arch::switch_mm_irqs_off(&mut s, 1, Some(MM));
            assert_eq!(!cached(&s, 3), flushed, "{policy}: CPU 3 came from outside");
            assert!(cached(&s, 1), "{policy}: CPU 1 was in the mask");
            assert!(s.arch.mm[MM].cpumask.test(3));
        }
    }

    /// arch_tlbbatch_flush() with RAR: one RAR of every PCID to the batch's other CPUs and a full
    /// local flush; nothing for a CPU outside the batch, and no IPI.
    #[test]
    fn a_batch_flush_is_one_rar_of_everything() {
        let mut s = rar_machine();
        s.arch.tlb[0].fill(0, 20, 2, true, true);
        s.arch.tlb[1].fill(0, 20, 2, true, true);
        let mut mask = CpuMask::new();
        for cpu in 0..3 {
            mask.set(cpu);
        }
        let Outcome::Busy { ps, .. } = rar_full_flush(&mut s, 0, 0, &mask) else {
            panic!("busy");
        };
        assert_eq!(
            s.arch.tlb[0].probe(0, 20).map(|_| ()),
            None,
            "local, at once"
        );
        run_until(&mut s, ps);
        assert!(!cached(&s, 1) && !cached(&s, 2) && cached(&s, 3));
        assert!(s.arch.tlb[1].probe(0, 20).is_none(), "every PCID");
        let b = s.arch.x86.bstats;
        assert_eq!((b.rar_calls, b.rar_signals, b.batch_flushes), (1, 2, 1));
        assert_eq!(s.obs.stats.irqs[Irq::Tlb as usize].iter().sum::<u64>(), 0);
    }
}
