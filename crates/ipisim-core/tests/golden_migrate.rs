//! Page migration's TLB flushes (migrate_pages, 6.3 vs 6.4) and the TLB-coherence checker.

mod common;
use common::{n, run_json, tlb};
use serde_json::Value;

/// One pmbench thread on CPU 0 of xeon-2s-2013 populates 2 MiB (512 pages) on node 0; one pass
/// moves them all to node 1 (lru_cache_disable() first drains the 512 mod 15 = 2 pages still in
/// the thread's LRU-add batch).
fn one_pass(kernel: &str, extra: &[(&str, &str)]) -> Value {
    let mut sets = vec![
        ("threads", "1"),
        ("memory", "2MiB"),
        ("passes", "1"),
        ("scale", "0.01"),
    ];
    sets.extend_from_slice(extra);
    run_json("migrate", "xeon-2s-2013", kernel, &sets)
}

/// The events of a violation report's page history, in order.
fn history(report: &Value) -> Vec<&str> {
    report["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

/// 6.3 flushes each page as try_to_migrate_one unmaps it: one flush_tlb_mm_range per page. 6.4
/// unmaps the whole batch (up to 512 pages) and flushes once.
#[test]
fn batching_flushes_once_per_batch() {
    let before = one_pass("linux-6.3", &[]);
    let after = one_pass("linux-6.4", &[]);
    for j in [&before, &after] {
        assert_eq!(n(&j["vmstat"]["pgmigrate_success"]), 512);
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
    assert_eq!(n(&before["vmstat"]["nr_tlb_remote_flush"]), 512);
    assert_eq!(n(&after["vmstat"]["nr_tlb_remote_flush"]), 1);
    // One target CPU: at most one IPI per flush (none while the thread sleeps, lazy, on a
    // migration entry).
    assert!(
        tlb(&before) <= 512 && tlb(&before) > 400,
        "{}",
        tlb(&before)
    );
    assert!(tlb(&after) <= 1);
}

/// More than NR_MAX_BATCHED_MIGRATION pages: one flush per 512.
#[test]
fn batches_hold_512_pages() {
    let j = one_pass("linux-6.4", &[("memory", "8MiB")]);
    let moved = n(&j["vmstat"]["pgmigrate_success"]);
    assert_eq!(moved, 2048);
    assert_eq!(n(&j["vmstat"]["nr_tlb_remote_flush"]), 4);
}

/// The what-if that moves (copies, restores, frees) before the batch flush leaves the thread's
/// CPU with translations to freed frames: the checker reports each at the free. Without PCID:
/// with it, the thread's CPU is lazy while the thread sleeps on a migration entry, and the
/// switch back to its mm flushes the ASID the batch's tlb_gen left behind, so the checker does
/// not count a lazy CPU at the free (mm/rmap.rs check_translations).
#[test]
fn moving_before_the_flush_is_caught() {
    let j = one_pass(
        "linux-6.4",
        &[
            ("kernel.migrate_flush", "batched_unsafe"),
            ("kernel.pcid", "false"),
        ],
    );
    let c = &j["check"];
    assert!(n(&c["by_site"]["free"]) > 0, "{c}");
    let first = &c["first"][0];
    assert_eq!(first["kind"], "use-after-free");
    assert_eq!(first["at"], "free");
    let history = history(first);
    assert_eq!(history[0], "unmapped, flush deferred in batch 1");
    assert!(history[1].starts_with("migrated to pfn"), "{history:?}");
}

/// With many threads and no PCID (so a thread that slept on a migration entry does not flush
/// its TLB when it comes back), threads also load and store through translations of freed
/// frames. The report names the first such access: its CPU, time and address, and the page's
/// history up to it.
#[test]
fn the_first_offending_access_is_named() {
    let sets = [
        ("memory", "32MiB"),
        ("passes", "2"),
        ("scale", "0.01"),
        ("kernel.migrate_flush", "batched_unsafe"),
        ("kernel.pcid", "false"),
    ];
    let j = run_json("migrate", "xeon-2s-2013", "linux-6.4", &sets);
    let c = &j["check"];
    assert!(n(&c["by_site"]["access"]) > 0, "{c}");
    let reports = c["first"].as_array().unwrap();
    let accesses: Vec<&Value> = reports
        .iter()
        .filter(|r| r["at"] == "read" || r["at"] == "write")
        .collect();
    let first = accesses[0];
    let t = first["time_s"].as_f64().unwrap();
    assert!(accesses.iter().all(|r| r["time_s"].as_f64().unwrap() >= t));
    assert_eq!(first["kind"], "use-after-free");
    let events = history(first);
    assert!(events.contains(&"freed"), "{events:?}");
    assert!(first["history"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["time_s"].as_f64().unwrap() <= t));
    // The same seed gives the same report.
    let again = run_json("migrate", "xeon-2s-2013", "linux-6.4", &sets);
    assert_eq!(again["check"], j["check"]);
}

/// The debug policy reclaim_flush = none never flushes: every page the reader's CPU still
/// caches is freed under it.
#[test]
fn never_flushing_is_caught() {
    let sets = [("processes", "1"), ("kernel.reclaim_flush", "none")];
    let j = run_json("reclaim", "kvm-8cpu", "linux-4.3", &sets);
    let c = &j["check"];
    assert_eq!(n(&c["by_site"]["free"]), 512, "{c}");
    assert_eq!(n(&c["by_kind"]["use-after-free"]), 512);
    assert_eq!(tlb(&j), 0);
}

/// The checker costs nothing in the model: with it off, the run is the same.
#[test]
fn checking_does_not_change_the_run() {
    let on = one_pass("linux-6.4", &[]);
    let off = one_pass("linux-6.4", &[("check.enabled", "false")]);
    assert_eq!(on["ops"], off["ops"]);
    assert_eq!(on["interrupts"], off["interrupts"]);
    assert_eq!(off["check"]["enabled"], false);
}
