//! membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): exact IPI counts. Each call IPIs every other CPU
//! whose current task is a thread of the caller's mm (kernel/sched/membarrier.c), counted in the
//! CAL row; never a TLB shootdown.

use ipisim_core::{run, RunRequest};
use serde_json::Value;

struct Out {
    cal: Vec<u64>,
    tlb: u64,
    calls: u64,
    ns_per_call: f64,
}

fn membarrier(machine: &str, remote: &str, threads: usize, calls: u64) -> Out {
    let req = RunRequest {
        scenario: "membarrier".into(),
        machine: Some(machine.into()),
        kernel: Some("linux-6.18".into()),
        sets: vec![
            ("remote".into(), remote.into()),
            ("remote_threads".into(), threads.to_string()),
            ("calls".into(), calls.to_string()),
        ],
        seed: 1,
    };
    let j = run(&req).unwrap().json;
    let n = |v: &Value| v.as_u64().unwrap();
    Out {
        cal: j["interrupts"]["CAL"]
            .as_array()
            .unwrap()
            .iter()
            .map(n)
            .collect(),
        tlb: n(&j["ops"]["tlb_shootdowns"]),
        calls: n(&j["ops"]["calls"]),
        ns_per_call: j["ops"]["ns_per_call"].as_f64().unwrap(),
    }
}

/// N busy threads on other CPUs: N IPIs per call, one to each of their CPUs, none to the caller.
#[test]
fn busy_threads_get_one_ipi_per_call_each() {
    let o = membarrier("host-2cpu", "busy", 1, 1000);
    assert_eq!(o.calls, 1000);
    assert_eq!(o.cal, vec![0, 1000]);
    assert_eq!(o.tlb, 0);
    for n in [1, 5, 47] {
        let o = membarrier("xeon-4n-48c-64g", "busy", n, 100);
        assert_eq!(o.cal.iter().sum::<u64>(), 100 * n as u64, "{n} threads");
        assert_eq!(o.cal[0], 0, "{n} threads");
        assert!(o.cal[1..=n].iter().all(|&c| c == 100), "{n} threads");
        assert!(o.cal[n + 1..].iter().all(|&c| c == 0), "{n} threads");
    }
}

/// Sleeping threads: their CPUs run the idle task (curr->mm is NULL, even in lazy TLB mode with
/// this mm loaded), so no IPI. No other thread at all: mm_users == 1 returns at once.
#[test]
fn sleeping_or_absent_threads_get_none() {
    for (remote, n) in [("sleeping", 1), ("none", 0)] {
        let o = membarrier("host-2cpu", remote, n, 1000);
        assert_eq!(o.cal, vec![0, 0], "{remote}");
        assert_eq!(o.tlb, 0);
    }
    let o = membarrier("xeon-4n-48c-64g", "sleeping", 47, 100);
    assert_eq!(o.cal.iter().sum::<u64>(), 0);
}

/// With IPIs a call waits for the round trip; without, it costs about one syscall.
#[test]
fn a_call_waits_for_its_ipis() {
    let busy = membarrier("host-2cpu", "busy", 1, 1000).ns_per_call;
    let none = membarrier("host-2cpu", "none", 0, 1000).ns_per_call;
    assert!(none < 500.0, "{none}");
    assert!(busy > 5.0 * none, "{busy} vs {none}");
}
