//! AMD broadcast TLB invalidation (INVLPGB + TLBSYNC) with global ASIDs, as merged for Linux 6.15
//! (Rik van Riel's series, tip x86/core; 4afeb0ed1753 enables it for multi-threaded processes).
//! arch/x86/mm/tlb.c: consider_global_asid(), mm_active_cpus_exceeds(), use_global_asid(),
//! allocate_global_asid(), reset_global_asid_space(), mm_free_global_asid(),
//! finish_asid_transition(), broadcast_tlb_flush(), arch_tlbbatch_flush() as 0b7eb55cb706
//! ("x86/mm: Only do broadcast flush from reclaim if pages were unmapped", which replaced the
//! series' targeted tlbbatch flushing before the merge); arch/x86/include/asm/tlb.h:
//! invlpgb_flush_user_nr_nosync(), invlpgb_flush_single_pcid_nosync(),
//! invlpgb_flush_all_nonglobals(), __tlbsync().
//!
//! An INVLPGB is asynchronous: the model drops the translations it names from every CPU's TLB
//! when it completes, `tlbsync` after its issue (`Event::InvlpgbDone`), and TLBSYNC waits until
//! every INVLPGB its own CPU issued has completed, no other CPU's.

use super::{BroadcastTlbFlush, TlbState, TLB_FLUSH_ALL};
use crate::arch::tlb::{Tlb, GLOBAL_SLOT, NR_ASID_SLOTS};
use crate::arch::{ArchState, Host};
use crate::engine::{CpuId, CpuMask, TaskId, Time};
use crate::machine::{Cost, Machine};
use crate::observe::Func;
use crate::step::{Event, Outcome, Step};

/// TLB_NR_DYN_ASIDS: global ASIDs are numbered from here.
const TLB_NR_DYN_ASIDS: u16 = NR_ASID_SLOTS as u16;

/// MAX_ASID_AVAILABLE = (1 << CR3_AVAIL_PCID_BITS) - 2 (arch/x86/include/asm/tlbflush.h), with
/// CR3_AVAIL_PCID_BITS = 12 - 1 when CONFIG_MITIGATION_PAGE_TABLE_ISOLATION is built in, as in
/// distribution kernels (KPTI takes one PCID bit even on CPUs that do not need it).
pub const MAX_ASID_AVAILABLE: u16 = (1 << 11) - 2;

const WORDS: usize = (MAX_ASID_AVAILABLE as usize).div_ceil(64);

/// The global ASID space: global_asid_used, global_asid_freed, last_global_asid and
/// global_asid_available of arch/x86/mm/tlb.c.
#[derive(Debug, Clone)]
pub struct GlobalAsids {
    used: [u64; WORDS],
    freed: [u64; WORDS],
    last: u16,
    available: u32,
}

impl GlobalAsids {
    pub fn new() -> GlobalAsids {
        GlobalAsids {
            used: [0; WORDS],
            freed: [0; WORDS],
            // last_global_asid starts at MAX_ASID_AVAILABLE: the first allocation resets the space.
            last: MAX_ASID_AVAILABLE,
            available: (MAX_ASID_AVAILABLE - TLB_NR_DYN_ASIDS - 1) as u32,
        }
    }

    fn test(bits: &[u64; WORDS], i: u16) -> bool {
        bits[i as usize / 64] & (1 << (i % 64)) != 0
    }
}

impl Default for GlobalAsids {
    fn default() -> Self {
        GlobalAsids::new()
    }
}

