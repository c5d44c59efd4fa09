//! arch/x86/mm/tlb.c: switching mms, lazy TLB mode, and TLB shootdowns by IPI.
//! Modelled on Linux 6.18; the `MmCpumask`, `LazyTlb` and `pcid` policies give the older eras.

use super::broadcast;
use super::{FlushInfo, FlushRange, LazyTlb, MmCpumask, INIT_MM_CTX_ID, TLB_FLUSH_ALL};
use crate::arch::tlb::{GLOBAL_SLOT, NR_ASID_SLOTS};
use crate::arch::{ArchState, Host, Parts};
use crate::engine::{CpuId, CpuMask, TaskId, Time, PS_PER_S};
use crate::machine::{Arch, Cost, Machine};
use crate::observe::tracelog::LineAt;
use crate::observe::{Func, Irq, Observe, Vm};
use crate::smp::{self, CallFunc, Cond};
use crate::step::{Outcome, Step};

/// tlb_flush reasons (include/linux/mm_types.h: enum tlb_flush_reason).
const TLB_FLUSH_ON_TASK_SWITCH: u8 = 0;
const TLB_REMOTE_SHOOTDOWN: u8 = 1;
const TLB_LOCAL_SHOOTDOWN: u8 = 2;
const TLB_LOCAL_MM_SHOOTDOWN: u8 = 3;
const TLB_REMOTE_SEND_IPI: u8 = 4;
const TLB_REMOTE_WRONG_CPU: u8 = 5;

/// The jiffies counter at `now` (CONFIG_HZ ticks since boot).
pub fn jiffies(now: Time, hz: u64) -> u64 {
    now / (PS_PER_S / hz)
}

fn ctx_id(a: &ArchState, mm: Option<usize>) -> u64 {
    mm.map_or(INIT_MM_CTX_ID, |m| a.mm[m].ctx_id)
}

fn tlb_gen(a: &ArchState, mm: Option<usize>) -> u64 {
    mm.map_or(0, |m| a.mm[m].tlb_gen)
}

/// choose_new_asid(): reuse the slot that holds `next` (flushing it if stale) or take the next
/// slot round-robin and flush it. Without PCID there is one address space and every switch flushes.
/// `new_cpu`: this CPU was not in next's mm_cpumask (only RAR's global ASIDs care).
fn choose_new_asid(
    a: &mut ArchState,
    cpu: CpuId,
    next: Option<usize>,
    next_tlb_gen: u64,
    new_cpu: bool,
) -> (u8, bool) {
    if !a.cfg.pcid {
        return (0, true);
    }
    // 6.15: global ASIDs are kept up to date by INVLPGB (by RAR, on the mm_cpumask's CPUs).
    if let Some(g) = next.map(|n| a.mm[n].global_asid).filter(|&g| g != 0) {
        return broadcast::choose_global_asid(a, cpu, g, new_cpu);
    }
    let id = ctx_id(a, next);
    let st = &mut a.x86.cpu[cpu];
    if let Some(i) = st.ctxs.iter().position(|c| c.ctx_id == id) {
        return (i as u8, st.ctxs[i].tlb_gen < next_tlb_gen);
    }
    let mut asid = st.next_asid;
    st.next_asid += 1;
    if asid as usize >= NR_ASID_SLOTS {
        asid = 0;
        st.next_asid = 1;
    }
    (asid, true)
}

/// switch_mm_irqs_off(): load `next` (None = init_mm) on `cpu`. Returns the time it takes.
/// `clear_old` says whether this architecture and era take the CPU out of the old mm's cpumask.
pub fn switch_mm_irqs_off(
    s: &mut impl Host,
    cpu: CpuId,
    next: Option<usize>,
    clear_old: bool,
) -> Time {
    let trace_at = s.trace_at(cpu);
    let now = s.now();
    let p = s.arch_parts();
    let (a, m) = (&mut *p.arch, p.m);
    let x86 = m.arch == Arch::X86;
    // atomic64_read(&next->context.tlb_gen) on x86 (riscv's tlb_gen is a stand-in, no line).
    let real_line = a.cfg.pcid && x86;
    // The time this switch waits for the lines it touches.
    let mut lines = 0;
    let prev = a.x86.cpu[cpu].loaded_mm;
    let was_lazy = a.x86.cpu[cpu].is_lazy;
    a.x86.cpu[cpu].is_lazy = false;
    let (asid, need_flush, next_tlb_gen);
    if let Some(n) = next.filter(|&n| prev == next && broadcast::needs_global_asid(a, cpu, n)) {
        // 6.15: the mm got a global ASID this CPU does not run yet: reload onto it.
        next_tlb_gen = tlb_gen(a, next);
        (asid, need_flush) = choose_new_asid(a, cpu, Some(n), next_tlb_gen, true);
    } else if prev == next {
        // Not switching mms: only a CPU coming back from lazy mode may have missed flushes. A
        // global ASID (6.15) is always up to date.
        if !was_lazy || !a.cfg.pcid || a.x86.cpu[cpu].loaded_asid == GLOBAL_SLOT {
            return 0;
        }
        next_tlb_gen = tlb_gen(a, next);
        if let Some(n) = next.filter(|_| real_line) {
            lines = read_mm_tlb_gen(a, m, cpu, now, n);
        }
        let l = a.x86.cpu[cpu].loaded_asid;
        if a.x86.cpu[cpu].ctxs[l as usize].tlb_gen == next_tlb_gen {
            return lines;
        }
        asid = l;
        need_flush = true;
    } else {
        if let (Some(p), true) = (prev, clear_old) {
            a.mm[p].cpumask.clear(cpu);
            if x86 {
                lines += cpumask_write(a, m, cpu, now, p);
            }
        }
        // Start receiving flush IPIs (and RARs), then read tlb_gen.
        let mut new_cpu = false;
        if let Some(n) = next {
            new_cpu = !a.mm[n].cpumask.test(cpu);
            if x86 {
                // 209954cbc7d0 tests the bit and sets it only if clear; before, every switch set it.
                let test_first = a.cfg.mm_cpumask != MmCpumask::ClearOnSwitch;
                if test_first {
                    lines += cpumask_read(a, m, cpu, now + lines, n);
                }
                if new_cpu || !test_first {
                    lines += cpumask_write(a, m, cpu, now + lines, n);
                }
            }
            a.mm[n].cpumask.set(cpu);
        }
        next_tlb_gen = tlb_gen(a, next);
        if let Some(n) = next.filter(|_| real_line) {
            lines += read_mm_tlb_gen(a, m, cpu, now + lines, n);
        }
        (asid, need_flush) = choose_new_asid(a, cpu, next, next_tlb_gen, new_cpu);
    }
    let id = ctx_id(a, next);
    let st = &mut a.x86.cpu[cpu];
    if need_flush {
        // is_dyn_asid(): a global ASID has no per-CPU context to record.
        if let Some(ctx) = st.ctxs.get_mut(asid as usize) {
            *ctx = super::AsidCtx {
                ctx_id: id,
                tlb_gen: next_tlb_gen,
            };
        }
        a.tlb[cpu].flush_asid(asid);
    }
    st.loaded_mm = next;
    st.loaded_asid = asid;
    // switch_mm_irqs_off traces TLB_FLUSH_ALL when it flushed, 0 when the ASID was current.
    let pages = if need_flush { -1 } else { 0 };
    p.obs.tlb_flush(trace_at, TLB_FLUSH_ON_TASK_SWITCH, pages);
    // Every CR3 write costs about the same; a flushing one also empties the ASID.
    lines + m.cost[Cost::Cr3Flush]
}

