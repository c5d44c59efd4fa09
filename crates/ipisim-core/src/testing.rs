//! A minimal machine for unit tests: N CPUs on one node of host-2cpu's cost table, 64 MiB, a
//! kernel preset with `--set`-style overrides, and no scenario running. Tests spawn tasks with
//! the steps they want and drive the event loop; each subsystem is tested on its own.

use crate::arch::x86::X86;
use crate::arch::Tlb;
use crate::config::RunRequest;
use crate::engine::{CpuMask, EventQueue, SharedLine, SpinLock, Time, NEVER};
use crate::machine::Cost;
use crate::observe::{Irq, Stats};
use crate::resolve;
use crate::sched::{self, Cpu, Mode, Step, TaskState};
use crate::sim::{CpuId, Sim, TaskId};
/// A new process's mm (mm_alloc() and init_new_context()), its mm_cpumask line in memory.
pub(crate) use crate::workload::mm_alloc;

/// The process every test task belongs to (the scenario's, made at start).
pub(crate) const MM: usize = 0;

/// What a test task does once its steps are done: spin in user space (IRQs on) or sleep.
#[derive(Clone, Copy)]
pub(crate) enum Then {
    Spin,
    Sleep,
}

/// `scenario` on `machine` with `kernel` and `sets`, seed 1, made and not started.
pub(crate) fn sim(scenario: &str, machine: &str, kernel: &str, sets: &[(&str, &str)]) -> Sim {
    let req = RunRequest::new(scenario, machine, kernel, sets);
    Sim::new(&resolve(&req).unwrap()).unwrap()
}

/// `cpus` CPUs on one node, HLT idle, `kernel` with `sets` on top. The scenario (membarrier,
/// whose threads other than its main one spin or sleep as `then` says) is only a host: its main
/// thread is taken off the machine before anything ran, so the machine is quiet at time 0.
pub(crate) fn machine(cpus: usize, kernel: &str, then: Then, sets: &[(&str, &str)]) -> Sim {
    let n = cpus.to_string();
    let remote = match then {
        Then::Spin => "busy",
        Then::Sleep => "sleeping",
    };
    let mut all = vec![
        ("machine.cpus_per_node", n.as_str()),
        ("machine.mem_per_node", "64MiB"),
        ("machine.idle", "hlt"),
        ("remote", remote),
        ("remote_threads", "0"),
    ];
    all.extend_from_slice(sets);
    let mut s = sim("membarrier", "host-2cpu", kernel, &all);
    // Undo the main thread's switch-in at time 0: the machine starts idle, with no mm loaded.
    let n = s.sched.cpus.len();
    s.q = EventQueue::new();
    let domain = s.sched.balance.domain(s.m.cpus_per_node);
    s.sched.cpus = (0..n)
        .map(|_| Cpu::idle_since_boot(s.m.idle, domain))
        .collect();
    s.sched.tasks[0].state = TaskState::Exited;
    s.mem.mms[s.sched.tasks[0].mm].users -= 1;
    s.obs.stats = Stats::new(n);
    (0..s.sched.tasks.len()).for_each(|_| s.obs.stats.add_task());
    s.arch.x86 = X86::new(n);
    s.arch.tlb = (0..n)
        .map(|_| Tlb::new(s.m.tlb_entries, s.m.tlb_ways))
        .collect();
    s.arch.mm[MM].cpumask = CpuMask::new();
    s.arch.mm[MM].tlb_gen_line = SpinLock::in_memory();
    s.arch.mm[MM].cpumask_line = SharedLine::default();
    s
}

/// will-it-scale tlb_flush2 in thread mode on the Milan: `tasks` threads of `loops` loops each,
/// with `kernel` and `sets`, run to its end.
pub(crate) fn tlb_flush2_threads(
    kernel: &str,
    tasks: usize,
    loops: u64,
    sets: &[(&str, &str)],
) -> Sim {
    let (tasks, loops) = (tasks.to_string(), loops.to_string());
    let mut all = vec![("mode", "thread"), ("tasks", &tasks), ("loops", &loops)];
    all.extend_from_slice(sets);
    let mut s = sim("will-it-scale/tlb_flush2", "amd-milan-72c", kernel, &all);
    let limit = crate::sim::time_limit(&s);
    s.run(limit, &mut |_, _| {});
    s
}

