//! Cross-CPU function calls (kernel/smp.c): per-CPU call queues, one csd per (sender, target),
//! the IPIs that announce queued work, and the handler pass that runs it.

use crate::engine::{CpuMask, Time};
use crate::machine::Cost;
use crate::observe::{Func, Trace};
use crate::sched::{self, Outcome, Step};
use crate::sim::{CpuId, Event, Sim, TaskId};

/// How smp_call_function_many queues work (one module per mechanism: the variants live here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFunction {
    /// 3.9 (9a46ad6d6df3): a queue per target CPU and a csd per (sender, target) pair.
    PercpuCsd,
}

impl CallFunction {
    pub const NAMES: &'static [&'static str] = &["percpu_csd"];
    /// One variant so far; the 3.8 global_cfd queue comes with the swapout scenario.
    pub fn from_name(_name: &str) -> CallFunction {
        CallFunction::PercpuCsd
    }
}

/// The function a csd runs on its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFunc {
    /// flush_tlb_func with the sender's flush_tlb_info.
    FlushTlbFunc,
    /// percpu_flush_tlb_batch_pages (4.3): a full local flush.
    FlushTlbBatchPages,
    /// The PFN-list variant: INVLPG each page of the sender's batch.
    FlushTlbPfns,
    /// drain_local_pages: this CPU's pcp lists back to the buddy allocator.
    DrainLocalPages,
    /// ipi_mb (kernel/sched/membarrier.c): smp_mb() on the target, for membarrier.
    IpiMb,
}

/// on_each_cpu_cond_mask's per-CPU condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Always,
    /// should_flush_tlb (x86) with the sender's flush_tlb_info.
    ShouldFlushTlb,
}

/// A queued call_single_data: who asked, and what to run.
#[derive(Debug, Clone, Copy)]
pub struct Csd {
    pub sender: u32,
    pub func: CallFunc,
}

pub struct Smp {
    /// call_single_queue of each CPU, in arrival (FIFO) order.
    pub queue: Vec<Vec<Csd>>,
    /// Scratch for the batch a handler pass detaches (llist_del_all).
    batch: Vec<Csd>,
    /// Per sender: targets whose csd is locked (queued and not yet run).
    pub locked: Vec<CpuMask>,
    /// Per sender: locked csds it waits for (csd_lock_wait).
    pub waiting: Vec<u32>,
    /// Per sender: when the sender sees its last csd unlocked (valid once `waiting` is 0).
    pub done_at: Vec<Time>,
}

impl Smp {
    pub fn new(n: usize) -> Smp {
        Smp {
            queue: (0..n).map(|_| Vec::with_capacity(n)).collect(),
            batch: Vec::with_capacity(n),
            locked: vec![CpuMask::new(); n],
            waiting: vec![0; n],
            done_at: vec![0; n],
        }
    }
}

fn cond_holds(s: &Sim, cond: Cond, cpu: CpuId, sender: CpuId) -> bool {
    match cond {
        Cond::Always => true,
        Cond::ShouldFlushTlb => crate::arch::x86::should_flush_tlb(s, cpu, sender),
    }
}

/// Send one IPI from `from` to `to`, leaving the sender at `at`.
fn send_ipi(s: &mut Sim, from: CpuId, to: CpuId, at: Time) {
    s.stats.ipis_sent += 1;
    let arrive = at + s.m.ipi_wire(from, to);
    let flow = s.trace.as_mut().map_or(0, |tr| tr.ipi_sent(from, at));
    s.q.schedule(
        arrive,
        Event::IpiArrive {
            cpu: to as u32,
            flow,
        },
    );
}

