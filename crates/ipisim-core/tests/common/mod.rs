//! Helpers the golden tests share (each test binary uses some of them).
#![allow(dead_code)]

use ipisim_core::{run, RunRequest};
use serde_json::Value;

/// The request for `scenario` on `machine` with `kernel` and `sets`, seed 1.
pub fn request(scenario: &str, machine: &str, kernel: &str, sets: &[(&str, &str)]) -> RunRequest {
    RunRequest {
        scenario: scenario.into(),
        machine: Some(machine.into()),
        kernel: Some(kernel.into()),
        sets: sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        seed: 1,
    }
}

/// Run `scenario` on `machine` with `kernel` and `sets`, seed 1: the result JSON.
pub fn run_json(scenario: &str, machine: &str, kernel: &str, sets: &[(&str, &str)]) -> Value {
    run(&request(scenario, machine, kernel, sets)).unwrap().json
}

/// The TLB row of /proc/interrupts, summed over CPUs.
pub fn tlb(j: &Value) -> u64 {
    let row = j["interrupts"]["TLB"].as_array().unwrap();
    row.iter().map(|v| v.as_u64().unwrap()).sum()
}

/// A function's percent of CPU time in a result's profile (0 if it has none).
pub fn profile_percent(j: &Value, function: &str) -> f64 {
    j["profile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["function"] == function)
        .map_or(0.0, |p| p["percent"].as_f64().unwrap())
}
