//! The simulator: all state of one run, and the event loop that drives it.

use crate::arch::{ArchConfig, ArchState};
use crate::config::{ConfigError, Resolved};
pub use crate::engine::{CpuId, TaskId};
use crate::engine::{EventQueue, Rng, Time, NEVER};
use crate::kernel::KernelConfig;
use crate::machine::Machine;
use crate::mm::{Memory, MmConfig};
use crate::observe::check::Checker;
use crate::observe::tracelog::LineAt;
use crate::observe::{Observe, Stats};
use crate::sched::{self, Cpu, Sched};
use crate::smp::{Smp, SmpConfig};
use crate::step::Event;
use crate::step::{CallFunc, Cond, Outcome, SpinOn, Step};
use crate::workload::{Scenario, Workload};

/// How often a long run reports progress, in events (about a second of host time).
pub const PROGRESS_EVENTS: u64 = 1 << 23;

pub struct Sim {
    pub m: Machine,
    pub k: KernelConfig,
    pub q: EventQueue<Event>,
    pub rng: Rng,
    pub sched: Sched,
    pub smp: Smp,
    pub arch: ArchState,
    pub mem: Memory,
    pub obs: Observe,
    /// The scenario; taken out while one of its hooks runs, so the hook has both it and the Sim.
    pub work: Option<Box<Workload>>,
    /// Set when the workload says it is finished, or at the time limit.
    pub end: Option<Time>,
    /// The memory per node simulated when `scale` asked for less than the 64 MiB floor.
    pub mem_floor: Option<u64>,
}

impl Sim {
    pub fn new(r: &Resolved) -> Result<Sim, ConfigError> {
        let k = KernelConfig::from_resolved(r)?;
        let mut m = Machine::from_resolved(r, k.spinlock)?;
        let mut mem_floor = None;
        if let Some(f) = crate::workload::scale(r)? {
            // Scenarios with a `scale` simulate that fraction of the machine's memory.
            if !(f > 0.0 && f <= 1.0) {
                let msg = format!("{f} is out of range (0, 1]");
                return Err(r.error(crate::workload::SCALE, msg));
            }
            let scaled = (m.mem_per_node as f64 * f) as u64;
            // The floor stays (results depend on it); the result's config says it was applied.
            if scaled < 64 << 20 {
                mem_floor = Some(64 << 20);
            }
            m.mem_per_node = scaled.max(64 << 20);
        }
        let n = m.ncpus();
        let work = Workload::from_resolved(r, &m)?;
        check_host_memory(r, &m, work.host_bytes(&m))?;
        let mut rng = Rng::new(r.seed);
        let perturb = sched::Perturb::new(r, n, &mut rng)?;
        let arch_cfg = ArchConfig::from_resolved(r)?;
        let fair = sched::fair::Fair::new(r, n, arch_cfg.hz)?;
        let balance = sched::balance::Config::new(r, arch_cfg.hz)?;
        let hz = arch_cfg.hz;
        let mut s = Sim {
            q: EventQueue::new(),
            rng,
            sched: Sched {
                cpus: (0..n)
                    .map(|_| Cpu::idle_since_boot(m.idle, balance.domain(m.cpus_per_node)))
                    .collect(),
                tasks: Vec::new(),
                perturb,
                fair,
                balance,
            },
            smp: Smp::new(n, SmpConfig::from_resolved(r)?),
            arch: ArchState::new(arch_cfg, &m),
            mem: Memory::new(MmConfig::from_resolved(r)?, m.nodes, m.mem_per_node, n, hz),
            obs: Observe {
                stats: Stats::new(n),
                check: Checker::new(crate::observe::check::CheckParams::from_resolved(r)?.enabled),
                trace: None,
            },
            work: None,
            end: None,
            mem_floor,
            m,
            k,
        };
        let mut work = Box::new(work);
        work.start(&mut s);
        s.work = Some(work);
        Ok(s)
    }

    pub fn now(&self) -> Time {
        self.q.now()
    }

    /// A tracepoint's context on `cpu` when a trace is recorded (None otherwise): what ftrace's
    /// line prefix shows, read from the scheduler's state of that CPU.
    pub fn trace_at(&self, cpu: CpuId) -> Option<LineAt> {
        self.obs.tracing().then(|| LineAt {
            time: self.now(),
            cpu,
            task: self.sched.cpus[cpu].task,
            in_irq: self.sched.cpus[cpu].in_irq(self.now()),
        })
    }

