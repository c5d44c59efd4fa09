//! `membarrier`: one thread on CPU 0 calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)
//! `calls` times while `remote_threads` threads of the same process sit on CPUs 1.. spinning in
//! user space (`busy`), blocked (`sleeping`) or absent. Each call sends one ipi_mb IPI to every
//! other CPU running a thread of the process and waits for them (kernel/sched/membarrier.c).
//! The same program runs for real in python/ipisim/native/membarrier.c.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::Machine;
use crate::observe::Irq;
use crate::sched::{Outcome, Step};

const REMOTE: &[&str] = &["busy", "sleeping", "none"];

params! {
    /// The membarrier parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        calls: u64 = "calls", Kind::Int { min: 1, max: 1 << 30 }, "calls", "10000", "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) calls";
        remote: String = "remote", Kind::Choice(REMOTE), "", "busy", "the other threads: spinning in user space, blocked, or not created";
        remote_threads: usize = "remote_threads", Kind::Int { min: 0, max: 1023 }, "threads", "1", "threads on CPUs 1..N (ignored with remote=none)";
        settle: Time = "settle", Kind::Duration, "s", "50ms", "the main thread sleeps this long before the first call, so the remote threads spin or idle";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "membarrier",
    description: "microbenchmark: one thread calls membarrier(PRIVATE_EXPEDITED) while other threads of its process spin, sleep or are absent",
    params: PARAMS,
    metrics: &[("ns_per_call", true)],
    powerpc: false,
    arm64: false,
    riscv: false,
    thp: false,
    machine: None,
    check: &[],
};

pub struct Membarrier {
    calls: u64,
    remote: &'static str,
    remote_threads: usize,
    settle: Time,
    main: TaskId,
    settled: bool,
    done: u64,
    window: super::OpWindow,
}

impl Membarrier {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Membarrier, ConfigError> {
        let p = Params::from_resolved(r)?;
        let remote = REMOTE
            .iter()
            .find(|n| **n == p.remote)
            .expect("validated choice");
        let remote_threads = if *remote == "none" {
            0
        } else {
            p.remote_threads
        };
        let what = format!("{remote_threads} remote threads");
        super::need_cpus(r, m, "remote_threads", what, remote_threads + 1)?;
        Ok(Membarrier {
            calls: p.calls,
            remote,
            remote_threads,
            settle: p.settle,
            main: 0,
            settled: false,
            done: 0,
            window: Default::default(),
        })
    }
}

impl Scenario for Membarrier {
    fn start(&mut self, s: &mut impl Host) {
        let mm = super::mm_alloc(s);
        let threads = self.remote_threads;
        self.main = super::spawn_main_and_remotes(s, mm, threads, "membarrier");
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        let now = s.now();
        if t != self.main {
            return super::remote_op(self.remote == "busy");
        }
        if !self.settled {
            self.settled = true;
            return if self.settle > 0 {
                Outcome::Sleep(now + self.settle)
            } else {
                Outcome::Next
            };
        }
        if self.done == 0 && self.window.start == 0 {
            self.window.begin(s, now.max(1));
        }
        if self.done == self.calls {
            self.window.end = now;
            return Outcome::Exit;
        }
        self.done += 1;
        s.push_step(t, Step::Membarrier);
        Outcome::Next
    }

    /// The run ends when the main thread has made its calls.
    fn task_exited(&mut self, s: &mut impl Host, t: TaskId) {
        if t == self.main {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("calls".into(), self.done.into());
        m.insert("op_time_s".into(), self.window.seconds().into());
        m.insert("ns_per_call".into(), self.window.ns_per(self.done).into());
        m.insert(
            "call_function_interrupts".into(),
            self.window.irqs(s, Irq::Cal).into(),
        );
        m.insert(
            "tlb_shootdowns".into(),
            self.window.irqs(s, Irq::Tlb).into(),
        );
        m
    }
}
