//! A small scheduler and the CPU execution model.
//!
//! Each CPU runs at most one task at a time; a task executes a stack of [`Step`]s (its kernel and
//! user work as explicit continuations). A step does its logic when it starts and then keeps the
//! CPU busy for its cost. An IPI interrupts a busy or spinning CPU at once unless IRQs are off, and
//! the interrupted work is delayed by the handler; a halted idle CPU also pays its wakeup latency.

pub mod balance;
pub mod fair;
pub mod membarrier;

pub use crate::step::{Outcome, SpinOn, Step};

use crate::config::{named_enum, params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, EventQueue, Rng, TaskId, Time, NEVER};
use crate::machine::{Cost, Idle, Machine};
use crate::observe::{Func, Irq, Observe};
use crate::step::{Event, Vector};

named_enum! {
    /// Where user tasks run (sched.placement).
    Placement {
        AsScenario = "as_scenario",
        Shuffled = "shuffled",
    }
}

params! {
    /// The seeded perturbations as declared (sched.*).
    #[derive(Debug, Clone)]
    pub struct SchedParams;
    pub const PARAMS = {
        jitter: f64 = "sched.jitter", Kind::Float { min: 0.0, max: 1.0 }, "", "0", "stretch every busy step by a seeded random fraction up to this (timing noise for `ipisim check`); 0: none";
        placement: Placement = "sched.placement", Kind::Choice(Placement::NAMES), "", "as_scenario", "as_scenario: user tasks run on the CPUs the scenario names; shuffled: on a seeded permutation of them (`ipisim check`)";
    }
}

/// The scheduler's state: the CPUs' run state, every task, and the seeded perturbations.
pub struct Sched {
    pub cpus: Vec<Cpu>,
    pub tasks: Vec<Task>,
    pub perturb: Perturb,
    pub fair: fair::Fair,
    pub balance: balance::Config,
}

/// The state sched works on, borrowed together from the machine around it.
pub struct Parts<'a> {
    pub m: &'a Machine,
    pub q: &'a mut EventQueue<Event>,
    pub sched: &'a mut Sched,
    pub rng: &'a mut Rng,
    pub obs: &'a mut Observe,
}

/// What sched needs from the machine around it, beyond mm's, arch's and smp's: its state and the
/// event queue, and the root's two answers, running a step and telling the scenario of an exit.
/// The root implements it for `Sim`.
pub trait Host: crate::mm::Host {
    /// The machine, the event queue, sched's state, the seeded generator and the observer.
    fn sched_parts(&mut self) -> Parts<'_>;
    /// sched's state and the machine, to read.
    fn sched_view(&self) -> (&Sched, &Machine);
    /// Run `step` of task `t` on `cpu`: what it did (the root's dispatch.rs).
    fn exec(&mut self, cpu: CpuId, t: TaskId, step: Step) -> Outcome;
    /// Task `t` exited (do_exit): the scenario hears of it, and may end the run.
    fn task_exited(&mut self, t: TaskId);
    /// sched's state.
    fn sched(&mut self) -> &mut Sched {
        self.sched_parts().sched
    }
    /// The event queue.
    fn q(&mut self) -> &mut EventQueue<Event> {
        self.sched_parts().q
    }
}

/// The seeded perturbations of a run: timing jitter and thread placement (sched.*).
pub struct Perturb {
    /// Up to this many 1/65536ths of a busy step are added to it.
    jitter: u64,
    /// The CPU a user task that the scenario puts on CPU i really runs on.
    placement: Vec<CpuId>,
}