    /// Run until the workload finishes or `limit` passes; `progress(simulated seconds, events)`
    /// is called every PROGRESS_EVENTS events.
    pub fn run(&mut self, limit: Time, progress: &mut dyn FnMut(f64, u64)) {
        if limit != NEVER {
            self.q.schedule(limit, Event::Stop);
        }
        while self.end.is_none() && !self.q.wrapped() {
            let Some((_, ev)) = self.q.pop() else { break };
            self.dispatch(ev);
            if self.q.popped() % PROGRESS_EVENTS == 0 {
                progress(crate::engine::secs(self.now()), self.q.popped());
            }
        }
        let end = self.end.unwrap_or(self.now());
        self.end = Some(end);
        sched::finish_accounting(self, end);
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::Resume { cpu, gen } => sched::resume(self, cpu as usize, gen),
            Event::IpiArrive { cpu, vector, flow } => {
                if let Some(tr) = self.obs.trace.as_mut() {
                    tr.ipi_arrived(cpu as usize, flow);
                }
                sched::ipi_arrive(self, cpu as usize, vector)
            }
            Event::PollKick { cpu } => sched::poll_kick(self, cpu as usize),
            Event::HandlerStart { cpu } => sched::handler_start(self, cpu as usize),
            Event::HandlerContinue { cpu } => sched::handler_continue(self, cpu as usize),
            Event::IrqExit { cpu } => sched::irq_exit(self, cpu as usize),
            Event::Wake { task } => sched::timer_wake(self, task as usize),
            Event::InvlpgbDone { cpu } => crate::arch::invlpgb_done(self, cpu as usize),
            Event::Stop => self.end = Some(self.now()),
        }
    }
}

/// The scenario's next operation for task `t`'s user program (sched's user step).
pub fn next_op(s: &mut Sim, cpu: CpuId, t: TaskId) -> Outcome {
    let mut work = s.work.take().expect("scenario hooks do not nest");
    let op = work.next_op(s, cpu, t);
    s.work = Some(work);
    op
}

/// Task `t` exited (sched's do_exit): the scenario hears of it, and may end the run.
pub fn task_exited(s: &mut Sim, t: TaskId) {
    // mmput(): the last task of a process gone, its mm's destroy_context().
    let mm = s.sched.tasks[t].mm;
    if mm != sched::KTHREAD {
        s.mem.mms[mm].users -= 1;
        if s.mem.mms[mm].users == 0 {
            crate::arch::destroy_context(s, mm);
        }
    }
    let mut work = s.work.take().expect("scenario hooks do not nest");
    work.task_exited(s, t);
    s.work = Some(work);
}

/// The scenario's counts and metrics, for the result's `ops`.
pub fn workload_ops(s: &Sim) -> serde_json::Map<String, serde_json::Value> {
    s.work.as_ref().expect("a scenario").ops(s)
}

/// The scenario's declared metrics (its `ops` keys, and whether lower is better), for the result.
pub fn workload_metrics(r: &Resolved) -> &'static [(&'static str, bool)] {
    crate::workload::decl(r).metrics
}

/// When the run stops if the scenario does not finish by itself.
pub fn time_limit(s: &Sim) -> Time {
    s.work.as_ref().expect("a scenario").time_limit()
}

/// MemAvailable from /proc/meminfo, in bytes; None where there is none (not Linux).
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Refuse, before anything is allocated, a run whose page state would not fit in the host's
/// memory (or `--max-memory`): the allocator would abort the process instead.
fn check_host_memory(r: &Resolved, m: &Machine, need: u64) -> Result<(), ConfigError> {
    if need == 0 {
        return Ok(());
    }
    let (limit, what) = match r.max_memory {
        Some(b) => (b, "--max-memory"),
        None => match mem_available() {
            Some(b) => (b, "the host's available memory (MemAvailable)"),
            None => return Ok(()),
        },
    };
    if need <= limit {
        return Ok(());
    }
    let fits = (limit as f64 / need as f64 * m.mem_per_node as f64) as u64;
    let msg = format!(
        "{} per node x {} nodes needs about {} of host memory to simulate, more than {what}, {}; \
         at most about {} per node fits (or lower scale)",
        crate::config::format_size(m.mem_per_node),
        m.nodes,
        crate::config::format_size(need),
        crate::config::format_size(limit),
        crate::config::format_size(fits),
    );
    Err(r.error("machine.mem_per_node", msg))
}

/// The scheduler's entry points mm calls, wired here so that mm names nothing above it.
impl crate::mm::Hooks for Sim {
    fn wake(&mut self, t: TaskId) {
        sched::wake(self, t)
    }
    fn spawn_kthread(&mut self, cpu: CpuId, comm: String) -> TaskId {
        let t = sched::spawn_at(self, sched::KTHREAD, cpu, NEVER);
        self.sched.tasks[t].comm = comm;
        t
    }
    fn kick_lock_spinner(&mut self, cpu: CpuId) {
        sched::kick_spinner(self, cpu)
    }
    fn signal_wake_up(&mut self, t: TaskId) {
        sched::signal_wake_up(self, t)
    }
    fn set_uninterruptible(&mut self, t: TaskId) {
        self.sched.tasks[t].uninterruptible = true;
    }
    fn panic(&mut self) {
        crate::workload::Host::finish(self)
    }
}

/// What a scenario needs from around it, wired here so that workload names nothing above it.
impl crate::workload::Host for Sim {
    fn observed(&self) -> &Observe {
        &self.obs
    }
    fn end(&self) -> Option<Time> {
        self.end
    }
    fn finish(&mut self) {
        self.end = Some(self.now());
    }
}

