//! will-it-scale tlb_flush1/2/3 (antonblanchard/will-it-scale): every task loops writing each page
//! of its own mapping and then madvise(MADV_DONTNEED)s it. In thread mode the tasks share one mm,
//! so every madvise shoots down the TLBs of all the other threads' CPUs.

use super::ScenarioDecl;
use crate::config::{ConfigError, Kind, Param, Resolved};
use crate::engine::{secs, Time};
use crate::machine::Machine;
use crate::mm::{Backing, Syscall};
use crate::sched::{self, Outcome, Step};
use crate::sim::{CpuId, Sim, TaskId};

const MODES: &[&str] = &["thread", "process"];

const PARAMS: &[Param] = &[
    Param {
        key: "mode",
        kind: Kind::Choice(MODES),
        unit: "",
        default: "thread",
        doc: "thread: tasks are threads of one process; process: one process each",
    },
    Param {
        key: "tasks",
        kind: Kind::Int { min: 0, max: 1024 },
        unit: "tasks",
        default: "0",
        doc: "tasks, task i pinned to CPU i; 0 = one per CPU",
    },
    Param {
        key: "duration",
        kind: Kind::Duration,
        unit: "s",
        default: "100ms",
        doc: "simulated time to run",
    },
];

pub const TLB_FLUSH1: ScenarioDecl = ScenarioDecl {
    name: "will-it-scale/tlb_flush1",
    description: "will-it-scale: TLB flush of separated file private mapping",
    params: PARAMS,
};
pub const TLB_FLUSH2: ScenarioDecl = ScenarioDecl {
    name: "will-it-scale/tlb_flush2",
    description: "will-it-scale: TLB flush of anonymous memory private mapping",
    params: PARAMS,
};
pub const TLB_FLUSH3: ScenarioDecl = ScenarioDecl {
    name: "will-it-scale/tlb_flush3",
    description: "will-it-scale: TLB flush of separated file shared mapping",
    params: PARAMS,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapping {
    FilePrivate,
    Anon,
    FileShared,
}

pub struct WillItScale {
    mapping: Mapping,
    /// Pages per task's mapping.
    pages: u64,
    threads: bool,
    tasks: usize,
    pub duration: Time,
    /// Per task: (its mapping's first page, loops finished, next step of the loop).
    region: Vec<u64>,
    iterations: Vec<u64>,
    touched: Vec<bool>,
}

impl WillItScale {
    pub fn new(r: &Resolved, m: &Machine) -> Result<WillItScale, ConfigError> {
        let (mapping, bytes) = match r.scenario.name {
            "will-it-scale/tlb_flush1" => (Mapping::FilePrivate, 128u64 << 20),
            "will-it-scale/tlb_flush2" => (Mapping::Anon, 1 << 20),
            _ => (Mapping::FileShared, 128 << 20),
        };
        let tasks = match r.int("tasks") as usize {
            0 => m.ncpus(),
            n => n,
        };
        if tasks > m.ncpus() {
            return Err(r.error(
                "tasks",
                format!(
                    "{tasks} tasks, one per CPU, but the machine has {} CPUs",
                    m.ncpus()
                ),
            ));
        }
        let pages = bytes >> 12;
        let need = tasks as u64 * pages * if mapping == Mapping::Anon { 1 } else { 2 };
        if need * 4096 > m.mem_per_node * m.nodes as u64 {
            return Err(r.error(
                "tasks",
                format!(
                    "{tasks} tasks need {} MiB; the machine has less",
                    (need * 4096) >> 20
                ),
            ));
        }
        Ok(WillItScale {
            mapping,
            pages,
            threads: r.str("mode") == "thread",
            tasks,
            duration: r.uint("duration"),
            region: vec![0; tasks],
            iterations: vec![0; tasks],
            touched: vec![false; tasks],
        })
    }

    pub fn ops(&self, s: &Sim) -> serde_json::Map<String, serde_json::Value> {
        let total: u64 = self.iterations.iter().sum();
        let t = secs(s.end.unwrap_or(s.now())).max(1e-12);
        let mut m = serde_json::Map::new();
        m.insert("iterations".into(), total.into());
        m.insert("loops_per_s".into(), (total as f64 / t).into());
        let per = if self.threads {
            "per_thread_ops"
        } else {
            "per_process_ops"
        };
        m.insert(per.into(), (total as f64 / t / self.tasks as f64).into());
        m
    }
}

fn state(s: &mut Sim) -> &mut WillItScale {
    match &mut s.work {
        super::Workload::WillItScale(w) => w,
        _ => unreachable!(),
    }
}

pub fn start(s: &mut Sim) {
    let (tasks, threads, pages, mapping) = {
        let w = state(s);
        (w.tasks, w.threads, w.pages, w.mapping)
    };
    let j = crate::arch::x86::jiffies(s);
    let shared_mm = threads.then(|| s.mem.new_mm(j, s.k.hz));
    for i in 0..tasks {
        let mm = shared_mm.unwrap_or_else(|| s.mem.new_mm(j, s.k.hz));
        let backing = match mapping {
            Mapping::Anon => Backing::Anon,
            Mapping::FilePrivate | Mapping::FileShared => {
                let file = s.mem.new_file(pages, true);
                Backing::File {
                    file,
                    pgoff: 0,
                    shared: mapping == Mapping::FileShared,
                }
            }
        };
        let region = s.mem.mmap(mm, pages, true, backing, false);
        // The harness creates its tasks one after another.
        let at = i as u64 * s.m.cost[crate::machine::Cost::ThreadCreate];
        let t = sched::spawn_at(s, mm, i, at);
        debug_assert_eq!(t, i);
        state(s).region[i] = region;
    }
}

pub fn next_op(s: &mut Sim, _cpu: CpuId, t: TaskId) -> Outcome {
    let w = state(s);
    let (vpn, n) = (w.region[t], w.pages);
    let step = if !w.touched[t] {
        w.touched[t] = true;
        Step::Touch {
            vpn,
            n: n as u32,
            write: true,
        }
    } else {
        w.touched[t] = false;
        w.iterations[t] += 1;
        Step::Syscall(Syscall::MadviseDontneed { vpn, n })
    };
    s.tasks[t].steps.push(step);
    Outcome::Next
}