/// enter_lazy_tlb(): the idle task keeps the old mm loaded, marked lazy.
pub fn enter_lazy_tlb(a: &mut ArchState, cpu: CpuId) {
    if a.x86.cpu[cpu].loaded_mm.is_some() {
        a.x86.cpu[cpu].is_lazy = true;
    }
}

/// should_trim_cpumask(): at most once per second (per mm), ask CPUs on other mms to leave.
fn should_trim_cpumask(a: &mut ArchState, now: Time, mm: usize) -> bool {
    if a.cfg.mm_cpumask != MmCpumask::LazyTrim {
        return false;
    }
    let j = jiffies(now, a.cfg.hz);
    if j > a.mm[mm].next_trim_cpumask {
        a.mm[mm].next_trim_cpumask = j + a.cfg.hz;
        true
    } else {
        false
    }
}

/// inc_mm_tlb_gen() on `cpu` at `now`: an atomic increment of the mm's tlb_gen, which takes its
/// line from the last CPU to touch it (after the reads and writes before it). Returns the new
/// generation and the time.
pub fn inc_mm_tlb_gen(
    a: &mut ArchState,
    m: &Machine,
    cpu: CpuId,
    now: Time,
    mm: usize,
) -> (u64, Time) {
    let ctx = &mut a.mm[mm];
    ctx.tlb_gen += 1;
    let t = m.line_write(&mut ctx.tlb_gen_line, cpu, now);
    (ctx.tlb_gen, t)
}

/// flush_tlb_mm_range(mm, start, end, stride_shift, freed_tables).
pub fn flush_tlb_mm_range(s: &mut impl Host, cpu: CpuId, task: TaskId, r: FlushRange) -> Outcome {
    let now = s.now();
    let p = s.arch_parts();
    let (a, m) = (p.arch, p.m);
    // inc_mm_tlb_gen(): also a full barrier against switch_mm.
    let mm = r.mm as usize;
    let (new_tlb_gen, mut inc) = match a.cfg.pcid {
        true => inc_mm_tlb_gen(a, m, cpu, now, mm),
        false => (0, 0),
    };
    if m.arch == Arch::X86 && a.mm[mm].global_asid == 0 {
        // cpumask_any_but(mm_cpumask(mm), cpu): which CPUs to IPI (a global ASID's need none).
        inc += cpumask_read(a, m, cpu, now + inc, mm);
    }
    let out = flush_tlb_mm_range_with(s, cpu, task, r, new_tlb_gen);
    if inc == 0 {
        return out;
    }
    // The increment and the cpumask's load come first; their time goes before the rest.
    let (ps, irqs_off) = match out {
        Outcome::Busy { ps, irqs_off } => (ps, irqs_off),
        Outcome::Next => (0, false),
        other => {
            let work = Step::Work {
                func: Func::FlushTlbMmRange,
                ps: inc,
                irqs_off: false,
            };
            s.push_step(task, work);
            return other;
        }
    };
    let stats = &mut s.arch_parts().obs.stats;
    stats.charge(Some(task), Func::FlushTlbMmRange, inc);
    Outcome::Busy {
        ps: ps + inc,
        irqs_off,
    }
}

