//! arm64's TLB maintenance (arch/arm64/include/asm/tlbflush.h, Linux 6.4 and 6.5): broadcast
//! TLBI ... IS and DSB ISH, no flush IPIs; and the batched unmap flush of 43b3dfdd0455 (6.5).
//! Exact counts of TLBIs and DSBs, the full-flush threshold of __flush_tlb_range(), and the
//! checker on the unsafe what-if that skips arch_tlbbatch_flush()'s dsb(ish).

mod common;
use common::{n, reclaim_json, run_json, tlb, tlbi_dsb};

const KUNPENG: &str = "kunpeng920-96c";
const SD888: &str = "snapdragon888";

/// One TLBI per unmapped page in both eras; 6.4 waits for each with its own DSB
/// (ptep_clear_flush), 6.5 with one DSB per batch (arch_tlbbatch_flush). No flush IPI either way.
#[test]
fn one_tlbi_per_page_one_dsb_per_page_or_per_batch() {
    for machine in [KUNPENG, SD888] {
        for (procs, pages) in [("1", 512), ("4", 2048)] {
            let before = reclaim_json(machine, "linux-6.4-arm64", procs, &[]);
            let after = reclaim_json(machine, "linux-6.5-arm64", procs, &[]);
            for j in [&before, &after] {
                assert_eq!(n(&j["vmstat"]["pgsteal_direct"]), pages);
                assert_eq!(n(&j["check"]["violations"]), 0);
                assert_eq!(tlb(j), 0);
                assert_eq!(n(&j["vmstat"]["nr_tlb_remote_flush"]), 0);
                assert_eq!(n(&j["ipis_sent"]), 0);
            }
            assert_eq!(tlbi_dsb(&before), (pages, pages), "{machine} {procs}");
            assert_eq!(tlbi_dsb(&after), (pages, pages / 32), "{machine} {procs}");
        }
    }
}

