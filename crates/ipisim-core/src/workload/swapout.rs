//! `swapout` (seed 003, Shaohua Li, 2013): `threads` threads of one process, each writing its own
//! private anonymous region once from start to end, 2 x MemTotal in all, so reclaim swaps out
//! continuously. Every flush targets the process's whole mm_cpumask: the threads' CPUs.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{secs, CpuId, TaskId, Time};
use crate::machine::Machine;
use crate::observe::Vm;
use crate::sched::{self, Outcome};

params! {
    /// The swapout parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        threads: usize = "threads", Kind::Int { min: 1, max: 1024 }, "threads", "10", "writer threads of the one process, one per core while there are cores, spread evenly over the nodes";
        #[allow(dead_code)] // Sim::new reads scale for every scenario, before the machine exists
        scale: f64 = "scale", Kind::Float { min: 0.0, max: 1.0 }, "", "1", "simulate this fraction of the machine's memory; the regions shrink with it (1 = full scale)";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "swapout",
    description: "threads of one process each write their own anonymous region (2 x RAM in all) while reclaim swaps out",
    params: PARAMS,
    metrics: &[("swapout_mb_per_s", false)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: true,
    // Seed 003's machine: the default 10 threads need more than host-2cpu's 2 CPUs.
    machine: Some("xeon-2s-2013"),
    check: &[("scale", "0.002")],
};

struct Writer {
    next: u64,
    end: u64,
    finished: Option<Time>,
}

pub struct Swapout {
    threads: usize,
    pages_per_thread: u64,
    writers: Vec<Writer>,
}

impl Swapout {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Swapout, ConfigError> {
        let p = Params::from_resolved(r)?;
        let threads = p.threads;
        super::need_cpus(r, m, "threads", format!("{threads} threads"), threads)?;
        let mem = m.mem_per_node * m.nodes as u64;
        Ok(Swapout {
            threads,
            pages_per_thread: (2 * mem / threads as u64) >> 12,
            writers: Vec::new(),
        })
    }
}

impl Scenario for Swapout {
    fn start(&mut self, s: &mut impl Host) {
        let (threads, pages) = (self.threads, self.pages_per_thread);
        let mm = super::mm_alloc(s);
        // The load balancer gives each thread a core of its own while there are idle cores, and
        // the nodes equal shares (Linux numbers the cores' first threads 0..cores, node by node).
        let (ncpus, cores) = (s.machine().ncpus(), s.machine().ncpus() / s.machine().smt);
        let spread = if threads <= cores { cores } else { ncpus };
        for i in 0..threads {
            let start = s.mem().map_new_anon(mm, pages);
            let t = sched::spawn(s, mm, i * spread / threads);
            debug_assert_eq!(t, i);
            s.sched().tasks[t].comm = "swapout".into();
            self.writers.push(Writer {
                next: start,
                end: start + pages,
                finished: None,
            });
        }
        super::spawn_kswapds(s);
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        let now = s.now();
        let w = &mut self.writers[t];
        if w.next >= w.end {
            w.finished = Some(now);
            return Outcome::Exit;
        }
        super::touch_next_pages(s, t, &mut w.next, w.end, true)
    }

    /// The run ends when the last writer exits.
    fn task_exited(&mut self, s: &mut impl Host, _t: TaskId) {
        if self.writers.iter().all(|w| w.finished.is_some()) {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let (from, to) = super::steady_phase(s, self.writers.iter().map(|w| w.finished));
        // Swap-out happens from reclaim's start to the end of the run.
        let out = s.observed().stats.vm[Vm::PSwpOut as usize] as f64 * 4096.0 / (1 << 20) as f64;
        let swapping = secs(s.end().unwrap_or(s.now()).saturating_sub(from)).max(1e-12);
        let mut m = serde_json::Map::new();
        m.insert("swapout_mb_per_s".into(), (out / swapping).into());
        m.insert("steady_s".into(), secs(to - from).into());
        m.insert("pages_per_thread".into(), self.pages_per_thread.into());
        m
    }

    fn host_bytes(&self, m: &Machine) -> u64 {
        super::fills_memory(m)
    }
}
