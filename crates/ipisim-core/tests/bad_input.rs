//! Bad input is refused with one line naming the key, the value and the allowed range, before
//! anything runs; it never wraps, aborts or panics (issue 26).

use ipisim_core::config::builtin_machine;
use ipisim_core::resolve;
use ipisim_core::{check, check_limited, run, ConfigError, RunRequest};

fn req(scenario: &str, machine: Option<&str>, sets: &[(&str, &str)]) -> RunRequest {
    RunRequest {
        scenario: scenario.into(),
        machine: machine.map(str::to_string),
        kernel: None,
        sets: sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        seed: 1,
    }
}

fn refused(r: &RunRequest) -> String {
    let e: ConfigError = check(r).expect_err("must be refused");
    let text = e.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
    text
}

#[test]
fn huge_costs_are_refused_instead_of_wrapping_time() {
    for v in ["1e17", "1e19", "1e300", "nan", "inf", "-1"] {
        let msg = refused(&req("shootdown", None, &[("machine.cost.syscall", v)]));
        assert!(msg.contains("machine.cost.syscall"), "{msg}");
        assert!(msg.contains(v) && msg.contains("[0, 1e9]"), "{msg}");
    }
    // Large allowed costs run, and the elapsed time grows with them (it wrapped before).
    let at = |cycles: &str| {
        let sets = [("machine.cost.syscall", cycles)];
        run(&req("shootdown", None, &sets)).unwrap().json["elapsed_s"]
            .as_f64()
            .unwrap()
    };
    assert!(at("1e8") > at("1e7") && at("1e7") > at("434"));
}

#[test]
fn huge_costs_in_a_profile_are_refused() {
    let text = builtin_machine("host-2cpu")
        .unwrap()
        .replace("syscall = { cycles = 434,", "syscall = { cycles = 1e17,");
    assert!(text.contains("1e17"));
    let dir = std::env::temp_dir().join(format!("ipisim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.toml");
    std::fs::write(&path, &text).unwrap();
    let p = path.to_str().unwrap();
    let msg = refused(&req("shootdown", Some(p), &[]));
    assert!(
        msg.contains("cost.syscall") && msg.contains("[0, 1e9]"),
        "{msg}"
    );
    assert!(msg.contains("100000000000000000"), "{msg}");
}

#[test]
fn a_clock_outside_its_physical_range_is_refused() {
    for v in ["1e-9", "0", "100", "nan"] {
        let msg = refused(&req("shootdown", None, &[("machine.ghz", v)]));
        assert!(
            msg.contains("machine.ghz") && msg.contains("[0.1, 10]"),
            "{msg}"
        );
        assert!(msg.contains(v), "{msg}");
    }
}

#[test]
fn sizes_and_durations_have_a_ceiling() {
    let msg = refused(&req(
        "shootdown",
        None,
        &[("machine.mem_per_node", "2000000TiB")],
    ));
    assert!(msg.contains("[0, 1PiB]"), "{msg}");
    let msg = refused(&req("shootdown", None, &[("settle", "1e300s")]));
    assert!(
        msg.contains("settle") && msg.contains("[0, 1e4 s]"),
        "{msg}"
    );
}

#[test]
fn a_run_that_would_not_fit_in_host_memory_is_refused_before_allocating() {
    let sets = [("machine.mem_per_node", "64TiB"), ("scale", "1")];
    let r = req("swapout", Some("xeon-2s-2013"), &sets);
    // Against the host's own available memory (no host has 1.8 TiB free) and against a limit.
    let msg = refused(&r);
    assert!(
        msg.contains("machine.mem_per_node") && msg.contains("64TiB"),
        "{msg}"
    );
    let e = check_limited(&r, Some(1 << 30)).unwrap_err().to_string();
    assert!(
        e.contains("--max-memory, 1GiB") && e.contains("at most about"),
        "{e}"
    );
    // A small run fits a small limit.
    let small = req("swapout", Some("xeon-2s-2013"), &[("scale", "0.002")]);
    check_limited(&small, Some(64 << 20)).unwrap();
}

#[test]
fn every_scenarios_defaults_run_and_ipistorm_names_the_real_cause() {
    check(&req("ipistorm", None, &[])).unwrap();
    check(&req("swapout", None, &[])).unwrap();
    let msg = refused(&req("ipistorm", Some("host-2cpu"), &[("cpus", "0")]));
    assert!(msg.contains("offset: 8 (the default)"), "{msg}");
    assert!(msg.contains("cpus=0") && msg.contains("2 CPUs"), "{msg}");
    let msg = refused(&req("ipistorm", Some("host-2cpu"), &[("offset", "4")]));
    assert!(
        msg.starts_with("--set: offset: 4 is a multiple of 2"),
        "{msg}"
    );
}

#[test]
fn a_scale_under_the_floor_says_what_was_simulated() {
    let sets = [("machine.mem_per_node", "453MiB"), ("scale", "0.01")];
    let j = run(&req("swapout", Some("xeon-2s-2013"), &sets))
        .unwrap()
        .json;
    assert_eq!(j["config"]["machine.simulated_mem_per_node"], 64 << 20);
    // Above the floor the config is as before: no such key.
    let sets = [("scale", "0.01")];
    let j = run(&req("swapout", Some("xeon-2s-2013"), &sets))
        .unwrap()
        .json;
    assert!(j["config"].get("machine.simulated_mem_per_node").is_none());
    assert!(resolve(&req("swapout", None, &[])).is_ok());
}

#[test]
fn huge_pages_are_refused_where_a_scenario_has_no_paths_for_them() {
    let msg = refused(&req("reclaim", None, &[("kernel.thp", "always")]));
    assert!(
        msg.contains("kernel.thp") && msg.contains("no paths for anonymous huge pages"),
        "{msg}"
    );
    let swapout = [("kernel.thp", "always"), ("scale", "0.002")];
    check(&req("swapout", None, &swapout)).expect("swapout models huge pages");
}
