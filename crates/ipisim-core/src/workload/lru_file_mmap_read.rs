//! vm-scalability `case-lru-file-mmap-read` (aristeu/vm-scalability, as mmtests ran it in 2015):
//! one reader per CPU, each with its own sparse file of 10 x MemTotal / nr_cpu bytes, mapped
//! MAP_SHARED, PROT_READ and read once from start to end, 8 bytes at a time (usemem --readonly).
//! The page cache fills memory and reclaim must unmap pages the readers still map.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{ConfigError, Kind, Param, Resolved};
use crate::engine::{secs, CpuId, TaskId, Time};
use crate::machine::{Cost, Machine};
use crate::mm::Backing;
use crate::sched::{self, Outcome, Step};

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "vm-scalability/lru-file-mmap-read",
    description: "one reader per CPU reads its own sparse file (10 x RAM in all) through a shared read-only mapping",
    params: &[
        Param { key: "scale", kind: Kind::Float { min: 0.0, max: 1.0 }, unit: "", default: "1", doc: "simulate this fraction of the machine's memory; the files shrink with it (1 = full scale)" },
    ],
    metrics: &[
        ("lru-file-mmap-read-elapsed", true),
        ("lru-file-mmap-read-time_range", true),
        ("lru-file-mmap-read-time_stddv", true),
    ],
    powerpc: false,
    arm64: false,
    riscv: false,
    thp: false,
    machine: None,
    check: &[("scale", "0.001")],
};

struct Reader {
    next: u64,
    end: u64,
    started: Time,
    finished: Option<Time>,
}

pub struct LruFileMmapRead {
    readers: Vec<Reader>,
    pages_per_file: u64,
}

impl LruFileMmapRead {
    pub fn new(_r: &Resolved, m: &Machine) -> Result<LruFileMmapRead, ConfigError> {
        // hw_vars: mem = MemTotal; each of nr_cpu files is 10 * mem / nr_cpu bytes.
        let mem = m.mem_per_node * m.nodes as u64;
        let pages_per_file = (10 * mem / m.ncpus() as u64) >> 12;
        Ok(LruFileMmapRead {
            readers: Vec::new(),
            pages_per_file,
        })
    }
}

impl Scenario for LruFileMmapRead {
    fn start(&mut self, s: &mut impl Host) {
        let pages = self.pages_per_file;
        for cpu in 0..s.machine().ncpus() {
            let mm = super::mm_alloc(s);
            let start = s.mem().map_new_file(mm, pages);
            // The case script starts the readers one after another.
            let at = cpu as Time * s.machine().cost[Cost::ThreadCreate];
            let t = sched::spawn_at(s, mm, cpu, at);
            s.sched().tasks[t].comm = "usemem".into();
            // usemem's text and stack pages, touched at the start.
            let ws = s.mem().mmap(mm, 2, true, Backing::Anon, false);
            s.mem().tasks[t].working_set = (ws, 2);
            s.push_step(
                t,
                Step::Touch {
                    vpn: ws,
                    n: 2,
                    write: true,
                },
            );
            self.readers.push(Reader {
                next: start,
                end: start + pages,
                started: at,
                finished: None,
            });
        }
        super::spawn_kswapds(s);
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        let chunk = s.mem().cfg.fault_around_pages;
        let now = s.now();
        let r = &mut self.readers[t];
        if r.next >= r.end {
            r.finished = Some(now);
            return Outcome::Exit;
        }
        let n = chunk.min(r.end - r.next);
        let vpn = r.next;
        r.next += n;
        s.push_step(
            t,
            Step::FileRead {
                vpn,
                n: n as u32,
                write: false,
            },
        );
        Outcome::Next
    }

    /// The run ends when the last reader exits.
    fn task_exited(&mut self, s: &mut impl Host, _t: TaskId) {
        if self.readers.iter().all(|r| r.finished.is_some()) {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let times: Vec<f64> = self
            .readers
            .iter()
            .map(|r| secs(r.finished.unwrap_or(s.now()) - r.started))
            .collect();
        let n = times.len().max(1) as f64;
        let mean = times.iter().sum::<f64>() / n;
        let stddev = (times.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / n).sqrt();
        let (min, max) = times
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        let (from, to) = super::steady_phase(s, self.readers.iter().map(|r| r.finished));
        let ipis = s.observed().stats.interrupts_between(from, to);
        // vmstat's `in` also counts the local timer: HZ per busy CPU (all CPUs read).
        let timer = s.arch_view().0.cfg.hz as f64 * s.machine().ncpus() as f64;
        let mut m = serde_json::Map::new();
        m.insert(
            "lru-file-mmap-read-elapsed".into(),
            secs(s.end().unwrap_or(s.now())).into(),
        );
        m.insert(
            "lru-file-mmap-read-time_range".into(),
            (max - min.min(max)).into(),
        );
        m.insert("lru-file-mmap-read-time_stddv".into(), stddev.into());
        m.insert(
            "interrupts_per_s_steady".into(),
            (ipis / secs(to - from) + timer).into(),
        );
        m.insert("steady_s".into(), secs(to - from).into());
        m.insert("file_pages_per_reader".into(), self.pages_per_file.into());
        m
    }

    fn host_bytes(&self, m: &Machine) -> u64 {
        super::fills_memory(m)
    }
}
