//! `ipistorm` (Anton Blanchard's ipistorm module, github.com/antonblanchard/ipistorm): a thread
//! bound to each of the first `cpus` CPUs calls `smp_call_function_single((cpu + offset) % cpus,
//! do_nothing_ipi, NULL, 1)` (`single`) or `smp_call_function(do_nothing_ipi, NULL, 1)` in a loop
//! for `duration` (`wait = false`: the same calls without waiting). The metric is the machine's
//! interrupt rate, as `vmstat 1` shows it: the figure Cédric Le Goater published for POWER9 in
//! 7dcc37b3eff9.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, CpuMask, TaskId, Time};
use crate::machine::Machine;
use crate::observe::Irq;
use crate::sched::Outcome;
use crate::smp::{self, CallFunc};

params! {
    /// The ipistorm parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        cpus: usize = "cpus", Kind::Int { min: 0, max: 1024 }, "CPUs", "0", "CPUs 0..cpus-1 run a thread each (the online CPUs of the module); 0: all";
        single: bool = "single", Kind::Bool, "", "true", "IPI one CPU, (cpu + offset) % cpus; false: every other CPU";
        offset: usize = "offset", Kind::Int { min: 1, max: 1023 }, "CPUs", "8", "single: the target's distance (8 skips a POWER9 core's threads, as the README's XIVE example)";
        wait: bool = "wait", Kind::Bool, "", "true", "wait for the call to run, as ipistorm does; false: return at once (wait = 0), so the next call to the same CPU spins in csd_lock() until the previous one ran";
        duration: Time = "duration", Kind::Duration, "s", "10ms", "how long the threads loop";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "ipistorm",
    description: "ipistorm: a thread per CPU calls smp_call_function(_single) with wait in a loop; interrupts per second",
    params: PARAMS,
    metrics: &[("interrupts_per_s", false)],
    powerpc: true,
    arm64: false,
    riscv: false,
    thp: false,
    // Le Goater's machine, where the default offset 8 skips a core's threads.
    machine: Some("power9-128c"),
    check: &[],
};

pub struct Ipistorm {
    cpus: usize,
    single: bool,
    wait: bool,
    offset: usize,
    duration: Time,
    calls: u64,
    running: usize,
    window: super::OpWindow,
}

impl Ipistorm {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Ipistorm, ConfigError> {
        let p = Params::from_resolved(r)?;
        let all = p.cpus == 0;
        let cpus = if all { m.ncpus() } else { p.cpus };
        super::need_cpus(r, m, "cpus", format!("{cpus} ipistorm threads"), cpus)?;
        if cpus < 2 {
            return Err(r.error("cpus", "at least 2, so there is a CPU to interrupt"));
        }
        let (single, offset) = (p.single, p.offset);
        if single && offset % cpus == 0 {
            // Each thread would call its own CPU: no IPI, no time, and the loop never ends.
            let given = if r.is_set("offset") {
                ""
            } else {
                " (the default)"
            };
            let threads = if all {
                format!("cpus=0 runs a thread on each of the machine's {cpus} CPUs")
            } else {
                format!("cpus={cpus}")
            };
            let msg = format!(
                "{offset}{given} is a multiple of {cpus} ({threads}), so each CPU would call itself; \
                 use an offset in [1, 1023] that is not a multiple of {cpus}, or another cpus"
            );
            return Err(r.error("offset", msg));
        }
        Ok(Ipistorm {
            cpus,
            single,
            wait: p.wait,
            offset,
            duration: p.duration,
            calls: 0,
            running: cpus,
            window: Default::default(),
        })
    }
}

impl Scenario for Ipistorm {
    fn start(&mut self, s: &mut impl Host) {
        let mm = super::mm_alloc(s);
        for cpu in 0..self.cpus {
            let t = crate::sched::spawn(s, mm, cpu);
            s.sched().tasks[t].comm = format!("ipistorm/{cpu}");
        }
        self.window.begin(s, 0);
        self.window.end = self.window.start + self.duration;
    }

    fn next_op(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        let now = s.now();
        if now >= self.window.end {
            return Outcome::Exit;
        }
        self.calls += 1;
        let mask = if self.single {
            let mut one = CpuMask::new();
            one.set((cpu + self.offset) % self.cpus);
            one
        } else {
            CpuMask::first_n(self.cpus)
        };
        if self.wait {
            smp::smp_call_function_many(s, cpu, t, &mask, CallFunc::DoNothingIpi)
        } else {
            let f = CallFunc::DoNothingIpi;
            smp::smp_call_function_many_cond(s, cpu, t, &mask, f, smp::Cond::Always, false, false)
        }
    }

    /// The run ends when the last thread has left its loop.
    fn task_exited(&mut self, s: &mut impl Host, _t: TaskId) {
        self.running -= 1;
        if self.running == 0 {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        let irqs = self.window.irqs(s, Irq::Cal);
        m.insert("calls".into(), self.calls.into());
        m.insert("call_function_interrupts".into(), irqs.into());
        let rate = irqs as f64 / self.window.seconds().max(1e-12);
        m.insert("interrupts_per_s".into(), rate.into());
        m
    }
}
