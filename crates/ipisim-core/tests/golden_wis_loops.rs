//! will-it-scale tlb_flush* with `loops`: every task stops after exactly that many iterations and
//! the run ends with the last one (what `ipisim validate` compares with the real loop).

use ipisim_core::{run, RunRequest};
use serde_json::Value;

fn wis(test: &str, tasks: usize, loops: u64) -> Value {
    let req = RunRequest {
        scenario: format!("will-it-scale/{test}"),
        machine: Some("host-2cpu".into()),
        kernel: Some("linux-6.18".into()),
        sets: vec![
            ("mode".into(), "thread".into()),
            ("tasks".into(), tasks.to_string()),
            ("loops".into(), loops.to_string()),
        ],
        seed: 1,
    };
    run(&req).unwrap().json
}

fn tlb(j: &Value) -> u64 {
    let row = j["interrupts"]["TLB"].as_array().unwrap();
    row.iter().map(|v| v.as_u64().unwrap()).sum()
}

#[test]
fn one_thread_sends_no_ipis() {
    for test in ["tlb_flush1", "tlb_flush2", "tlb_flush3"] {
        let j = wis(test, 1, 1000);
        assert_eq!(j["ops"]["iterations"], 1000, "{test}");
        assert_eq!(tlb(&j), 0, "{test}");
    }
}

/// Two threads: each 1-page madvise shoots down the other CPU while both run.
#[test]
fn two_threads_shoot_each_other_down() {
    let j = wis("tlb_flush1", 2, 1000);
    assert_eq!(j["ops"]["iterations"], 2000);
    let n = tlb(&j);
    assert!((1980..=2000).contains(&n), "{n}");
    // Under 256 iterations: no munmap. (With munmaps, two threads trip a debug assertion in
    // free_pgtables, mm/: the hole a munmap leaves can be mmapped by the other thread before
    // the first frees its page tables, as if munmap did not hold mmap_lock.)
    let j = wis("tlb_flush2", 2, 200);
    let n = tlb(&j);
    assert!((390..=400).contains(&n), "{n}");
}