/// flush_tlb_mm_range() after inc_mm_tlb_gen() gave `new_tlb_gen`.
fn flush_tlb_mm_range_with(
    s: &mut impl Host,
    cpu: CpuId,
    task: TaskId,
    r: FlushRange,
    new_tlb_gen: u64,
) -> Outcome {
    let now = s.now();
    let p = s.arch_parts();
    let (a, m) = (p.arch, p.m);
    let mm = r.mm as usize;
    // get_flush_tlb_info(): more than the ceiling of strides becomes a full flush.
    let (mut start, mut end) = (r.start, r.end);
    if end != TLB_FLUSH_ALL
        && ((end - start) >> (r.stride_shift - 12)) > a.cfg.tlb_single_page_flush_ceiling
    {
        start = 0;
        end = TLB_FLUSH_ALL;
    }
    a.x86.info[cpu] = FlushInfo {
        mm: Some(mm),
        start,
        end,
        stride_shift: r.stride_shift,
        new_tlb_gen,
        freed_tables: r.freed_tables,
        trim_cpumask: false,
        initiating_cpu: cpu,
    };
    let others = a.mm[mm].cpumask.any_but(cpu);
    let loaded_here = a.x86.cpu[cpu].loaded_mm == Some(mm);
    let global = a.mm[mm].global_asid != 0;
    // The RAR RFC trims first, by IPI, as RARs follow the mm_cpumask too (its flush_tlb_mm_range).
    let trim = global && broadcast::rar(a) && should_trim_cpumask(a, now, mm);
    // mm_global_asid(mm) (6.15): every CPU's TLB by INVLPGB, then TLBSYNC; no IPI.
    if global && !trim {
        return broadcast::broadcast_tlb_flush(s, cpu, task);
    }
    a.x86.info[cpu].trim_cpumask = trim;
    if a.cfg.concurrent_local_flush {
        if others {
            a.x86.info[cpu].trim_cpumask = trim || should_trim_cpumask(a, now, mm);
            // After the IPIs, consider_global_asid(mm) (6.15).
            if broadcast::active(a, m) {
                s.push_step(task, Step::ConsiderGlobalAsid { mm: mm as u32 });
            }
            return flush_tlb_multi(s, cpu, task, true);
        }
    } else if others {
        // Before 5.13 the local flush ran first, then flush_tlb_others() to the rest.
        s.push_step(task, Step::FlushTlbOthers);
    }
    if loaded_here {
        return smp::run_local(s, cpu, task, CallFunc::FlushTlbFunc);
    }
    Outcome::Next
}

/// native_flush_tlb_multi() (flush_tlb_others() before 5.13): IPI the CPUs of the mm's cpumask
/// that need it, with the initiator's flush_tlb_info, and wait for all of them.
pub fn flush_tlb_multi(s: &mut impl Host, cpu: CpuId, task: TaskId, run_local: bool) -> Outcome {
    let trace_at = s.trace_at(cpu);
    let p = s.arch_parts();
    let info = p.arch.x86.info[cpu];
    let mm = info.mm.expect("flush_tlb_multi without an mm");
    p.obs.stats.vm(Vm::TlbRemoteFlush, 1);
    let pages = if info.end == TLB_FLUSH_ALL {
        -1
    } else {
        (info.end - info.start) as i64
    };
    p.obs.tlb_flush(trace_at, TLB_REMOTE_SEND_IPI, pages);
    // Lazy CPUs may skip the IPI unless page tables are being freed: a lazy CPU must not walk
    // them speculatively (4.20). Before that every CPU in the mask got it.
    // 6.15: an mm in its ASID transition IPIs every CPU too (mm_in_asid_transition()).
    let transition = p.arch.mm[mm].asid_transition;
    // The RAR RFC's should_flush_all(): a trim, or any flush of a global-ASID mm, too.
    let rar_all = broadcast::rar(p.arch) && (info.trim_cpumask || p.arch.mm[mm].global_asid != 0);
    let cond = match p.arch.cfg.lazy_tlb {
        LazyTlb::LeaveMmOnIpi => Cond::Always,
        LazyTlb::SkipLazyCpus if info.freed_tables || transition || rar_all => Cond::Always,
        LazyTlb::SkipLazyCpus => Cond::ShouldFlushTlb,
    };
    let mask = p.arch.mm[mm].cpumask.copied();
    smp::smp_call_function_many_cond(
        s,
        cpu,
        task,
        &mask,
        CallFunc::FlushTlbFunc,
        cond,
        true,
        run_local,
    )
}

/// should_flush_tlb(): does `cpu` need the flush that `sender` is sending?
pub fn should_flush_tlb(a: &ArchState, cpu: CpuId, sender: CpuId) -> bool {
    let info = &a.x86.info[sender];
    let st = &a.x86.cpu[cpu];
    if st.is_lazy {
        // Lazy TLB will get flushed at the next context switch.
        return false;
    }
    match info.mm {
        None => true,
        // 209954cbc7d0 kept tlb_is_not_lazy(): a CPU left in the mask on another mm gets every
        // flush; 6db2526c1d69 sends it one only when should_trim_cpumask() said so.
        Some(_) if a.cfg.mm_cpumask == MmCpumask::LazyEveryFlush => true,
        Some(mm) => st.loaded_mm == Some(mm) || info.trim_cpumask,
    }
}

/// A load of `mm`'s tlb_gen (atomic64_read) on `cpu` at `at`: the wait for the write in
/// progress and the line's transfer.
fn read_mm_tlb_gen(a: &mut ArchState, m: &Machine, cpu: CpuId, at: Time, mm: usize) -> Time {
    m.line_read(&mut a.mm[mm].tlb_gen_line, cpu, at)
}

/// A load of `mm`'s mm_cpumask on `cpu` at `at`: the time until the line is here.
pub fn cpumask_read(a: &mut ArchState, m: &Machine, cpu: CpuId, at: Time, mm: usize) -> Time {
    a.mm[mm]
        .cpumask_line
        .read(at, cpu, |x, y| m.line_transfer(x, y))
}

