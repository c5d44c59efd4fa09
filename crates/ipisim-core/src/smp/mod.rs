//! Cross-CPU function calls (kernel/smp.c): per-CPU call queues, one csd per (sender, target),
//! the IPIs that announce queued work, and the handler pass that runs it. Before 3.9 a call to
//! several CPUs went through one global queue instead (`global_cfd`).

use crate::config::{named_enum, params, Kind};
use crate::engine::{CpuId, CpuMask, EventQueue, SpinLock, TaskId, Time};
use crate::machine::{Apic, Arch, Cost, Machine};
use crate::observe::tracelog::LineAt;
use crate::observe::{Func, Observe, Trace};
use crate::step::Event;
pub use crate::step::{CallFunc, Cond, Vector};
use crate::step::{Outcome, SpinOn, Step};

named_enum! {
    /// How smp_call_function_many queues work (one module per mechanism: the variants live here).
    CallFunction {
        /// To 3.8: each sender's one cfd_data goes on the global call_function.queue under
        /// call_function.lock; every target walks the whole queue (generic_smp_call_function_interrupt).
        GlobalCfd = "global_cfd",
        /// 3.9 (9a46ad6d6df3): a queue per target CPU and a csd per (sender, target) pair.
        PercpuCsd = "percpu_csd",
    }
}

named_enum! {
    /// How a CPU's call_single_queue is guarded.
    CallSingleQueue {
        /// To 3.13: a list under `call_single_queue.lock`, taken by each sender to add a csd
        /// (raw_spin_lock_irqsave in generic_exec_single / smp_call_function_many) and by the
        /// handler to detach the list (generic_smp_call_function_single_interrupt).
        Spinlock = "spinlock",
        /// 3.14 (6897fc22ea01): a lock-free llist, llist_add by senders and llist_del_all.
        Llist = "llist",
    }
}

/// One sender's `struct call_function_data` (3.8): its request, the CPUs yet to run it, and
/// the cache line all of them write (cpumask bits, refs).
#[derive(Debug, Clone, Default)]
pub struct Cfd {
    func: Option<CallFunc>,
    /// Its sender waits until the last target drops refs.
    wait: bool,
    cpumask: CpuMask,
    refs: u32,
    pub line: SpinLock,
    /// When list_add_rcu() and atomic_set(&data->refs) publish it to the handlers' walks.
    visible_at: Time,
    /// Targets the sender's IPI loop has not reached yet.
    unsent: CpuMask,
    /// When each target cleared its bit of `cpumask` (cpumask_test_and_clear_cpu).
    cleared_at: Vec<Time>,
}

/// The global `call_function` of 3.8: a list and its lock.
#[derive(Debug, Default)]
pub struct GlobalCfd {
    pub lock: SpinLock,
    /// Senders whose cfd is on call_function.queue, newest first (list_add_rcu at the head).
    pub queue: Vec<u32>,
    pub cfd: Vec<Cfd>,
}

/// A queued call_single_data: who asked, and what to run.
#[derive(Debug, Clone, Copy)]
pub struct Csd {
    pub sender: u32,
    pub func: CallFunc,
    /// CSD_FLAG_SYNCHRONOUS: its sender waits for it in csd_lock_wait().
    pub wait: bool,
}

params! {
    /// The kernel preset's choices for cross-CPU calls (kernel.*), declared where they are used.
    #[derive(Debug, Clone, Copy)]
    pub struct SmpConfig;
    pub const PARAMS = {
        call_function: CallFunction = "kernel.call_function", Kind::Choice(CallFunction::NAMES), "", "percpu_csd", "smp_call_function_many: `global_cfd` (to 3.8: one global queue under one lock, every handler walks it) or `percpu_csd` (per-CPU queues and a csd per (sender, target), 9a46ad6d6df3, 3.9)";
        call_single_queue: CallSingleQueue = "kernel.call_single_queue", Kind::Choice(CallSingleQueue::NAMES), "", "llist", "each CPU's call queue: `spinlock` (a list under call_single_queue.lock that every sender and the handler take, to 3.13) or `llist` (lock-free llist_add / llist_del_all, 6897fc22ea01, 3.14)";
        cfd_cpumask_ipi: bool = "kernel.cfd_cpumask_ipi", Kind::Bool, "", "true", "`global_cfd` sends its IPIs to cfd_data's cpumask_ipi, a copy of the targets taken before list_add_rcu (\"smp: Fix SMP function call empty cpu mask race\", 2013-01, 3.8): every target gets one; false: to the live cpumask, which targets clear as they run the cfd, so one that ran it already gets none (to 3.7)";
        local_call_after_wait: bool = "kernel.local_call_after_wait", Kind::Bool, "", "false", "on_each_cpu() and on_each_cpu_mask() run the call on this CPU after the remote ones are done (to 5.12); false: smp_call_function_many_cond() runs it between the IPIs and the wait (a32a4d8a815c, 5.13)";
        skip_ipi_if_queued: bool = "kernel.skip_ipi_if_queued", Kind::Bool, "", "true", "smp_call_function_many sends no IPI to a CPU whose call queue already holds work (3fc5b3b6a80b, 4.13)";
        ipi_poll_elision: bool = "kernel.ipi_poll_elision", Kind::Bool, "", "true", "a single-target call IPI to an idle CPU that is polling sets NEED_RESCHED instead (call_function_single_prep_ipi)";
        smp_call_function_many_cond: bool = "kernel.smp_call_function_many_cond", Kind::Bool, "", "true", "the worker that queues and sends cross-CPU calls is smp_call_function_many_cond() (Sebastian Andrzej Siewior, 5.6), as perf names it; false: smp_call_function_many() itself, before";
    }
}

pub struct Smp {
    pub cfg: SmpConfig,
    /// call_single_queue of each CPU, in arrival (FIFO) order.
    pub queue: Vec<Vec<Csd>>,
    /// call_single_queue.lock of each CPU (`call_single_queue = spinlock`, to 3.13).
    pub queue_lock: Vec<SpinLock>,
    /// The line of each CPU's call_single_queue llist head (3.14 on): every sender's llist_add()
    /// cmpxchg and the handler's llist_del_all() xchg own it in turn. It starts in its CPU's cache.
    pub llist_head: Vec<SpinLock>,
    /// Each CPU's handler pass in progress.
    pub pass: Vec<Pass>,
    /// Per sender: targets whose csd is locked (queued and not yet run).
    pub locked: Vec<CpuMask>,
    /// Per sender: locked csds it waits for (csd_lock_wait).
    pub waiting: Vec<u32>,
    /// Per sender: when the sender sees its last csd unlocked (valid once `waiting` is 0).
    pub done_at: Vec<Time>,
    /// The 3.8 global queue (used with `call_function = global_cfd`).
    pub global: GlobalCfd,
    /// Per sender: the csd it spins on in csd_lock() (its target, GLOBAL_CFD, or NO_CPU: none),
    /// and when it sees that csd unlocked.
    pub csd_lock_on: Vec<u32>,
    /// Per CPU: the call its task waits to make in csd_lock() (smp_call_function_many_cond, made
    /// again once the csd is free); preemption is off meanwhile, so the task stays on the CPU.
    pub csd_lock_call: Vec<Option<Call>>,
    pub csd_free_at: Vec<Time>,
    /// Per sender: the call whose csds it is queueing (the loop of smp_call_function_many_cond).
    pub sending: Vec<Option<Sending>>,
}

/// A handler's pass over the call queues, part-way through (generic_smp_call_function_interrupt
/// of 3.8 walks the global queue after the CPU's own).
#[derive(Debug, Default)]
pub struct Pass {
    /// The csds it detached (llist_del_all / list_replace_init), and how many it has run.
    batch: Vec<Csd>,
    ran: usize,
    /// 3.8: the walk of the global queue has begun; the cfds on it then not visited yet (one
    /// unlinked meanwhile is dropped, one added later is not seen: list_add_rcu at the head).
    walk_begun: bool,
    walk: CpuMask,
    /// The first and last csd's lines came over under the queue lock (list_replace_init): their
    /// reads are free. 0, 1 or 2 (first, then last).
    read_under_lock: usize,
    /// Where it has got to.
    pub at: Time,
}

