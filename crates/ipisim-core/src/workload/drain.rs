//! `drain`: a microbenchmark of drain_all_pages(). `drainers` tasks on CPUs 0..D call
//! drain_all_pages() at the same moment while the next `holders` CPUs each hold `pages` pages on
//! their per-CPU lists; the other CPUs are idle or spin in user space. Which CPUs get an IPI, and
//! who waits for whom, depend on `kernel.pcp_drain`.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{secs, CpuId, TaskId, Time};
use crate::machine::Machine;
use crate::mm::drain::cpus_with_pcps;
use crate::sched::{self, Outcome, SpinOn, Step};

const OTHERS: &[&str] = &["idle", "busy"];

params! {
    /// The drain parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        drainers: usize = "drainers", Kind::Int { min: 1, max: 1023 }, "tasks", "1", "tasks on CPUs 0..D calling drain_all_pages together";
        holders: usize = "holders", Kind::Int { min: 0, max: 1023 }, "CPUs", "1", "CPUs 1..N hold pages on their per-CPU lists";
        pages: usize = "pages", Kind::Int { min: 1, max: 65536 }, "pages", "31", "pages on each holder's list";
        others: String = "others", Kind::Choice(OTHERS), "", "idle", "what CPUs other than 0 do: nothing, or spin in user space";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "drain",
    description:
        "microbenchmark: some CPUs hold per-CPU pages, others call drain_all_pages at once",
    params: PARAMS,
    metrics: &[("drain_s", true)],
    powerpc: false,
    arm64: false,
    riscv: false,
    thp: false,
    machine: None,
    check: &[],
};

pub struct Drain {
    drainers: usize,
    holders: usize,
    pages: usize,
    busy: bool,
    started: Time,
    /// Per drainer task: has it called drain_all_pages yet.
    issued: Vec<bool>,
    finished: usize,
}

impl Drain {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Drain, ConfigError> {
        let p = Params::from_resolved(r)?;
        let (drainers, holders) = (p.drainers, p.holders);
        let what = format!("{drainers} drainers and {holders} holders");
        super::need_cpus(r, m, "holders", what, drainers + holders)?;
        Ok(Drain {
            drainers,
            holders,
            pages: p.pages,
            busy: p.others == "busy",
            started: 0,
            issued: vec![false; drainers],
            finished: 0,
        })
    }
}

impl Scenario for Drain {
    fn start(&mut self, s: &mut impl Host) {
        let (drainers, holders, pages, busy) = (self.drainers, self.holders, self.pages, self.busy);
        for cpu in drainers..drainers + holders {
            let zone = s.machine().node_of(cpu);
            for _ in 0..pages {
                let p = s.mem().frames.zones[zone]
                    .take()
                    .expect("memory for the lists");
                s.mem().frames.pcp[cpu][zone].push(p);
            }
        }
        // After the others have settled (spinning or idle), the drainers start together.
        let at = s.machine().cost[crate::machine::Cost::ThreadCreate];
        for cpu in 0..drainers {
            let mm = super::mm_alloc(s);
            let t = sched::spawn_at(s, mm, cpu, at);
            debug_assert_eq!(t, cpu);
            s.sched().tasks[t].comm = "drainer".into();
        }
        if busy {
            for cpu in drainers..s.machine().ncpus() {
                let mm = super::mm_alloc(s);
                sched::spawn(s, mm, cpu);
            }
        }
        self.started = at;
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        if t >= self.drainers {
            return Outcome::Spin(SpinOn::UserForever);
        }
        if !self.issued[t] {
            self.issued[t] = true;
            s.push_step(t, Step::DrainAllPages);
            return Outcome::Next;
        }
        self.finished += 1;
        if self.finished == self.drainers {
            s.finish();
        }
        Outcome::Exit
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        let left = cpus_with_pcps(&s.mm_view().0.frames).weight();
        m.insert("drain_ipis".into(), s.observed().stats.ipis_sent.into());
        m.insert(
            "drain_s".into(),
            secs(s.end().unwrap_or(s.now()) - self.started).into(),
        );
        m.insert("cpus_with_pages_after".into(), left.into());
        m
    }
}