impl Perturb {
    pub fn new(r: &Resolved, ncpus: usize, rng: &mut Rng) -> Result<Perturb, ConfigError> {
        let p = SchedParams::from_resolved(r)?;
        let j = p.jitter;
        if !(0.0..=1.0).contains(&j) {
            return Err(r.error("sched.jitter", "must be in [0, 1]"));
        }
        let mut placement: Vec<CpuId> = (0..ncpus).collect();
        if p.placement == Placement::Shuffled {
            // Fisher-Yates, from the seed.
            for i in (1..ncpus).rev() {
                placement.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        Ok(Perturb {
            jitter: (j * 65536.0) as u64,
            placement,
        })
    }
}

/// A busy step of `ps`, stretched by the run's jitter.
fn jittered(s: &mut impl Host, ps: Time) -> Time {
    if s.sched().perturb.jitter == 0 || ps == 0 {
        return ps;
    }
    let max = ((ps as u128 * s.sched().perturb.jitter as u128) >> 16) as u64;
    ps + s.sched_parts().rng.below(max + 1)
}

/// A step that starts while another thread of its core is busy (a step, a handler or a user
/// spin) shares the core's pipeline with it for its whole length (machine.smt_yield); a kernel
/// spin runs cpu_relax() (PAUSE), which leaves the core to its sibling.
fn smt_shared(s: &mut impl Host, cpu: CpuId, ps: Time, now: Time) -> Time {
    let (sched, m) = s.sched_view();
    let Some(ppm) = m.smt_stretch_ppm else {
        return ps;
    };
    let task = sched.cpus[cpu].task.expect("a busy step has a task");
    let busy = |c: &Cpu| match c.mode {
        _ if c.in_irq(now) => true,
        Mode::Busy { until } => until > now,
        Mode::Spin(on) => on == SpinOn::UserForever,
        Mode::Idle => false,
    };
    if !m.siblings(cpu).any(|o| busy(&sched.cpus[o])) {
        return ps;
    }
    // The time lost is the step's own: charged to the function it charged last.
    let shared = (ps as u128 * ppm as u128 / 1_000_000) as Time;
    s.obs().stats.charge_last(task, shared - ps);
    shared
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// No task: the idle loop (lazy TLB).
    #[default]
    Idle,
    /// Running a step until `until`.
    Busy { until: Time },
    /// Spinning with IRQs on until a condition holds.
    Spin(SpinOn),
}

#[derive(Debug, Default)]
pub struct Cpu {
    pub task: Option<TaskId>,
    /// Runnable tasks waiting for this CPU.
    pub runq: fair::RunQueue,
    /// cfs_rq->min_vruntime: the virtual time of the CPU's queue.
    min_vruntime: Time,
    pub mode: Mode,
    /// Bumped whenever a scheduled Resume must be ignored.
    pub gen: u32,
    /// In an interrupt handler until this time. A busy step's handler exits on its own: the
    /// interrupted step's Resume is scheduled at entry, so most interrupts take no IrqExit event.
    irq_end: Time,
    /// The handler ends with an IrqExit event (an idle CPU, or an IPI arrived meanwhile); it is
    /// in the handler until that event runs.
    exit_queued: bool,
    /// When the spin's Resume of generation `spin_gen` is due (a spin keeps it across handlers).
    spin_at: Time,
    spin_gen: u32,
    /// The local APIC holds an undelivered call-function IPI of each vector (bit 1 << `Vector`).
    pub irq_pending: u8,
    /// The vector of the interrupt being handled (an idle CPU's polling pass: the single one).
    vector: Vector,
    /// A woken task waits for this CPU: switch to it at the next step boundary.
    pub need_resched: bool,
    /// When the current task was picked: its slice runs from here.
    picked_at: Time,
    /// When a task last came to wait in an empty queue: no tick before it preempted for it.
    queued_since: Time,
    /// The current busy step runs with IRQs off.
    pub irqs_off: bool,
    /// The current busy step runs a vCPU in guest mode: an interrupt first exits the guest.
    pub in_guest: bool,
    /// What was left of the busy step when an interrupt arrived.
    busy_left: Time,
    /// When the current interrupt arrived, and what follows its handler's pass (the exit, and
    /// the guest re-entry of a vCPU).
    irq_from: Time,
    irq_tail: Time,
    /// Start of the current spin or idle period (for accounting).
    since: Time,
    /// The idle loop polls (TIF_POLLING_NRFLAG set) until this time, then halts.
    poll_until: Time,
    /// Its periodic load balancing at the node level.
    pub domain: balance::Domain,
    /// rq->active_balance and rq->push_cpu: the CPU this one's stopper is to push a task to.
    push_cpu: Option<CpuId>,
}

impl Cpu {
    /// A CPU that has run no task since boot: idle long enough that a halt-polling loop has
    /// halted, while idle=poll polls for ever (cpu_idle_poll).
    pub fn idle_since_boot(idle: Idle, domain: balance::Domain) -> Cpu {
        let poll_until = if idle == Idle::Poll { NEVER } else { 0 };
        Cpu {
            poll_until,
            domain,
            min_vruntime: fair::BOOT_VRUNTIME,
            ..Cpu::default()
        }
    }

    /// Running an interrupt handler at `now` (IRQs are off).
    pub fn in_irq(&self, now: Time) -> bool {
        self.exit_queued || now < self.irq_end
    }

    /// In a handler whose pass has not ended yet, so its end is not known (irq_end = NEVER).
    fn in_pass(&self) -> bool {
        self.irq_end == NEVER
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Running,
    Sleeping,
    Exited,
}

#[derive(Debug)]
pub struct Task {
    pub mm: usize,
    /// The CPU the task is on: where it runs, or waits to run, or last ran.
    pub cpu: CpuId,
    /// Where it may run: that CPU only, or (kswapd) its node, where the load balancer moves it.
    pub affinity: balance::Affinity,
    /// When it last left a CPU (se.exec_start of a waiting task: task_hot()).
    pub left_cpu_at: Time,
    pub state: TaskState,
    pub steps: Vec<Step>,
    /// The command name traces show.
    pub comm: String,
    /// Spinlocks held across steps (PTE locks): preemption is off while any is (preempt_count).
    pub locks_held: u32,
    /// TASK_UNINTERRUPTIBLE: a fatal signal does not end this sleep.
    pub uninterruptible: bool,
    /// Its place in the fair class.
    pub se: fair::Entity,
    /// TASK_INTERRUPTIBLE: in a wait a fatal signal ends too; only wake_interruptible() clears it.
    pub interruptible: bool,
    /// When this task's current timed sleep ends (NEVER: none); a wake-up timer left from a
    /// sleep that ended early must not end a later one.
    pub timer_at: Time,
}

impl Task {
    /// The task has exited (its CPU time stays in the accounting).
    pub fn exited(&self) -> bool {
        self.state == TaskState::Exited
    }
}

pub use crate::mm::KTHREAD;

/// Create a task of `mm` pinned to `cpu`; it becomes runnable at once.
pub fn spawn(s: &mut impl Host, mm: usize, cpu: CpuId) -> TaskId {
    let t = spawn_at(s, mm, cpu, NEVER);
    wake(s, t);
    t
}

/// Create a task of `mm` pinned to `cpu` that starts running at `at`.
pub fn spawn_at(s: &mut impl Host, mm: usize, cpu: CpuId, at: Time) -> TaskId {
    let cpu = if mm == KTHREAD {
        cpu
    } else {
        s.sched().perturb.placement[cpu]
    };
    let t = s.sched().tasks.len();
    s.obs().stats.add_task();
    s.mem().tasks.push(crate::mm::TaskMm::default());
    s.mem().oom_killed.push(false);
    if mm != KTHREAD {
        s.mem().mms[mm].users += 1;
    }
    s.sched().tasks.push(Task {
        mm,
        cpu,
        affinity: balance::Affinity::Cpu,
        left_cpu_at: 0,
        state: TaskState::Sleeping,
        steps: Vec::with_capacity(16),
        comm: "task".into(),
        locks_held: 0,
        uninterruptible: false,
        se: fair::Entity::at_start(mm == KTHREAD),
        interruptible: false,
        timer_at: at,
    });
    if at != NEVER {
        s.q().schedule(at, Event::Wake { task: t as u32 });
    }
    t
}

/// When the spin's condition comes true, if that is already known (None: it waits for events).
fn spin_until(s: &impl Host, cpu: CpuId, on: SpinOn) -> Option<Time> {
    match on {
        SpinOn::CsdLockWait => (s.view().0.waiting[cpu] == 0).then(|| s.view().0.done_at[cpu]),
        SpinOn::CsdLock => {
            (s.view().0.csd_lock_on[cpu] == crate::smp::NO_CPU).then(|| s.view().0.csd_free_at[cpu])
        }
        SpinOn::UserForever => None,
        SpinOn::Ptl => {
            let at = s.mm_view().0.ptl.granted_at[cpu];
            (at != NEVER).then_some(at)
        }
    }
}

/// Spin (or keep spinning) on `on`; if its end is known, schedule the resume. True if it is over.
fn spin(s: &mut impl Host, cpu: CpuId, on: SpinOn) -> bool {
    let now = s.now();
    let until = spin_until(s, cpu, on);
    if until.is_some_and(|t| t <= now) {
        if on == SpinOn::Ptl {
            // The lock is this CPU's now: the grant is used up.
            s.mem().ptl.granted_at[cpu] = NEVER;
        }
        return true;
    }
    let c = &mut s.sched().cpus[cpu];
    if c.mode != Mode::Spin(on) {
        c.mode = Mode::Spin(on);
        c.since = now;
    }
    c.irqs_off = false;
    c.gen = c.gen.wrapping_add(1);
    if let Some(t) = until {
        let gen = c.gen;
        c.spin_at = t;
        c.spin_gen = gen;
        s.q().schedule(
            t,
            Event::Resume {
                cpu: cpu as u16,
                gen,
            },
        );
    } else if on == SpinOn::UserForever && !c.runq.is_empty() {
        // Others wait for this CPU: the tick that ends this task's slice looks at it.
        resume_at_tick(s, cpu);
    }
    false
}

/// Charge `dt` of spinning on `on` to the task on `cpu` (PTE-lock spins to the lock's caller:
/// the reclaim rmap walks' __page_check_address, or a huge page's split_huge_page).
fn charge_spin(s: &mut impl Host, cpu: CpuId, on: SpinOn, dt: Time) {
    let task = s.sched().cpus[cpu].task;
    match on {
        SpinOn::Ptl => {
            let caller = crate::mm::ptl::spin_caller(s.mm_view().0, cpu);
            s.obs().stats.charge_lock(task, caller, dt)
        }
        _ => {
            let func = spin_func(s, on);
            s.obs().stats.charge(task, func, dt)
        }
    }
}

fn spin_func(s: &impl Host, on: SpinOn) -> Func {
    match on {
        // csd_lock_wait() is inlined into smp_call_function_many(_cond): perf shows it there.
        SpinOn::CsdLockWait | SpinOn::CsdLock => s.view().0.cfg.scf_func(),
        SpinOn::UserForever => Func::User,
        SpinOn::Ptl => Func::RawSpinLock,
    }
}

/// Leave the current spin or idle period, charging its time.
fn close_period(s: &mut impl Host, cpu: CpuId) {
    let now = s.now();
    let dt = now - s.sched().cpus[cpu].since;
    let since = s.sched().cpus[cpu].since;
    s.sched().cpus[cpu].since = now;
    match s.sched().cpus[cpu].mode {
        Mode::Spin(on) => {
            let name = spin_func(s, on).name();
            if let Some(tr) = s.obs().trace.as_mut() {
                tr.slice(cpu, since, now, name);
            }
            charge_spin(s, cpu, on, dt)
        }
        Mode::Idle => s.obs().stats.idle[cpu] += dt,
        Mode::Busy { .. } => {}
    }
}

/// Run the current task's steps until it is busy, spins, sleeps or exits.
pub fn run(s: &mut impl Host, cpu: CpuId) {
    // Steps since simulated time last moved: a busy step that runs on (no event due before it
    // ends) moves it too, so a lone task may run any number of steps here.
    let mut zero_time = 0u32;
    while zero_time < 1_000_000 {
        zero_time += 1;
        let t = s.sched().cpus[cpu]
            .task
            .expect("run() on a CPU without a task");
        // IRQs are on between steps, unless the next goes on with them off: a pending IPI is
        // taken first, and the tick's softirq may run.
        let irqs_on = !s.sched().tasks[t]
            .steps
            .last()
            .is_some_and(|st| st.irqs_stay_off());
        if irqs_on && s.sched().cpus[cpu].irq_pending != 0 {
            irq_enter(s, cpu, Entry::Ipi);
            return;
        }
        let now = s.now();
        if let Some(tr) = s.obs().trace.as_mut() {
            tr.step_end(cpu, now);
        }
        if irqs_on && now >= s.sched().cpus[cpu].domain.next {
            // The tick's SCHED_SOFTIRQ (rebalance_domains()), taken at this step boundary.
            balance::load_balance(s, cpu);
        }
        if s.sched().cpus[cpu].push_cpu.is_some() && preemptible(s, cpu, t) {
            // The stopper that active balancing woke preempts the task, and may take it away.
            s.sched().cpus[cpu].need_resched = false;
            put_prev(s.sched(), cpu, t, now, false);
            s.sched().cpus[cpu].task = None;
            balance::active_load_balance_cpu_stop(s, cpu, Some(t));
            switch_out(s, cpu);
            return;
        }
        if (s.sched().cpus[cpu].need_resched || slice_used(s.sched(), cpu, now))
            && preemptible(s, cpu, t)
        {
            // Wakeup or tick preemption at a step boundary: the current task waits its turn.
            s.sched().cpus[cpu].need_resched = false;
            if !s.sched().cpus[cpu].runq.is_empty() {
                put_prev(s.sched(), cpu, t, now, false);
                s.sched().cpus[cpu].task = None;
                switch_in(s, cpu);
                return;
            }
        }
        let step = s.sched().tasks[t].steps.pop().unwrap_or(Step::User);
        s.sched().cpus[cpu].in_guest = matches!(step, Step::Guest { .. });
        match s.exec(cpu, t, step) {
            Outcome::Next => continue,
            Outcome::Busy { ps, irqs_off } => {
                if start_busy(s, cpu, step, ps, irqs_off) {
                    if ps > 0 {
                        zero_time = 0;
                    }
                    continue;
                }
                return;
            }
            Outcome::Spin(on) => {
                if spin(s, cpu, on) {
                    continue;
                }
                return;
            }
            Outcome::Sleep(until) => {
                sleep(s, cpu, t, until);
                return;
            }
            Outcome::Exit => {
                s.sched().tasks[t].state = TaskState::Exited;
                switch_out(s, cpu);
                s.task_exited(t);
                return;
            }
        }
    }
    panic!("CPU {cpu} ran a million zero-time steps: a workload loops without spending time");
}

/// The tick preempts the task on `cpu` (its slice is used and another task waits); it is taken at
/// the first step boundary after the tick, as the model has no tick event.
fn slice_used(sched: &Sched, cpu: CpuId, now: Time) -> bool {
    let c = &sched.cpus[cpu];
    !c.runq.is_empty()
        && sched
            .fair
            .tick_passed(c.picked_at, c.queued_since, c.runq.len() + 1, now)
}

/// The tick that ends the slice of the task on `cpu`, with the tasks runnable there now: the
/// first after its slice is used and after a task came to wait.
fn tick_at(sched: &Sched, cpu: CpuId) -> Time {
    let c = &sched.cpus[cpu];
    sched
        .fair
        .tick_at(c.picked_at, c.queued_since, c.runq.len() + 1)
}

/// A task spinning in user space on `cpu` is looked at again on the tick that ends its slice
/// (never before now).
fn resume_at_tick(s: &mut impl Host, cpu: CpuId) {
    let at = tick_at(s.sched(), cpu).max(s.now());
    spin_resume_at(s, cpu, at);
}

/// The running task's virtual time now.
fn curr_vruntime(sched: &Sched, cpu: CpuId, t: TaskId, now: Time) -> Time {
    sched.tasks[t].se.vruntime + (now - sched.cpus[cpu].picked_at)
}

/// enqueue_entity()'s update_curr() before a task queues on `cpu`: the running task's virtual
/// time now (None if none runs); into an empty queue, the wait starts now and min_vruntime
/// catches up with the running task (update_min_vruntime(), never back).
pub(crate) fn update_curr(sched: &mut Sched, cpu: CpuId, now: Time) -> Option<Time> {
    let curr = sched.cpus[cpu]
        .task
        .map(|c| curr_vruntime(sched, cpu, c, now));
    let c = &mut sched.cpus[cpu];
    if c.runq.is_empty() {
        c.queued_since = now;
        if let Some(v) = curr {
            c.min_vruntime = c.min_vruntime.max(v);
        }
    }
    curr
}

/// Task `t` leaves `cpu` (to sleep, or back to the queue): its run goes into its vruntime.
fn put_prev(sched: &mut Sched, cpu: CpuId, t: TaskId, now: Time, sleeping: bool) {
    let c = &sched.cpus[cpu];
    let ran = now - c.picked_at;
    let avg = c
        .runq
        .avg(Some(sched.tasks[t].se.vruntime + ran), c.min_vruntime);
    sched
        .fair
        .put_prev(&mut sched.tasks[t].se, ran, avg, sleeping);
    sched.tasks[t].left_cpu_at = now;
    if !sleeping {
        let v = sched.tasks[t].se.vruntime;
        sched.cpus[cpu].runq.push(v, t);
    }
}

/// No preemption while a spinlock is held across steps, nor inside smp_call_function_many (it
/// runs under get_cpu()): from a csd_lock() spin to the call, and from queueing to the end of
/// csd_lock_wait(). A request sent without waiting does not hold it off.
fn preemptible(s: &impl Host, cpu: CpuId, t: TaskId) -> bool {
    let task = &s.sched_view().0.tasks[t];
    task.locks_held == 0
        && s.view().0.waiting[cpu] == 0
        && s.view().0.csd_lock_call[cpu].is_none()
        && s.view().0.sending[cpu].is_none()
        && !s.view().0.sending_cfd_ipis(cpu)
}

/// Keep `cpu` busy with `step` for `ps` (jittered). True: nothing happens anywhere before the
/// step ends, so the CPU ran on to its end without an event and takes the next step now.
fn start_busy(s: &mut impl Host, cpu: CpuId, step: Step, ps: Time, irqs_off: bool) -> bool {
    let now = s.now();
    let ps = smt_shared(s, cpu, ps, now);
    let until = now + jittered(s, ps);
    if let Some(tr) = s.obs().trace.as_mut() {
        tr.step_begin(cpu, step.name(), now);
    }
    if !s.q().due_by(until) {
        // The Resume would be the very next event popped: run on without it.
        s.q().advance_to(until);
        let c = &mut s.sched().cpus[cpu];
        c.mode = Mode::Busy { until };
        c.irqs_off = irqs_off;
        return true;
    }
    resume_at(s, cpu, until, irqs_off);
    false
}

/// `cpu` is busy until `until`, when its Resume comes (a new generation: older ones are stale).
fn resume_at(s: &mut impl Host, cpu: CpuId, until: Time, irqs_off: bool) {
    let c = &mut s.sched().cpus[cpu];
    c.mode = Mode::Busy { until };
    c.irqs_off = irqs_off;
    c.gen = c.gen.wrapping_add(1);
    let gen = c.gen;
    s.q().schedule(
        until,
        Event::Resume {
            cpu: cpu as u16,
            gen,
        },
    );
}

/// The task on `cpu` sleeps until `until` (NEVER: until woken) and leaves the CPU.
fn sleep(s: &mut impl Host, cpu: CpuId, t: TaskId, until: Time) {
    s.sched().tasks[t].state = TaskState::Sleeping;
    s.sched().tasks[t].timer_at = until;
    if until != NEVER {
        s.q().schedule(until, Event::Wake { task: t as u32 });
    }
    let cs = s.machine().cost[Cost::ContextSwitch];
    s.obs().stats.charge(Some(t), Func::Schedule, cs);
    let now = s.now();
    put_prev(s.sched(), cpu, t, now, true);
    switch_out(s, cpu);
}

/// The current task left the CPU: run the next runnable task, or go idle.
fn switch_out(s: &mut impl Host, cpu: CpuId) {
    s.sched().cpus[cpu].task = None;
    // A stopper woken for active balancing runs first at this schedule().
    balance::active_load_balance_cpu_stop(s, cpu, None);
    if !s.sched().cpus[cpu].runq.is_empty() {
        switch_in(s, cpu);
    } else {
        go_idle(s, cpu);
    }
    balance::nr_running_changed(s, cpu);
}

fn go_idle(s: &mut impl Host, cpu: CpuId) {
    crate::arch::enter_lazy_tlb(s, cpu);
    let now = s.now();
    let poll = match s.machine().idle {
        Idle::Hlt => 0,
        Idle::Poll => NEVER,
        Idle::HaltPoll => s.machine().idle_poll,
    };
    let c = &mut s.sched().cpus[cpu];
    c.mode = Mode::Idle;
    c.irqs_off = false;
    c.since = now;
    c.poll_until = now.saturating_add(poll);
}

/// Is this idle CPU polling (so a single-target call IPI can be replaced by setting NEED_RESCHED)?
pub fn idle_polling(s: &impl Host, cpu: CpuId) -> bool {
    let now = s.now();
    let c = &s.sched_view().0.cpus[cpu];
    c.mode == Mode::Idle && !c.in_irq(now) && now < c.poll_until
}

/// Switch an idle CPU to its first runnable task: context switch plus switch_mm.
fn switch_in(s: &mut impl Host, cpu: CpuId) {
    let now = s.now();
    let sched = s.sched();
    let t = sched.cpus[cpu]
        .runq
        .pop()
        .expect("switch_in() with no runnable task");
    // update_min_vruntime(): the leftmost task's virtual time, never back.
    let c = &mut sched.cpus[cpu];
    c.min_vruntime = c.min_vruntime.max(sched.tasks[t].se.vruntime);
    if s.sched().cpus[cpu].mode == Mode::Idle {
        close_period(s, cpu);
    }
    s.sched().cpus[cpu].task = Some(t);
    s.sched().cpus[cpu].picked_at = now;
    s.sched().tasks[t].state = TaskState::Running;
    let mm = s.sched().tasks[t].mm;
    let switch_mm = if mm == KTHREAD {
        // A kernel thread keeps the previous mm loaded, lazily.
        crate::arch::enter_lazy_tlb(s, cpu);
        0
    } else {
        crate::arch::switch_mm_irqs_off(s, cpu, Some(mm))
    };
    let cs = s.machine().cost[Cost::ContextSwitch];
    s.obs().stats.charge(Some(t), Func::Schedule, cs);
    s.obs().stats.charge(Some(t), Func::SwitchMm, switch_mm);
    if let Some(tr) = s.obs().trace.as_mut() {
        tr.step_begin(cpu, Func::Schedule.name(), now);
    }
    let until = now + smt_shared(s, cpu, cs + switch_mm, now);
    resume_at(s, cpu, until, true);
}

/// The timer of a timed sleep fired: wake the task if that sleep is still the one it is in.
pub fn timer_wake(s: &mut impl Host, t: TaskId) {
    if s.sched().tasks[t].timer_at == s.now() {
        wake(s, t);
    }
}

pub fn wake(s: &mut impl Host, t: TaskId) {
    let now = s.now();
    if s.sched().tasks[t].state != TaskState::Sleeping {
        return;
    }
    s.sched().tasks[t].state = TaskState::Running;
    s.sched().tasks[t].uninterruptible = false;
    let cpu = s.sched().tasks[t].cpu;
    // enqueue_entity(): placed in the CPU's virtual time, whose clock the running task moves.
    let sched = s.sched();
    let curr = update_curr(sched, cpu, now);
    let c = &mut sched.cpus[cpu];
    let (min_vruntime, queued) = (c.min_vruntime, c.runq.len() + curr.is_some() as usize);
    let avg = c.runq.avg(curr, min_vruntime);
    sched
        .fair
        .place(&mut sched.tasks[t].se, min_vruntime, avg, queued);
    let v = sched.tasks[t].se.vruntime;
    sched.cpus[cpu].runq.push(v, t);
    let avg = sched.cpus[cpu].runq.avg(curr, min_vruntime);
    check_preempt_curr(s, cpu, curr, v, avg);
}

/// A task of virtual time `v` came to `cpu`'s queue (`avg` its average now, `curr` the running
/// task's virtual time): an idle CPU runs it, and it preempts the running task if it is due
/// (check_preempt_curr()).
fn check_preempt_curr(s: &mut impl Host, cpu: CpuId, curr: Option<Time>, v: Time, avg: Time) {
    let now = s.now();
    balance::nr_running_changed(s, cpu);
    let in_irq = s.sched().cpus[cpu].in_irq(now);
    if s.sched().cpus[cpu].task.is_none() && s.sched().cpus[cpu].mode == Mode::Idle && !in_irq {
        switch_in(s, cpu);
    } else if let Some(curr) = curr {
        let user_spin = s.sched().cpus[cpu].mode == Mode::Spin(SpinOn::UserForever);
        if s.sched().fair.wakeup_preempts(curr, v, avg) {
            s.sched().cpus[cpu].need_resched = true;
        } else if user_spin {
            // A task spinning in user space reaches no step boundary: the tick looks at it.
            resume_at_tick(s, cpu);
            return;
        }
        if user_spin && s.sched().cpus[cpu].need_resched {
            if !in_irq {
                // A task spinning in user space is preempted at once (the reschedule IPI).
                preempt_user_spin(s, cpu);
            } else {
                // ... or, in a handler, when it returns to user space.
                look_again_after_handler(s, cpu);
            }
        }
    }
}

/// wait_event_interruptible(): sleep until wake_interruptible() or a fatal signal.
pub fn sleep_interruptible(s: &mut impl Host, t: TaskId) -> Outcome {
    s.sched().tasks[t].interruptible = true;
    Outcome::Sleep(NEVER)
}

/// wake_up_interruptible(): end task `t`'s interruptible wait, if it is in one.
pub fn wake_interruptible(s: &mut impl Host, t: TaskId) {
    if s.sched().tasks[t].interruptible {
        s.sched().tasks[t].interruptible = false;
        wake(s, t);
    }
}

/// signal_wake_up() of a fatal signal (the OOM killer's SIGKILL): ends an interruptible sleep.
pub fn signal_wake_up(s: &mut impl Host, t: TaskId) {
    // An interruptible mark left from a wait that a plain wake() ended must not end this one.
    if !s.sched().tasks[t].uninterruptible {
        wake_interruptible(s, t);
    }
}

/// Switch a task spinning in user space out for the first runnable one (NEED_RESCHED is set).
fn preempt_user_spin(s: &mut impl Host, cpu: CpuId) {
    s.sched().cpus[cpu].need_resched = false;
    close_period(s, cpu);
    let cur = s.sched().cpus[cpu]
        .task
        .take()
        .expect("a user spin runs a task");
    let now = s.now();
    put_prev(s.sched(), cpu, cur, now, false);
    switch_in(s, cpu);
}

pub fn resume(s: &mut impl Host, cpu: CpuId, gen: u32) {
    let now = s.now();
    let c = &s.sched().cpus[cpu];
    if c.gen != gen || c.in_irq(now) {
        return;
    }
    let (mode, resched, waiting) = (c.mode, c.need_resched, !c.runq.is_empty());
    match mode {
        Mode::Busy { .. } => run(s, cpu),
        Mode::Spin(SpinOn::UserForever) if resched || slice_used(s.sched(), cpu, now) => {
            preempt_user_spin(s, cpu)
        }
        Mode::Spin(SpinOn::UserForever) if waiting => {
            // Not yet: the tick that ends its slice looks again.
            resume_at_tick(s, cpu);
        }
        Mode::Spin(on) => {
            if spin(s, cpu, on) {
                close_period(s, cpu);
                s.sched().cpus[cpu].mode = Mode::Busy { until: s.now() };
                run(s, cpu);
            }
        }
        Mode::Idle => {}
    }
}

/// The condition a CPU spins on may have come true: re-arm its spin (in a handler, once it ends).
pub fn kick_spinner(s: &mut impl Host, cpu: CpuId) {
    let now = s.now();
    if let Mode::Spin(on) = s.sched().cpus[cpu].mode {
        if s.sched().cpus[cpu].in_irq(now) {
            look_again_after_handler(s, cpu);
        } else if spin(s, cpu, on) {
            close_period(s, cpu);
            s.sched().cpus[cpu].mode = Mode::Busy { until: s.now() };
            run(s, cpu);
        }
    }
}

/// A spinning CPU in a handler looks at its spin again when the handler ends: at its end if it
/// exits on its own, or at the IrqExit re-entry's (irq_enter's Spin case) if one is queued.
fn look_again_after_handler(s: &mut impl Host, cpu: CpuId) {
    // (A handler that has not started its pass looks at the spin when it has: handler_start.)
    if !s.sched().cpus[cpu].exit_queued && !s.sched().cpus[cpu].in_pass() {
        let end = s.sched().cpus[cpu].irq_end;
        spin_resume_at(s, cpu, end);
    }
}

/// Make sure a spinning CPU looks at its condition again at `at` (unless a Resume of this spin
/// is due then already).
fn spin_resume_at(s: &mut impl Host, cpu: CpuId, at: Time) {
    let c = &mut s.sched().cpus[cpu];
    if c.spin_gen == c.gen && c.spin_at == at {
        return;
    }
    c.spin_at = at;
    c.spin_gen = c.gen;
    let gen = c.gen;
    s.q().schedule(
        at,
        Event::Resume {
            cpu: cpu as u16,
            gen,
        },
    );
}

/// An IPI of `vector` reaches `cpu`'s local APIC: it sets the vector's IRR bit, taken now unless
/// the CPU is in a handler or has IRQs off.
pub fn ipi_arrive(s: &mut impl Host, cpu: CpuId, vector: Vector) {
    let now = s.now();
    let c = &mut s.sched().cpus[cpu];
    let in_irq = c.in_irq(now);
    let masked = in_irq || (c.irqs_off && matches!(c.mode, Mode::Busy { .. }));
    c.irq_pending |= 1 << vector as u8;
    if masked {
        if in_irq && !c.exit_queued && !c.in_pass() {
            // The handler's exit must take this interrupt: it becomes an IrqExit event (the
            // interrupted work's Resume, due later, is ignored meanwhile).
            c.exit_queued = true;
            let end = c.irq_end;
            s.q().schedule(end, Event::IrqExit { cpu: cpu as u16 });
        }
    } else {
        irq_enter(s, cpu, Entry::Ipi);
    }
}

pub fn poll_kick(s: &mut impl Host, cpu: CpuId) {
    let now = s.now();
    if s.sched().cpus[cpu].mode == Mode::Idle && !s.sched().cpus[cpu].in_irq(now) {
        irq_enter(s, cpu, Entry::IdlePoll);
    } else {
        // The CPU left the idle loop meanwhile: the queued work needs a real interrupt.
        ipi_arrive(s, cpu, Vector::CallFunctionSingle);
    }
}

/// How a CPU comes to run its call queue.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// An IPI interrupts it (a halted idle CPU wakes up first).
    Ipi,
    /// The polling idle loop finds work queued without an interrupt (set_nr_if_polling).
    IdlePoll,
    /// The IPI that arrived during the last handler is taken right after its iret: the CPU is
    /// awake, even if idle.
    Pending,
}

/// Take an interrupt, or let the polling idle loop run the call queue.
fn irq_enter(s: &mut impl Host, cpu: CpuId, how: Entry) {
    let now = s.now();
    let mut entry = 0;
    let mut exit = 0;
    let mut guest_exit = 0;
    let mut wake = 0;
    match s.sched().cpus[cpu].mode {
        Mode::Busy { until } => {
            let c = &mut s.sched().cpus[cpu];
            c.busy_left = until.saturating_sub(now);
            c.gen = c.gen.wrapping_add(1);
            if c.in_guest && how == Entry::Ipi {
                // KVM: the host interrupt makes the vCPU leave the guest, and enter it again after
                // (an IPI taken right after the last handler finds it still out of the guest).
                guest_exit = s.machine().cost[Cost::GuestExit];
            }
        }
        Mode::Spin(_) => close_period(s, cpu),
        Mode::Idle => {
            if how == Entry::Ipi && now >= s.sched().cpus[cpu].poll_until {
                // Leaving the halted state is idle time, not handler time (perf sees none of it).
                wake = s.machine().cost[Cost::IdleWakeup];
            }
            close_period(s, cpu);
        }
    }
    if how != Entry::IdlePoll {
        // sysvec_call_function(_single): inc_irq_stat(irq_call_count)
        s.obs().stats.irq(Irq::Cal, cpu);
        s.obs().stats.interrupt_at(now);
        let half = s.machine().cost[Cost::IrqEntryExit] / 2;
        entry += half;
        exit += s.machine().cost[Cost::IrqEntryExit] - half;
    }
    let c = &mut s.sched().cpus[cpu];
    // In the handler from now: its end is known once its pass has run (irq_end = NEVER till then).
    c.irq_end = NEVER;
    // The highest pending vector is taken first: CALL_FUNCTION_VECTOR is above the single one.
    c.vector = match how {
        Entry::IdlePoll => Vector::CallFunctionSingle,
        Entry::Ipi | Entry::Pending if c.irq_pending & 1 << Vector::CallFunction as u8 != 0 => {
            Vector::CallFunction
        }
        Entry::Ipi | Entry::Pending => Vector::CallFunctionSingle,
    };
    if how != Entry::IdlePoll {
        c.irq_pending &= !(1 << c.vector as u8);
    }
    let task = handler_task(s, cpu);
    s.obs()
        .stats
        .charge(task, Func::CallFunctionInterrupt, entry + exit);
    s.obs().stats.charge(task, Func::GuestExit, guest_exit);
    s.obs().stats.idle[cpu] += wake;
    // The guest exit comes before the handler, the re-entry after it.
    let leave_guest = guest_exit / 2;
    let c = &mut s.sched().cpus[cpu];
    c.irq_from = now;
    c.irq_tail = guest_exit - leave_guest + exit;
    // The handler reads the call queue when it starts, not when the IPI arrives: senders that
    // queue meanwhile are in its batch (llist_del_all / list_replace_init at that time).
    s.q().schedule(
        now + wake + leave_guest + entry,
        Event::HandlerStart { cpu: cpu as u16 },
    );
}

/// The handler of an IPI taken earlier starts its pass over the call queue
/// (generic_smp_call_function_single_interrupt / __flush_smp_call_function_queue).
pub fn handler_start(s: &mut impl Host, cpu: CpuId) {
    let now = s.now();
    if let Some(tr) = s.obs().trace.as_mut() {
        tr.handler_start(cpu, now);
    }
    let task = handler_task(s, cpu);
    let vector = s.sched().cpus[cpu].vector;
    let pass = crate::smp::begin_pass(s, cpu, task, now, vector, true);
    handler_went_on(s, cpu, pass);
}

/// A handler's pass that stopped for something due first goes on.
pub fn handler_continue(s: &mut impl Host, cpu: CpuId) {
    let task = handler_task(s, cpu);
    let pass = crate::smp::continue_pass(s, cpu, task, true);
    handler_went_on(s, cpu, pass);
}

/// The task a handler on `cpu` interrupts (none on an idle CPU).
fn handler_task(s: &impl Host, cpu: CpuId) -> Option<TaskId> {
    let c = &s.sched_view().0.cpus[cpu];
    if c.mode == Mode::Idle {
        None
    } else {
        c.task
    }
}

/// After a stretch of a handler's pass: go on with it later, or, if it ended at `pass`, leave
/// the handler.
fn handler_went_on(s: &mut impl Host, cpu: CpuId, pass: Option<Time>) {
    let Some(pass_end) = pass else {
        let at = s.view().0.pass[cpu].at;
        s.q()
            .schedule(at, Event::HandlerContinue { cpu: cpu as u16 });
        return;
    };
    let task = handler_task(s, cpu);
    let (from, tail) = (s.sched().cpus[cpu].irq_from, s.sched().cpus[cpu].irq_tail);
    let end = pass_end + tail;
    if let Some(tr) = s.obs().trace.as_mut() {
        tr.slice(cpu, from, end, Func::CallFunctionInterrupt.name());
    }
    if task.is_none() {
        // Interrupt time on an idle CPU belongs to no task; keep the idle clock honest.
        s.sched().cpus[cpu].since = end;
    }
    let c = &mut s.sched().cpus[cpu];
    c.irq_end = end;
    c.exit_queued = false;
    match c.mode {
        Mode::Busy { .. } => {
            // iret returns to the interrupted step, which ends its handler's length later.
            let until = end + c.busy_left;
            c.mode = Mode::Busy { until };
            let gen = c.gen;
            s.q().schedule(
                until,
                Event::Resume {
                    cpu: cpu as u16,
                    gen,
                },
            );
        }
        Mode::Spin(on) => {
            // iret returns to the spin: its Resume stays due if the condition comes true after
            // the handler; one that came true before is looked at when the handler ends.
            c.since = end;
            if on == SpinOn::UserForever && (c.need_resched || !c.runq.is_empty()) {
                // A wakeup came during the last handler: preempted on the way back to user space.
                spin_resume_at(s, cpu, end);
            } else if let Some(t) = spin_until(s, cpu, on) {
                spin_resume_at(s, cpu, t.max(end));
            }
        }
        Mode::Idle => {}
    }
    // An idle CPU leaves its handler with an event, and so does one where an IPI arrived before
    // the pass started (taken again after iret).
    let c = &mut s.sched().cpus[cpu];
    if c.mode == Mode::Idle || c.irq_pending != 0 {
        c.exit_queued = true;
        s.q().schedule(end, Event::IrqExit { cpu: cpu as u16 });
    }
}

/// The end of a handler that exits with an event: an idle CPU's, or one that must take an IPI
/// that arrived while it ran (a busy or spinning CPU's handler otherwise ends without one).
pub fn irq_exit(s: &mut impl Host, cpu: CpuId) {
    s.sched().cpus[cpu].exit_queued = false;
    s.sched().cpus[cpu].irq_end = 0;
    if s.sched().cpus[cpu].irq_pending != 0 {
        // The IRR bit was set while the handler ran: the interrupt is taken again after iret.
        irq_enter(s, cpu, Entry::Pending);
        return;
    }
    debug_assert_eq!(s.sched().cpus[cpu].mode, Mode::Idle);
    if !s.sched().cpus[cpu].runq.is_empty() {
        switch_in(s, cpu);
    } else {
        // Back to the top of the idle loop: poll again before halting.
        go_idle(s, cpu);
    }
}

/// Charge the periods still open when the run ends.
pub fn finish_accounting(s: &mut impl Host, end: Time) {
    for cpu in 0..s.sched().cpus.len() {
        if let Some(tr) = s.obs().trace.as_mut() {
            tr.step_end(cpu, end);
        }
        if matches!(s.sched().cpus[cpu].mode, Mode::Spin(_) | Mode::Idle)
            && !s.sched().cpus[cpu].in_irq(end)
        {
            let since = s.sched().cpus[cpu].since.min(end);
            let dt = end - since;
            s.sched().cpus[cpu].since = end;
            match s.sched().cpus[cpu].mode {
                Mode::Spin(on) => {
                    let name = spin_func(s, on).name();
                    if let Some(tr) = s.obs().trace.as_mut() {
                        tr.slice(cpu, since, end, name);
                    }
                    charge_spin(s, cpu, on, dt)
                }
                _ => s.obs().stats.idle[cpu] += dt,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{spawn_at, Mode, SpinOn, Step, TaskState};
    use crate::machine::Cost::{self, *};
    use crate::sim::Sim;
    use crate::testing::{
        busy_until, cal, ipi_at, machine, mm_alloc, run_until, spawn, switch_in, work, Then, MM,
    };

    const US: u64 = 1_000_000;
    const MS: u64 = 1_000 * US;

    fn c(s: &Sim, k: Cost) -> u64 {
        s.m.cost[k]
    }

    /// CPU 1 runs one step of `w` ps with IRQs on or off (then sleeps); returns when it began.
    fn one_step(w: u64, irqs_off: bool, then: &[Step]) -> (Sim, u64) {
        let mut s = machine(2, "linux-6.3", Then::Sleep, &[]);
        let mut steps = vec![work(w, irqs_off)];
        steps.extend_from_slice(then);
        spawn(&mut s, MM, 1, &steps);
        let start = switch_in(&s);
        (s, start)
    }

    /// machine.smt_yield 1.6: a step that starts while the other thread of its core runs one
    /// takes 2 / 1.6 = 1.25 times as long; one beside an idle sibling, or on another core, does
    /// not. 4 CPUs of 2 cores: CPUs 1 and 3 are siblings, 0 and 2.
    #[test]
    fn a_step_beside_a_busy_smt_sibling_takes_its_share_of_the_core() {
        let sets = [("machine.smt", "2"), ("machine.smt_yield", "1.6")];
        let mut s = machine(4, "linux-6.3", Then::Sleep, &sets);
        spawn(&mut s, MM, 1, &[work(100 * US, false)]);
        let start = switch_in(&s);
        run_until(&mut s, start);
        assert_eq!(busy_until(&s, 1), start + 100 * US, "its sibling is idle");
        // CPU 2 (beside idle CPU 0) and CPU 3 (beside busy CPU 1) switch in alike: to mms of
        // their own, whose mm_cpumask lines neither waits for.
        let (mm2, mm3) = (mm_alloc(&mut s), mm_alloc(&mut s));
        spawn(&mut s, mm2, 2, &[work(100 * US, false)]);
        spawn(&mut s, mm3, 3, &[work(100 * US, false)]);
        let sw = busy_until(&s, 2) - start;
        assert_eq!(busy_until(&s, 3), start + sw * 5 / 4, "CPU 1 runs");
        run_until(&mut s, start + sw * 5 / 4);
        assert_eq!(busy_until(&s, 2), start + sw + 100 * US, "CPU 0 idles");
        assert_eq!(busy_until(&s, 3), start + sw * 5 / 4 + 125 * US);
        let t = s.sched.cpus[3].task.unwrap();
        assert_eq!(
            s.obs.stats.tasks[t].times.user,
            125 * US,
            "the stretch is its step's"
        );
    }

    /// An IPI to a CPU in a busy step with IRQs on is taken at once; iret returns to the step,
    /// which ends exactly one handler (irq_entry_exit, nothing queued) later.
    #[test]
    fn an_ipi_delays_the_interrupted_step_by_the_handler() {
        let (mut s, start) = one_step(100 * US, false, &[]);
        ipi_at(&mut s, 1, start + 10 * US);
        run_until(&mut s, start + 10 * US + 1);
        assert!(s.sched.cpus[1].in_irq(s.now()));
        run_until(&mut s, start + 50 * US);
        let handler = c(&s, IrqEntryExit);
        assert_eq!(busy_until(&s, 1), start + 100 * US + handler);
        assert_eq!(cal(&s, 1), 1);
        let t = s.sched.cpus[1].task.unwrap();
        assert_eq!(
            s.obs.stats.tasks[t].times.user,
            100 * US,
            "the step's own time is unchanged"
        );
    }

    /// An IPI that arrives while the CPU is in a handler (IRQs off) is taken after that
    /// handler's exit, and delays the step by its own handler: two IPIs, two passes, the step
    /// two handlers later (a44168d: the re-entry recomputed what was left of the step from its
    /// old end, losing the first handler). A third IPI that arrives while the second is still
    /// pending sets the same IRR bit: no third pass. One that arrives during the second
    /// handler is a third pass.
    #[test]
    fn an_ipi_during_a_handler_is_taken_after_its_exit() {
        // (IPIs at these offsets from 10 us, interrupts taken, handlers the step is delayed by)
        for (offsets, passes) in [(&[0, 1][..], 2), (&[0, 1, 2], 2), (&[0, 1, 7 * US], 3)] {
            let (mut s, start) = one_step(100 * US, false, &[]);
            for &o in offsets {
                ipi_at(&mut s, 1, start + 10 * US + o);
            }
            run_until(&mut s, start + 80 * US);
            let handler = c(&s, IrqEntryExit);
            assert_eq!(cal(&s, 1), passes, "{offsets:?}");
            assert_eq!(s.sched.cpus[1].irq_pending, 0, "{offsets:?}");
            let end = start + 100 * US + passes * handler;
            assert_eq!(busy_until(&s, 1), end, "{offsets:?}");
        }
    }

    /// An IPI to a CPU in an IRQs-off step waits in the APIC until the step ends; the handler
    /// then runs before the next step, which starts one handler after the first step's end.
    /// More IPIs meanwhile set the same IRR bit: still one interrupt (seed 000's flushfull
    /// merges a quarter of its flush IPIs so, at readers waiting for the lru_lock).
    #[test]
    fn an_ipi_to_an_irqs_off_step_waits_for_its_end() {
        for ipis in [1, 3] {
            let (mut s, start) = one_step(100 * US, true, &[work(50 * US, false)]);
            for i in 0..ipis {
                ipi_at(&mut s, 1, start + (10 + 20 * i) * US);
            }
            run_until(&mut s, start + 100 * US - 1);
            assert!(s.sched.cpus[1].irq_pending != 0);
            assert_eq!(cal(&s, 1), 0);
            assert_eq!(
                busy_until(&s, 1),
                start + 100 * US,
                "the step is not delayed"
            );
            let handler = c(&s, IrqEntryExit);
            run_until(&mut s, start + 100 * US + handler + 1);
            assert_eq!(cal(&s, 1), 1, "{ipis} IPIs");
            assert_eq!(busy_until(&s, 1), start + 100 * US + handler + 50 * US);
        }
    }

    /// A halted idle CPU pays idle_wakeup before its handler (idle time, not handler time); a
    /// second IPI that arrives meanwhile is taken right after the first handler's iret, awake:
    /// no second wakeup (03cdd11). The handlers end at wakeup + 1 or 2 handlers.
    #[test]
    fn a_halted_idle_cpu_pays_its_wakeup_once() {
        for ipis in [1, 2] {
            let mut s = machine(2, "linux-6.3", Then::Sleep, &[]);
            let at = 10 * US;
            for i in 0..ipis {
                ipi_at(&mut s, 1, at + i);
            }
            let end = at + c(&s, IdleWakeup) + ipis * c(&s, IrqEntryExit);
            run_until(&mut s, end - 1);
            assert!(s.sched.cpus[1].in_irq(s.now()), "{ipis} IPIs");
            run_until(&mut s, end);
            assert!(!s.sched.cpus[1].in_irq(s.now()), "{ipis} IPIs");
            assert_eq!(cal(&s, 1), ipis);
            assert_eq!(s.sched.cpus[1].mode, Mode::Idle);
            // Idle the whole time but the handlers.
            run_until(&mut s, 1000 * US);
            assert_eq!(s.obs.stats.idle[1], 1000 * US - ipis * c(&s, IrqEntryExit));
        }
    }

    /// A vCPU in guest code pays one guest exit and entry for two IPIs taken back to back: the
    /// second finds it still out of the guest (22d6423).
    #[test]
    fn a_vcpu_leaves_the_guest_once_for_back_to_back_ipis() {
        let mut s = machine(2, "linux-6.3", Then::Sleep, &[]);
        spawn(&mut s, MM, 1, &[Step::Guest { ps: 100 * US }]);
        let start = switch_in(&s);
        ipi_at(&mut s, 1, start + 10 * US);
        ipi_at(&mut s, 1, start + 10 * US + 1);
        run_until(&mut s, start + 50 * US);
        let delay = c(&s, GuestExit) + 2 * c(&s, IrqEntryExit);
        assert_eq!(busy_until(&s, 1), start + 100 * US + delay);
        assert_eq!(cal(&s, 1), 2);
    }

    /// A thread spinning in user space (IRQs on) takes interrupts at once; its user time is the
    /// run's time but the handlers, which are system time, each charged once even back to back
    /// (95d3d49: the first handler was charged again as spin time).
    #[test]
    fn a_user_spin_takes_interrupts_and_is_not_charged_for_them() {
        for ipis in [1, 2] {
            let mut s = machine(2, "linux-6.3", Then::Spin, &[]);
            let t = spawn(&mut s, MM, 1, &[]);
            let start = switch_in(&s);
            for i in 0..ipis {
                ipi_at(&mut s, 1, start + 10 * US + i);
            }
            run_until(&mut s, start + 10 * US + 1);
            assert!(s.sched.cpus[1].in_irq(s.now()), "taken at once");
            let end = start + 100 * US;
            run_until(&mut s, end);
            assert_eq!(s.sched.cpus[1].mode, Mode::Spin(SpinOn::UserForever));
            let handlers = ipis * c(&s, IrqEntryExit);
            assert_eq!(
                s.obs.stats.tasks[t].times.user,
                end - start - handlers,
                "{ipis} IPIs"
            );
            assert_eq!(
                s.obs.stats.tasks[t].times.system,
                switch_in(&s) + handlers,
                "{ipis} IPIs"
            );
        }
    }

    /// A task woken while its CPU runs a handler over a thread spinning in user space runs when
    /// the handler returns to user space (NEED_RESCHED), both when the wakeup comes before the
    /// handler's pass began and after (c655d65: it waited for a step boundary the spinner never
    /// reaches). It starts one context switch later (same mm: no CR3 write). The spinner has run
    /// 10 ms, so the sleeper's credit puts it more than CFS's wakeup granularity behind.
    #[test]
    fn a_wakeup_during_a_handler_over_a_user_spin_runs_at_its_exit() {
        for woken in [1, 4 * US] {
            let mut s = machine(2, "linux-6.3", Then::Spin, &[]);
            let spinner = spawn(&mut s, MM, 1, &[]);
            let at = switch_in(&s) + 10 * MS;
            ipi_at(&mut s, 1, at);
            let t = spawn_at(&mut s, MM, 1, at + woken);
            s.sched.tasks[t].steps = vec![work(20 * US, false)];
            let exit = at + c(&s, IrqEntryExit);
            run_until(&mut s, exit - 1);
            assert_eq!(s.sched.cpus[1].task, Some(spinner), "woken at {woken}");
            run_until(&mut s, exit + 1);
            assert_eq!(s.sched.cpus[1].task, Some(t), "woken at {woken}");
            assert_eq!(busy_until(&s, 1), exit + c(&s, ContextSwitch));
            run_until(&mut s, exit + 10 * US);
            assert_eq!(busy_until(&s, 1), exit + c(&s, ContextSwitch) + 20 * US);
        }
    }

    /// Two threads spinning in user space on one CPU share it in slices (check_preempt_tick()):
    /// CFS on 2 CPUs gives each 12 ms / 2 = 6 ms, taken at the next 4 ms tick (HZ=250); the
    /// second, woken 1 ms in, is not the 2 ms wakeup granularity behind and waits for the tick.
    /// EEVDF gives each base_slice, 1.5 ms here, also ending on a tick.
    #[test]
    fn the_tick_shares_a_cpu_between_two_user_spinners() {
        for (kernel, turns) in [
            ("linux-6.3", [8 * MS, 16 * MS, 24 * MS]),
            ("linux-6.18", [4 * MS, 8 * MS, 12 * MS]),
        ] {
            let mut s = machine(2, kernel, Then::Spin, &[]);
            let a = spawn(&mut s, MM, 1, &[]);
            let b = spawn_at(&mut s, MM, 1, MS);
            for (turn, at) in turns.into_iter().enumerate() {
                let (before, after) = if turn % 2 == 0 { (a, b) } else { (b, a) };
                run_until(&mut s, at - 1);
                assert_eq!(s.sched.cpus[1].task, Some(before), "{kernel} turn {turn}");
                run_until(&mut s, at + 1);
                assert_eq!(s.sched.cpus[1].task, Some(after), "{kernel} turn {turn}");
            }
        }
    }

    /// A kernel thread asleep since boot, woken on a CPU whose user task has run past the wakeup
    /// granularity, preempts it at once under CFS (sleeper credit); under EEVDF it has no lag to
    /// be ahead with, so the running task keeps the CPU until its slice ends (RUN_TO_PARITY).
    #[test]
    fn a_woken_kthread_preempts_under_cfs_and_waits_for_the_slice_under_eevdf() {
        for (kernel, runs_at) in [("linux-6.3", 10 * MS), ("linux-6.18", 12 * MS)] {
            let mut s = machine(2, kernel, Then::Spin, &[]);
            let spinner = spawn(&mut s, MM, 1, &[]);
            let k = spawn_at(&mut s, crate::mm::KTHREAD, 1, 10 * MS);
            s.sched.tasks[k].steps = vec![work(US, false)];
            run_until(&mut s, 10 * MS - 1);
            assert_eq!(s.sched.cpus[1].task, Some(spinner), "{kernel}");
            run_until(&mut s, runs_at - 1);
            assert_eq!(s.sched.cpus[1].task, Some(spinner), "{kernel}");
            run_until(&mut s, runs_at + 1);
            assert_eq!(s.sched.cpus[1].task, Some(k), "{kernel}");
        }
    }

    /// Two timers due at the same time wake their tasks in the order they were set (the event
    /// queue's sequence number): the first runs, the second waits in the runqueue.
    #[test]
    fn wakeups_at_the_same_time_run_in_the_order_they_were_set() {
        for first_set in [0, 1] {
            let mut s = machine(2, "linux-6.3", Then::Sleep, &[]);
            let at = 10 * US;
            let mut tasks = [0; 2];
            for i in [first_set, 1 - first_set] {
                tasks[i] = spawn_at(&mut s, MM, 1, at);
                s.sched.tasks[tasks[i]].steps = vec![work(5 * US, false)];
            }
            let (a, b) = (tasks[first_set], tasks[1 - first_set]);
            run_until(&mut s, at + 1);
            assert_eq!(s.sched.cpus[1].task, Some(a));
            assert_eq!(s.sched.cpus[1].runq.tasks(), [b]);
            assert_eq!(s.sched.tasks[b].state, TaskState::Running);
            // b runs once a sleeps after its step: a context switch out, one in.
            run_until(&mut s, at + 100 * US);
            assert_eq!(s.obs.stats.tasks[b].times.user, 5 * US);
        }
    }

    /// A handler reads its CPU's call queue when its pass starts, after the halted CPU's wakeup
    /// and the entry, not when the IPI arrives (cb9f910): CPU 2's call to CPUs 0 and 1, made while
    /// CPU 1 wakes up for CPU 0's IPI, finds CPU 1's queue holding CPU 0's csd and sends CPU 1
    /// no IPI (skip_ipi_if_queued); CPU 1's one pass runs both csds.
    #[test]
    fn a_csd_queued_during_the_wakeup_is_in_the_handlers_batch() {
        let mut s = machine(3, "linux-6.3", Then::Spin, &[]);
        spawn(&mut s, MM, 0, &[Step::TlbRemoveTableSyncOne]);
        spawn(
            &mut s,
            MM,
            2,
            &[work(20 * US, false), Step::TlbRemoveTableSyncOne],
        );
        let start = switch_in(&s);
        // CPU 0's IPI reaches CPU 1 at about start + 6 us; its pass starts some 37 us later.
        // (The two llist_add()s take their heads' lines at once; the IPIs wait for the later.)
        let arrive =
            start + 2 * c(&s, CsdQueue) + c(&s, LineNode) + c(&s, IpiSend) + c(&s, IpiWireNode);
        let pass = arrive + c(&s, IdleWakeup) + c(&s, IrqEntryExit) / 2;
        run_until(&mut s, pass - 1);
        assert_eq!(s.smp.queue[1].len(), 2, "both csds wait for the pass");
        assert_eq!(s.obs.stats.ipis_sent, 2 + 1, "CPU 2 sent only CPU 0 an IPI");
        run_until(&mut s, pass + 1);
        assert!(s.smp.queue[1].is_empty());
        run_until(&mut s, 200 * US);
        assert_eq!((s.smp.waiting[0], s.smp.waiting[2]), (0, 0));
        assert_eq!(cal(&s, 1), 1);
        assert_eq!(s.obs.stats.ipis_sent, 3);
    }
}
