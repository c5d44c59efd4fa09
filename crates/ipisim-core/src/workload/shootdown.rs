//! `shootdown`: one thread on CPU 0 touches `pages` pages of a private anonymous mapping, then
//! applies `op` over them in calls of `batch` pages, while `remote_threads` threads of the same
//! process sit on CPUs 1.. spinning in user space (`busy`), blocked (`sleeping`) or absent.
//! The same program runs for real in python/ipisim/native/shootdown.c.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::Machine;
use crate::mm::{Backing, Syscall};
use crate::observe::Irq;
use crate::sched::{Outcome, Step};

const OPS: &[&str] = &["madvise", "munmap", "mprotect"];
const REMOTE: &[&str] = &["busy", "sleeping", "none"];

params! {
    /// The shootdown parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        pages: u64 = "pages", Kind::Int { min: 1, max: 1 << 26 }, "pages", "512", "4 KiB pages touched, then operated on";
        op: String = "op", Kind::Choice(OPS), "", "madvise", "madvise(MADV_DONTNEED), munmap or mprotect(PROT_READ)";
        batch: u64 = "batch", Kind::Int { min: 1, max: 1 << 26 }, "pages", "1", "pages per call; the last call may be shorter";
        remote: String = "remote", Kind::Choice(REMOTE), "", "busy", "the other threads: spinning in user space, blocked, or not created";
        remote_threads: usize = "remote_threads", Kind::Int { min: 0, max: 1023 }, "threads", "1", "threads on CPUs 1..N (ignored with remote=none)";
        misalign: bool = "misalign", Kind::Bool, "", "false", "start the region one page past a 2 MiB boundary (default: aligned)";
        settle: Time = "settle", Kind::Duration, "s", "50ms", "remote=sleeping: the main thread sleeps this long first, so the remote CPUs are idle";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "shootdown",
    description: "microbenchmark: one thread unmaps or protects pages while other threads of its process spin, sleep or are absent",
    params: PARAMS,
    metrics: &[("ns_per_syscall", true)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: None,
    check: &[],
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Touch,
    Settle,
    Ops { next: u64 },
}

pub struct Shootdown {
    pages: u64,
    op: &'static str,
    batch: u64,
    remote: &'static str,
    remote_threads: usize,
    misalign: bool,
    settle: Time,
    main: TaskId,
    region: u64,
    phase: Phase,
    calls: u64,
    window: super::OpWindow,
}

fn pick(names: &'static [&'static str], v: &str) -> &'static str {
    names.iter().find(|n| **n == v).expect("validated choice")
}

impl Shootdown {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Shootdown, ConfigError> {
        let p = Params::from_resolved(r)?;
        let remote = pick(REMOTE, &p.remote);
        let remote_threads = if remote == "none" {
            0
        } else {
            p.remote_threads
        };
        let what = format!("{remote_threads} remote threads");
        super::need_cpus(r, m, "remote_threads", what, remote_threads + 1)?;
        let pages = p.pages;
        if pages * 4096 > m.mem_per_node * m.nodes as u64 / 2 {
            return Err(r.error("pages", "more than half the machine's memory"));
        }
        Ok(Shootdown {
            pages,
            op: pick(OPS, &p.op),
            batch: p.batch,
            remote,
            remote_threads,
            misalign: p.misalign,
            settle: p.settle,
            main: 0,
            region: 0,
            phase: Phase::Touch,
            calls: 0,
            window: Default::default(),
        })
    }
}

impl Scenario for Shootdown {
    fn start(&mut self, s: &mut impl Host) {
        let mm = super::mm_alloc(s);
        let (pages, misalign, threads) = (self.pages, self.misalign, self.remote_threads);
        let region = s.mem().mmap(mm, pages, true, Backing::Anon, misalign);
        self.main = super::spawn_main_and_remotes(s, mm, threads, "shootdown");
        self.region = region;
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        let now = s.now();
        if t != self.main {
            return super::remote_op(self.remote == "busy");
        }
        match self.phase {
            Phase::Touch => {
                self.phase = Phase::Settle;
                let step = Step::Touch {
                    vpn: self.region,
                    n: self.pages as u32,
                    write: true,
                };
                s.push_step(t, step);
                Outcome::Next
            }
            Phase::Settle => {
                self.phase = Phase::Ops { next: 0 };
                if self.remote == "sleeping" && self.settle > 0 {
                    Outcome::Sleep(now + self.settle)
                } else {
                    Outcome::Next
                }
            }
            Phase::Ops { next } => {
                if next == 0 {
                    self.window.begin(s, now);
                }
                if next >= self.pages {
                    self.window.end = now;
                    return Outcome::Exit;
                }
                let n = self.batch.min(self.pages - next);
                let vpn = self.region + next;
                let sc = match self.op {
                    "madvise" => Syscall::MadviseDontneed { vpn, n },
                    "munmap" => Syscall::Munmap { vpn, n },
                    _ => Syscall::MprotectRead { vpn, n },
                };
                self.phase = Phase::Ops { next: next + n };
                self.calls += 1;
                s.push_step(t, Step::Syscall(sc));
                Outcome::Next
            }
        }
    }

    /// The run ends when the main thread has done its calls.
    fn task_exited(&mut self, s: &mut impl Host, t: TaskId) {
        if t == self.main {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("syscalls".into(), self.calls.into());
        m.insert("op_time_s".into(), self.window.seconds().into());
        m.insert(
            "ns_per_syscall".into(),
            self.window.ns_per(self.calls).into(),
        );
        m.insert(
            "tlb_shootdowns".into(),
            self.window.irqs(s, Irq::Tlb).into(),
        );
        m.insert(
            "call_function_interrupts".into(),
            self.window.irqs(s, Irq::Cal).into(),
        );
        m
    }
}