/// A set or clear of a bit in `mm`'s mm_cpumask on `cpu` at `at` (a locked RMW).
fn cpumask_write(a: &mut ArchState, m: &Machine, cpu: CpuId, at: Time, mm: usize) -> Time {
    a.mm[mm]
        .cpumask_line
        .write(at, cpu, |x, y| m.line_transfer(x, y))
}

/// flush_tlb_func(): run `sender`'s flush_tlb_info on `cpu` at `at`. Returns the time taken.
pub fn flush_tlb_func(
    s: &mut impl Host,
    cpu: CpuId,
    task: Option<TaskId>,
    sender: CpuId,
    at: Time,
) -> Time {
    let trace_at = s.trace_at(cpu);
    let p = s.arch_parts();
    let (m, a, obs) = (p.m, p.arch, p.obs);
    let f = a.x86.info[sender];
    let local = cpu == f.initiating_cpu;
    let mut cost = m.cost[Cost::FlushTlbFunc];
    if !local {
        obs.stats.irq(Irq::Tlb, cpu);
        if a.cfg.pcid {
            obs.stats.vm(Vm::TlbRemoteFlushReceived, 1);
        }
        // The sender's flush_tlb_info, which it just wrote: its line comes over.
        cost += m.line_transfer(sender, cpu);
    }
    let loaded = a.x86.cpu[cpu].loaded_mm;
    if let Some(mm) = loaded.filter(|_| a.cfg.pcid && a.cfg.tlb_gen_read_early) {
        // To 5.19 flush_tlb_func() read mm_tlb_gen first thing, whatever followed.
        cost += read_mm_tlb_gen(a, m, cpu, at + cost, mm);
    }
    obs.stats.charge(task, Func::FlushTlbFunc, cost);
    if let Some(target) = f.mm.filter(|&mm| Some(mm) != loaded) {
        // The CPU was left in the mm_cpumask of the target mm: clear it (6.13+). 209954cbc7d0
        // cleared it on remote CPUs only ("Can only happen on remote CPUs"); "x86/mm/tlb: Also
        // remove local CPU from mm_cpumask if stale" (tip, 2024-12-05) added the initiator.
        let clears = match a.cfg.mm_cpumask {
            MmCpumask::ClearOnSwitch => false,
            MmCpumask::LazyEveryFlush => !local,
            MmCpumask::LazyTrim => true,
        };
        if clears {
            a.mm[target].cpumask.clear(cpu);
            // cpumask_clear_cpu(): a locked RMW, each time, on the line every sender reads.
            let t = cpumask_write(a, m, cpu, at + cost, target);
            obs.stats.charge(task, Func::FlushTlbFunc, t);
            cost += t;
            obs.tlb_flush(trace_at, TLB_REMOTE_WRONG_CPU, 0);
        }
        return cost;
    }
    if !local && !a.cfg.pcid {
        // 4.3 counted a received flush only once the mm matched.
        obs.stats.vm(Vm::TlbRemoteFlushReceived, 1);
    }
    let Some(mm) = loaded else { return cost };
    if broadcast::needs_global_asid(a, cpu, mm) {
        // 6.15: reload the ASID when transitioning to a global one.
        let t = crate::arch::switch_mm_irqs_off(s, cpu, Some(mm));
        s.arch_parts().obs.stats.charge(task, Func::SwitchMm, t);
        cost += t;
    }
    let p = s.arch_parts();
    let (m, a, obs) = (p.m, p.arch, p.obs);
    let global = a.x86.cpu[cpu].loaded_asid == GLOBAL_SLOT;
    if global && !broadcast::rar(a) {
        // Broadcast ASIDs are always kept up to date with INVLPGB.
        return cost;
    }
    if a.x86.cpu[cpu].is_lazy {
        // Lazy: leave the mm rather than flush it (switch_mm_irqs_off(NULL, &init_mm); leave_mm).
        let t = crate::arch::switch_mm_irqs_off(s, cpu, None);
        s.arch_parts().obs.stats.charge(task, Func::SwitchMm, t);
        return cost + t;
    }
    let asid = a.x86.cpu[cpu].loaded_asid;
    let mut partial = f.end != TLB_FLUSH_ALL;
    if a.cfg.pcid {
        // A global ASID (RAR) keeps no per-CPU generation: 0, always behind (is_dyn_asid()).
        let local_gen = a.x86.cpu[cpu]
            .ctxs
            .get(asid as usize)
            .map_or(0, |c| c.tlb_gen);
        if f.new_tlb_gen != 0 && f.new_tlb_gen <= local_gen {
            // Already caught up with this flush.
            return cost;
        }
        if !a.cfg.tlb_gen_read_early {
            // aa44284960d5 (6.0): "Defer mm_tlb_gen reading as long as possible to avoid cache
            // contention": only a CPU that is behind this flush reads it.
            let read = read_mm_tlb_gen(a, m, cpu, at + cost, mm);
            obs.stats.charge(task, Func::FlushTlbFunc, read);
            cost += read;
        }
        let mm_gen = a.mm[mm].tlb_gen;
        if local_gen == mm_gen {
            // A concurrent flush caught us all the way up.
            trace_flush_done(obs, trace_at, local, f.mm.is_none(), 0);
            return cost;
        }
        // Partial only if it brings this CPU exactly up to date.
        partial = partial && f.new_tlb_gen == local_gen + 1 && f.new_tlb_gen == mm_gen;
        if let Some(c) = a.x86.cpu[cpu].ctxs.get_mut(asid as usize) {
            c.tlb_gen = mm_gen;
        }
    }
    let parts = Parts {
        m,
        arch: &mut *a,
        obs: &mut *obs,
    };
    let (t, pages) = flush_asid_range(parts, cpu, task, asid, &f, partial);
    cost += t;
    trace_flush_done(obs, trace_at, local, f.mm.is_none(), pages);
    cost
}