/// A call of smp_call_function_many_cond() part-way through its loop over the targets.
#[derive(Debug, Clone, Copy)]
pub struct Sending {
    /// Targets not queued on yet, queued on, and whose queue was empty then.
    left: CpuMask,
    queued: CpuMask,
    was_empty: CpuMask,
    func: CallFunc,
    wait: bool,
    callsite: &'static str,
    /// SCF_RUN_LOCAL and the condition holds here: run `func` on this CPU after the sends.
    run_local: bool,
    /// When the llist_add()s so far all have their heads' lines. Their read-for-ownerships
    /// overlap (measured: docs/kernel/smp-call-function.md section 6), so the loop goes on and
    /// waits once, at its end, for the latest line.
    heads_ready: Time,
}

pub const NO_CPU: u32 = u32::MAX;
/// `csd_lock_on` for the sender's 3.8 cfd_data, which the last of its targets unlocks.
pub const GLOBAL_CFD: u32 = u32::MAX - 1;

/// A call of smp_call_function_many_cond() waiting in csd_lock() to be made.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    mask: CpuMask,
    func: CallFunc,
    cond: Cond,
    wait: bool,
    run_local: bool,
}

impl Smp {
    pub fn new(n: usize, cfg: SmpConfig) -> Smp {
        // Only 3.x's live-mask IPI loop reads the cfds' per-target clear times (n x n of them).
        let per_cfd = if cfg.call_function == CallFunction::GlobalCfd && !cfg.cfd_cpumask_ipi {
            n
        } else {
            0
        };
        Smp {
            cfg,
            queue: (0..n).map(|_| Vec::with_capacity(n)).collect(),
            queue_lock: vec![SpinLock::default(); n],
            llist_head: (0..n).map(SpinLock::on).collect(),
            pass: (0..n)
                .map(|_| Pass {
                    batch: Vec::with_capacity(n),
                    ..Default::default()
                })
                .collect(),
            locked: vec![CpuMask::new(); n],
            waiting: vec![0; n],
            done_at: vec![0; n],
            global: GlobalCfd {
                cfd: vec![
                    Cfd {
                        cleared_at: vec![0; per_cfd],
                        ..Default::default()
                    };
                    n
                ],
                ..Default::default()
            },
            csd_lock_on: vec![NO_CPU; n],
            csd_lock_call: vec![None; n],
            csd_free_at: vec![0; n],
            sending: vec![None; n],
        }
    }

    /// `cpu` is in 3.8's IPI loop (smp_call_function_many runs with preemption off).
    pub fn sending_cfd_ipis(&self, cpu: CpuId) -> bool {
        !self.global.cfd[cpu].unsent.is_empty()
    }
}

/// The state smp works on, borrowed together from the machine around it.
pub struct Parts<'a> {
    pub m: &'a Machine,
    pub q: &'a mut EventQueue<Event>,
    pub smp: &'a mut Smp,
    pub obs: &'a mut Observe,
}

/// What smp needs from the machine around it: its state and the observer (`parts`), the
/// scheduler's task stacks, and the code above it that a csd runs. The root implements it for
/// `Sim` (sim.rs), so smp names nothing above it; the calls stay static (generic, no indirect
/// call per csd).
pub trait Host {
    /// smp's state, the machine, the event queue and the observer, borrowed together.
    fn parts(&mut self) -> Parts<'_>;
    /// smp's state and the machine, to read.
    fn view(&self) -> (&Smp, &Machine);
    fn now(&self) -> Time;
    /// Push `step` on task `t`'s stack: what it does next.
    fn push_step(&mut self, t: TaskId, step: Step);
    /// Take back the step pushed last for task `t`, if any.
    fn pop_step(&mut self, t: TaskId) -> Option<Step>;
    /// A tracepoint's context on `cpu` when a trace is recorded.
    fn trace_at(&self, cpu: CpuId) -> Option<LineAt>;
    /// Run `func` on `cpu` for `sender` at `at` (task: the CPU's current task): the handler's
    /// time.
    fn run_call(
        &mut self,
        cpu: CpuId,
        task: Option<TaskId>,
        sender: CpuId,
        func: CallFunc,
        at: Time,
    ) -> Time;
    /// Does `cpu` want the call `sender` is making (on_each_cpu_cond_mask's cond_func)?
    fn call_wanted(&self, cond: Cond, cpu: CpuId, sender: CpuId) -> bool;
    /// Is `cpu` idle and polling its need-resched flag (set_nr_if_polling)?
    fn idle_polling(&self, cpu: CpuId) -> bool;
    /// A CPU spinning in csd_lock or csd_lock_wait looks at its condition again.
    fn kick_spinner(&mut self, cpu: CpuId);
    /// Is `cpu` polling its csd in csd_lock_wait() at `at` (not in a handler)?
    fn polls_csd(&self, cpu: CpuId, at: Time) -> bool;
}

/// Where perf shows the IPI writes: the APIC send loop of machine.apic, or powerpc's XIVE trigger
/// store.
fn send_ipi_func(m: &Machine) -> Func {
    match m.arch {
        Arch::X86 => match m.apic {
            Apic::Phys => Func::SendIpiPhys,
            Apic::X2apicCluster => Func::SendIpiX2apic,
            Apic::KvmPv => Func::SendIpiKvmPv,
        },
        Arch::PowerpcRadix => Func::XiveCauseIpi,
        // arm64: smp_cross_call() -> __ipi_send_mask() -> the GICv3 SGI write.
        Arch::Arm64 => Func::GicIpiSendMask,
        // riscv with the SBI IPI driver: sbi_send_ipi() -> an SBI IPI ecall.
        Arch::Riscv => Func::SbiSendIpi,
    }
}

impl SmpConfig {
    /// The sending worker as perf names it: smp_call_function_many_cond() since 5.6, before that
    /// smp_call_function_many() itself (csd_lock_wait() is inlined into either).
    pub fn scf_func(&self) -> Func {
        match self.smp_call_function_many_cond {
            true => Func::SmpCallFunctionManyCond,
            false => Func::SmpCallFunctionMany,
        }
    }
}

/// Send one IPI of `vector` from `from` to `to`, leaving the sender at `at`.
fn send_ipi(p: &mut Parts, from: CpuId, to: CpuId, vector: Vector, at: Time) {
    p.obs.stats.ipis_sent += 1;
    let vector = match p.m.arch {
        Arch::X86 => vector,
        Arch::PowerpcRadix | Arch::Arm64 | Arch::Riscv => Vector::CallFunction,
    };
    let arrive = at + p.m.ipi_wire(from, to);
    let flow = p.obs.trace.as_mut().map_or(0, |tr| tr.ipi_sent(from, at));
    p.q.schedule(
        arrive,
        Event::IpiArrive {
            cpu: to as u16,
            vector,
            flow,
        },
    );
}

/// send_call_function_ipi_mask(): trace the mask once, then one CALL_FUNCTION_VECTOR ICR write per
/// target (default_send_IPI_mask_sequence_phys / x2apic physical mode) from `at`. Returns the time
/// taken.
fn send_ipi_mask(
    s: &mut impl Host,
    from: CpuId,
    mask: &CpuMask,
    at: Time,
    callsite: &'static str,
) -> Time {
    let trace_at = s.trace_at(from);
    let mut p = s.parts();
    p.obs.ipi_send_cpumask(trace_at, mask, callsite);
    let mut send: Time = 0;
    for t in mask.iter() {
        send += p.m.cost[Cost::IpiSend];
        send_ipi(&mut p, from, t, Vector::CallFunction, at + send);
    }
    send
}

/// The sender's csd_lock_wait() has one more csd to see unlocked.
fn wait_for_one_more(smp: &mut Smp, sender: CpuId) {
    if smp.waiting[sender] == 0 {
        smp.done_at[sender] = 0;
    }
    smp.waiting[sender] += 1;
}

/// Who called smp_call_function_many_cond(), as the ipi tracepoints' callsite shows it: a call
/// with a per-CPU condition or that runs here too came through on_each_cpu_cond_mask().
fn callsite(cond: Cond, run_local: bool) -> &'static str {
    if run_local || cond != Cond::Always {
        "on_each_cpu_cond_mask"
    } else {
        "smp_call_function_many"
    }
}

/// The call that waited in csd_lock(): make it now.
pub fn deferred_call(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let c = s.parts().smp.csd_lock_call[cpu]
        .take()
        .expect("a call waited in csd_lock");
    smp_call_function_many_cond(s, cpu, task, &c.mask, c.func, c.cond, c.wait, c.run_local)
}

/// smp_call_function_many(mask, func, info, wait = true): every CPU of `mask` but this one, no
/// condition, not run here; the caller waits for all.
pub fn smp_call_function_many(
    s: &mut impl Host,
    cpu: CpuId,
    task: TaskId,
    mask: &CpuMask,
    func: CallFunc,
) -> Outcome {
    smp_call_function_many_cond(s, cpu, task, mask, func, Cond::Always, true, false)
}