/// What sched needs from around it, wired here so that sched names nothing above it.
impl crate::sched::Host for Sim {
    fn sched_parts(&mut self) -> crate::sched::Parts<'_> {
        crate::sched::Parts {
            m: &self.m,
            q: &mut self.q,
            sched: &mut self.sched,
            rng: &mut self.rng,
            obs: &mut self.obs,
        }
    }
    fn sched_view(&self) -> (&Sched, &Machine) {
        (&self.sched, &self.m)
    }
    fn exec(&mut self, cpu: CpuId, t: TaskId, step: Step) -> Outcome {
        crate::dispatch::exec(self, cpu, t, step)
    }
    fn task_exited(&mut self, t: TaskId) {
        task_exited(self, t)
    }
}

/// What mm needs from around it, wired here so that mm names nothing above it.
impl crate::mm::Host for Sim {
    fn mm_parts(&mut self) -> crate::mm::Parts<'_> {
        crate::mm::Parts {
            m: &self.m,
            mem: &mut self.mem,
            arch: &mut self.arch,
            obs: &mut self.obs,
        }
    }
    fn mm_view(&self) -> (&Memory, &Machine) {
        (&self.mem, &self.m)
    }
    fn exited(&self, t: TaskId) -> bool {
        self.sched.tasks[t].exited()
    }
    fn locks_held(&mut self, t: TaskId) -> &mut u32 {
        &mut self.sched.tasks[t].locks_held
    }
}

/// What smp needs from around it, wired here so that smp names nothing above it.
impl crate::smp::Host for Sim {
    fn parts(&mut self) -> crate::smp::Parts<'_> {
        crate::smp::Parts {
            m: &self.m,
            q: &mut self.q,
            smp: &mut self.smp,
            obs: &mut self.obs,
        }
    }
    fn view(&self) -> (&Smp, &Machine) {
        (&self.smp, &self.m)
    }
    fn now(&self) -> Time {
        self.q.now()
    }
    fn push_step(&mut self, t: TaskId, step: Step) {
        self.sched.tasks[t].steps.push(step);
    }
    fn pop_step(&mut self, t: TaskId) -> Option<Step> {
        self.sched.tasks[t].steps.pop()
    }
    fn trace_at(&self, cpu: CpuId) -> Option<LineAt> {
        Sim::trace_at(self, cpu)
    }
    /// The function a csd runs on its target: the handler's time.
    fn run_call(
        &mut self,
        cpu: CpuId,
        task: Option<TaskId>,
        sender: CpuId,
        func: CallFunc,
        at: Time,
    ) -> Time {
        match func {
            CallFunc::FlushTlbFunc => crate::arch::flush_tlb_func(self, cpu, task, sender, at),
            CallFunc::FlushTlbBatchPages => crate::arch::tlbbatch_flush(self, cpu, task),
            CallFunc::FlushTlbPfns => crate::arch::tlbbatch_flush_pfns(self, cpu, task, sender),
            CallFunc::DrainLocalPages => crate::mm::drain::drain_local_pages(self, cpu, task),
            // ipi_mb(): one smp_mb(), a few dozen cycles: within the noise of irq_entry_exit.
            CallFunc::IpiMb => 0,
            CallFunc::DoSerialize | CallFunc::TlbRemoveTableSmpSync | CallFunc::DoNothingIpi => 0,
        }
    }
    /// on_each_cpu_cond_mask's condition for `cpu`.
    fn call_wanted(&self, cond: Cond, cpu: CpuId, sender: CpuId) -> bool {
        match cond {
            Cond::Always => true,
            Cond::ShouldFlushTlb => crate::arch::should_flush_tlb(self, cpu, sender),
        }
    }
    fn idle_polling(&self, cpu: CpuId) -> bool {
        sched::idle_polling(self, cpu)
    }
    fn kick_spinner(&mut self, cpu: CpuId) {
        sched::kick_spinner(self, cpu)
    }
    fn polls_csd(&self, cpu: CpuId, at: Time) -> bool {
        let c = &self.sched.cpus[cpu];
        c.mode == sched::Mode::Spin(SpinOn::CsdLockWait) && !c.in_irq(at)
    }
}

/// What arch needs from around it, wired here so that arch names nothing above it.
impl crate::arch::Host for Sim {
    fn arch_parts(&mut self) -> crate::arch::Parts<'_> {
        crate::arch::Parts {
            m: &self.m,
            arch: &mut self.arch,
            obs: &mut self.obs,
        }
    }
    fn arch_view(&self) -> (&ArchState, &Machine) {
        (&self.arch, &self.m)
    }
    fn current(&self, cpu: CpuId) -> Option<TaskId> {
        self.sched.cpus[cpu].task
    }
    fn task_mm(&self, t: TaskId) -> usize {
        self.sched.tasks[t].mm
    }
    fn batch_page(&self, t: TaskId, i: usize) -> Option<(Option<u32>, u64)> {
        self.mem.tasks[t].reclaim.ubc.pages.get(i).copied()
    }
}
