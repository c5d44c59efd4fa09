//! AMD INVLPGB/TLBSYNC broadcast flushes (Linux 6.15) on will-it-scale tlb_flush2 threads, on the
//! 72-CPU Milan of the series' cover letters: which flushes are INVLPGBs and which still IPI, per
//! thread count around the global-ASID threshold (mm_active_cpus_exceeds(mm, 3)); the global ASID
//! freed when the process exits; one TLBSYNC per broadcast flush, waiting for exactly the
//! INVLPGBs its CPU issued; reclaim's batch flush as one INVLPGB of everything; and the unsafe
//! what-if without TLBSYNC caught by the checker (at the read-back, and at reclaim's free).

mod common;

use common::{broadcast as b, remote_flushes, run_json, tlb, tlb_flush2_threads};
use serde_json::Value;

const MILAN: &str = "amd-milan-72c";

/// Up to 3 threads the process never gets a global ASID: 6.15 flushes exactly as 6.14 does, by
/// IPI, and issues no INVLPGB.
#[test]
fn below_the_threshold_every_flush_is_an_ipi() {
    // (threads, nr_tlb_remote_flush, TLB interrupts) of 1000 loops each. The interrupts are as
    // simulated: timing decides how many flushes share one (1967 and 5838 before madvise took
    // mmap_lock; 5870 before the call queue heads' lines, 5822 before Milan's published line
    // costs, 5826 before the lock words' lines, 5827 before a lru_lock round moved the
    // lruvec's own lines, 5819 before the flush's info and tlb_gen lines, and 1992 and 5824
    // before the lru_lock's rounds kept interrupts off, 2026-11-28; 5848 before a queued
    // spinlock's hand-off took two line transfers, 5847 before it took three, and 5850 before a
    // CPU's second lock round of one step stopped spinning on its own first, 2026-11-30; 5826
    // before each gather took mm->tlb_flush_pending's line, the same day).
    for (n, remote, irqs) in [(1, 0, 0), (2, 1998, 1994), (3, 3001, 5836)] {
        let old = tlb_flush2_threads("linux-6.14", n, 1000, &[]);
        let new = tlb_flush2_threads("linux-6.15", n, 1000, &[]);
        for j in [&old, &new] {
            assert_eq!(remote_flushes(j), remote, "{n} threads");
            assert_eq!(tlb(j), irqs, "{n} threads");
            assert_eq!(b(j, "invlpgb"), 0);
            assert_eq!(b(j, "global_asids_allocated"), 0);
        }
        assert_eq!(
            old["elapsed_s"], new["elapsed_s"],
            "{n} threads: the same run"
        );
    }
}