/// smp_call_function_many_cond(): queue `func` on every CPU of `mask` (but this one) for which
/// `cond` holds, send the IPIs, optionally run `func` here too, and optionally wait.
#[allow(clippy::too_many_arguments)]
pub fn smp_call_function_many_cond(
    s: &mut impl Host,
    cpu: CpuId,
    task: TaskId,
    mask: &CpuMask,
    func: CallFunc,
    cond: Cond,
    wait: bool,
    run_local: bool,
) -> Outcome {
    let mut targets = CpuMask::new();
    for t in mask.iter().filter(|&t| t != cpu) {
        if s.call_wanted(cond, t, cpu) {
            targets.set(t);
        }
    }
    let smp = s.parts().smp;
    debug_assert!(smp.sending[cpu].is_none(), "one call at a time per CPU");
    // 3.8 sends a lone target through smp_call_function_single (the per-CPU queue, below).
    let global = smp.cfg.call_function == CallFunction::GlobalCfd && targets.weight() > 1;
    // csd_lock(): a csd this CPU sent without waiting (wait = false) stays locked until its
    // target has run it (3.8's one cfd: until the last target has); the next request that needs
    // it spins here until then. (The kernel queues the targets before it first, but sends no IPI
    // until the loop ends.)
    let busy = if global {
        (smp.global.cfd[cpu].refs > 0).then_some(GLOBAL_CFD)
    } else {
        targets
            .iter()
            .find(|&t| smp.locked[cpu].test(t))
            .map(|t| t as u32)
    };
    if let Some(csd) = busy {
        smp.csd_lock_on[cpu] = csd;
        smp.csd_lock_call[cpu] = Some(Call {
            mask: mask.copied(),
            func,
            cond,
            wait,
            run_local,
        });
        s.push_step(task, Step::SmpCallFunctionMany);
        return Outcome::Spin(SpinOn::CsdLock);
    }
    if global {
        return global_cfd_call(
            s,
            cpu,
            task,
            &targets,
            func,
            wait,
            run_local && mask.test(cpu),
        );
    }
    s.parts().smp.sending[cpu] = Some(Sending {
        left: targets.copied(),
        queued: CpuMask::new(),
        was_empty: CpuMask::new(),
        func,
        wait,
        callsite: callsite(cond, run_local),
        run_local: run_local && mask.test(cpu) && s.call_wanted(cond, cpu, cpu),
        heads_ready: 0,
    });
    queue_loop(s, cpu, task)
}

/// The rest of a call's loop over its targets, where it stopped (Step::QueueCsds).
pub fn queue_csds(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    queue_loop(s, cpu, task)
}

/// smp_call_function_many_cond()'s loop: queue a csd on each target (csd_lock, then llist_add or
/// list_add_tail under the target's lock), then send the IPIs. Each target is queued at its own
/// time: when another event comes first, the loop stops there and goes on as a step of its own.
/// The call stays in `Smp::sending` meanwhile: it holds three CpuMasks, a 430-byte copy to move.
fn queue_loop(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let now = s.now();
    let mut setup: Time = 0;
    let mut queue_lock_wait: Time = 0;
    let mut p = s.parts();
    let scf = p.smp.cfg.scf_func();
    // To 3.13 each csd goes on under raw_spin_lock_irqsave(&dst->lock) and the IPIs go out under
    // the send loop's local_irq_save() (default_send_IPI_mask_sequence_phys): an IPI that comes
    // meanwhile waits for the next segment boundary (the kernel's IRQ window between two targets)
    // or the loop's end. (Since 3.14 the llist_add()s run with IRQs on; their send loop's IRQs-off
    // stretch is not modelled.)
    let irqs_off = p.smp.cfg.call_single_queue == CallSingleQueue::Spinlock;
    while let Some(t) = sending(p.smp, cpu).left.iter().next() {
        if setup > 0 && p.q.due_by(now + setup) {
            // Something happens before this target's turn (its handler may take the lock).
            p.obs.stats.charge(Some(task), scf, setup - queue_lock_wait);
            s.push_step(task, Step::QueueCsds);
            return Outcome::Busy {
                ps: setup,
                irqs_off,
            };
        }
        let (add, wait) = queue_csd(&mut p, cpu, task, t, now + setup);
        setup += wait + add;
        queue_lock_wait += wait;
    }
    let skip_ipi_if_queued = p.smp.cfg.skip_ipi_if_queued;
    let st = sending(p.smp, cpu);
    // The cmpxchgs retire in order, so the loop ends when the latest head's line is here.
    let stall = st.heads_ready.saturating_sub(now + setup);
    p.obs.stats.charge(Some(task), Func::LlistAddBatch, stall);
    setup += stall;
    queue_lock_wait += stall;
    let nr_queued = st.queued.weight();
    // A lone target (smp_call_function_single before 4.13) and, since 4.13, every target gets an
    // IPI only if its queue was empty: a non-empty queue is already going to be run.
    let ipi_mask = if nr_queued == 1 || skip_ipi_if_queued {
        st.was_empty.copied()
    } else {
        st.queued.copied()
    };
    let (wait, run_local, func, callsite) = (st.wait, st.run_local, st.func, st.callsite);
    p.smp.sending[cpu] = None;
    // smp_call_function_single() (a lone target, to 5.12) and, since a32a4d8a815c (5.13), a call
    // that sends one IPI raise CALL_FUNCTION_SINGLE_VECTOR; the others CALL_FUNCTION_VECTOR.
    let vector =
        match nr_queued == 1 || (!p.smp.cfg.local_call_after_wait && ipi_mask.weight() == 1) {
            true => Vector::CallFunctionSingle,
            false => Vector::CallFunction,
        };
    let send = send_call_ipis(s, cpu, &ipi_mask, vector, callsite, now + setup);
    push_wait_and_local(s, task, wait && nr_queued > 0, run_local.then_some(func));
    // The ICR writes follow the queueing with nothing in between: one busy period for both.
    let p = s.parts();
    p.obs.stats.charge(Some(task), scf, setup - queue_lock_wait);
    p.obs.stats.charge(Some(task), send_ipi_func(p.m), send);
    Outcome::Busy {
        ps: setup + send,
        irqs_off,
    }
}

/// The steps after a call's IPIs, in the kernel's order (the step pushed last runs first):
/// csd_lock_wait() for the targets and the call on this CPU. Since a32a4d8a815c (5.13) the local
/// call runs between the IPIs and the wait; before, on_each_cpu() and on_each_cpu_mask() ran it
/// once smp_call_function_many() had returned.
fn push_wait_and_local(s: &mut impl Host, task: TaskId, wait: bool, local: Option<CallFunc>) {
    let wait = wait.then_some(Step::CsdLockWait);
    let local = local.map(Step::LocalCall);
    let order = match s.view().0.cfg.local_call_after_wait {
        true => [local, wait],
        false => [wait, local],
    };
    for step in order.into_iter().flatten() {
        s.push_step(task, step);
    }
}

/// The call `cpu` is queueing.
fn sending(smp: &mut Smp, cpu: CpuId) -> &mut Sending {
    smp.sending[cpu].as_mut().expect("a call is being queued")
}

/// Queue `cpu`'s csd (of `Smp::sending`) on target `t` at `at` (llist_add, or list_add_tail under
/// the queue lock before 3.14): the time it adds, and the time spent waiting for the queue lock,
/// charged here (an llist head's line is waited for at the loop's end: `Sending::heads_ready`).
fn queue_csd(p: &mut Parts, cpu: CpuId, task: TaskId, t: CpuId, at: Time) -> (Time, Time) {
    let (m, smp) = (p.m, &mut *p.smp);
    let st = sending(smp, cpu);
    st.left.clear(t);
    let (func, wait_all) = (st.func, st.wait);
    smp.locked[cpu].set(t);
    if wait_all {
        wait_for_one_more(smp, cpu);
    }
    p.obs.stats.trace(Trace::CsdQueueCpu);
    // llist_add() (or list_empty() under the lock) tells whether the queue was empty.
    let tail = smp.queue[t].last().map(|c| c.sender as usize);
    if tail.is_none() {
        sending(smp, cpu).was_empty.set(t);
    }
    smp.queue[t].push(Csd {
        sender: cpu as u32,
        func,
        wait: wait_all,
    });
    let mut add = m.cost[Cost::CsdQueue];
    let wait = if smp.cfg.call_single_queue == CallSingleQueue::Llist {
        // __smp_call_single_queue(): llist_add() on the target's head, a cmpxchg that takes its
        // line from the last sender or the target's llist_del_all(), in turn with other senders.
        let wait = m.line_write(&mut smp.llist_head[t], cpu, at + add);
        let st = sending(smp, cpu);
        st.heads_ready = st.heads_ready.max(at + add + wait);
        0
    } else {
        // list_add_tail() sets the last queued csd's next: a write to its sender's line.
        if let Some(tail) = tail {
            add += m.line_transfer(tail, cpu);
        }
        // raw_spin_lock_irqsave(&dst->lock): its line comes from the last sender or the
        // target's handler; the list_add_tail happens under it.
        let wait = m.lock(&mut smp.queue_lock[t], cpu, at, add);
        p.obs
            .stats
            .charge(Some(task), Func::RawSpinLockIrqsave, wait);
        wait
    };
    sending(smp, cpu).queued.set(t);
    (add, wait)
}

