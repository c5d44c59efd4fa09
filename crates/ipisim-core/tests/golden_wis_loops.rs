//! will-it-scale tlb_flush* with `loops`: every task stops after exactly that many iterations and
//! the run ends with the last one (what `ipisim validate` compares with the real loop).

mod common;

use common::{run_json, tlb};
use serde_json::Value;

fn wis(test: &str, tasks: usize, loops: u64) -> Value {
    let (tasks, loops) = (tasks.to_string(), loops.to_string());
    let sets = [("mode", "thread"), ("tasks", &tasks), ("loops", &loops)];
    run_json(
        &format!("will-it-scale/{test}"),
        "host-2cpu",
        "linux-6.18",
        &sets,
    )
}

#[test]
fn one_thread_sends_no_ipis() {
    for test in ["tlb_flush1", "tlb_flush2", "tlb_flush3"] {
        let j = wis(test, 1, 1000);
        assert_eq!(j["ops"]["iterations"], 1000, "{test}");
        assert_eq!(tlb(&j), 0, "{test}");
    }
}

/// Two threads: each 1-page madvise shoots down the other CPU while both run. In tlb_flush1
/// (a private file mapping) the read-back faults around, mapping the next 15 pages of its
/// 16-page window read-only, so each of their writes is a COW of a present PTE, which flushes
/// too (wp_page_copy): at most 2000 + 2000 * 15 / 16 IPIs. ftrace on the real loop showed the
/// same two sources (docs/probe-and-validate.md).
#[test]
fn two_threads_shoot_each_other_down() {
    let j = wis("tlb_flush1", 2, 1000);
    assert_eq!(j["ops"]["iterations"], 2000);
    let n = tlb(&j);
    assert!((3800..=3875).contains(&n), "{n}");
    let j = wis("tlb_flush2", 2, 200);
    let n = tlb(&j);
    assert!((390..=400).contains(&n), "{n}");
}

/// tlb_flush3 writes a shared file mapping, so each madvise zaps a dirty page-cache PTE: the zap
/// flushes before dropping the PTE lock (delay_rmap), and tlb_finish_mmu() flushes the whole mm
/// again when the other thread's madvise is in flight (mm_tlb_flush_nested). ftrace on the real
/// loop: 596 flushes from the zap and 574 from tlb_finish_mmu per 600 calls.
#[test]
fn dirty_shared_file_pages_flush_twice_when_threads_overlap() {
    let j = wis("tlb_flush3", 2, 1000);
    let n = tlb(&j);
    assert!((3800..=4000).contains(&n), "{n}");
    // One thread: nothing to IPI, and no other gather open.
    assert_eq!(tlb(&wis("tlb_flush3", 1, 1000)), 0);
}

/// Past 256 iterations each thread munmaps its region and maps a new one. munmap holds mmap_lock
/// for writing until its page tables are freed, so the other thread's mmap waits rather than
/// landing in the hole (it used to, and free_pgtables then freed a table in use: a debug
/// assertion in free_table).
#[test]
fn munmap_and_mmap_of_two_threads_do_not_race() {
    let j = wis("tlb_flush2", 2, 1000);
    assert_eq!(j["ops"]["iterations"], 2000);
    assert!(tlb(&j) > 1900);
    assert_eq!(j["check"]["violations"], 0);
}