/// The flush of flush_tlb_func() on `cpu`'s ASID `asid`: INVLPG each page of a `partial` flush
/// (flush_tlb_one_user), else the whole ASID (flush_tlb_local). Its time and the pages flushed
/// (-1: all, as the tlb_flush tracepoint says).
fn flush_asid_range(
    p: Parts,
    cpu: CpuId,
    task: Option<TaskId>,
    asid: u8,
    f: &FlushInfo,
    partial: bool,
) -> (Time, i64) {
    let (m, a, obs) = (p.m, p.arch, p.obs);
    let local = cpu == f.initiating_cpu;
    if partial {
        let step = 1u64 << (f.stride_shift - 12);
        let n = (f.end - f.start).div_ceil(step);
        let mut vpn = f.start;
        while vpn < f.end {
            a.tlb[cpu].flush_one(asid, vpn);
            vpn += step;
        }
        let t = n * m.cost[Cost::Invlpg];
        // Before 4.15 paravirt patched `invlpg` into the caller (a035795499ca).
        let func = if a.cfg.flush_one_call {
            Func::NativeFlushTlbOneUser
        } else {
            Func::FlushTlbFunc
        };
        obs.stats.charge(task, func, t);
        if local {
            obs.stats.vm(Vm::TlbLocalFlushOne, n);
        }
        (t, n as i64)
    } else {
        a.tlb[cpu].flush_asid(asid);
        let t = m.cost[Cost::Cr3Flush];
        obs.stats.charge(task, Func::NativeFlushTlbLocal, t);
        if local {
            obs.stats.vm(Vm::TlbLocalFlushAll, 1);
        }
        (t, -1)
    }
}

fn trace_flush_done(obs: &mut Observe, at: Option<LineAt>, local: bool, no_mm: bool, pages: i64) {
    let reason = if !local {
        TLB_REMOTE_SHOOTDOWN
    } else if no_mm {
        TLB_LOCAL_SHOOTDOWN
    } else {
        TLB_LOCAL_MM_SHOOTDOWN
    };
    obs.tlb_flush(at, reason, pages);
}

/// percpu_flush_tlb_batch_pages() (4.3 to 4.5): count, then flush_tlb_local(), a full flush of
/// whatever mm is loaded, lazy or not. 4.3 counted the sender's own run as received too.
pub fn flush_tlb_batch_pages(p: Parts, cpu: CpuId, task: Option<TaskId>) -> Time {
    let (m, a, stats) = (p.m, p.arch, &mut p.obs.stats);
    stats.vm(Vm::TlbRemoteFlushReceived, 1);
    stats.irq(Irq::Tlb, cpu);
    let asid = a.x86.cpu[cpu].loaded_asid;
    let mut ps = m.cost[Cost::FlushTlbFunc];
    // With PCID (arch_tlbbatch_flush -> flush_tlb_func): nothing to do if this ASID has caught
    // up with its mm's tlb_gen; else a full flush brings it there.
    let behind = match a.x86.cpu[cpu].loaded_mm {
        Some(mm) if a.cfg.pcid && (asid as usize) < NR_ASID_SLOTS => {
            let gen = a.mm[mm].tlb_gen;
            let ctx = &mut a.x86.cpu[cpu].ctxs[asid as usize];
            std::mem::replace(&mut ctx.tlb_gen, gen) < gen
        }
        _ => true,
    };
    if behind {
        a.tlb[cpu].flush_asid(asid);
        ps += m.cost[Cost::Cr3Flush];
    }
    stats.charge(task, Func::FlushTlbBatchPages, ps);
    ps
}

/// The PFN-list handler (v5 percpu_flush_tlb_batch_pages): one INVLPG per listed page. It flushes
/// the pages' user addresses (what the series meant; see docs/kernel/reclaim-4.x.md).
pub fn flush_tlb_pfns(s: &mut impl Host, cpu: CpuId, task: Option<TaskId>, sender: CpuId) -> Time {
    let owner = s.current(sender).expect("batch flush sender runs a task");
    let p = s.arch_parts();
    p.obs.stats.vm(Vm::TlbRemoteFlushReceived, 1);
    p.obs.stats.irq(Irq::Tlb, cpu);
    let st = &p.arch.x86.cpu[cpu];
    let (asid, loaded) = (st.loaded_asid, st.loaded_mm);
    let mut n = 0;
    while let Some((mm, vpn)) = s.batch_page(owner, n) {
        n += 1;
        // The posted PFN list's INVLPG (mm None) takes a physical address as a linear one: below
        // the RAM's size, far under x86-64's mmap base (near 128 TiB), where file maps lie.
        if mm.is_some_and(|mm| loaded == Some(mm as usize)) {
            s.arch_parts().arch.tlb[cpu].flush_one(asid, vpn);
        }
    }
    let p = s.arch_parts();
    // The list is the sender's tlb_ubc.pfns[], 8 bytes a page: its lines come over.
    let lines = (n as Time).div_ceil(8) * p.m.line_transfer(sender, cpu);
    let ps = p.m.cost[Cost::FlushTlbFunc] + n as Time * p.m.cost[Cost::Invlpg] + lines;
    p.obs.stats.charge(task, Func::FlushTlbBatchPages, ps);
    ps
}