/// From 4 threads, once the fourth runs, the first thread whose pid matches jiffies (task 0 in
/// jiffy 0) gives the mm a global ASID (the first allocation resets the ASID space: one more
/// INVLPGB). Before it, flushes IPI; during the transition broadcast_tlb_flush's
/// finish_asid_transition() IPIs the threads not yet on the global ASID (threads that slept on
/// mmap_lock behind a munmap switch to it on waking). How many of each is timing, as simulated:
/// 26 and 2, and 25 and 2 with the per-VMA madvise (31 and 0, 31 and 3 until 2026-11-28; 28 and
/// 1, 25 and 1 before the lock words' lines, 29 and 1 before the flush's info and tlb_gen lines,
/// the same day; 23 and 1, 24 and 1 before each gather took mm->tlb_flush_pending's line,
/// 2026-11-30). Every
/// other flush (the 1-page madvise and munmap's, page tables freed included) is one INVLPGB and
/// one TLBSYNC.
#[test]
fn from_four_threads_flushes_are_invlpgb() {
    // (threads, INVLPGBs of flushes; the same with the per-VMA madvise) of 1000 loops each, as
    // simulated: how many flushes come before the global ASID is timing.
    // (3981 and 3980, 4984 and 4983, 7993 and 7992 before each gather took
    // mm->tlb_flush_pending's line, 2026-11-30)
    for (n, flushes, vma_flushes) in [(4, 3978, 3979), (5, 4981, 4982), (8, 7990, 7991)] {
        let j = tlb_flush2_threads("linux-6.15", n, 1000, &[]);
        assert_eq!(j["ops"]["iterations"], 1000 * n as u64);
        assert_eq!(b(&j, "global_asids_allocated"), 1, "{n} threads");
        assert_eq!(b(&j, "asid_space_resets"), 1);
        assert_eq!(b(&j, "broadcast_flushes"), flushes, "{n} threads");
        assert_eq!(
            b(&j, "invlpgb"),
            flushes + 1,
            "one page each, and the reset"
        );
        assert_eq!(b(&j, "transition_flushes"), 2, "{n} threads");
        assert_eq!(remote_flushes(&j), 26 + 2, "{n} threads");
        assert_eq!(tlb(&j), 49, "{n} threads");
        let vma_lock = tlb_flush2_threads(
            "linux-6.15",
            n,
            1000,
            &[("kernel.madvise_vma_lock", "true")],
        );
        assert_eq!(
            b(&vma_lock, "broadcast_flushes"),
            vma_flushes,
            "{n} threads"
        );
        assert_eq!(b(&vma_lock, "transition_flushes"), 2, "{n} threads");
        assert_eq!(remote_flushes(&vma_lock), 25 + 2, "{n} threads");
        assert_eq!(tlb(&vma_lock), 49, "{n} threads");
        // One TLBSYNC per broadcast flush, covering exactly the INVLPGBs its CPU issued for it.
        assert_eq!(b(&j, "tlbsync"), flushes);
        assert_eq!(b(&j, "tlbsync_invlpgbs"), flushes);
        assert_eq!(j["check"]["violations"], 0);
        // The same loop on 6.14 IPIs for every flush.
        let old = tlb_flush2_threads("linux-6.14", n, 1000, &[]);
        assert_eq!(b(&old, "invlpgb"), 0);
        assert!(remote_flushes(&old) >= 1000 * n as u64, "{n} threads");
    }
}

/// A process keeps its global ASID while it runs and frees it when its last thread exits
/// (destroy_context -> mm_free_global_asid); single-threaded processes never get one.
#[test]
fn the_global_asid_is_freed_when_the_process_exits() {
    let j = tlb_flush2_threads("linux-6.15", 4, 1000, &[]);
    assert_eq!(b(&j, "global_asids_freed"), 1);
    assert_eq!(j["broadcast"]["global_asids_held"], serde_json::json!([]));
    // Stopped by time, not by exit: still held, transition over, TLB_NR_DYN_ASIDS = 6 first.
    let sets = [("mode", "thread"), ("tasks", "4"), ("duration", "10ms")];
    let j = run_json("will-it-scale/tlb_flush2", MILAN, "linux-6.15", &sets);
    assert_eq!(b(&j, "global_asids_freed"), 0);
    let held = serde_json::json!([{"mm": 0, "asid": 6, "transition": false}]);
    assert_eq!(j["broadcast"]["global_asids_held"], held);
    // Processes: one mm each on one CPU, none exceeds the threshold.
    let sets = [("mode", "process"), ("tasks", "8"), ("loops", "500")];
    let j = run_json("will-it-scale/tlb_flush2", MILAN, "linux-6.15", &sets);
    assert_eq!(b(&j, "global_asids_allocated"), 0);
    assert_eq!(b(&j, "invlpgb"), 0);
}

/// A CPU without INVLPGB runs 6.15 exactly as 6.14, and its results carry no broadcast block.
#[test]
fn without_invlpgb_linux_6_15_is_linux_6_14() {
    let sets = [("mode", "thread"), ("tasks", "2"), ("loops", "300")];
    let old = run_json("will-it-scale/tlb_flush2", "host-2cpu", "linux-6.14", &sets);
    let new = run_json("will-it-scale/tlb_flush2", "host-2cpu", "linux-6.15", &sets);
    assert!(new.get("broadcast").is_none());
    for key in ["elapsed_s", "interrupts", "vmstat", "events", "profile"] {
        assert_eq!(old[key], new[key], "{key}");
    }
}

