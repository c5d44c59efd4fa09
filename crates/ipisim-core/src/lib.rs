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
    let r = config::resolve(req)?;
    let mut s = sim::Sim::new(&r)?;
    let limit = s.work.time_limit();
    s.run(limit);
    Ok(observe::to_json(&s, &r))
}