/// smp_call_function_many_cond(): queue `func` on every CPU of `mask` (but this one) for which
/// `cond` holds, send the IPIs, optionally run `func` here too, and optionally wait.
#[allow(clippy::too_many_arguments)]
pub fn smp_call_function_many_cond(
    s: &mut Sim,
    cpu: CpuId,
    task: TaskId,
    mask: &CpuMask,
    func: CallFunc,
    cond: Cond,
    wait: bool,
    run_local: bool,
) -> Outcome {
    let now = s.now();
    let mut setup: Time = 0;
    let mut queued = CpuMask::new();
    let mut was_empty = CpuMask::new();
    for t in mask.iter().filter(|&t| t != cpu) {
        if !cond_holds(s, cond, t, cpu) {
            continue;
        }
        debug_assert!(
            !s.smp.locked[cpu].test(t),
            "csd to {t} still locked: no async calls are modelled yet"
        );
        s.smp.locked[cpu].set(t);
        if wait {
            if s.smp.waiting[cpu] == 0 {
                s.smp.done_at[cpu] = 0;
            }
            s.smp.waiting[cpu] += 1;
        }
        s.stats.trace(Trace::CsdQueueCpu);
        // llist_add() returns true when the target's queue was empty.
        if s.smp.queue[t].is_empty() {
            was_empty.set(t);
        }
        s.smp.queue[t].push(Csd {
            sender: cpu as u32,
            func,
        });
        setup += s.m.cost[Cost::CsdQueue];
        queued.set(t);
    }
    let nr_queued = queued.weight();
    // A lone target (smp_call_function_single before 4.13) and, since 4.13, every target gets an
    // IPI only if its queue was empty: a non-empty queue is already going to be run.
    let ipi_mask = if nr_queued == 1 || s.k.skip_ipi_if_queued {
        was_empty
    } else {
        queued
    };
    let nr_ipi = ipi_mask.weight();
    let last = ipi_mask.iter().last().unwrap_or(0);
    let mut send: Time = 0;
    if nr_ipi == 1 {
        // send_call_function_single_ipi(): an idle CPU that is polling needs no interrupt.
        if s.k.ipi_poll_elision && sched::idle_polling(s, last) {
            s.stats.trace(Trace::WakeIdleWithoutIpi);
            let at = now + setup + s.m.line_transfer(cpu, last);
            s.q.schedule(at, Event::PollKick { cpu: last as u32 });
        } else {
            crate::observe::tracelog::ipi_send_cpu(s, cpu, last);
            send += s.m.cost[Cost::IpiSend];
            send_ipi(s, cpu, last, now + setup + send);
        }
    } else if nr_ipi > 1 {
        // send_call_function_ipi_mask() traces the whole mask once.
        crate::observe::tracelog::ipi_send_cpumask(s, cpu, &ipi_mask);
        // One ICR write per target (default_send_IPI_mask_sequence_phys / x2apic physical mode).
        for t in ipi_mask.iter() {
            send += s.m.cost[Cost::IpiSend];
            send_ipi(s, cpu, t, now + setup + send);
        }
    }
    if wait && nr_queued > 0 {
        s.tasks[task].steps.push(Step::CsdLockWait);
    }
    if run_local && mask.test(cpu) && cond_holds(s, cond, cpu, cpu) {
        s.tasks[task].steps.push(Step::LocalCall(func));
    }
    // The ICR writes follow the queueing with nothing in between: one busy period for both.
    sched::charge(s, Some(task), Func::SmpCallFunctionManyCond, setup);
    sched::charge(s, Some(task), Func::SendIpi, send);
    Outcome::Busy {
        ps: setup + send,
        irqs_off: false,
    }
}

/// Run a call function on the calling CPU, IRQs off (SCF_RUN_LOCAL).
pub fn run_local(s: &mut Sim, cpu: CpuId, task: TaskId, func: CallFunc) -> Outcome {
    let ps = run_func(s, cpu, Some(task), cpu, func);
    Outcome::Busy { ps, irqs_off: true }
}

fn run_func(s: &mut Sim, cpu: CpuId, task: Option<TaskId>, sender: CpuId, func: CallFunc) -> Time {
    match func {
        CallFunc::FlushTlbFunc => crate::arch::x86::flush_tlb_func(s, cpu, task, sender),
        CallFunc::FlushTlbBatchPages => crate::mm::rmap::flush_tlb_batch_pages(s, cpu, task),
        CallFunc::FlushTlbPfns => crate::mm::rmap::flush_tlb_pfns(s, cpu, task, sender),
        CallFunc::DrainLocalPages => crate::mm::drain::drain_local_pages(s, cpu, task),
        // ipi_mb(): one smp_mb(), a few dozen cycles: within the noise of irq_entry_exit.
        CallFunc::IpiMb => 0,
    }
}

/// __flush_smp_call_function_queue(): detach this CPU's queue and run each csd in order, from
/// `start`. Each csd unlocks when its function returns. Returns the time spent.
pub fn flush_smp_call_function_queue(
    s: &mut Sim,
    cpu: CpuId,
    task: Option<TaskId>,
    start: Time,
) -> Time {
    let mut batch = std::mem::take(&mut s.smp.batch);
    batch.clear();
    std::mem::swap(&mut batch, &mut s.smp.queue[cpu]);
    let mut t = start;
    for csd in &batch {
        t += run_func(s, cpu, task, csd.sender as usize, csd.func);
        csd_unlock(s, csd.sender as usize, cpu, t);
    }
    s.smp.batch = batch;
    t - start
}

/// csd_unlock() at time `at` (now or later in this handler pass): the csd is free again, and a
/// waiting sender sees it once the cache line holding csd->node.u_flags comes back to it.
/// Unlock times are known when the pass starts, so no event is needed per csd.
fn csd_unlock(s: &mut Sim, sender: CpuId, target: CpuId, at: Time) {
    s.smp.locked[sender].clear(target);
    if s.smp.waiting[sender] > 0 {
        s.smp.waiting[sender] -= 1;
        let seen = at + s.m.line_transfer(target, sender);
        s.smp.done_at[sender] = s.smp.done_at[sender].max(seen);
        if s.smp.waiting[sender] == 0 {
            sched::kick_spinner(s, sender);
        }
    }
}