/// Counts the kernel keeps none of (no vmstat or tracepoint covers INVLPGB).
#[derive(Debug, Clone, Copy, Default)]
pub struct BroadcastStats {
    /// INVLPGB instructions issued (broadcast flushes, batch pages, the ASID-space resets).
    pub invlpgb: u64,
    /// TLBSYNCs that waited for this CPU's outstanding INVLPGBs (tlbsync() with need_tlbsync).
    pub tlbsync: u64,
    /// INVLPGBs those TLBSYNCs waited for.
    pub tlbsync_invlpgbs: u64,
    /// flush_tlb_mm_range() calls done by broadcast_tlb_flush().
    pub broadcast_flushes: u64,
    /// finish_asid_transition() found a CPU on a dynamic ASID and sent flush_tlb_multi() IPIs.
    pub transition_flushes: u64,
    /// arch_tlbbatch_flush() done by invlpgb_flush_all_nonglobals() (reclaim, migration).
    pub batch_flushes: u64,
    /// Global ASIDs allocated (use_global_asid) and freed (mm_free_global_asid at exit).
    pub allocated: u64,
    pub freed: u64,
    /// reset_global_asid_space(): invlpgb_flush_all_nonglobals() at an allocation.
    pub resets: u64,
    /// RAR (what-if): smp_call_rar_many() calls, and the RAR signals they sent (one a target).
    pub rar_calls: u64,
    pub rar_signals: u64,
}

/// The `asid` of an INVLPGB of every non-global translation of every ASID.
pub(super) const ALL_NONGLOBALS: u16 = u16::MAX;

/// One INVLPGB in flight (or a RAR's invalidation on its targets): what it invalidates, where,
/// and when it has.
#[derive(Debug, Clone, Copy)]
pub struct Invlpgb {
    /// The global ASID, or ALL_NONGLOBALS.
    asid: u16,
    /// Page numbers [start, end); end == TLB_FLUSH_ALL: the whole ASID.
    start: u64,
    end: u64,
    stride_shift: u8,
    /// The CPUs whose TLBs it reaches: every CPU for an INVLPGB, a RAR's targets.
    targets: Option<CpuMask>,
    done_at: Time,
}

/// Broadcast flushing is on: the CPU has INVLPGB (or RAR, for the what-if) and the kernel uses
/// it. Global ASIDs are PCIDs: without PCID (kernel.pcid = false) there are none, and no process
/// ever gets one.
pub fn active(a: &ArchState, m: &Machine) -> bool {
    a.cfg.pcid
        && match a.cfg.broadcast_tlb_flush {
            BroadcastTlbFlush::None => false,
            BroadcastTlbFlush::Invlpgb | BroadcastTlbFlush::InvlpgbNoTlbsync => m.invlpgb,
            BroadcastTlbFlush::Rar => m.rar,
        }
}

/// Flushes of an mm with a global ASID are RARs (only such an mm exists when RAR is active).
pub fn rar(a: &ArchState) -> bool {
    a.cfg.broadcast_tlb_flush == BroadcastTlbFlush::Rar
}

/// `cpu` runs under `g`, a global ASID.
fn uses_global(st: &TlbState, g: u16) -> bool {
    st.loaded_asid == GLOBAL_SLOT && st.global_tag == g
}

/// mm_needs_global_asid(mm, loaded_mm_asid): `mm` has a global ASID that `cpu` does not run yet.
pub fn needs_global_asid(a: &ArchState, cpu: CpuId, mm: usize) -> bool {
    let g = a.mm[mm].global_asid;
    g != 0 && !uses_global(&a.x86.cpu[cpu], g)
}

/// choose_new_asid() for an mm with a global ASID: with INVLPGB always up to date, no flush;
/// with RAR up to date only on the CPUs of the mm_cpumask, so a CPU that was not in it
/// (`new_cpu`) flushes (the RFC's choose_new_asid(next, next_tlb_gen, new_cpu)). The model's one
/// global slot is also emptied when it held another global ASID's translations.
pub fn choose_global_asid(a: &mut ArchState, cpu: CpuId, g: u16, new_cpu: bool) -> (u8, bool) {
    let need_flush = new_cpu && rar(a);
    let st = &mut a.x86.cpu[cpu];
    if st.global_tag != g {
        a.tlb[cpu].flush_asid(GLOBAL_SLOT);
        st.global_tag = g;
    }
    (GLOBAL_SLOT, need_flush)
}

