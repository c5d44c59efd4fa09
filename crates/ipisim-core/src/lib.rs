//! ipisim-core: a fast, deterministic discrete-event simulator of SMP memory management and
//! inter-processor interrupts. Layers, from the bottom: engine, machine, smp, arch, mm, sched,
//! workload, observe. A run is `machine profile + kernel preset (+ overrides) + scenario`.

pub mod arch;
pub mod config;
pub mod engine;
pub mod kernel;
pub mod machine;
pub mod mm;
pub mod observe;
pub mod sched;
pub mod sim;
pub mod smp;
pub mod workload;

pub use config::{ConfigError, RunRequest};
pub use observe::RunOutput;

/// Resolve the request, run it to completion, and return the result.
pub fn run(req: &RunRequest) -> Result<RunOutput, ConfigError> {
    run_traced(req, None, &mut |_, _| {}).map(|(out, _)| out)
}

/// Check a request as [`run`] would, building the machine and starting the workload, without
/// running it: a comparison can reject a bad variant before the good ones spend minutes.
pub fn check(req: &RunRequest) -> Result<(), ConfigError> {
    sim::Sim::new(&config::resolve(req)?).map(|_| ())
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
    let r = config::resolve(req)?;
    let mut s = sim::Sim::new(&r)?;
    if let Some((from, to)) = window {
        let ps = |x: f64| (x * engine::PS_PER_S as f64) as engine::Time;
        s.trace = Some(Box::new(observe::TraceLog::new(
            s.m.ncpus(),
            ps(from),
            ps(to),
        )));
    }
    let limit = s.work.time_limit();
    s.run(limit, progress);
    let trace = s.trace.as_ref().map(|tr| TraceOutput {
        chrome_json: tr.chrome_json(&s),
        ftrace: tr.ftrace_text(&s),
        truncated: tr.truncated,
    });
    Ok((observe::to_json(&s, &r), trace))
}