/// Dirty PTEs (written anonymous memory): try_to_unmap_flush_dirty() runs before each pageout(),
/// so 6.5 waits with a DSB per page as well: the batch saves nothing on them.
#[test]
fn dirty_ptes_flush_before_each_pageout() {
    let sets = [("memory", "anon"), ("access", "write")];
    for kernel in ["linux-6.4-arm64", "linux-6.5-arm64"] {
        let j = reclaim_json(KUNPENG, kernel, "1", &sets);
        assert_eq!(n(&j["vmstat"]["pswpout"]), 512);
        assert_eq!(tlbi_dsb(&j), (512, 512), "{kernel}");
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
}

/// The merged 6.5 has no CPU-count rule: it batches on the 8-CPU Snapdragon too. The v6-v9
/// postings' threshold (num_online_cpus() < CONFIG_ARM64_NR_CPUS_FOR_BATCHED_TLB): set to 9, that
/// is "more than 8 CPUs", batching is off at 8 CPUs and on at 96.
#[test]
fn batching_below_the_cpu_threshold_is_off() {
    let merged = reclaim_json(SD888, "linux-6.5-arm64", "1", &[]);
    assert_eq!(tlbi_dsb(&merged), (512, 16));
    let more_than_8 = [("kernel.arm64_batch_min_cpus", "9")];
    let sd = reclaim_json(SD888, "linux-6.5-arm64", "1", &more_than_8);
    assert_eq!(tlbi_dsb(&sd), (512, 512));
    let kp = reclaim_json(KUNPENG, "linux-6.5-arm64", "1", &more_than_8);
    assert_eq!(tlbi_dsb(&kp), (512, 16));
    // v6's own default: on from 8 CPUs (">= 8 rather than > 8").
    let v6 = reclaim_json(
        SD888,
        "linux-6.5-arm64",
        "1",
        &[("kernel.arm64_batch_min_cpus", "8")],
    );
    assert_eq!(tlbi_dsb(&v6), (512, 16));
    // Fewer CPUs than that: 4.
    let four = reclaim_json(
        SD888,
        "linux-6.5-arm64",
        "1",
        &[
            ("kernel.arm64_batch_min_cpus", "8"),
            ("machine.cpus_per_node", "4"),
        ],
    );
    assert_eq!(tlbi_dsb(&four), (512, 512));
}

/// madvise(MADV_DONTNEED) of 1024 pages in calls of `batch`: __flush_tlb_range() issues a TLBI a
/// page below MAX_TLBI_OPS (512) pages and flush_tlb_mm() (one TLBI ASIDE1IS) from there; one
/// DSB a call. With FEAT_TLBIRANGE, range TLBIs up to MAX_TLBI_RANGE_PAGES.
fn madvise(batch: &str, range: &str) -> (u64, u64) {
    let sets = [
        ("pages", "1024"),
        ("batch", batch),
        ("remote_threads", "1"),
        ("machine.tlbi_range", range),
    ];
    let j = run_json("shootdown", KUNPENG, "linux-6.5-arm64", &sets);
    assert_eq!(tlb(&j), 0);
    tlbi_dsb(&j)
}

#[test]
fn full_asid_flush_from_512_pages() {
    // 1024 = 511 + 511 + 2: 511 + 511 + 2 TLBIs, three calls.
    assert_eq!(madvise("511", "false"), (1024, 3));
    // 512 + 512: two ASID flushes.
    assert_eq!(madvise("512", "false"), (2, 2));
    assert_eq!(madvise("1024", "false"), (1, 1));
    assert_eq!(madvise("1", "false"), (1024, 1024));
    // Range TLBIs: 511 = 1 + 62 + 448 (three ops), 511 again, then 2 = one op.
    assert_eq!(madvise("511", "true"), (3 + 3 + 1, 3));
    // 512 pages: one range op at scale 1; 1024: one at scale 1 too ((15 + 1) << 6).
    assert_eq!(madvise("512", "true"), (2, 2));
    assert_eq!(madvise("1024", "true"), (1, 1));
}

/// The what-if that frees the batch's pages without arch_tlbbatch_flush()'s dsb(ish): the
/// TLBIs are still outstanding, so the reader's CPU still caches translations to the freed
/// frames. Every page of the batch is caught at the free.
#[test]
fn skipping_the_batch_dsb_is_caught() {
    for machine in [KUNPENG, SD888] {
        let j = reclaim_json(
            machine,
            "linux-6.5-arm64",
            "1",
            &[("kernel.arm64_tlbbatch_dsb", "false")],
        );
        let c = &j["check"];
        assert_eq!(n(&c["by_site"]["free"]), 512, "{c}");
        assert_eq!(n(&c["by_kind"]["use-after-free"]), 512);
        let first = &c["first"][0];
        assert_eq!(first["kind"], "use-after-free");
        assert_eq!(first["at"], "free");
        assert_eq!(
            first["history"][0]["event"],
            "unmapped, flush deferred in batch 1"
        );
    }
}

/// The checker stays clean over seeds that stretch busy steps and shuffle the threads, for both
/// eras on both machines, and for migration.
#[test]
fn checker_clean_over_seeds() {
    let runs = common::reclaim_checker_clean_over_seeds(
        &[SD888, KUNPENG],
        &["linux-6.4-arm64", "linux-6.5-arm64"],
        &[],
    );
    assert_eq!(runs, 400);
}

/// Migration on arm64 6.5 batches too: one TLBI a page, one DSB a batch of up to 512.
#[test]
fn migration_batches_its_dsb() {
    let sets = [
        ("threads", "1"),
        ("memory", "2MiB"),
        ("passes", "1"),
        ("scale", "0.01"),
    ];
    let machine = [("machine.nodes", "2"), ("machine.cpus_per_node", "4")];
    let mut all: Vec<(&str, &str)> = sets.to_vec();
    all.extend_from_slice(&machine);
    let before = run_json("migrate", SD888, "linux-6.4-arm64", &all);
    let after = run_json("migrate", SD888, "linux-6.5-arm64", &all);
    for j in [&before, &after] {
        assert_eq!(n(&j["vmstat"]["pgmigrate_success"]), 512);
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
    assert_eq!(tlbi_dsb(&before).1, tlbi_dsb(&before).0);
    assert!(tlbi_dsb(&before).0 >= 512);
    assert_eq!(tlbi_dsb(&after).0, tlbi_dsb(&before).0);
    assert!(tlbi_dsb(&after).1 < tlbi_dsb(&before).1);
}

/// Same inputs and seed, same bytes.
#[test]
fn deterministic() {
    let sets = [
        ("processes", "3"),
        ("sched.jitter", "0.05"),
        ("sched.placement", "shuffled"),
    ];
    let a = run_json("reclaim", KUNPENG, "linux-6.5-arm64", &sets);
    let b = run_json("reclaim", KUNPENG, "linux-6.5-arm64", &sets);
    assert_eq!(a.to_string(), b.to_string());
}
