//! drain_all_pages() in its four eras: which CPUs get an IPI for a given set of per-CPU page
//! counts, who waits for whom, and pcpu_drain_mutex in the workqueue era. 48-CPU profile.

use ipisim_core::{run, RunRequest};
use serde_json::Value;

struct Drain {
    ipis: u64,
    cal: u64,
    drains: u64,
    saved: u64,
    left: u64,
    seconds: f64,
}

fn drain(variant: &str, drainers: usize, holders: usize, others: &str) -> Drain {
    let req = RunRequest {
        scenario: "drain".into(),
        machine: Some("xeon-4n-48c-64g".into()),
        kernel: Some("linux-4.3".into()),
        sets: vec![
            ("kernel.pcp_drain".into(), variant.into()),
            ("drainers".into(), drainers.to_string()),
            ("holders".into(), holders.to_string()),
            ("others".into(), others.into()),
        ],
        seed: 1,
    };
    let j = run(&req).unwrap().json;
    let n = |v: &Value| v.as_u64().unwrap();
    let cal = j["interrupts"]["CAL"]
        .as_array()
        .unwrap()
        .iter()
        .map(n)
        .sum();
    Drain {
        ipis: n(&j["ops"]["drain_ipis"]),
        cal,
        drains: n(&j["vmstat"]["pcp_global_drain"]),
        saved: n(&j["vmstat"]["pcp_global_ipi_saved"]),
        left: n(&j["ops"]["cpus_with_pages_after"]),
        seconds: j["ops"]["drain_s"].as_f64().unwrap(),
    }
}

const HOLDERS: [usize; 4] = [0, 1, 5, 47];

/// Before 3.4 every other CPU gets an IPI; from 3.4 only those holding pages; from 4.11 none.
#[test]
fn ipis_go_to_the_cpus_the_era_chooses() {
    for h in HOLDERS {
        for others in ["idle", "busy"] {
            let ctx = format!("holders={h} others={others}");
            assert_eq!(drain("all_cpus", 1, h, others).ipis, 47, "{ctx}");
            assert_eq!(
                drain("cpus_with_pages", 1, h, others).ipis,
                h as u64,
                "{ctx}"
            );
            assert_eq!(drain("workqueue", 1, h, others).ipis, 0, "{ctx}");
            assert_eq!(drain("remote_no_ipi", 1, h, others).ipis, 0, "{ctx}");
        }
    }
}

/// Every era leaves no page behind: the caller returns only once every list is drained.
#[test]
fn the_caller_waits_until_every_list_is_empty() {
    for variant in ["all_cpus", "cpus_with_pages", "workqueue", "remote_no_ipi"] {
        for others in ["idle", "busy"] {
            assert_eq!(drain(variant, 1, 5, others).left, 0, "{variant} {others}");
        }
    }
    // Waiting for 47 CPUs (idle ones must wake from HLT) takes longer than for 1.
    let all = drain("all_cpus", 1, 1, "idle").seconds;
    let some = drain("cpus_with_pages", 1, 1, "idle").seconds;
    assert!(all > some, "{all} vs {some}");
}

/// The seed's debug counters: one drain per call, "saved" when fewer than half the CPUs held
/// pages (patch 8/8).
#[test]
fn debug_counters_follow_patch_8() {
    for h in HOLDERS {
        let d = drain("cpus_with_pages", 1, h, "idle");
        assert_eq!((d.drains, d.saved), (1, (h < 24) as u64), "holders={h}");
    }
}

/// pcpu_drain_mutex (4.11+): a second caller while a drain runs gives up (mutex_trylock with no
/// zone) before it looks at any list, so the holders' pages are drained and counted once, with no
/// IPI; the IPI eras have no mutex and drain twice.
#[test]
fn mutex_callers_serialise_on_the_mutex() {
    for variant in ["workqueue", "remote_no_ipi"] {
        let d = drain(variant, 2, 5, "busy");
        assert_eq!((d.drains, d.ipis, d.cal, d.left), (1, 0, 0, 0), "{variant}");
    }
    let ipi = drain("cpus_with_pages", 2, 5, "busy");
    assert_eq!((ipi.drains, ipi.ipis, ipi.left), (2, 10, 0));
}
