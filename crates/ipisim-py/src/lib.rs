//! The Python binding: conversions only. Results cross as JSON text; user mistakes become
//! `ipisim.ConfigError` (a ValueError) carrying the one-line "file: key: reason" message.

use ipisim_core::{config, RunRequest};
use pyo3::create_exception;
use pyo3::prelude::*;

create_exception!(
    ipisim._native,
    ConfigError,
    pyo3::exceptions::PyValueError,
    "A user mistake in a config file, preset, scenario or --set value."
);

fn to_py(e: ipisim_core::ConfigError) -> PyErr {
    ConfigError::new_err(e.to_string())
}

/// Run with progress: long runs say how far they got on one rewritten stderr line, when stderr
/// is a terminal, and wipe it when done.
fn run_with_progress(
    req: &RunRequest,
    max_memory: Option<u64>,
    window: Option<(f64, f64)>,
) -> Result<(ipisim_core::RunOutput, Option<ipisim_core::TraceOutput>), ipisim_core::ConfigError> {
    use std::io::{IsTerminal, Write};
    let tty = std::io::stderr().is_terminal();
    let mut shown = false;
    let mut report = |simulated_s: f64, events: u64| {
        if tty {
            let mut err = std::io::stderr();
            let _ = write!(
                err,
                "\ripisim: {simulated_s:.3} s simulated, {}M events\x1b[K",
                events >> 20
            );
            let _ = err.flush();
            shown = true;
        }
    };
    let out = ipisim_core::run_limited(req, max_memory, window, &mut report);
    if shown {
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    }
    out
}

fn request(
    scenario: String,
    machine: Option<String>,
    kernel: Option<String>,
    sets: Vec<(String, String)>,
    seed: u64,
) -> RunRequest {
    RunRequest {
        scenario,
        machine,
        kernel,
        sets,
        seed,
    }
}

/// `--max-memory` as a size such as "4GiB"; None: the host's available memory.
fn max_memory(text: Option<String>) -> PyResult<Option<u64>> {
    text.map(|t| {
        config::parse_size(&t)
            .map_err(|e| to_py(ipisim_core::ConfigError::new("--max-memory", "", e)))
    })
    .transpose()
}

/// Run one simulation; returns (result JSON, events handled).
#[pyfunction]
#[pyo3(signature = (scenario, machine=None, kernel=None, sets=Vec::new(), seed=1, max_memory=None))]
fn run(
    py: Python<'_>,
    scenario: String,
    machine: Option<String>,
    kernel: Option<String>,
    sets: Vec<(String, String)>,
    seed: u64,
    max_memory: Option<String>,
) -> PyResult<(String, u64)> {
    let req = request(scenario, machine, kernel, sets, seed);
    let limit = self::max_memory(max_memory)?;
    let (out, _) = py
        .detach(|| run_with_progress(&req, limit, None))
        .map_err(to_py)?;
    Ok((out.json.to_string(), out.events))
}

/// Run one simulation recording [start_s, end_s) of simulated time; returns (result JSON,
/// events handled, Chrome trace JSON, ftrace text, whether the record cap cut the trace).
#[pyfunction]
#[pyo3(signature = (scenario, machine, kernel, sets, seed, start_s, end_s, max_memory=None))]
#[allow(clippy::too_many_arguments)]
fn run_traced(
    py: Python<'_>,
    scenario: String,
    machine: Option<String>,
    kernel: Option<String>,
    sets: Vec<(String, String)>,
    seed: u64,
    start_s: f64,
    end_s: f64,
    max_memory: Option<String>,
) -> PyResult<(String, u64, String, String, bool)> {
    let req = request(scenario, machine, kernel, sets, seed);
    let limit = self::max_memory(max_memory)?;
    let (out, trace) = py
        .detach(|| run_with_progress(&req, limit, Some((start_s, end_s))))
        .map_err(to_py)?;
    let trace = trace.expect("a window was given");
    Ok((
        out.json.to_string(),
        out.events,
        trace.chrome_json,
        trace.ftrace,
        trace.truncated,
    ))
}

/// Check a run's scenario, machine, kernel and sets without running it.
#[pyfunction]
#[pyo3(signature = (scenario, machine=None, kernel=None, sets=Vec::new(), seed=1, max_memory=None))]
fn check(
    py: Python<'_>,
    scenario: String,
    machine: Option<String>,
    kernel: Option<String>,
    sets: Vec<(String, String)>,
    seed: u64,
    max_memory: Option<String>,
) -> PyResult<()> {
    let req = request(scenario, machine, kernel, sets, seed);
    let limit = self::max_memory(max_memory)?;
    py.detach(|| ipisim_core::check_limited(&req, limit))
        .map_err(to_py)
}

/// Built-in scenarios, machines and kernels, as JSON.
#[pyfunction]
fn list_builtins() -> String {
    ipisim_core::describe::list().to_string()
}

/// Every parameter of a scenario, machine or kernel preset, as JSON.
#[pyfunction]
fn describe(thing: &str) -> PyResult<String> {
    ipisim_core::describe::describe(thing)
        .map(|v| v.to_string())
        .map_err(to_py)
}

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_traced, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(list_builtins, m)?)?;
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    Ok(())
}
