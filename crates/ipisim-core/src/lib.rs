//! ipisim-core: a fast, deterministic discrete-event simulator of SMP memory management and
//! inter-processor interrupts. A run is `machine profile + kernel preset (+ overrides) + scenario`.
//!
//! Layers, lowest first ([`LAYERS`]): a module imports only its own layer and lower ones. The
//! root ([`ROOT`]) composes them: it owns the run's state and dispatches steps and events.
//! `tests/layering.rs` checks this on every test run.

pub mod arch;
pub mod config;
pub mod describe;
mod dispatch;
pub mod engine;
pub mod kernel;
pub mod machine;
pub mod mm;
pub mod observe;
pub mod output;
pub mod sched;
pub mod sim;
pub mod smp;
pub mod step;
#[cfg(test)]
pub(crate) mod testing;
pub mod workload;

pub use config::{ConfigError, RunRequest};

/// The layers, lowest first: engine (time, event queue, bitsets), config (parameters), machine
/// (topology, costs), observe (counters, accounting, checker, trace), step (what a task executes:
/// steps, their outcomes, the calls and flushes they carry), smp (cross-CPU calls and
/// IPIs), arch (TLBs and their flushes), mm, sched (CPUs, tasks, interrupts), workload (scenarios).
pub const LAYERS: &[&str] = &[
    "engine", "config", "machine", "observe", "step", "smp", "arch", "mm", "sched", "workload",
];

/// The composition root, above every layer: the run's state and its dispatch.
pub const ROOT: &[&str] = &[
    "lib", "sim", "dispatch", "kernel", "describe", "output", "testing",
];
pub use output::RunOutput;

/// Every parameter a run of `scenario` accepts, in `describe` order: the machine's, the kernel's,
/// the scheduler's, the checker's, then the scenario's own.
pub fn all_params(scenario: &workload::ScenarioDecl) -> Vec<&'static config::Param> {
    machine::PARAMS
        .iter()
        .chain(kernel::params())
        .chain(sched::PARAMS.iter())
        .chain(observe::check::PARAMS.iter())
        .chain(scenario.params.iter())
        .collect()
}

/// Resolve a request: find its scenario, then let `config::resolve` check it against every
/// layer's declarations (gathered here, since config is below them).
pub fn resolve(req: &RunRequest) -> Result<config::Resolved, ConfigError> {
    let scenario = workload::find(&req.scenario).ok_or_else(|| {
        let names: Vec<&str> = workload::decls().map(|s| s.name).collect();
        ConfigError::new(
            "",
            "scenario",
            format!(
                "unknown scenario {:?} (one of: {})",
                req.scenario,
                names.join(", ")
            ),
        )
    })?;
    let schema = config::Schema {
        scenario: scenario.name,
        machine: scenario.machine,
        params: all_params(scenario),
        costs: machine::COST_NAMES,
    };
    config::resolve(req, schema)
}

/// Resolve the request, run it to completion, and return the result.
pub fn run(req: &RunRequest) -> Result<RunOutput, ConfigError> {
    run_traced(req, None, &mut |_, _| {}).map(|(out, _)| out)
}

/// Check a request as [`run`] would, building the machine and starting the workload, without
/// running it: a comparison can reject a bad variant before the good ones spend minutes.
pub fn check(req: &RunRequest) -> Result<(), ConfigError> {
    check_limited(req, None)
}

/// [`check`] with a limit on the host memory the run may use (None: what the host has free).
pub fn check_limited(req: &RunRequest, max_memory: Option<u64>) -> Result<(), ConfigError> {
    let mut r = resolve(req)?;
    r.max_memory = max_memory;
    sim::Sim::new(&r).map(|_| ())
}

/// A trace of a run: Chrome trace-event JSON, ftrace text, and whether the record cap cut it.
pub struct TraceOutput {
    pub chrome_json: String,
    pub ftrace: String,
    pub truncated: bool,
}

/// Like [`run`], also recording a trace of simulated time [start, end) (seconds) when asked,
/// and calling `progress(simulated seconds, events)` now and then on long runs.
pub fn run_traced(
    req: &RunRequest,
    window: Option<(f64, f64)>,
    progress: &mut dyn FnMut(f64, u64),
) -> Result<(RunOutput, Option<TraceOutput>), ConfigError> {
    run_limited(req, None, window, progress)
}

/// [`run_traced`] with a limit on the host memory the run may use (None: what the host has free).
pub fn run_limited(
    req: &RunRequest,
    max_memory: Option<u64>,
    window: Option<(f64, f64)>,
    progress: &mut dyn FnMut(f64, u64),
) -> Result<(RunOutput, Option<TraceOutput>), ConfigError> {
    let mut r = resolve(req)?;
    r.max_memory = max_memory;
    let mut s = sim::Sim::new(&r)?;
    if let Some((from, to)) = window {
        let ps = |x: f64| (x * engine::PS_PER_S as f64) as engine::Time;
        s.obs.trace = Some(Box::new(observe::TraceLog::new(
            s.m.ncpus(),
            ps(from),
            ps(to),
        )));
    }
    let limit = sim::time_limit(&s);
    s.run(limit, progress);
    if s.q.wrapped() {
        // Only input far outside the documented ranges gets here; its result would be wrong.
        let msg =
            "simulated time overflowed 2^64 ps (213 days); use smaller costs, durations or sizes";
        return Err(ConfigError::new("", "", msg));
    }
    let trace = s.obs.trace.as_ref().map(|tr| TraceOutput {
        chrome_json: tr.chrome_json(s.m.ncpus(), &s.obs.stats.irq_bins),
        ftrace: tr.ftrace_text(|t| s.sched.tasks[t].comm.as_str()),
        truncated: tr.truncated,
    });
    Ok((output::to_json(&s, &r), trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenarios_defaults_run_on_its_default_machine() {
        for s in workload::decls() {
            let req = RunRequest {
                scenario: s.name.into(),
                ..Default::default()
            };
            check(&req).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        }
    }
}