/// arch_tlbbatch_flush() (6.1 arch/x86/mm/tlb.c): a full flush with no mm; from 6.15 with
/// INVLPGB, one broadcast flush of everything instead. With another CPU in
/// the mask, flush_tlb_multi() -> native_flush_tlb_multi(): no page tables were freed, so
/// on_each_cpu_cond_mask(tlb_is_not_lazy, flush_tlb_func, ...) skips lazy CPUs (4.20; before,
/// every CPU got it), this CPU included; else flush_tlb_func() here alone. flush_tlb_func()
/// counts the TLB row only `if (!local)`.
pub fn arch_tlbbatch_flush(s: &mut impl Host, cpu: CpuId, t: TaskId, mask: &CpuMask) -> Outcome {
    let trace_at = s.trace_at(cpu);
    let (a, m) = s.arch_view();
    if broadcast::active(a, m) && broadcast::rar(a) {
        // The RAR RFC: rar_full_flush() of the batch's CPUs, every PCID; no IPI.
        return super::rar::rar_full_flush(s, cpu, t, mask);
    }
    if broadcast::active(a, m) {
        // 6.15 (0b7eb55cb706): pages were unmapped (else no flush is asked for), so
        // invlpgb_flush_all_nonglobals(): every ASID on every CPU, then __tlbsync(); no IPI.
        return broadcast::flush_all_nonglobals(s, cpu, t);
    }
    let p = s.arch_parts();
    p.arch.x86.info[cpu] = FlushInfo {
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
        p.obs.stats.vm(Vm::TlbRemoteFlush, 1);
        p.obs.tlb_flush(trace_at, TLB_REMOTE_SEND_IPI, -1);
        let cond = match p.arch.cfg.lazy_tlb {
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

#[cfg(test)]
mod tests {
    use crate::engine::Time;
    use crate::machine::Cost;
    use crate::observe::{Func, Irq, Trace};
    use crate::sched::{self, Step};
    use crate::sim::Sim;
    use crate::step::FlushRange;
    use crate::testing::{machine, run_until, spawn, work, Then, MM};

    const MS: Time = 1_000_000_000;

    /// A one-page flush of MM (page 10), with or without freed page tables.
    fn flush(freed_tables: bool) -> Step {
        Step::FlushTlbMmRange(FlushRange {
            mm: MM as u32,
            start: 10,
            end: 11,
            stride_shift: 12,
            freed_tables,
        })
    }

    fn tlb_irqs(s: &Sim, cpu: usize) -> u64 {
        s.obs.stats.irqs[Irq::Tlb as usize][cpu]
    }

    fn wrong_cpu_traces(s: &Sim) -> u64 {
        s.obs.stats.trace[Trace::TlbFlushRemoteWrongCpu as usize]
    }

    /// 3 CPUs. MM's thread on CPU 1 runs 1 ms and sleeps (CPU 1 goes lazy on MM); at 2 ms a
    /// thread of a second process starts there and runs for good (switch_mm MM -> mm2). CPU 0
    /// runs MM's thread that flushes one page at 5, 10, 15 and 20 ms (jiffies 1-5 at HZ 250).
    fn left_for_another_mm(variant: &str, next_trim: u64) -> Sim {
        let mut s = machine(
            3,
            "linux-6.18",
            Then::Sleep,
            &[("kernel.mm_cpumask", variant)],
        );
        let mm2 = crate::testing::mm_alloc(&mut s);
        s.arch.mm[MM].next_trim_cpumask = next_trim;
        spawn(&mut s, MM, 1, &[work(MS, false)]);
        let b = sched::spawn_at(&mut s, mm2, 1, 2 * MS);
        s.sched.tasks[b].steps = vec![work(1000 * MS, false)];
        let mut steps = Vec::new();
        for _ in 0..4 {
            steps.push(work(5 * MS, false));
            steps.push(flush(false));
        }
        spawn(&mut s, MM, 0, &steps);
        s
    }

    /// CPU 1 runs MM and CPU 0 has begun flushing its pages [10, end): inc_mm_tlb_gen(), then
    /// its flush_tlb_info. Returns the flush's tlb_gen.
    fn pending_flush(s: &mut Sim, end: u64) -> u64 {
        crate::arch::load_for_test(s, 1, MM);
        let (gen, _) = super::inc_mm_tlb_gen(&mut s.arch, &s.m, 0, 0, MM);
        s.arch.x86.info[0] = super::FlushInfo {
            mm: Some(MM),
            start: 10,
            end,
            stride_shift: 12,
            new_tlb_gen: gen,
            freed_tables: false,
            trim_cpumask: false,
            initiating_cpu: 0,
        };
        gen
    }

    /// A flush target pays for the lines it reads: the sender's flush_tlb_info always, and the
    /// mm's tlb_gen, which the sender's inc_mm_tlb_gen() just wrote, only when it is behind the
    /// flush (aa44284960d5, 6.0), or at every flush with `kernel.tlb_gen_read_early` (to 5.19).
    #[test]
    fn a_flush_target_reads_the_senders_info_and_the_mms_tlb_gen_line() {
        // (tlb_gen_read_early, target behind the flush, lines read)
        for (early, behind, lines) in [
            ("false", true, 2),
            ("false", false, 1),
            ("true", true, 2),
            ("true", false, 2),
        ] {
            let mut s = machine(
                2,
                "linux-6.18",
                Then::Sleep,
                &[("kernel.tlb_gen_read_early", early)],
            );
            let gen = pending_flush(&mut s, 11);
            assert_eq!(s.arch.mm[MM].tlb_gen_line.acquisitions, 1);
            if !behind {
                s.arch.x86.cpu[1].ctxs[0].tlb_gen = gen;
            }
            let t = super::flush_tlb_func(&mut s, 1, None, 0, 0);
            let work = s.m.cost[Cost::FlushTlbFunc] + behind as Time * s.m.cost[Cost::Invlpg];
            let line = s.m.line_transfer(0, 1);
            assert!(line > 0);
            assert_eq!(t - work, lines * line, "early {early}, behind {behind}");
        }
    }

    /// A target's INVLPG is native_flush_tlb_one_user's time from 4.15; before, paravirt patched
    /// it inline (a035795499ca), so perf counts it in flush_tlb_func.
    #[test]
    fn invlpg_is_charged_to_its_own_function_from_4_15() {
        for (call, own) in [("true", true), ("false", false)] {
            let mut s = machine(
                2,
                "linux-6.18",
                Then::Sleep,
                &[("kernel.flush_one_call", call)],
            );
            pending_flush(&mut s, 13);
            let t = super::flush_tlb_func(&mut s, 1, None, 0, 0);
            let invlpg = 3 * s.m.cost[Cost::Invlpg];
            let profile = &s.obs.stats.profile;
            let (one, func) = (
                profile[Func::NativeFlushTlbOneUser as usize],
                profile[Func::FlushTlbFunc as usize],
            );
            assert_eq!(one, own as Time * invlpg, "flush_one_call {call}");
            assert_eq!(one + func, t, "flush_one_call {call}");
        }
    }

    /// switch_mm_irqs_off() reads the next mm's tlb_gen: a CPU switching to the mm, or coming
    /// back to it from lazy mode behind a flush, takes the line the last inc_mm_tlb_gen() wrote;
    /// one still up to date, with the line, pays nothing. The line starts in memory.
    #[test]
    fn switching_to_the_mm_reads_its_tlb_gen_line() {
        let mut s = machine(2, "linux-6.18", Then::Sleep, &[]);
        let (cr3, line) = (s.m.cost[Cost::Cr3Flush], s.m.line_transfer(0, 1));
        let switch_at = |s: &mut Sim, t: Time, inc: bool| {
            if inc {
                let _ = super::inc_mm_tlb_gen(&mut s.arch, &s.m, 0, t, MM);
            }
            s.q.advance_to(t + MS);
            let ps = crate::arch::switch_mm_irqs_off(s, 1, Some(MM));
            super::enter_lazy_tlb(&mut s.arch, 1);
            ps
        };
        assert_eq!(
            switch_at(&mut s, 0, false),
            cr3,
            "a new mm, its line in memory"
        );
        assert_eq!(
            switch_at(&mut s, 2 * MS, true),
            cr3 + line,
            "back from lazy, behind"
        );
        assert_eq!(
            switch_at(&mut s, 4 * MS, false),
            0,
            "back from lazy, up to date"
        );
    }

    /// mm_cpumask's line under CPU 1's switches MM -> mm2 -> MM, after CPU 0 read MM's mask (as
    /// a flush does): to 6.12 every switch between mms clears the old mm's bit and sets the new
    /// one's, so leaving MM takes the line back from CPU 0's copy; from 209954cbc7d0 a switch
    /// only tests the new mm's bit (set again only if clear) and leaves the old mm's alone.
    #[test]
    fn switch_mm_writes_the_mm_cpumask_lines_as_each_variant_says() {
        // (variant, writes of MM's line, extra time of the switch to mm2)
        for (variant, writes, lines) in [("clear_on_switch", 3, 1), ("lazy_trim", 1, 0)] {
            let mut s = machine(
                2,
                "linux-6.18",
                Then::Sleep,
                &[("kernel.mm_cpumask", variant)],
            );
            let mm2 = crate::testing::mm_alloc(&mut s);
            let cr3 = s.m.cost[Cost::Cr3Flush];
            let switch_at = |s: &mut Sim, t: Time, next: usize| {
                s.q.advance_to(t);
                crate::arch::switch_mm_irqs_off(s, 1, Some(next))
            };
            // Both lines start in memory: nothing moves between caches.
            assert_eq!(switch_at(&mut s, 0, MM), cr3, "{variant}");
            let read = super::cpumask_read(&mut s.arch, &s.m, 0, MS, MM);
            assert_eq!(read, s.m.line_transfer(1, 0), "CPU 0's load");
            let out = switch_at(&mut s, 2 * MS, mm2);
            assert_eq!(out, cr3 + lines * s.m.line_transfer(0, 1), "{variant}");
            switch_at(&mut s, 4 * MS, MM);
            assert_eq!(s.arch.mm[MM].cpumask_line.writes, writes, "{variant}");
            assert!(s.arch.mm[MM].cpumask.test(1), "{variant}");
        }
    }

    /// Reclaim's batch (set_tlb_ubc_flush_pending() -> arch_tlbbatch_add_pending(), then
    /// cpumask_or()) loads the mm's mm_cpumask: a reclaimer on CPU 0 takes the line from CPU 1,
    /// whose switch_mm set its bit, for its first page; its second page finds its own copy. (No
    /// PCID: no tlb_gen line either.)
    #[test]
    fn the_reclaim_batch_loads_the_mm_cpumask_line() {
        let mut s = machine(2, "linux-6.18", Then::Sleep, &[("kernel.pcid", "false")]);
        crate::arch::switch_mm_irqs_off(&mut s, 1, Some(MM));
        let add = |s: &mut Sim, at: Time| {
            let p = crate::arch::Parts {
                m: &s.m,
                arch: &mut s.arch,
                obs: &mut s.obs,
            };
            crate::arch::tlbbatch_add_pending(p, 0, at, MM, 10)
        };
        assert_eq!(add(&mut s, MS), s.m.line_transfer(1, 0));
        assert_eq!(add(&mut s, 2 * MS), 0);
        assert_eq!(s.arch.mm[MM].cpumask_line.writes, 1, "CPU 1's switch only");
    }

    /// Each mm_cpumask variant on a CPU that left MM for another process: how many of MM's four
    /// flushes IPI it, and whether its bit is still set after each. clear_on_switch (to 6.12)
    /// clears it at the switch: no IPI. 209954cbc7d0 alone leaves it set and IPIs it at the
    /// first flush, whose wrong-mm path clears it: one IPI. 6db2526c1d69 IPIs it only on the
    /// once-a-second trim flush: none in the first second; with next_trim_cpumask at jiffy 2,
    /// the flush at jiffy 3 (strictly after) trims it: one IPI, then none.
    #[test]
    fn a_cpu_on_another_mm_gets_ipis_as_each_variant_says() {
        // (variant, next_trim_cpumask, CPU 1 TLB IPIs after each flush, bit after each flush)
        let cases: [(&str, u64, [u64; 4], [bool; 4]); 4] = [
            ("clear_on_switch", 250, [0, 0, 0, 0], [false; 4]),
            ("lazy_every_flush", 250, [1, 1, 1, 1], [false; 4]),
            ("lazy_trim", 250, [0, 0, 0, 0], [true; 4]),
            ("lazy_trim", 2, [0, 0, 1, 1], [true, true, false, false]),
        ];
        for (variant, next_trim, ipis, bits) in cases {
            let mut s = left_for_another_mm(variant, next_trim);
            run_until(&mut s, 3 * MS);
            assert_eq!(
                s.arch.mm[MM].cpumask.test(1),
                variant != "clear_on_switch",
                "{variant}: the bit after the switch to mm2"
            );
            for (i, (&n, &bit)) in ipis.iter().zip(&bits).enumerate() {
                // Flush i is sent at 5 (i + 1) ms and done well before the next.
                run_until(&mut s, (5 * (i as u64 + 1) + 3) * MS);
                assert_eq!(tlb_irqs(&s, 1), n, "{variant} {next_trim}: flush {i}");
                assert_eq!(s.arch.mm[MM].cpumask.test(1), bit, "{variant}: flush {i}");
            }
            // Every IPI CPU 1 took found it on mm2: one cpumask clear (and trace) each.
            assert_eq!(wrong_cpu_traces(&s), ipis[3], "{variant}");
            // MM's mm_cpumask line: CPUs 0 and 1 set their bits, and CPU 1's clears it at the
            // switch to mm2 (to 6.12) or at each wrong-CPU flush.
            let clears = (variant == "clear_on_switch") as u64 + ipis[3];
            assert_eq!(s.arch.mm[MM].cpumask_line.writes, 2 + clears, "{variant}");
            // CPU 2 never ran MM: never in its mask, never an IPI.
            assert_eq!(tlb_irqs(&s, 2), 0);
            // should_trim_cpumask() moved the deadline once, to the trimming jiffy + HZ.
            let want = match (variant, next_trim) {
                ("lazy_trim", 2) => 3 + 250,
                _ => next_trim,
            };
            assert_eq!(s.arch.mm[MM].next_trim_cpumask, want, "{variant}");
        }
    }

    /// A lazy CPU (MM's thread slept, MM still loaded) gets no IPI for a plain flush in any
    /// variant; a flush that freed page tables IPIs it and it leaves MM for init_mm. Before
    /// 209954cbc7d0 that switch cleared its bit; after, it stays set. 209954cbc7d0 then IPIs it
    /// at the next plain flush (it is on init_mm, not lazy) and it clears its bit; with
    /// 6db2526c1d69 it gets none and keeps its bit until a trim flush or another freed-tables
    /// flush (which then IPIs it a second time and clears it).
    #[test]
    fn a_lazy_cpu_after_a_freed_tables_flush() {
        // (variant, CPU 1 IPIs after flushes 1..=5, bit after flush 4, after flush 5)
        let cases = [
            ("clear_on_switch", [0, 1, 1, 1, 1], false, false),
            ("lazy_every_flush", [0, 1, 2, 2, 2], false, false),
            ("lazy_trim", [0, 1, 1, 1, 2], true, false),
        ];
        for (variant, ipis, bit4, bit5) in cases {
            let mut s = machine(
                2,
                "linux-6.18",
                Then::Sleep,
                &[("kernel.mm_cpumask", variant)],
            );
            spawn(&mut s, MM, 1, &[work(MS, false)]);
            let mut steps = Vec::new();
            for freed in [false, true, false, false, true] {
                steps.push(work(5 * MS, false));
                steps.push(flush(freed));
            }
            spawn(&mut s, MM, 0, &steps);
            run_until(&mut s, 3 * MS);
            assert!(s.arch.is_lazy(1), "{variant}: CPU 1 idles lazily on MM");
            for (i, &n) in ipis.iter().enumerate() {
                run_until(&mut s, (5 * (i as u64 + 1) + 3) * MS);
                assert_eq!(tlb_irqs(&s, 1), n, "{variant}: flush {i}");
                if i == 3 {
                    assert_eq!(s.arch.mm[MM].cpumask.test(1), bit4, "{variant}");
                }
            }
            assert_eq!(s.arch.loaded_mm(1), None, "{variant}: on init_mm");
            assert_eq!(s.arch.mm[MM].cpumask.test(1), bit5, "{variant}");
        }
    }
}