/// Drop the translations `b` names from every CPU's TLB (what the hardware has done by the time
/// the INVLPGB completes).
fn invalidate(tlb: &mut [Tlb], cpus: &[TlbState], b: &Invlpgb) {
    if b.asid == ALL_NONGLOBALS {
        for (cpu, t) in tlb.iter_mut().enumerate() {
            if b.targets.is_some_and(|m| !m.test(cpu)) {
                continue;
            }
            for slot in 0..=GLOBAL_SLOT {
                t.flush_asid(slot);
            }
        }
        return;
    }
    for (cpu, (t, st)) in tlb.iter_mut().zip(cpus).enumerate() {
        if st.global_tag != b.asid || b.targets.is_some_and(|m| !m.test(cpu)) {
            continue;
        }
        if b.end == TLB_FLUSH_ALL {
            t.flush_asid(GLOBAL_SLOT);
        } else {
            let step = 1u64 << (b.stride_shift - 12);
            let mut vpn = b.start;
            while vpn < b.end {
                t.flush_one(GLOBAL_SLOT, vpn);
                vpn += step;
            }
        }
    }
}

/// Apply the INVLPGBs `cpu` issued that have completed by `now`.
fn complete(a: &mut ArchState, cpu: CpuId, now: Time) {
    let (tlb, cpus) = (&mut a.tlb, &a.x86.cpu);
    a.x86.inflight[cpu].retain(|b| {
        if b.done_at <= now {
            invalidate(tlb, cpus, b);
            false
        } else {
            true
        }
    });
}

/// `Event::InvlpgbDone`: an INVLPGB `cpu` issued has completed on every CPU.
pub fn invlpgb_done(s: &mut impl Host, cpu: CpuId) {
    let now = s.now();
    complete(s.arch_parts().arch, cpu, now);
}

/// An invalidation `cpu` started that reaches `targets` (None: every CPU) at `done_at`.
pub(super) fn issue_on(
    s: &mut impl Host,
    cpu: CpuId,
    b: (u16, u64, u64, u8),
    targets: Option<CpuMask>,
    done_at: Time,
) {
    let (asid, start, end, stride_shift) = b;
    s.arch_parts().arch.x86.inflight[cpu].push(Invlpgb {
        asid,
        start,
        end,
        stride_shift,
        targets,
        done_at,
    });
    s.parts()
        .q
        .schedule(done_at, Event::InvlpgbDone { cpu: cpu as u16 });
}

/// invlpgb_flush_user_nr_nosync() (or _single_pcid_ when `end` is TLB_FLUSH_ALL) issued by `cpu`
/// at `at`: in flight until `at + tlbsync`, for this CPU's next TLBSYNC to wait for.
fn issue(s: &mut impl Host, cpu: CpuId, b: (u16, u64, u64, u8), at: Time) {
    let done_at = at + s.arch_parts().m.cost[Cost::Tlbsync];
    issue_on(s, cpu, b, None, done_at);
    let p = s.arch_parts();
    p.arch.x86.cpu[cpu].need_tlbsync = true;
    p.arch.x86.cpu[cpu].issued_since_sync += 1;
    p.arch.x86.bstats.invlpgb += 1;
}

