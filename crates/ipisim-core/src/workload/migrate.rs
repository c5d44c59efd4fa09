//! `migrate` (Huang Ying's test for 7e12beb8ca2a, 6.4): a pmbench-like process whose `threads`
//! threads first write their share of one anonymous region, then keep loading and storing to
//! random pages of all of it, while a `migratepages` process moves the region's pages from one
//! node to the other and back, `passes` times. The metric is pages migrated per second.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::{Cost, Machine};
use crate::mm::filemap::access_page;
use crate::observe::{Func, Irq, Vm};
use crate::sched::{self, Outcome, Step};

params! {
    /// The migrate parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        threads: usize = "threads", Kind::Int { min: 0, max: 1024 }, "threads", "0", "accessing threads, one per CPU from CPU 0; 0: every CPU but the last, where migratepages runs";
        memory: u64 = "memory", Kind::Size, "bytes", "256MiB", "the region the threads access and migratepages moves; at most half a node, as all of it lands on one";
        write_percent: u64 = "write_percent", Kind::Int { min: 0, max: 100 }, "%", "50", "share of random accesses that are stores (chosen: pmbench takes a read/write ratio)";
        passes: u32 = "passes", Kind::Int { min: 1, max: 1000 }, "passes", "4", "migrate_pages() calls, alternating node 0 -> 1 and 1 -> 0";
        #[allow(dead_code)] // Sim::new reads scale for every scenario, before the machine exists
        scale: f64 = "scale", Kind::Float { min: 0.0, max: 1.0 }, "", "1", "simulate this fraction of the machine's memory (1 = full scale); `memory` is not scaled";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "migrate",
    description: "pmbench-like threads access random pages of one region while migratepages moves it between two nodes",
    params: PARAMS,
    metrics: &[("pages_migrated_per_s", false), ("tlb_shootdowns", true)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: Some("xeon-2s-2013"),
    // 128 pages, within every thread's TLB reach: a stale translation is used, not refilled
    // (with 32 MiB each thread soon misses onto a migration entry, sleeps and flushes on return).
    check: &[("scale", "0.01"), ("memory", "512KiB"), ("passes", "2")],
};

/// Random accesses per user step: the loop's granularity, not a pmbench setting.
const ACCESSES_PER_STEP: u32 = 1024;

struct Thread {
    /// The next page of its share to write in the populate phase, and its end.
    next: u64,
    end: u64,
    /// An access that faulted, to retry first.
    retry: Option<(u64, bool)>,
    /// It has finished populating and waited for the others.
    joined: bool,
}

pub struct Migrate {
    threads: usize,
    pages: u64,
    write_percent: u64,
    passes: u32,
    /// The region: its first page, its mm and its anonymous "file".
    start: u64,
    mm: usize,
    file: u32,
    workers: Vec<Thread>,
    populated: usize,
    migrator: TaskId,
    pass: u32,
    /// From migratepages' first call to its exit.
    window: super::OpWindow,
}

impl Migrate {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Migrate, ConfigError> {
        let p = Params::from_resolved(r)?;
        if m.nodes < 2 {
            return Err(r.error(
                "machine.nodes",
                "migrate needs a machine with 2 or more nodes",
            ));
        }
        let threads = match p.threads {
            0 => m.ncpus() - 1,
            n => n,
        };
        super::need_cpus(
            r,
            m,
            "threads",
            format!("{threads} threads and migratepages"),
            threads + 1,
        )?;
        let bytes = p.memory;
        let pages = bytes >> 12;
        if pages < threads as u64 {
            return Err(r.error("memory", "less than a page per thread"));
        }
        // The machine is already scaled (sim.rs).
        let node = m.mem_per_node;
        if bytes > node / 2 {
            let msg = format!(
                "{} MiB do not fit in half of a node ({} MiB at this scale)",
                bytes >> 20,
                node >> 20
            );
            return Err(r.error("memory", msg));
        }
        Ok(Migrate {
            threads,
            pages,
            write_percent: p.write_percent,
            passes: p.passes,
            start: 0,
            mm: 0,
            file: 0,
            workers: Vec::new(),
            populated: 0,
            migrator: 0,
            pass: 0,
            window: Default::default(),
        })
    }

    /// A thread finished populating: it sleeps until the last one does, which wakes every thread
    /// and migratepages.
    fn populated(&mut self, s: &mut impl Host) -> Outcome {
        self.populated += 1;
        if self.populated < self.threads {
            return Outcome::Sleep(crate::engine::NEVER);
        }
        let (m, n) = (self.migrator, self.threads);
        let now = s.now();
        self.window.begin(s, now);
        for t in (0..n).chain([m]) {
            sched::wake(s, t);
        }
        Outcome::Next
    }

    /// migratepages PID 0 1, then 1 0, ...: one migrate_pages() syscall per pass; then the run ends.
    fn migratepages(&mut self, s: &mut impl Host, t: TaskId) -> Outcome {
        if self.pass == self.passes {
            let now = s.now();
            self.window.end = now;
            s.finish();
            return Outcome::Exit;
        }
        let (from, to) = if self.pass % 2 == 0 { (0, 1) } else { (1, 0) };
        self.pass += 1;
        let mm = self.mm as u32;
        let sys = s.machine().cost[Cost::Syscall];
        s.obs().stats.charge(Some(t), Func::Syscall, sys);
        s.sched().tasks[t]
            .steps
            .push(Step::MigratePages { mm, from, to });
        Outcome::Busy {
            ps: sys,
            irqs_off: false,
        }
    }
}

impl Scenario for Migrate {
    fn start(&mut self, s: &mut impl Host) {
        let (threads, pages) = (self.threads, self.pages);
        let mm = super::mm_alloc(s);
        let start = s.mem().map_new_anon(mm, pages);
        let file = match s.mem().vma_at(mm, start).map(|v| v.backing) {
            Some(crate::mm::Backing::File { file, .. }) => file,
            _ => unreachable!("map_new_anon maps an anonymous file"),
        };
        for i in 0..threads {
            let t = sched::spawn(s, mm, i);
            debug_assert_eq!(t, i);
            s.sched().tasks[t].comm = "pmbench".into();
            let share = (
                start + pages * i as u64 / threads as u64,
                start + pages * (i as u64 + 1) / threads as u64,
            );
            self.workers.push(Thread {
                next: share.0,
                end: share.1,
                retry: None,
                joined: false,
            });
        }
        // migratepages: its own process, on the last CPU, asleep until the region is populated.
        let other = super::mm_alloc(s);
        let last = s.machine().ncpus() - 1;
        let t = sched::spawn_at(s, other, last, crate::engine::NEVER);
        s.sched().tasks[t].comm = "migratepages".into();
        (self.start, self.mm, self.file, self.migrator) = (start, mm, file, t);
    }

    fn next_op(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        if t == self.migrator {
            return self.migratepages(s, t);
        }
        let w = &mut self.workers[t];
        if w.next < w.end {
            // Populate: write every page of its share once (pmbench's initial memset).
            return super::touch_next_pages(s, t, &mut w.next, w.end, true);
        }
        if !w.joined {
            // Random accesses start on a fully populated region.
            w.joined = true;
            return self.populated(s);
        }
        let (mm, file, start, pages, wp) = (
            self.mm,
            self.file,
            self.start,
            self.pages,
            self.write_percent,
        );
        // Random accesses over the region miss the caches.
        let touch = s.machine().cost[Cost::UserTouch] + s.machine().cost[Cost::DramAccess];
        let mut user: Time = 0;
        for _ in 0..ACCESSES_PER_STEP {
            let (v, write) = match self.workers[t].retry.take() {
                Some(a) => a,
                None => (
                    start + s.sched_parts().rng.below(pages),
                    s.sched_parts().rng.below(100) < wp,
                ),
            };
            match access_page(s, cpu, (mm, v), (file, (v - start) as u32), write) {
                Ok(walk) => user += walk + touch,
                Err(fault) => {
                    self.workers[t].retry = Some((v, write));
                    s.push_step(t, fault);
                    break;
                }
            }
        }
        s.obs().stats.charge(Some(t), Func::User, user);
        Outcome::Busy {
            ps: user,
            irqs_off: false,
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let migrated = s.observed().stats.vm[Vm::PgMigrateSuccess as usize];
        let span = self.window.seconds().max(1e-12);
        let mut m = serde_json::Map::new();
        m.insert(
            "pages_migrated_per_s".into(),
            (migrated as f64 / span).into(),
        );
        m.insert("pages_migrated".into(), migrated.into());
        m.insert("migrate_s".into(), span.into());
        m.insert(
            "tlb_shootdowns".into(),
            self.window.irqs(s, Irq::Tlb).into(),
        );
        m.insert("threads".into(), self.threads.into());
        m
    }

    fn host_bytes(&self, m: &Machine) -> u64 {
        super::fills_memory(m)
    }
}