/// The IPIs after the queueing, from `at`: to `ipi_mask`, the targets whose queue was empty (or
/// all queued ones before 4.13 with two or more), or a poll kick to a polling idle CPU; a lone IPI
/// on `vector`. Their time.
fn send_call_ipis(
    s: &mut impl Host,
    cpu: CpuId,
    ipi_mask: &CpuMask,
    vector: Vector,
    callsite: &'static str,
    at: Time,
) -> Time {
    let cfg = s.view().0.cfg;
    let nr_ipi = ipi_mask.weight();
    let last = ipi_mask.last().unwrap_or(0);
    let mut send: Time = 0;
    if nr_ipi == 1 {
        // send_call_function_single_ipi(): an idle CPU that is polling needs no interrupt.
        if cfg.ipi_poll_elision && s.idle_polling(last) {
            let p = s.parts();
            p.obs.stats.trace(Trace::WakeIdleWithoutIpi);
            let at = at + p.m.line_transfer(cpu, last);
            p.q.schedule(at, Event::PollKick { cpu: last as u16 });
        } else {
            let trace_at = s.trace_at(cpu);
            let mut p = s.parts();
            p.obs.ipi_send_cpu(trace_at, last, callsite);
            send += p.m.cost[Cost::IpiSend];
            send_ipi(&mut p, cpu, last, vector, at + send);
        }
    } else if nr_ipi > 1 {
        send = send_ipi_mask(s, cpu, ipi_mask, at, callsite);
    }
    send
}

/// smp_call_function_many() of 3.8 for two or more targets: fill this CPU's cfd_data (its line
/// comes back from the last target that wrote it), put it at the head of the global queue under
/// call_function.lock, send every target an IPI, and wait until the last one drops refs to 0.
fn global_cfd_call(
    s: &mut impl Host,
    cpu: CpuId,
    task: TaskId,
    targets: &CpuMask,
    func: CallFunc,
    wait: bool,
    run_local: bool,
) -> Outcome {
    let now = s.now();
    let p = s.parts();
    let m = p.m;
    // Filling the cfd and the list operation each cost about one csd_queue.
    let op = m.cost[Cost::CsdQueue];
    let g = &mut p.smp.global;
    // csd_lock(&data->csd) and the stores to func, cpumask and refs.
    let mut setup = m.lock(&mut g.cfd[cpu].line, cpu, now, op) + op;
    // raw_spin_lock_irqsave(&call_function.lock, flags): perf names the spin
    // _raw_spin_lock_irqsave (the handler's list_del_rcu takes it with raw_spin_lock).
    let spin = m.lock(&mut g.lock, cpu, now + setup, op);
    setup += spin + op;
    // list_add_rcu() at the head sets the old first entry's prev: a write to its cfd's line.
    if let Some(&first) = g.queue.first() {
        setup += m.line_write(&mut g.cfd[first as usize].line, cpu, now + setup);
    }
    let cfd = &mut g.cfd[cpu];
    (cfd.func, cfd.cpumask, cfd.refs) = (Some(func), *targets, targets.weight() as u32);
    (cfd.wait, cfd.visible_at, cfd.unsent) = (wait, now + setup, *targets);
    g.queue.insert(0, cpu as u32);
    let stats = &mut p.obs.stats;
    stats.charge(Some(task), Func::RawSpinLockIrqsave, spin);
    stats.charge(Some(task), p.smp.cfg.scf_func(), setup - spin);
    if wait {
        wait_for_one_more(p.smp, cpu);
    }
    push_wait_and_local(s, task, wait, run_local.then_some(func));
    // arch_send_call_function_ipi_mask(data->cpumask), once the list_add is done.
    let trace_at = s.trace_at(cpu);
    s.parts()
        .obs
        .ipi_send_cpumask(trace_at, targets, "smp_call_function_many");
    s.push_step(task, Step::SendCfdIpis);
    Outcome::Busy {
        ps: setup,
        irqs_off: false,
    }
}

/// 3.x's arch_send_call_function_ipi_mask(), from now: the IPI loop of
/// default_send_IPI_mask_sequence_phys(), IRQs off, for_each_cpu()'s find_next_bit() reading the
/// mask on the cfd's line, which the targets write as they run the cfd. From 3.8 the mask is
/// data->cpumask_ipi, a copy, so every target gets its IPI (`cfd_cpumask_ipi`); to 3.7 it is the
/// live data->cpumask, so a target whose handler, entered for another sender, has run this cfd
/// before the loop reaches it gets none. One ICR write per IPI, in CPU order; where another
/// event is due before a target's turn, the loop stops there and goes on as a step of its own.
pub fn send_cfd_ipis(s: &mut impl Host, cpu: CpuId, task: TaskId) -> Outcome {
    let now = s.now();
    let (mut send, mut reads, mut stopped) = (0, 0, false);
    let mut p = s.parts();
    while let Some(t) = p.smp.global.cfd[cpu].unsent.iter().next() {
        let turn = now + send;
        if turn > now && p.q.due_by(turn) {
            stopped = true;
            break;
        }
        let cfd = &mut p.smp.global.cfd[cpu];
        let read = p.m.line_read(&mut cfd.line, cpu, turn);
        (send, reads) = (send + read, reads + read);
        cfd.unsent.clear(t);
        if p.smp.cfg.cfd_cpumask_ipi || cfd.cpumask.test(t) || cfd.cleared_at[t] > turn + read {
            send += p.m.cost[Cost::IpiSend];
            send_ipi(&mut p, cpu, t, Vector::CallFunction, now + send);
        }
    }
    p.obs.stats.charge(Some(task), Func::FindNextBit, reads);
    p.obs
        .stats
        .charge(Some(task), send_ipi_func(p.m), send - reads);
    if stopped {
        s.push_step(task, Step::SendCfdIpis);
    }
    Outcome::Busy {
        ps: send,
        irqs_off: true,
    }
}

