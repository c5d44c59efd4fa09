//! `ipisim list` and `ipisim describe`: generated from the same declarations that validate input.
//! A root module: it reads every layer's declarations (machine, kernel, sched, check, scenarios).

use crate::config::{
    builtin_kernel, builtin_machine, kernel_names, machine_names, ConfigError, Kind, Param,
    RunRequest,
};
use crate::machine::COSTS;
use crate::resolve;
use crate::workload::{decls, ScenarioDecl};
use serde_json::{json, Value};

fn description_of(text: &str, section: &str) -> String {
    text.parse::<toml::Table>()
        .ok()
        .and_then(|t| {
            t.get(section)?
                .get("description")?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// Built-in scenarios, machines and kernel presets with one line each.
pub fn list() -> Value {
    let scenarios: Vec<Value> = decls()
        .map(|s| json!({"name": s.name, "description": s.description}))
        .collect();
    let machines: Vec<Value> = machine_names()
        .into_iter()
        .map(|n| json!({"name": n, "description": description_of(builtin_machine(n).unwrap(), "machine")}))
        .collect();
    let kernels: Vec<Value> = kernel_names()
        .into_iter()
        .map(|n| json!({"name": n, "description": description_of(builtin_kernel(n).unwrap(), "kernel")}))
        .collect();
    json!({"scenarios": scenarios, "machines": machines, "kernels": kernels})
}

fn kind_text(p: &Param) -> String {
    match p.kind {
        Kind::Int { min, max } => format!("int [{min}, {max}]"),
        Kind::Size => "size [0, 1PiB]".into(),
        Kind::Duration => "duration [0, 1e4 s]".into(),
        Kind::Float { min, max } => format!("number [{min}, {max}]"),
        Kind::Bool => "bool".into(),
        Kind::Choice(names) => names.join(" | "),
        Kind::Str => "string".into(),
    }
}

fn param_json(p: &Param, value: Option<String>) -> Value {
    json!({
        "key": p.key,
        "type": kind_text(p),
        "unit": p.unit,
        "default": p.default,
        "value": value.unwrap_or_else(|| p.default.to_string()),
        "description": p.doc,
    })
}

/// Every parameter of a scenario, a machine profile or a kernel preset, with its value there.
/// `thing` is a scenario name, a machine or kernel name (built-in or a .toml path), or one of the
/// words `machine` / `kernel` for the declarations alone.
pub fn describe(thing: &str) -> Result<Value, ConfigError> {
    if let Some(s) = decls().find(|s| s.name == thing) {
        return Ok(scenario_json(s));
    }
    if thing == "run" {
        // Keys of any run, whatever the scenario, machine and kernel.
        let params: Vec<Value> = crate::sched::PARAMS
            .iter()
            .chain(crate::observe::check::PARAMS)
            .map(|p| param_json(p, None))
            .collect();
        return Ok(
            json!({"kind": "run", "name": "run", "description": "seeded perturbations and the TLB-coherence checker", "params": params}),
        );
    }
    let is_machine = thing == "machine"
        || builtin_machine(thing).is_some()
        || (thing.ends_with(".toml") && looks_like(thing, "machine"));
    let is_kernel = thing == "kernel"
        || builtin_kernel(thing).is_some()
        || (thing.ends_with(".toml") && looks_like(thing, "kernel"));
    if !is_machine && !is_kernel {
        let names: Vec<&str> = decls()
            .map(|s| s.name)
            .chain(machine_names())
            .chain(kernel_names())
            .collect();
        return Err(ConfigError::new(
            "describe",
            "",
            format!(
                "unknown thing {thing:?} (one of: machine, kernel, run, {})",
                names.join(", ")
            ),
        ));
    }
    preset_json(thing, is_machine, is_kernel)
}

/// A machine profile's or kernel preset's parameters (and a machine's costs) with their values;
/// `thing` "machine" or "kernel" shows the defaults.
fn preset_json(thing: &str, is_machine: bool, is_kernel: bool) -> Result<Value, ConfigError> {
    let mut req = RunRequest {
        scenario: "shootdown".into(),
        ..Default::default()
    };
    if is_machine && thing != "machine" {
        req.machine = Some(thing.into());
    }
    if is_kernel && thing != "kernel" {
        req.kernel = Some(thing.into());
    }
    let r = resolve(&req)?;
    // Durations are held in picoseconds; show them in the declared unit, seconds.
    let value = |p: &Param| {
        Some(
            r.values()
                .find(|(k, _)| *k == p.key)
                .map(|(_, v)| match (&p.kind, v) {
                    (Kind::Duration, crate::config::Value::UInt(ps)) => {
                        (*ps as f64 / 1e12).to_string()
                    }
                    _ => v.to_string(),
                })
                .unwrap_or_default(),
        )
    };
    if is_machine {
        let params: Vec<Value> = crate::machine::PARAMS
            .iter()
            .map(|p| param_json(p, value(p)))
            .collect();
        let costs: Vec<Value> = COSTS
            .iter()
            .zip(&r.costs)
            .map(|((_, name, doc), e)| json!({"key": format!("machine.cost.{name}"), "unit": "cycles", "value": e.cycles, "source": e.source, "description": doc}))
            .collect();
        let m = crate::machine::MachineParams::from_resolved(&r)?;
        Ok(
            json!({"kind": "machine", "name": m.name, "description": m.description, "params": params, "costs": costs}),
        )
    } else {
        let params: Vec<Value> = crate::kernel::params()
            .map(|p| param_json(p, value(p)))
            .collect();
        let k = crate::kernel::KernelConfig::from_resolved(&r)?;
        Ok(
            json!({"kind": "kernel", "name": k.name, "description": k.description, "params": params}),
        )
    }
}

/// A scenario's parameters, its `ipisim check` shape, its metrics and the counters it reports.
fn scenario_json(s: &ScenarioDecl) -> Value {
    let params: Vec<Value> = s.params.iter().map(|p| param_json(p, None)).collect();
    let check: serde_json::Map<String, Value> = s
        .check
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    json!({"kind": "scenario", "name": s.name, "description": s.description, "params": params,
        "machine": s.machine, "check": check,
        "metrics": s.metrics.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
        "counters": {
            "interrupts": crate::observe::Irq::ALL.iter().map(|i| i.name()).collect::<Vec<_>>(),
            "vmstat": crate::observe::Vm::ALL.iter().map(|v| v.name()).collect::<Vec<_>>(),
        },
        "note": "machine.*, kernel.*, sched.* and check.* keys apply too: see `ipisim describe machine`, `ipisim describe kernel` and `ipisim describe run`"})
}

fn looks_like(path: &str, section: &str) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.contains_key(section))
}
