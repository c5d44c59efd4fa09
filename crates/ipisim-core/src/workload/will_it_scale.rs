//! will-it-scale tlb_flush1/2/3 (antonblanchard/will-it-scale tests/tlb_flush*.c): every task maps
//! its own region, and for each page writes it, madvise(MADV_DONTNEED)s that one page and reads
//! it back (one iteration); after the last page it munmaps the region and maps a new one. In
//! thread mode the tasks share one mm, so every madvise shoots down the other threads' CPUs.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{secs, CpuId, TaskId, Time};
use crate::machine::Cost;
use crate::machine::Machine;
use crate::mm::{Backing, Syscall};
use crate::observe::Func;
use crate::sched::{self, Outcome, Step};

const MODES: &[&str] = &["thread", "process"];

params! {
    /// The will-it-scale tlb_flush* parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        mode: String = "mode", Kind::Choice(MODES), "", "thread", "thread: tasks are threads of one process; process: one process each";
        tasks: usize = "tasks", Kind::Int { min: 0, max: 1024 }, "tasks", "0", "tasks, task i pinned to CPU i; 0 = one per CPU";
        duration: Time = "duration", Kind::Duration, "s", "100ms", "simulated time to run";
        loops: u64 = "loops", Kind::Int { min: 0, max: 1 << 40 }, "iterations", "0", "each task exits after this many iterations; 0 = run for `duration`";
    }
}

