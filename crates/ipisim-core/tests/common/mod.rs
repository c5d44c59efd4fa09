//! Helpers the golden tests share (each test binary uses some of them).
#![allow(dead_code)]

use ipisim_core::{run, RunRequest};
use serde_json::Value;

/// The request for `scenario` on `machine` with `kernel` and `sets`, seed 1.
pub fn request(scenario: &str, machine: &str, kernel: &str, sets: &[(&str, &str)]) -> RunRequest {
    RunRequest::new(scenario, machine, kernel, sets)
}

/// Run `scenario` on `machine` with `kernel` and `sets`, seed 1: the result JSON.
pub fn run_json(scenario: &str, machine: &str, kernel: &str, sets: &[(&str, &str)]) -> Value {
    run(&request(scenario, machine, kernel, sets)).unwrap().json
}

/// will-it-scale tlb_flush2 in thread mode on the Milan (`amd-milan-72c`): `tasks` threads of
/// `loops` loops each with `kernel`, plus `extra` sets: the result JSON.
pub fn tlb_flush2_threads(kernel: &str, tasks: usize, loops: u64, extra: &[(&str, &str)]) -> Value {
    let (tasks, loops) = (tasks.to_string(), loops.to_string());
    let mut sets = vec![("mode", "thread"), ("tasks", &tasks), ("loops", &loops)];
    sets.extend_from_slice(extra);
    run_json("will-it-scale/tlb_flush2", "amd-milan-72c", kernel, &sets)
}

/// A JSON count.
pub fn n(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// `reclaim` with `processes` readers on CPUs 1..N, each reading its own file, reclaimed by CPU 0
/// (SWAP_CLUSTER_MAX pages a pass), plus `extra` sets: the result JSON.
pub fn reclaim_json(machine: &str, kernel: &str, processes: &str, extra: &[(&str, &str)]) -> Value {
    let mut sets = vec![("processes", processes)];
    sets.extend_from_slice(extra);
    run_json("reclaim", machine, kernel, &sets)
}

/// The TLB row of /proc/interrupts, summed over CPUs.
pub fn tlb(j: &Value) -> u64 {
    let row = j["interrupts"]["TLB"].as_array().unwrap();
    row.iter().map(|v| v.as_u64().unwrap()).sum()
}

/// x86: a count of the result's broadcast block (INVLPGB, RAR and the global ASIDs).
pub fn broadcast(j: &Value, key: &str) -> u64 {
    j["broadcast"][key].as_u64().unwrap()
}

/// vmstat nr_tlb_remote_flush: flushes that went to other CPUs by IPI.
pub fn remote_flushes(j: &Value) -> u64 {
    j["vmstat"]["nr_tlb_remote_flush"].as_u64().unwrap()
}

/// arm64: (TLBIs issued, dsb(ish) executed).
pub fn tlbi_dsb(j: &Value) -> (u64, u64) {
    (n(&j["arm64"]["tlbi"]), n(&j["arm64"]["dsb_ish"]))
}

/// RISC-V: (SBI RFENCE calls, sfence.vma run by kernel or firmware, firmware IPIs).
pub fn sbi_counts(j: &Value) -> (u64, u64, u64) {
    (
        n(&j["riscv"]["sbi_rfence"]),
        n(&j["riscv"]["sfence_vma"]),
        n(&j["ipis_sent"]),
    )
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

/// The coherence checker on `reclaim` over seeds: 4 shapes (file and anon, direct reclaim and
/// kswapd, busy and sleeping readers) x 25 seeds, with timing jitter and shuffled placement, on
/// each machine and kernel, with `extra` sets. Panics on the first violation; returns the number
/// of runs.
pub fn reclaim_checker_clean_over_seeds(
    machines: &[&str],
    kernels: &[&str],
    extra: &[(&str, &str)],
) -> usize {
    let perturb = [("sched.jitter", "0.05"), ("sched.placement", "shuffled")];
    let shapes: [&[(&str, &str)]; 4] = [
        &[("processes", "3"), ("pages", "64")],
        &[("processes", "3"), ("pages", "64"), ("remote", "sleeping")],
        &[
            ("processes", "2"),
            ("pages", "64"),
            ("access", "write"),
            ("reclaimer", "kswapd"),
        ],
        &[
            ("processes", "2"),
            ("pages", "64"),
            ("memory", "anon"),
            ("access", "write"),
        ],
    ];
    let mut runs = 0;
    for &machine in machines {
        for &kernel in kernels {
            for (i, shape) in shapes.iter().enumerate() {
                for seed in 1..=25u64 {
                    let mut sets: Vec<(&str, &str)> = shape.to_vec();
                    sets.extend_from_slice(&perturb);
                    sets.extend_from_slice(extra);
                    let mut req = request("reclaim", machine, kernel, &sets);
                    req.seed = seed + 100 * i as u64;
                    let j = run(&req).unwrap().json;
                    assert_eq!(
                        n(&j["check"]["violations"]),
                        0,
                        "{machine} {kernel} {shape:?} seed {}: {}",
                        req.seed,
                        j["check"]
                    );
                    runs += 1;
                }
            }
        }
    }
    runs
}
