//! ipistorm: exact counts. Each smp_call_function_single() is one interrupt on its target; each
//! smp_call_function() one IPI to every other CPU of the set (before 4.13).

mod common;
use common::run_json;

#[test]
fn single_calls_interrupt_their_target_once() {
    let j = run_json(
        "ipistorm",
        "power9-128c",
        "linux-5.7",
        &[("cpus", "16"), ("duration", "1ms")],
    );
    let calls = j["ops"]["calls"].as_u64().unwrap();
    assert!(calls > 16);
    assert_eq!(j["ops"]["call_function_interrupts"], calls);
    // Offset 8 on 16 CPUs: CPU c interrupts c + 8 mod 16; CPUs 16.. stay out of it.
    let cal = j["interrupts"]["CAL"].as_array().unwrap();
    assert!(cal[16..].iter().all(|v| v == 0));
}

#[test]
fn broadcast_calls_send_an_ipi_to_every_other_cpu_unless_queued() {
    // 4.2 sends every target an IPI; 6.18 skips a target whose queue already holds work.
    let sets = [("cpus", "4"), ("single", "false"), ("duration", "1ms")];
    let old = run_json("ipistorm", "xeon-4n-48c-64g", "linux-4.2", &sets);
    let calls = old["ops"]["calls"].as_u64().unwrap();
    assert_eq!(old["ipis_sent"], calls * 3);
    let new = run_json("ipistorm", "xeon-4n-48c-64g", "linux-6.18", &sets);
    let (calls, sent) = (
        new["ops"]["calls"].as_u64().unwrap(),
        new["ipis_sent"].as_u64().unwrap(),
    );
    assert!(sent < calls * 3, "{sent} IPIs for {calls} calls");
    // An IPI that finds the target's interrupt already pending merges with it.
    assert!(new["ops"]["call_function_interrupts"].as_u64().unwrap() <= sent);
}

/// An offset that is a multiple of the CPUs would make every thread call itself forever at no
/// simulated time: a configuration error naming the key.
#[test]
fn an_offset_that_targets_the_caller_is_a_config_error() {
    let sets = [("cpus", "8"), ("offset", "16")];
    let req = common::request("ipistorm", "xeon-4n-48c-64g", "linux-6.18", &sets);
    let e = ipisim_core::run(&req).err().expect("an error");
    assert_eq!(e.key, "offset");
    assert!(e.reason.contains("call itself"), "{}", e.reason);
}