/// broadcast_tlb_flush(): INVLPGB the flush_tlb_info of `cpu` (invlpgb_count_max pages a go),
/// then finish_asid_transition(), then __tlbsync(). No IPI unless a CPU is mid-transition.
pub fn broadcast_tlb_flush(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    if rar(s.arch_view().0) {
        return super::rar::rar_tlb_flush(s, cpu, task);
    }
    let now = s.now();
    let (a, m) = s.arch_view();
    let f = a.x86.info[cpu];
    let mm = f.mm.expect("broadcast_tlb_flush without an mm");
    let asid = a.mm[mm].global_asid;
    let (each, count_max) = (m.cost[Cost::Invlpgb], m.invlpgb_count_max);
    let mut ps = 0;
    if f.end == TLB_FLUSH_ALL {
        issue(s, cpu, (asid, 0, TLB_FLUSH_ALL, 12), now);
        ps += each;
    } else {
        let step_shift = f.stride_shift - 12;
        let mut addr = f.start;
        loop {
            // nr = (end - addr) >> stride_shift, clamped to [1, invlpgb_count_max] (strides up
            // to PMD_SHIFT; one stride a go above it).
            let nr = if f.stride_shift <= 21 {
                ((f.end - addr) >> step_shift).clamp(1, count_max)
            } else {
                1
            };
            let next = addr + (nr << step_shift);
            issue(s, cpu, (asid, addr, next, f.stride_shift), now + ps);
            ps += each;
            addr = next;
            if addr >= f.end {
                break;
            }
        }
    }
    let p = s.arch_parts();
    p.arch.x86.bstats.broadcast_flushes += 1;
    p.obs.stats.charge(Some(task), Func::BroadcastTlbFlush, ps);
    let transition = p.arch.mm[mm].asid_transition;
    // Wait for the INVLPGBs kicked off above (after the transition's IPIs, if any).
    s.push_step(task, Step::Tlbsync);
    if transition {
        s.push_step(task, Step::FinishAsidTransition);
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// arch_tlbbatch_flush() with INVLPGB (6.15, 0b7eb55cb706): the batch unmapped pages, so
/// invlpgb_flush_all_nonglobals(): one INVLPGB of every ASID on every CPU, then __tlbsync(). No
/// IPI, whatever the mms' ASIDs.
pub fn flush_all_nonglobals(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let now = s.now();
    issue(s, cpu, (ALL_NONGLOBALS, 0, TLB_FLUSH_ALL, 12), now);
    let p = s.arch_parts();
    let ps = p.m.cost[Cost::Invlpgb];
    p.arch.x86.bstats.batch_flushes += 1;
    p.obs
        .stats
        .charge(Some(task), Func::InvlpgbFlushAllNonglobals, ps);
    s.push_step(task, Step::Tlbsync);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// finish_asid_transition(): while some CPU running the mm is not on its global ASID yet, send
/// flush_tlb_multi() IPIs to the mm's CPUs (stragglers switch to the global ASID in
/// flush_tlb_func); once all are on it, the transition is over.
pub fn finish_asid_transition(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let a = s.arch_parts().arch;
    let mm = a.x86.info[cpu]
        .mm
        .expect("finish_asid_transition without an mm");
    if !a.mm[mm].asid_transition {
        return Outcome::Next;
    }
    let g = a.mm[mm].global_asid;
    let straggler = a.mm[mm]
        .cpumask
        .iter()
        .any(|c| a.x86.cpu[c].loaded_mm == Some(mm) && !uses_global(&a.x86.cpu[c], g));
    if straggler {
        a.x86.bstats.transition_flushes += 1;
        return super::flush_tlb_multi(s, cpu, task, true);
    }
    // mm_clear_asid_transition(): all the CPUs running this process use the global ASID.
    a.mm[mm].asid_transition = false;
    Outcome::Next
}

/// The last INVLPGB `cpu` has in flight completes at this time (0: none).
fn last_done(a: &ArchState, cpu: CpuId) -> Time {
    a.x86.inflight[cpu]
        .iter()
        .map(|b| b.done_at)
        .max()
        .unwrap_or(0)
}

/// __tlbsync() as a step, after broadcast_tlb_flush()'s or invlpgb_flush_all_nonglobals()'s
/// INVLPGBs: wait until every INVLPGB this CPU issued has completed (its own only: other CPUs'
/// INVLPGBs in flight do not delay it), then go on. The unsafe what-if never waits.
pub fn tlbsync_step(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let now = s.now();
    let p = s.arch_parts();
    let wait = tlbsync_inline(p.arch, cpu, now);
    if wait == 0 {
        return Outcome::Next;
    }
    p.obs.stats.charge(Some(task), Func::Tlbsync, wait);
    // The busy time is never shorter than asked, and the INVLPGBs' completion events were queued
    // before the end of this wait: they are applied before the CPU goes on.
    Outcome::Busy {
        ps: wait,
        irqs_off: false,
    }
}

/// The time the TLBSYNC waits for this CPU's INVLPGBs (0 if none is in flight). Counts the
/// TLBSYNC and the INVLPGBs it covers.
fn tlbsync_inline(a: &mut ArchState, cpu: CpuId, now: Time) -> Time {
    let st = &mut a.x86.cpu[cpu];
    if !st.need_tlbsync {
        return 0;
    }
    st.need_tlbsync = false;
    let issued = std::mem::take(&mut st.issued_since_sync);
    if a.cfg.broadcast_tlb_flush == BroadcastTlbFlush::InvlpgbNoTlbsync {
        return 0;
    }
    a.x86.bstats.tlbsync += 1;
    a.x86.bstats.tlbsync_invlpgbs += issued;
    complete(a, cpu, now);
    last_done(a, cpu).saturating_sub(now)
}

/// mm_active_cpus_exceeds(mm, threshold): more than `threshold` CPUs run `mm` now, not lazily.
fn mm_active_cpus_exceeds(a: &ArchState, mm: usize, threshold: u64) -> bool {
    let mask = &a.mm[mm].cpumask;
    // The quick check on the cpumask's weight, then the slower one.
    if mask.weight() as u64 <= threshold {
        return false;
    }
    let mut count = 0;
    for c in mask.iter() {
        let st = &a.x86.cpu[c];
        if st.loaded_mm != Some(mm) || st.is_lazy {
            continue;
        }
        count += 1;
        if count > threshold {
            return true;
        }
    }
    false
}

/// consider_global_asid(), after flush_tlb_mm_range() sent its IPIs: once in a while (when the
/// low 5 bits of the task's pid match those of jiffies; the model's pid is the task's index), an
/// mm active on more than `kernel.global_asid_threshold` CPUs gets a global ASID.
pub fn consider_global_asid(s: &mut impl Host, _cpu: CpuId, task: TaskId, mm: usize) -> Outcome {
    let now = s.now();
    let (a, m) = s.arch_view();
    if !active(a, m) {
        return Outcome::Next;
    }
    if (task as u64 & 0x1f) != (super::jiffies(now, a.cfg.hz) & 0x1f) {
        return Outcome::Next;
    }
    if !mm_active_cpus_exceeds(a, mm, a.cfg.global_asid_threshold) {
        return Outcome::Next;
    }
    use_global_asid(s, task, mm)
}

/// use_global_asid() -> allocate_global_asid() (-> reset_global_asid_space() when the search hit
/// the end of the space) -> mm_assign_global_asid(): the mm enters its ASID transition.
fn use_global_asid(s: &mut impl Host, task: TaskId, mm: usize) -> Outcome {
    let p = s.arch_parts();
    let (m, a) = (p.m, p.arch);
    if a.mm[mm].global_asid != 0 || a.x86.asids.available == 0 {
        return Outcome::Next;
    }
    let mut ps = 0;
    if a.x86.asids.last >= MAX_ASID_AVAILABLE - 1 {
        // reset_global_asid_space(): invlpgb_flush_all_nonglobals() (INVLPGB + TLBSYNC, every
        // ASID on every CPU) makes the freed global ASIDs safe to use again.
        for t in a.tlb.iter_mut() {
            for slot in 0..=GLOBAL_SLOT {
                t.flush_asid(slot);
            }
        }
        let g = &mut a.x86.asids;
        for (u, f) in g.used.iter_mut().zip(g.freed.iter_mut()) {
            *u &= !*f;
            *f = 0;
        }
        g.last = TLB_NR_DYN_ASIDS;
        a.x86.bstats.resets += 1;
        // The RAR RFC resets with flush_tlb_all() (an IPI to every CPU), modelled as this same
        // flush of every TLB at once, and not counted as an INVLPGB.
        a.x86.bstats.invlpgb += !rar(a) as u64;
        ps = m.cost[Cost::Invlpgb] + m.cost[Cost::Tlbsync];
        p.obs.stats.charge(Some(task), Func::BroadcastTlbFlush, ps);
    }
    let g = &mut a.x86.asids;
    // find_next_zero_bit(global_asid_used, MAX_ASID_AVAILABLE, last_global_asid).
    let Some(asid) = (g.last..MAX_ASID_AVAILABLE).find(|&i| !GlobalAsids::test(&g.used, i)) else {
        return Outcome::Next;
    };
    g.used[asid as usize / 64] |= 1 << (asid % 64);
    g.last = asid;
    g.available -= 1;
    a.x86.bstats.allocated += 1;
    // mm_assign_global_asid(): asid_transition first, then the ASID.
    a.mm[mm].asid_transition = true;
    a.mm[mm].global_asid = asid;
    if ps > 0 {
        return Outcome::Busy { ps, irqs_off: true };
    }
    Outcome::Next
}

/// mm_free_global_asid() from destroy_context(): the ASID is marked freed, reusable only after
/// the next reset_global_asid_space(). A process keeps its global ASID until then, however few
/// CPUs it runs on later.
pub fn mm_free_global_asid(a: &mut ArchState, mm: usize) {
    let asid = a.mm[mm].global_asid;
    if asid == 0 {
        return;
    }
    let g = &mut a.x86.asids;
    g.freed[asid as usize / 64] |= 1 << (asid % 64);
    g.available += 1;
    a.mm[mm].global_asid = 0;
    a.x86.bstats.freed += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{cost, machine, run_until, Then, MM};

    /// A 4-CPU test machine with INVLPGB, at Milan's placeholder costs.
    const INVLPGB: [(&str, &str); 3] = [
        ("machine.invlpgb", "true"),
        ("machine.cost.invlpgb", "260"),
        ("machine.cost.tlbsync", "2000"),
    ];

    /// Each CPU's TLBSYNC waits for its own INVLPGBs only, and each INVLPGB drops its page from
    /// every TLB holding that global ASID exactly when it completes.
    #[test]
    fn tlbsync_waits_for_its_own_cpus_invlpgbs_only() {
        let mut s = machine(4, "linux-6.15", Then::Sleep, &INVLPGB);
        let l = cost(&s, Cost::Tlbsync);
        assert!(l > 0);
        // CPU 2 caches page 10 under global ASID 6, CPU 3 the same page under ASID 7.
        for (cpu, g) in [(2, 6), (3, 7)] {
            s.arch.x86.cpu[cpu].global_tag = g;
            s.arch.tlb[cpu].fill(GLOBAL_SLOT, 10, 1, true, true);
        }
        // CPU 0 issues two INVLPGBs at 0; CPU 1 one at l / 2, which completes after them.
        issue(&mut s, 0, (6, 10, 11, 12), 0);
        issue(&mut s, 0, (6, 20, 21, 12), 0);
        issue(&mut s, 1, (6, 30, 31, 12), l / 2);
        assert_eq!(
            tlbsync_inline(&mut s.arch, 0, 0),
            l,
            "not CPU 1's later one"
        );
        assert_eq!(s.arch.x86.bstats.tlbsync_invlpgbs, 2);
        assert_eq!(
            tlbsync_inline(&mut s.arch, 0, 0),
            0,
            "nothing left to wait for"
        );
        run_until(&mut s, l - 1);
        assert!(s.arch.tlb[2].probe(GLOBAL_SLOT, 10).is_some(), "in flight");
        run_until(&mut s, l);
        assert!(s.arch.tlb[2].probe(GLOBAL_SLOT, 10).is_none(), "completed");
        assert!(
            s.arch.tlb[3].probe(GLOBAL_SLOT, 10).is_some(),
            "another ASID"
        );
        assert_eq!(tlbsync_inline(&mut s.arch, 1, l), l / 2);
        assert_eq!(s.arch.x86.bstats.tlbsync, 2);
        assert_eq!(s.arch.x86.bstats.tlbsync_invlpgbs, 3);
        let _ = MM;
    }

    /// broadcast_tlb_flush() splits a range into INVLPGBs of at most invlpgb_count_max strides;
    /// a full flush is one; the issuing CPU is busy for their issue only.
    #[test]
    fn broadcast_tlb_flush_issues_count_max_strides_a_go() {
        let mut sets = INVLPGB.to_vec();
        sets.push(("machine.invlpgb_count_max", "8"));
        let mut s = machine(4, "linux-6.15", Then::Sleep, &sets);
        s.arch.mm[MM].global_asid = 6;
        let each = cost(&s, Cost::Invlpgb);
        // (start, end, stride_shift): 20 pages -> 8 + 8 + 4; 3 PMDs -> one of 3; all -> one.
        for (r, n) in [
            ((0, 20, 12), 3),
            ((0, 3 * 512, 21), 1),
            ((0, TLB_FLUSH_ALL, 12), 1),
        ] {
            s.arch.x86.info[0] = super::super::FlushInfo {
                mm: Some(MM),
                start: r.0,
                end: r.1,
                stride_shift: r.2,
                ..Default::default()
            };
            let (before, now, l) = (s.arch.x86.bstats.invlpgb, s.now(), cost(&s, Cost::Tlbsync));
            let out = broadcast_tlb_flush(&mut s, 0, 0);
            assert_eq!(s.arch.x86.bstats.invlpgb - before, n, "{r:?}");
            let ps = n * each;
            assert_eq!(
                out,
                Outcome::Busy {
                    ps,
                    irqs_off: false
                }
            );
            assert_eq!(s.arch.x86.inflight[0].len() as u64, n);
            assert_eq!(tlbsync_inline(&mut s.arch, 0, now), (n - 1) * each + l);
            run_until(&mut s, now + ps + l);
            assert!(s.arch.x86.inflight[0].is_empty());
        }
    }

    /// The global ASID space: the first allocation resets it (one flush of everything) and takes
    /// TLB_NR_DYN_ASIDS; a freed ASID is reused only after the next reset.
    #[test]
    fn global_asids_are_allocated_from_6_and_freed_at_exit() {
        let mut s = machine(4, "linux-6.15", Then::Sleep, &INVLPGB);
        assert!(matches!(
            use_global_asid(&mut s, 0, MM),
            Outcome::Busy { .. }
        ));
        assert_eq!(s.arch.mm[MM].global_asid, TLB_NR_DYN_ASIDS);
        assert!(s.arch.mm[MM].asid_transition);
        assert_eq!(s.arch.x86.bstats.resets, 1);
        // Already has one: nothing.
        assert_eq!(use_global_asid(&mut s, 0, MM), Outcome::Next);
        let avail = s.arch.x86.asids.available;
        mm_free_global_asid(&mut s.arch, MM);
        assert_eq!(s.arch.mm[MM].global_asid, 0);
        assert_eq!(s.arch.x86.asids.available, avail + 1);
        // Not reused before a reset: the next allocation takes the next number.
        assert_eq!(use_global_asid(&mut s, 0, MM), Outcome::Next);
        assert_eq!(s.arch.mm[MM].global_asid, TLB_NR_DYN_ASIDS + 1);
        assert_eq!(s.arch.x86.bstats.resets, 1);
    }
}