/// The unsafe what-if: INVLPGB without TLBSYNC. madvise frees the page while the broadcast is
/// in flight, and the thread's read-back still hits its translation: the checker reports a
/// use-after-free at the access. With TLBSYNC, none. Whether a read-back beats its broadcast is
/// timing: 16 threads and 6000 loops give seven (six until each gather took mm->tlb_flush_pending's
/// line, five until a CPU's second lock round of one step stopped spinning on its own first,
/// 2026-11-30; 16 threads and 3000 loops gave four until a queued
/// spinlock's hand-off took three line transfers and none since, five until it took two,
/// 2026-11-30; six until list operations moved their
/// neighbours' lines, 2026-11-29; 8 threads and 1000 loops gave two until the
/// flush's info and tlb_gen lines, 2026-11-28, and none since; 8 threads and 3000 loops gave
/// three before the lock words' lines, two after them and none since a lru_lock round moves the
/// lruvec's own lines; 4 threads and 1000 loops gave some until Milan's published line costs).
#[test]
fn skipping_tlbsync_before_the_free_is_caught() {
    let what_if = [("kernel.broadcast_tlb_flush", "invlpgb_no_tlbsync")];
    let j = tlb_flush2_threads("linux-6.15", 16, 6000, &what_if);
    assert_eq!(j["check"]["violations"], 7, "{}", j["check"]);
    assert_eq!(j["check"]["by_kind"]["use-after-free"], 7);
    assert_eq!(j["check"]["by_site"]["access"], 7);
    assert_eq!(b(&j, "tlbsync"), 0);
    let j = tlb_flush2_threads("linux-6.15", 16, 6000, &[]);
    assert_eq!(j["check"]["violations"], 0);
}

fn reclaim(kernel: &str, extra: &[(&str, &str)]) -> Value {
    let mut sets = vec![("processes", "7"), ("memory", "file")];
    sets.extend_from_slice(extra);
    run_json("reclaim", MILAN, kernel, &sets)
}

/// Reclaim's batched flush (arch_tlbbatch_flush) as merged in 6.15 (0b7eb55cb706): the batch
/// unmapped pages, so one invlpgb_flush_all_nonglobals() (INVLPGB + TLBSYNC) instead of the
/// IPIs, whatever the processes' ASIDs (here single-threaded: none has a global ASID). Each
/// 32-page pass flushes twice, after its first folio batch of 31 and at its end (bc2ff4cbc329;
/// 112 passes: 112 flushes and 224 TLB interrupts before kernel.reclaim_free_batch, 2026-11-30).
#[test]
fn reclaim_batches_flush_everything_by_invlpgb() {
    let old = reclaim("linux-6.14", &[]);
    assert_eq!(remote_flushes(&old), 224);
    // The end-of-pass flush covers the pass's last page alone, so it reaches fewer CPUs (what
    // the simulator printed: 332).
    assert_eq!(tlb(&old), 332);
    let new = reclaim("linux-6.15", &[]);
    assert_eq!(remote_flushes(&new), 0);
    assert_eq!(tlb(&new), 0);
    assert_eq!(b(&new, "batch_flushes"), 224);
    assert_eq!(b(&new, "invlpgb"), 224);
    assert_eq!(b(&new, "tlbsync"), 224);
    assert_eq!(b(&new, "tlbsync_invlpgbs"), 224);
    assert_eq!(b(&new, "global_asids_allocated"), 0);
    assert_eq!(new["check"]["violations"], 0);
}

/// Without TLBSYNC the reclaimed pages are freed while the INVLPGB is in flight: the checker
/// finds the other CPUs' translations at the free.
#[test]
fn reclaim_without_tlbsync_frees_pages_still_cached() {
    let what_if = [("kernel.broadcast_tlb_flush", "invlpgb_no_tlbsync")];
    let j = reclaim("linux-6.15", &what_if);
    assert_eq!(b(&j, "tlbsync"), 0);
    // The first pass's first folio batch (32, its whole pass, before kernel.reclaim_free_batch).
    assert_eq!(j["check"]["by_site"]["free"], 31, "{}", j["check"]);
    assert_eq!(j["check"]["by_kind"]["use-after-free"], 31);
}