/// One step of generic_smp_call_function_interrupt() of 3.8 at `t`: the entry at `i` of the
/// global queue. Read its cfd's line; if it holds this CPU, run it, clear the bit and drop refs
/// (read-modify-writes of the line, one CPU at a time); the last CPU unlinks it under
/// call_function.lock and unlocks the sender's csd. Returns when the step ends.
fn walk_one(s: &mut impl Host, cpu: CpuId, task: Option<TaskId>, mut t: Time, i: usize) -> Time {
    let p = s.parts();
    let m = p.m;
    let sender = p.smp.global.queue[i] as usize;
    let cfd = &mut p.smp.global.cfd[sender];
    // list_for_each_entry_rcu + cpumask_test_cpu: a read of the entry's line, after the write
    // in progress (the sender's fill or another target's update).
    let read = m.line_read(&mut cfd.line, cpu, t);
    let (mine, func) = (cfd.cpumask.test(cpu), cfd.func);
    p.obs
        .stats
        .charge(task, Func::GenericSmpCallFunctionInterrupt, read);
    t += read;
    if !mine {
        return t;
    }
    let func = func.expect("queued cfd has a function");
    t += s.run_call(cpu, task, sender, func, t);
    let p = s.parts();
    let m = p.m;
    let g = &mut p.smp.global;
    // cpumask_test_and_clear_cpu + atomic_dec_return on the shared line.
    let mut walk = m.line_write(&mut g.cfd[sender].line, cpu, t);
    t += walk;
    let cfd = &mut g.cfd[sender];
    cfd.cpumask.clear(cpu);
    if let Some(cleared) = cfd.cleared_at.get_mut(cpu) {
        *cleared = t;
    }
    cfd.refs -= 1;
    if cfd.refs > 0 {
        let waited = cfd.wait;
        p.obs
            .stats
            .charge(task, Func::GenericSmpCallFunctionInterrupt, walk);
        // A sender polling in csd_lock_wait(&data->csd) reads this line again at once (flags
        // shares it with refs and cpumask): the next target takes it back from there.
        if waited && s.polls_csd(sender, t) {
            let p = s.parts();
            let m = p.m;
            m.line_read(&mut p.smp.global.cfd[sender].line, sender, t);
        }
        return t;
    }
    // The last one: list_del_rcu under call_function.lock, then csd_unlock.
    let op = m.cost[Cost::CsdQueue];
    let spin = m.lock(&mut g.lock, cpu, t, op);
    (t, walk) = (t + spin + op, walk + op);
    // list_del_rcu() relinks the neighbours: next->prev and prev->next, each a write to
    // that entry's cfd line (the head's is the lock's, held now).
    let neighbours = [i.checked_sub(1), Some(i + 1)];
    for n in neighbours.into_iter().flatten() {
        if let Some(&other) = g.queue.get(n) {
            let w = m.line_write(&mut g.cfd[other as usize].line, cpu, t);
            (t, walk) = (t + w, walk + w);
        }
    }
    g.queue.remove(i);
    g.cfd[sender].func = None;
    let waited = g.cfd[sender].wait;
    // A walker that has not reached it yet will not find it: it is off the list.
    for pass in p.smp.pass.iter_mut() {
        pass.walk.clear(sender);
    }
    csd_unlock(s, sender, cpu, GLOBAL_CFD, waited, t);
    let stats = &mut s.parts().obs.stats;
    stats.charge(task, Func::GenericSmpCallFunctionInterrupt, walk);
    stats.charge_lock(task, Func::GenericSmpCallFunctionInterrupt, spin);
    t
}

/// Run a call function on the calling CPU, IRQs off (SCF_RUN_LOCAL).
pub fn run_local(s: &mut impl Host, cpu: CpuId, task: TaskId, func: CallFunc) -> Outcome {
    let now = s.now();
    let ps = s.run_call(cpu, Some(task), cpu, func, now);
    Outcome::Busy { ps, irqs_off: true }
}

/// A handler's whole pass for `vector` from `start`, in one go (no other event runs meanwhile):
/// as begin_pass() with nothing due first. Returns the time spent.
pub fn handler_pass(
    s: &mut impl Host,
    cpu: CpuId,
    task: Option<TaskId>,
    vector: Vector,
    start: Time,
) -> Time {
    begin_pass(s, cpu, task, start, vector, false).expect("a pass that does not stop ends") - start
}

/// A handler's pass for `vector` starts at `start`: take the queue lock (to 3.13) and detach the
/// queue, then go on as `continue_pass`. Returns when the pass ends, or None if it stopped (`stop`).
pub fn begin_pass(
    s: &mut impl Host,
    cpu: CpuId,
    task: Option<TaskId>,
    start: Time,
    vector: Vector,
    stop: bool,
) -> Option<Time> {
    let mut t = start;
    let mut read_under_lock = 0;
    let p = s.parts();
    let (m, smp) = (p.m, &mut *p.smp);
    // 3.8 on x86: CALL_FUNCTION_SINGLE_VECTOR runs the queue (generic_smp_call_function_single_
    // interrupt), CALL_FUNCTION_VECTOR walks the global queue (generic_smp_call_function_interrupt).
    let (run_queue, walk) = match (smp.cfg.call_function, vector) {
        (CallFunction::PercpuCsd, _) => (true, false),
        (CallFunction::GlobalCfd, Vector::CallFunctionSingle) => (true, false),
        (CallFunction::GlobalCfd, Vector::CallFunction) if m.arch == Arch::X86 => (false, true),
        (CallFunction::GlobalCfd, Vector::CallFunction) => (true, true),
    };
    if smp.cfg.call_single_queue == CallSingleQueue::Spinlock
        && run_queue
        && (smp.cfg.call_function == CallFunction::PercpuCsd
            || vector == Vector::CallFunctionSingle
            || !smp.queue[cpu].is_empty())
    {
        // generic_smp_call_function_single_interrupt: raw_spin_lock(&q->lock), whose line the
        // last sender wrote, then list_replace_init(&q->list, &list) under it, which sets the
        // first csd's prev and the last csd's next: those csds' lines (their senders wrote them
        // last) come over while the lock is held, and are then at hand when the csds run.
        let q = &smp.queue[cpu];
        read_under_lock = q.len().min(2);
        let hold: Time = [q.first(), q.get(1).and(q.last())]
            .into_iter()
            .flatten()
            .map(|c| m.line_transfer(c.sender as usize, cpu))
            .sum();
        let wait = m.lock(&mut smp.queue_lock[cpu], cpu, t, hold);
        let stats = &mut p.obs.stats;
        stats.charge_lock(task, Func::GenericSmpCallFunctionSingleInterrupt, wait);
        stats.charge(task, Func::GenericSmpCallFunctionSingleInterrupt, hold);
        t += wait + hold;
    }
    if smp.cfg.call_single_queue == CallSingleQueue::Llist {
        // llist_del_all(): an xchg of this CPU's head, whose line the last sender took.
        let head = m.line_write(&mut smp.llist_head[cpu], cpu, t);
        p.obs
            .stats
            .charge(task, Func::FlushSmpCallFunctionQueue, head);
        t += head;
    }
    let pass = &mut smp.pass[cpu];
    pass.read_under_lock = read_under_lock;
    pass.batch.clear();
    if run_queue {
        std::mem::swap(&mut pass.batch, &mut smp.queue[cpu]);
    }
    (pass.ran, pass.walk_begun, pass.walk, pass.at) = (0, !walk, CpuMask::new(), t);
    continue_pass(s, cpu, task, stop)
}

/// Go on with this CPU's handler pass from where it is (`Pass::at`): run the detached csds in
/// order, then (3.8) walk the global queue. With `stop`, it stops before a step that something
/// else due first could change (a sender, another handler) and returns None; the caller goes
/// on at `Pass::at`. Returns when the pass ends.
pub fn continue_pass(
    s: &mut impl Host,
    cpu: CpuId,
    task: Option<TaskId>,
    stop: bool,
) -> Option<Time> {
    let now = s.now();
    let due_first = |p: &Parts, t: Time| stop && t > now && p.q.due_by(t);
    let cfg = s.view().0.cfg;
    // The handler as perf names it: generic_smp_call_function_single_interrupt until the llist.
    let handler = match cfg.call_single_queue {
        CallSingleQueue::Spinlock => Func::GenericSmpCallFunctionSingleInterrupt,
        CallSingleQueue::Llist => Func::FlushSmpCallFunctionQueue,
    };
    let mut t = s.view().0.pass[cpu].at;
    loop {
        let p = s.parts();
        let pass = &mut p.smp.pass[cpu];
        if pass.ran == pass.batch.len() {
            break;
        }
        if due_first(&p, t) {
            p.smp.pass[cpu].at = t;
            return None;
        }
        let pass = &mut p.smp.pass[cpu];
        let csd = pass.batch[pass.ran];
        let at_hand = match pass.read_under_lock {
            0 => false,
            1 => pass.ran == 0,
            _ => pass.ran == 0 || pass.ran + 1 == pass.batch.len(),
        };
        pass.ran += 1;
        // Reading the csd's func and info, which its sender just wrote, brings their line over
        // (unless list_replace_init already did).
        let read = match at_hand {
            true => 0,
            false => p.m.line_transfer(csd.sender as usize, cpu),
        };
        p.obs.stats.charge(task, handler, read);
        t += read;
        t += s.run_call(cpu, task, csd.sender as usize, csd.func, t);
        csd_unlock(s, csd.sender as usize, cpu, cpu as u32, csd.wait, t);
    }
    let p = s.parts();
    if !p.smp.pass[cpu].walk_begun {
        // 3.8: a sender due before the walk begins could still put its cfd where the walk sees it.
        if cfg.call_function == CallFunction::GlobalCfd && due_first(&p, t) {
            p.smp.pass[cpu].at = t;
            return None;
        }
        p.smp.pass[cpu].walk_begun = true;
        t += begin_walk(p, cpu, task, t);
    }
    loop {
        let p = s.parts();
        let walk = &p.smp.pass[cpu].walk;
        let g = &p.smp.global;
        let Some(i) = g.queue.iter().position(|&c| walk.test(c as usize)) else {
            break;
        };
        if due_first(&p, t) {
            p.smp.pass[cpu].at = t;
            return None;
        }
        let sender = p.smp.global.queue[i] as usize;
        p.smp.pass[cpu].walk.clear(sender);
        t = walk_one(s, cpu, task, t, i);
    }
    Some(t)
}