/// A task of `mm` on `cpu` that runs `steps` in order (then does as the machine's `Then`), woken
/// now: on an idle CPU it is switched in at once.
pub(crate) fn spawn(s: &mut Sim, mm: usize, cpu: CpuId, steps: &[Step]) -> TaskId {
    let t = sched::spawn(s, mm, cpu);
    s.sched.tasks[t].steps = steps.iter().rev().copied().collect();
    t
}

/// A new region of `pages` pages of MM (anonymous memory, or a file) and a task on `cpu` that
/// reads it (anonymous pages are written: a read would map the zero page); its first page.
pub(crate) fn spawn_reader(s: &mut Sim, cpu: CpuId, pages: u32, anon: bool) -> u64 {
    let vpn = match anon {
        true => s.mem.map_new_anon(MM, pages as u64),
        false => s.mem.map_new_file(MM, pages as u64),
    };
    let read = Step::FileRead {
        vpn,
        n: pages,
        write: anon,
    };
    spawn(s, MM, cpu, &[read]);
    vpn
}

/// A busy step of `ps` charged to user time, with IRQs on or off.
pub(crate) fn work(ps: Time, irqs_off: bool) -> Step {
    Step::Work {
        func: crate::observe::Func::User,
        ps,
        irqs_off,
    }
}

/// Run the event loop until `t` (the clock is then at `t`).
pub(crate) fn run_until(s: &mut Sim, t: Time) {
    s.end = None;
    s.run(t, &mut |_, _| {});
}

/// Run the event loop until nothing is left to happen.
pub(crate) fn run_quiet(s: &mut Sim) {
    s.end = None;
    s.run(NEVER, &mut |_, _| {});
}

/// When `cpu`'s current busy step ends (panics if it is not busy).
pub(crate) fn busy_until(s: &Sim, cpu: CpuId) -> Time {
    match s.sched.cpus[cpu].mode {
        Mode::Busy { until } => until,
        m => panic!("CPU {cpu} is not busy: {m:?}"),
    }
}

/// An IPI (with nothing queued for it, unless a test queued something) reaches `cpu` at `at`.
pub(crate) fn ipi_at(s: &mut Sim, cpu: CpuId, at: Time) {
    let cpu = cpu as u16;
    let vector = crate::step::Vector::CallFunction;
    s.q.schedule(
        at,
        crate::step::Event::IpiArrive {
            cpu,
            vector,
            flow: 0,
        },
    );
}

/// Call-function interrupts `cpu` took (its CAL row).
pub(crate) fn cal(s: &Sim, cpu: CpuId) -> u64 {
    s.obs.stats.irqs[Irq::Cal as usize][cpu]
}

/// A cost of the machine's table, in ps.
pub(crate) fn cost(s: &Sim, c: Cost) -> Time {
    s.m.cost[c]
}

/// The time a task switched in on an idle CPU takes before its first step: the context switch
/// and switch_mm's CR3 write (a kernel thread loads no mm).
pub(crate) fn switch_in(s: &Sim) -> Time {
    cost(s, Cost::ContextSwitch) + cost(s, Cost::Cr3Flush)
}

mod tests {
    use super::*;

    /// The builder's machine is quiet, and a spawned task's step ends exactly its length after
    /// the switch-in.
    #[test]
    fn a_task_runs_its_steps_after_the_switch_in() {
        let mut s = machine(2, "linux-6.3", Then::Sleep, &[]);
        assert!(s.q.peek_time().is_none(), "nothing scheduled");
        assert_eq!(s.sched.cpus[0].mode, Mode::Idle);
        let t = spawn(&mut s, MM, 1, &[work(1_000_000, false)]);
        let start = switch_in(&s);
        assert_eq!(busy_until(&s, 1), start);
        run_until(&mut s, start + 1);
        assert_eq!(busy_until(&s, 1), start + 1_000_000);
        run_quiet(&mut s);
        assert_eq!(s.sched.tasks[t].state, TaskState::Sleeping);
        assert_eq!(s.obs.stats.tasks[t].times.user, 1_000_000);
        assert_eq!(s.obs.stats.ipis_sent, 0);
    }
}