pub const TLB_FLUSH1: ScenarioDecl = ScenarioDecl {
    name: "will-it-scale/tlb_flush1",
    description: "will-it-scale: TLB flush of separated file private mapping",
    params: PARAMS,
    metrics: &[("loops_per_s", false)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: None,
    check: &[],
};
pub const TLB_FLUSH2: ScenarioDecl = ScenarioDecl {
    name: "will-it-scale/tlb_flush2",
    description: "will-it-scale: TLB flush of anonymous memory private mapping",
    params: PARAMS,
    metrics: &[("loops_per_s", false)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: None,
    check: &[],
};
pub const TLB_FLUSH3: ScenarioDecl = ScenarioDecl {
    name: "will-it-scale/tlb_flush3",
    description: "will-it-scale: TLB flush of separated file shared mapping",
    params: PARAMS,
    metrics: &[("loops_per_s", false)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: None,
    check: &[],
};

/// What each task maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapping {
    /// MAP_PRIVATE of a file: writes COW the page-cache page into an anonymous one.
    FilePrivate,
    /// MAP_PRIVATE | MAP_ANONYMOUS: reads after the zap map the zero page.
    Anon,
    /// MAP_SHARED of a file: writes dirty the page-cache page, which survives the zap.
    FileShared,
}

/// Where a task is in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Mmap,
    Write,
    Madvise,
    Read,
    Munmap,
    /// `loops` iterations done: the task exits.
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Task {
    backing: Backing,
    region: u64,
    /// The page of the region this iteration works on.
    page: u64,
    phase: Phase,
    iterations: u64,
}

pub struct WillItScale {
    mapping: Mapping,
    /// Pages per task's mapping.
    pages: u64,
    threads: bool,
    duration: Time,
    /// Iterations per task before it exits (0: no limit).
    loops: u64,
    tasks: Vec<Task>,
}

impl WillItScale {
    fn new(
        r: &Resolved,
        m: &Machine,
        mapping: Mapping,
        bytes: u64,
    ) -> Result<WillItScale, ConfigError> {
        let p = Params::from_resolved(r)?;
        let tasks = match p.tasks {
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
        let task = Task {
            backing: Backing::Anon,
            region: 0,
            page: 0,
            phase: Phase::Mmap,
            iterations: 0,
        };
        Ok(WillItScale {
            mapping,
            pages,
            threads: p.mode == "thread",
            duration: match p.loops {
                0 => p.duration,
                _ => crate::engine::NEVER,
            },
            loops: p.loops,
            tasks: vec![task; tasks],
        })
    }
}

// tlb_flush1.c / tlb_flush3.c: FILESIZE 128 MiB of a tmp file; tlb_flush2.c: MEMORYSIZE 1 MiB.
pub fn tlb_flush1(r: &Resolved, m: &Machine) -> Result<WillItScale, ConfigError> {
    WillItScale::new(r, m, Mapping::FilePrivate, 128 << 20)
}
pub fn tlb_flush2(r: &Resolved, m: &Machine) -> Result<WillItScale, ConfigError> {
    WillItScale::new(r, m, Mapping::Anon, 1 << 20)
}
pub fn tlb_flush3(r: &Resolved, m: &Machine) -> Result<WillItScale, ConfigError> {
    WillItScale::new(r, m, Mapping::FileShared, 128 << 20)
}

impl Scenario for WillItScale {
    fn start(&mut self, s: &mut impl Host) {
        let (tasks, threads, pages, mapping) =
            (self.tasks.len(), self.threads, self.pages, self.mapping);
        let shared_mm = threads.then(|| super::mm_alloc(s));
        for i in 0..tasks {
            let mm = shared_mm.unwrap_or_else(|| super::mm_alloc(s));
            // The test creates its file once (mkstemp, unlink, ftruncate); its pages end up in the
            // page cache during the first pass, on the node of the task's CPU, and stay there.
            let node = s.machine().node_of(i);
            let backing = match mapping {
                Mapping::Anon => Backing::Anon,
                Mapping::FilePrivate | Mapping::FileShared => Backing::File {
                    file: s.mem().new_file(pages, Some(node)),
                    pgoff: 0,
                    shared: mapping == Mapping::FileShared,
                },
            };
            // The harness creates its tasks one after another.
            let at = i as u64 * s.machine().cost[Cost::ThreadCreate];
            let t = sched::spawn_at(s, mm, i, at);
            debug_assert_eq!(t, i);
            // The harness's binaries: tests/<test>.c built as <test>_threads or <test>_processes.
            let test = match mapping {
                Mapping::FilePrivate => "tlb_flush1",
                Mapping::Anon => "tlb_flush2",
                Mapping::FileShared => "tlb_flush3",
            };
            let mode = if threads { "threads" } else { "processes" };
            s.sched().tasks[t].comm = format!("{test}_{mode}");
            self.tasks[i].backing = backing;
        }
    }

    fn next_op(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        let pages = self.pages;
        let task = self.tasks[t];
        let vpn = task.region + task.page;
        let (step, phase) = match task.phase {
            Phase::Mmap => {
                // mmap() takes mmap_lock for writing: wait out another thread's munmap.
                let entry = s.machine().cost[Cost::Syscall];
                let Some(down) = crate::mm::mmap_write_lock(s, cpu, t, s.now() + entry) else {
                    return Outcome::Sleep(crate::engine::NEVER);
                };
                let mm = s.sched().tasks[t].mm;
                let region = s.mem().mmap(mm, pages, true, task.backing, false);
                let up = crate::mm::mmap_write_unlock(s, cpu, t);
                self.tasks[t].region = region;
                self.tasks[t].page = 0;
                // mmap() itself flushes nothing: a syscall, VMA work and the lock's two atomics.
                let ps = entry + down + s.machine().cost[Cost::VmaOp] + up;
                let step = Step::Work {
                    func: Func::DoMmap,
                    ps,
                    irqs_off: false,
                };
                (step, Phase::Write)
            }
            Phase::Write => {
                let step = Step::Touch {
                    vpn,
                    n: 1,
                    write: true,
                };
                (step, Phase::Madvise)
            }
            Phase::Madvise => (
                Step::Syscall(Syscall::MadviseDontneed { vpn, n: 1 }),
                Phase::Read,
            ),
            Phase::Read => {
                let loops = self.loops;
                let w = &mut self.tasks[t];
                w.iterations += 1;
                w.page += 1;
                let next = if w.iterations == loops {
                    Phase::Done
                } else if w.page == pages {
                    Phase::Munmap
                } else {
                    Phase::Write
                };
                let step = Step::Touch {
                    vpn,
                    n: 1,
                    write: false,
                };
                (step, next)
            }
            Phase::Munmap => {
                let step = Step::Syscall(Syscall::Munmap {
                    vpn: task.region,
                    n: pages,
                });
                (step, Phase::Mmap)
            }
            Phase::Done => return Outcome::Exit,
        };
        self.tasks[t].phase = phase;
        s.push_step(t, step);
        Outcome::Next
    }

    /// With `loops`, the run ends when the last task has exited.
    fn task_exited(&mut self, s: &mut impl Host, _t: TaskId) {
        if self.tasks.iter().all(|t| t.phase == Phase::Done) {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let total: u64 = self.tasks.iter().map(|t| t.iterations).sum();
        let t = secs(s.end().unwrap_or(s.now())).max(1e-12);
        let mut m = serde_json::Map::new();
        m.insert("iterations".into(), total.into());
        m.insert("elapsed_s".into(), t.into());
        m.insert("loops_per_s".into(), (total as f64 / t).into());
        let per = if self.threads {
            "per_thread_ops"
        } else {
            "per_process_ops"
        };
        m.insert(
            per.into(),
            (total as f64 / t / self.tasks.len() as f64).into(),
        );
        m
    }

    fn time_limit(&self) -> Time {
        self.duration
    }
}