/// generic_smp_call_function_interrupt() of 3.8 begins its walk of the global queue at `t`: the
/// cfds there now are the ones it will visit. Returns the time of its first load.
fn begin_walk(p: Parts, cpu: CpuId, task: Option<TaskId>, t: Time) -> Time {
    let (m, g) = (p.m, &mut p.smp.global);
    if g.queue.is_empty() {
        return 0;
    }
    // list_for_each_entry_rcu starts at call_function.queue, whose line is the lock's: a load
    // after the write in progress (a sender's list_add_rcu or an unlink, under the lock), from
    // the last CPU there. It sees the entries there now (new ones go at the head).
    let read = m.line_read(&mut g.lock, cpu, t);
    p.obs
        .stats
        .charge(task, Func::GenericSmpCallFunctionInterrupt, read);
    let mut walk = CpuMask::new();
    g.queue
        .iter()
        .filter(|&&c| g.cfd[c as usize].visible_at <= t + read)
        .for_each(|&c| walk.set(c as usize));
    p.smp.pass[cpu].walk = walk;
    read
}

/// csd_unlock() at time `at` (now or later in this stretch of a handler pass, with nothing else
/// due before it): the csd is free again, and a waiting sender sees it once the cache line
/// holding csd->node.u_flags comes back to it. `csd` names it:
/// its target's number, or GLOBAL_CFD for 3.8's cfd_data; `waited` if its sender waits for it.
fn csd_unlock(s: &mut impl Host, sender: CpuId, target: CpuId, csd: u32, waited: bool, at: Time) {
    let p = s.parts();
    p.smp.locked[sender].clear(target);
    let seen = at + p.m.line_transfer(target, sender);
    if p.smp.csd_lock_on[sender] == csd {
        p.smp.csd_lock_on[sender] = NO_CPU;
        p.smp.csd_free_at[sender] = seen;
        s.kick_spinner(sender);
    }
    if waited {
        let smp = s.parts().smp;
        smp.waiting[sender] -= 1;
        smp.done_at[sender] = smp.done_at[sender].max(seen);
        if smp.waiting[sender] == 0 {
            s.kick_spinner(sender);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{push_wait_and_local, CallFunc};
    use crate::machine::Cost::{self, *};
    use crate::observe::Trace;
    use crate::sched::Mode;
    use crate::sim::Sim;
    use crate::step::{SpinOn, Step};
    use crate::testing::{
        busy_until, cal, ipi_at, machine, run_until, spawn, switch_in, work, Then, MM,
    };

    const US: u64 = 1_000_000;

    fn c(s: &Sim, k: Cost) -> u64 {
        s.m.cost[k]
    }

    /// percpu_csd with the llist (6.3): membarrier's smp_call_function_many() to the K = 3 CPUs
    /// running the mm sends exactly K IPIs (none to the idle CPUs 4 and 5), and csd_lock_wait()
    /// ends exactly when the last target's unlock reaches the sender.
    #[test]
    fn a_call_to_k_targets_sends_k_ipis_and_waits_for_the_last_handler() {
        // No PCID: the switch-ins then read no mm tlb_gen line, and start together.
        let mut s = machine(6, "linux-6.3", Then::Spin, &[("kernel.pcid", "false")]);
        for cpu in 1..=3 {
            spawn(&mut s, MM, cpu, &[]);
        }
        // Each switch_mm sets its bit in MM's mm_cpumask in turn: CPU 2 takes the line from
        // CPU 1, CPU 3 from CPU 2, CPU 0's switch-in below from CPU 3.
        let l = |a, b| s.m.line_transfer(a, b);
        let (l12, l23, l30) = (l(1, 2), l(2, 3), l(3, 0));
        let start = switch_in(&s) + l12 + l23;
        run_until(&mut s, start + 1);
        assert_eq!(s.sched.cpus[3].mode, Mode::Spin(SpinOn::UserForever));
        let w = 7 * US;
        spawn(&mut s, MM, 0, &[Step::MembarrierIpiMb, work(w, false)]);
        let t1 = start + 1 + switch_in(&s) + l30;
        // Three csds queued, their llist_add()s taking the heads' lines at once (the loop ends
        // when the third is here), three ICR writes; the third target enters its handler a wire
        // and half an irq_entry_exit later, takes its head back (llist_del_all), reads the csd's
        // line and its unlock's line goes back.
        let last_unlock_seen = t1
            + 3 * c(&s, CsdQueue)
            + c(&s, LineNode)
            + 3 * c(&s, IpiSend)
            + c(&s, IpiWireNode)
            + c(&s, IrqEntryExit) / 2
            + 3 * c(&s, LineNode);
        run_until(&mut s, last_unlock_seen - 1);
        assert_eq!(s.smp.waiting[0], 0, "every target ran the function by now");
        assert_eq!(
            s.sched.cpus[0].mode,
            Mode::Spin(SpinOn::CsdLockWait),
            "but its unlock has not reached the sender yet"
        );
        run_until(&mut s, last_unlock_seen + 1);
        assert_eq!(busy_until(&s, 0), last_unlock_seen + w);
        assert_eq!(s.obs.stats.ipis_sent, 3);
        let cals: Vec<u64> = (0..6).map(|cpu| cal(&s, cpu)).collect();
        assert_eq!(cals, [0, 1, 1, 1, 0, 0]);
    }

    /// skip_ipi_if_queued (4.13): CPU 1's call to {0, 2, 3} sends no IPI to CPUs 2 and 3, whose
    /// queues still hold CPU 0's csds (they run an IRQs-off step), only to CPU 0: 3 + 1 IPIs.
    /// Without it (4.3) every target gets one: 3 + 3; both reach CPUs 2 and 3 while IRQs are off
    /// and set the same IRR bit, so each takes one interrupt either way. No csd is lost: both
    /// waits end.
    #[test]
    fn no_second_ipi_to_a_cpu_whose_queue_holds_work() {
        for (skip, ipis) in [("true", 4), ("false", 6)] {
            let sets = [("kernel.skip_ipi_if_queued", skip)];
            let mut s = machine(4, "linux-6.3", Then::Spin, &sets);
            spawn(&mut s, MM, 0, &[Step::TlbRemoveTableSyncOne]);
            spawn(
                &mut s,
                MM,
                1,
                &[work(100 * US, true), Step::TlbRemoveTableSyncOne],
            );
            spawn(&mut s, MM, 2, &[work(1000 * US, true)]);
            spawn(&mut s, MM, 3, &[work(1000 * US, true)]);
            run_until(&mut s, 500 * US);
            assert_eq!(s.obs.stats.ipis_sent, ipis, "skip_ipi_if_queued={skip}");
            assert_eq!((s.smp.queue[2].len(), s.smp.queue[3].len()), (2, 2));
            assert_eq!((s.smp.waiting[0], s.smp.waiting[1]), (2, 2));
            run_until(&mut s, 2000 * US);
            assert_eq!((s.smp.waiting[0], s.smp.waiting[1]), (0, 0));
            assert_eq!(s.obs.stats.ipis_sent, ipis, "skip_ipi_if_queued={skip}");
            let cals: Vec<u64> = (0..4).map(|cpu| cal(&s, cpu)).collect();
            assert_eq!(cals, [1, 1, 1, 1], "skip_ipi_if_queued={skip}");
        }
    }

    /// 3.8's global_cfd: a call to three CPUs puts the sender's one cfd on the global queue under
    /// call_function.lock and sends every target an IPI; each handler walks the global queue and
    /// does one read-modify-write of the cfd's line; the last one unlinks it under the lock. The
    /// per-CPU queues and their locks are not used.
    #[test]
    fn global_cfd_every_handler_walks_the_global_queue() {
        let mut s = machine(4, "linux-3.8", Then::Spin, &[]);
        for cpu in 1..=3 {
            spawn(&mut s, MM, cpu, &[]);
        }
        let start = switch_in(&s);
        run_until(&mut s, start + 1);
        spawn(&mut s, MM, 0, &[Step::TlbRemoveTableSyncOne]);
        // Just after the sender's step began: queued, nothing arrived yet (the wire is longer).
        // Its switch_mm took MM's mm_cpumask line from CPU 3, the last of the three to set a bit.
        let t1 = start + 1 + switch_in(&s) + s.m.line_transfer(3, 0);
        run_until(&mut s, t1 + 1);
        assert_eq!(s.smp.global.queue, vec![0]);
        assert_eq!(
            s.smp.global.lock.acquisitions, 1,
            "the sender's list_add_rcu"
        );
        assert_eq!(s.smp.global.cfd[0].refs, 3);
        run_until(&mut s, t1 + 100 * US);
        assert!(s.smp.global.queue.is_empty());
        assert_eq!(s.smp.global.cfd[0].refs, 0);
        assert_eq!(s.smp.waiting[0], 0);
        assert_eq!(s.obs.stats.ipis_sent, 3);
        // The sender's fill, then one cpumask/refs update by each of the three handlers.
        assert_eq!(s.smp.global.cfd[0].line.acquisitions, 1 + 3);
        assert_eq!(
            s.smp.global.lock.acquisitions, 2,
            "the sender's add and the last target's list_del_rcu"
        );
        for cpu in 1..=3 {
            assert_eq!(cal(&s, cpu), 1);
            assert_eq!(s.smp.queue_lock[cpu].acquisitions, 0, "CPU {cpu}");
            let t = s.sched.cpus[cpu].task.unwrap();
            let walked = s.obs.stats.tasks[t].profile
                [crate::observe::Func::GenericSmpCallFunctionInterrupt as usize];
            assert!(walked > 0, "CPU {cpu}'s handler walked the global queue");
        }
    }

    /// 3.8's cfd_data line under three handlers at once (IPIs sent with no time between them): each
    /// handler's read of the line (cpumask_test_cpu) waits for the update in progress, its
    /// update (cpumask_test_and_clear_cpu, atomic_dec_return) takes the line back from the cache
    /// it was read from, and the sender, polling data->csd.flags in csd_lock_wait() on the same
    /// line, reads it again after each update that leaves refs above 0: the next handler takes
    /// it from there. So the last update comes 2 transfers later than with the reads served on
    /// the side and the polling unseen (8 transfers and the unlink from the walks' start to the
    /// sender seeing its csd unlocked, not 6).
    #[test]
    fn global_cfd_reads_and_the_polling_sender_take_turns_on_the_line() {
        let mut s = machine(
            4,
            "linux-3.8",
            Then::Spin,
            &[("machine.cost.ipi_send", "0")],
        );
        for cpu in 1..=3 {
            spawn(&mut s, MM, cpu, &[]);
        }
        let start = switch_in(&s);
        run_until(&mut s, start + 1);
        let w = 7 * US;
        spawn(
            &mut s,
            MM,
            0,
            &[Step::TlbRemoveTableSyncOne, work(w, false)],
        );
        // CPU 0's switch_mm takes MM's mm_cpumask line from CPU 3, the last of the three to set
        // a bit (their switches set theirs in turn, each done well before start + 1).
        let t1 = start + 1 + switch_in(&s) + s.m.line_transfer(3, 0);
        let (op, l) = (c(&s, CsdQueue), c(&s, LineNode));
        // The fill and list_add_rcu, the wire, half an entry: the three passes start together
        // and each reads call_function.queue (the lock's line, at the sender): one transfer.
        let walk = t1 + 2 * op + c(&s, IpiWireNode) + c(&s, IrqEntryExit) / 2 + l;
        // CPU 1 reads, then updates; CPUs 0 and 2 read (both from CPU 1), CPU 2 updates; CPUs
        // 0 and 3 read, CPU 3 updates: 6 transfers one after another. Then call_function.lock
        // (from the sender), the unlink, and csd_unlock's line back to the sender.
        let seen = walk + 6 * l + l + op + l;
        run_until(&mut s, seen - 1);
        assert_eq!(s.sched.cpus[0].mode, Mode::Spin(SpinOn::CsdLockWait));
        run_until(&mut s, seen + 1);
        assert_eq!(busy_until(&s, 0), seen + w);
        assert_eq!(
            s.smp.global.cfd[0].line.acquisitions,
            1 + 3,
            "reads are not updates"
        );
    }

    /// 3.x's IPI loop: CPUs 0 and 4 call every other CPU, one ICR write every 60,000 cycles
    /// (23 us), CPU 4 10 us after CPU 0. CPU 1's handler, entered for CPU 0's IPI, runs both
    /// cfds. 3.8 walks data->cpumask_ipi, the copy taken before the cfd went on the list, so CPU 4
    /// still IPIs CPU 1, whose second interrupt finds nothing left: 8 IPIs, two interrupts on each
    /// of CPUs 1 to 3. To 3.7 (the 3.4 preset) the loop walks the live data->cpumask, which CPU 1
    /// has cleared before CPU 4's loop reads its bit: 7 IPIs, one interrupt on CPU 1. (CPU 4's loop
    /// reaches CPUs 2 and 3 before CPU 0's IPIs to them are handled, and sends both either way.)
    #[test]
    fn global_cfd_ipis_every_target_from_its_copy_of_the_mask() {
        for (kernel, ipis, cals) in [("linux-3.8", 8, [2, 2, 2]), ("linux-3.4", 7, [1, 2, 2])] {
            let sets = [("machine.cost.ipi_send", "60000")];
            let mut s = machine(5, kernel, Then::Spin, &sets);
            for cpu in 1..=3 {
                spawn(&mut s, MM, cpu, &[]);
            }
            let start = switch_in(&s);
            run_until(&mut s, start + 1);
            spawn(&mut s, MM, 0, &[Step::TlbRemoveTableSyncOne]);
            spawn(
                &mut s,
                MM,
                4,
                &[work(10 * US, false), Step::TlbRemoveTableSyncOne],
            );
            run_until(&mut s, start + 1000 * US);
            assert_eq!(s.obs.stats.ipis_sent, ipis, "{kernel}");
            assert!(s.smp.global.queue.is_empty());
            assert_eq!((s.smp.waiting[0], s.smp.waiting[4]), (0, 0));
            assert_eq!([1, 2, 3].map(|cpu| cal(&s, cpu)), cals, "{kernel}");
        }
    }

    /// on_each_cpu_mask() to 5.12 runs the local call once smp_call_function_many() has waited for
    /// the remote ones (3.3's preset); since a32a4d8a815c (5.13) it runs between the IPIs and the
    /// wait (6.3's). The step pushed last runs first.
    #[test]
    fn the_local_call_runs_after_the_wait_until_5_13() {
        for (kernel, first, then) in [
            (
                "linux-3.3",
                Step::CsdLockWait,
                Step::LocalCall(CallFunc::DrainLocalPages),
            ),
            (
                "linux-6.3",
                Step::LocalCall(CallFunc::DrainLocalPages),
                Step::CsdLockWait,
            ),
        ] {
            let mut s = machine(2, kernel, Then::Spin, &[]);
            let t = spawn(&mut s, MM, 0, &[]);
            let before = s.sched.tasks[t].steps.len();
            push_wait_and_local(&mut s, t, true, Some(CallFunc::DrainLocalPages));
            let steps = &s.sched.tasks[t].steps[before..];
            assert_eq!(steps.len(), 2, "{kernel}");
            assert!(steps[1] == first && steps[0] == then, "{kernel}");
        }
    }

    /// To 3.13 a sender queues under raw_spin_lock_irqsave() and sends under local_irq_save(): an
    /// IPI reaching it mid-send waits for the send loop's end (3.9). Since 3.14 the queueing runs
    /// with IRQs on, and the model takes the IPI at once (6.3).
    #[test]
    fn an_ipi_waits_for_the_end_of_a_send_loop_under_local_irq_save() {
        for (kernel, deferred) in [("linux-3.9", true), ("linux-6.3", false)] {
            let sets = [("machine.cost.ipi_send", "60000"), ("kernel.pcid", "false")];
            let mut s = machine(3, kernel, Then::Spin, &sets);
            for cpu in 1..=2 {
                spawn(&mut s, MM, cpu, &[]);
            }
            run_until(&mut s, 10 * US);
            spawn(&mut s, MM, 0, &[Step::TlbRemoveTableSyncOne]);
            run_until(&mut s, 15 * US);
            let end = busy_until(&s, 0);
            assert!(end > 40 * US, "{kernel}: the two ICR writes take 40 us");
            ipi_at(&mut s, 0, 20 * US);
            run_until(&mut s, 20 * US + 1);
            assert_eq!(cal(&s, 0), u64::from(!deferred), "{kernel}");
            assert_eq!(s.sched.cpus[0].irq_pending != 0, deferred, "{kernel}");
            run_until(&mut s, end + 1);
            assert_eq!(cal(&s, 0), 1, "{kernel}");
        }
    }

    /// 3.8 sends a lone target through smp_call_function_single(): the target's own queue under
    /// its call_single_queue.lock (the sender's add, the handler's list_replace_init), not the
    /// global queue.
    /// x86 raises a lone target's call on CALL_FUNCTION_SINGLE_VECTOR and a call to several on
    /// CALL_FUNCTION_VECTOR, each its own IRR bit: CPU 1, with IRQs off from 10 to 60 us, is
    /// sent a call to itself alone (by CPU 0) and one to CPUs 1 and 2 (by CPU 3), and takes two
    /// interrupts once IRQs are on; two calls to CPUs 1 and 2 make one (the second IPI finds its
    /// bit set).
    #[test]
    fn a_lone_target_call_and_a_call_to_several_are_two_interrupts() {
        use super::{smp_call_function_many_cond, Cond};
        use crate::engine::CpuMask;
        for (first_alone, interrupts) in [(true, 2), (false, 1)] {
            let mut s = machine(4, "linux-3.9", Then::Spin, &[]);
            let senders = [spawn(&mut s, MM, 0, &[]), spawn(&mut s, MM, 3, &[])];
            spawn(&mut s, MM, 1, &[work(50 * US, true)]);
            spawn(&mut s, MM, 2, &[]);
            let start = 10 * US + switch_in(&s);
            run_until(&mut s, start);
            let (mut alone, mut both) = (CpuMask::new(), CpuMask::new());
            alone.set(1);
            both.set(1);
            both.set(2);
            let first = if first_alone { &alone } else { &both };
            let f = CallFunc::DoNothingIpi;
            for (cpu, mask) in [(0, first), (3, &both)] {
                let t = senders[cpu / 3];
                smp_call_function_many_cond(&mut s, cpu, t, mask, f, Cond::Always, false, false);
            }
            assert_eq!(s.obs.stats.ipis_sent, first.weight() as u64 + 2);
            run_until(&mut s, 100 * US);
            assert_eq!(cal(&s, 1), interrupts, "first call alone: {first_alone}");
            // CPU 2, spinning with IRQs on, takes each call's IPI as it comes.
            assert_eq!(cal(&s, 2), first.weight() as u64);
        }
    }

    /// 3.8 on x86 has a handler per vector: CALL_FUNCTION_SINGLE_VECTOR's runs the CPU's own
    /// queue (generic_smp_call_function_single_interrupt), CALL_FUNCTION_VECTOR's walks the global
    /// queue (generic_smp_call_function_interrupt); neither does the other's work. CPU 2 calls
    /// CPUs 1 and 3 (the global queue), CPU 0 calls CPU 1 alone (its queue).
    #[test]
    fn global_cfd_each_vector_runs_its_own_queue() {
        use super::{handler_pass, smp_call_function_many_cond, Cond, Vector};
        use crate::engine::CpuMask;
        let mut s = machine(4, "linux-3.8", Then::Spin, &[]);
        let sender = spawn(&mut s, MM, 0, &[]);
        let (mut alone, mut two) = (CpuMask::new(), CpuMask::new());
        alone.set(1);
        two.set(1);
        two.set(3);
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(&mut s, 2, sender, &two, f, Cond::Always, false, false);
        smp_call_function_many_cond(&mut s, 0, sender, &alone, f, Cond::Always, false, false);
        assert_eq!(
            (s.smp.queue[1].len(), s.smp.global.queue.clone()),
            (1, vec![2])
        );
        handler_pass(&mut s, 1, None, Vector::CallFunctionSingle, US);
        assert_eq!(
            (s.smp.queue[1].len(), s.smp.global.queue.clone()),
            (0, vec![2])
        );
        assert!(
            s.smp.global.cfd[2].cpumask.test(1),
            "CPU 1 has not run CPU 2's call"
        );
        smp_call_function_many_cond(&mut s, 0, sender, &alone, f, Cond::Always, false, false);
        handler_pass(&mut s, 1, None, Vector::CallFunction, 2 * US);
        assert!(!s.smp.global.cfd[2].cpumask.test(1), "it has now");
        assert_eq!(
            s.smp.queue[1].len(),
            1,
            "CPU 0's second call waits for its own vector"
        );
    }

    #[test]
    fn global_cfd_a_lone_target_goes_through_its_own_queue() {
        let mut s = machine(2, "linux-3.8", Then::Spin, &[]);
        spawn(&mut s, MM, 1, &[]);
        run_until(&mut s, 10 * US);
        spawn(&mut s, MM, 0, &[Step::TlbRemoveTableSyncOne]);
        run_until(&mut s, 100 * US);
        assert_eq!(s.smp.waiting[0], 0);
        assert_eq!(s.obs.stats.ipis_sent, 1);
        assert_eq!(s.smp.global.lock.acquisitions, 0);
        assert_eq!(s.smp.global.cfd[0].line.acquisitions, 0);
        assert_eq!(s.smp.queue_lock[1].acquisitions, 2);
    }

    /// ipi_poll_elision: a single-target call to an idle CPU that polls sends no IPI; the sender
    /// sets NEED_RESCHED (a line to the target) and the idle loop runs the queue with no
    /// interrupt entry: done a csd_queue and three line transfers after the call began. Without
    /// the elision the same call costs an IPI and an interrupt.
    #[test]
    fn a_polling_idle_cpu_is_kicked_without_an_ipi() {
        for (elide, ipis) in [("true", 0), ("false", 1)] {
            // No PCID: CPU 0's switch-in then reads no mm tlb_gen line that CPU 1's read last.
            let sets = [
                ("machine.idle", "poll"),
                ("kernel.ipi_poll_elision", elide),
                ("kernel.pcid", "false"),
            ];
            let mut s = machine(2, "linux-6.3", Then::Sleep, &sets);
            // CPU 1 runs a task that sleeps at once, so it enters the (polling) idle loop.
            spawn(&mut s, MM, 1, &[]);
            run_until(&mut s, 10 * US);
            assert_eq!(s.sched.cpus[1].mode, Mode::Idle);
            let t = spawn(
                &mut s,
                MM,
                0,
                &[Step::TlbRemoveTableSyncOne, work(US, false)],
            );
            // CPU 0's switch_mm takes MM's mm_cpumask line from CPU 1 to set its bit.
            let t1 = 10 * US + switch_in(&s) + s.m.line_transfer(1, 0);
            if elide == "true" {
                // llist_add() takes CPU 1's head line, the kick's line, llist_del_all() takes the
                // head back, the csd's line to the handler, the unlock's line back.
                let done = t1 + c(&s, CsdQueue) + 5 * c(&s, LineNode);
                run_until(&mut s, done - 1);
                assert_eq!(s.sched.cpus[0].mode, Mode::Spin(SpinOn::CsdLockWait));
                run_until(&mut s, done + 1);
                assert_eq!(busy_until(&s, 0), done + US);
            }
            run_until(&mut s, 100 * US);
            assert_eq!(s.obs.stats.ipis_sent, ipis, "ipi_poll_elision={elide}");
            assert_eq!(cal(&s, 1), ipis, "ipi_poll_elision={elide}");
            let kicks = s.obs.stats.trace[Trace::WakeIdleWithoutIpi as usize];
            assert_eq!(kicks, 1 - ipis, "ipi_poll_elision={elide}");
            assert_eq!(s.smp.waiting[0], 0);
            assert_eq!(s.obs.stats.tasks[t].times.user, US);
        }
    }

    #[test]
    fn a_cpu_idle_since_boot_polls_under_idle_poll() {
        // CPU 1 never ran a task: with idle=poll it has polled since boot (a kick, no IPI); a
        // halting idle loop has long halted (an IPI).
        for (idle, ipis) in [("poll", 0), ("hlt", 1), ("haltpoll", 1)] {
            let mut s = machine(2, "linux-6.3", Then::Sleep, &[("machine.idle", idle)]);
            spawn(
                &mut s,
                MM,
                0,
                &[Step::TlbRemoveTableSyncOne, work(US, false)],
            );
            run_until(&mut s, 100 * US);
            assert_eq!(s.obs.stats.ipis_sent, ipis, "idle={idle}");
            let kicks = s.obs.stats.trace[Trace::WakeIdleWithoutIpi as usize];
            assert_eq!(kicks, 1 - ipis, "idle={idle}");
        }
    }
}
