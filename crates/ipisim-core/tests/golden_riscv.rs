//! RISC-V's TLB flushing (arch/riscv/mm/tlbflush.c, Linux 6.7 and 6.8): local sfence.vma, and
//! remote fences through the SBI RFENCE extension (an ecall; the firmware IPIs the other harts
//! and waits for them); and the batched unmap flush of 54d7431af73e (6.8). Exact counts of SBI
//! calls, firmware IPIs and sfence.vma, the tlb_flush_all_threshold switch, and the checker on
//! the unsafe what-if that skips arch_tlbbatch_flush().

mod common;
use common::{n, reclaim_json, run_json, sbi_counts, tlb};
use serde_json::Value;

const UNMATCHED: &str = "hifive-unmatched";
const TH1520: &str = "th1520";
const OLD: &str = "linux-6.7-riscv";
const NEW: &str = "linux-6.8-riscv";

/// 6.7: ptep_clear_flush() -> flush_tlb_page(): one SBI call a page, each IPIing the one hart
/// that runs the page's mm and waiting for it. 6.8: one SBI call a batch of 32, which IPIs every
/// hart of the batch's cpumask (the union of the mms' cpumasks) once. No kernel IPI, no TLB row.
#[test]
fn sbi_calls_per_page_and_per_batch() {
    for machine in [UNMATCHED, TH1520] {
        for (procs, pages, harts) in [("1", 512, 1), ("3", 1536, 3)] {
            let before = reclaim_json(machine, OLD, procs, &[]);
            let after = reclaim_json(machine, NEW, procs, &[]);
            for j in [&before, &after] {
                assert_eq!(n(&j["vmstat"]["pgsteal_direct"]), pages);
                assert_eq!(n(&j["check"]["violations"]), 0);
                assert_eq!(tlb(j), 0);
            }
            // One remote hart a page; its firmware runs one sfence.vma of the page.
            assert_eq!(
                sbi_counts(&before),
                (pages, pages, pages),
                "{machine} {procs}"
            );
            // A batch of 32: one call, one full sfence.vma and one IPI on each of its harts.
            let batches = pages / 32;
            assert_eq!(
                sbi_counts(&after),
                (batches, batches * harts, batches * harts),
                "{machine} {procs}"
            );
        }
    }
}

/// Firmware waits: every SBI call here has remote harts, so each waits in the firmware once:
/// a page each in 6.7, a batch each in 6.8. The share of __sbi_rfence_v02_call falls with them.
#[test]
fn firmware_waits_per_batch_with_and_without_batching() {
    let before = reclaim_json(UNMATCHED, OLD, "3", &[]);
    let after = reclaim_json(UNMATCHED, NEW, "3", &[]);
    assert_eq!(sbi_counts(&before).0, 1536);
    assert_eq!(sbi_counts(&after).0, 48);
    let share = |j: &Value| common::profile_percent(j, "__sbi_rfence_v02_call");
    assert!(share(&before) > 0.0);
    assert!(share(&after) < share(&before));
    // 6.7 charges each page's flush to __sbi_rfence_v02_call, 6.8 never calls flush_tlb_page.
    assert_eq!(common::profile_percent(&after, "ptep_clear_flush"), 0.0);
}

/// Dirty PTEs (written anonymous memory): try_to_unmap_flush_dirty() flushes before each
/// pageout(), so 6.8 still makes one SBI call a page.
#[test]
fn dirty_ptes_flush_before_each_pageout() {
    let sets = [("memory", "anon"), ("access", "write")];
    for kernel in [OLD, NEW] {
        let j = reclaim_json(TH1520, kernel, "1", &sets);
        assert_eq!(n(&j["vmstat"]["pswpout"]), 512);
        assert_eq!(sbi_counts(&j).0, 512, "{kernel}");
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
}

/// madvise(MADV_DONTNEED) of 1024 pages in calls of `batch`, with `remote` threads of the mm on
/// other harts of `machine`: (SBI calls, sfence.vma, of those without an address).
fn madvise_on(machine: &str, batch: &str, remote: &str) -> (u64, u64, u64) {
    let sets = [
        ("pages", "1024"),
        ("batch", batch),
        ("remote_threads", remote),
    ];
    let j = run_json("shootdown", machine, NEW, &sets);
    assert_eq!(tlb(&j), 0);
    let (sbi, sfence, _) = sbi_counts(&j);
    (sbi, sfence, n(&j["riscv"]["sfence_vma_all"]))
}

/// madvise_on() the Unmatched: (SBI calls, sfence.vma).
fn madvise(batch: &str, remote: &str) -> (u64, u64) {
    let (sbi, sfence, _) = madvise_on(UNMATCHED, batch, remote);
    (sbi, sfence)
}

/// tlb_flush_all_threshold = 64: a local range of up to 64 pages is one sfence.vma a page, from
/// 65 one sfence.vma of the ASID. A remote range is one SBI call, and the firmware flushes the
/// whole ASID on each hart above the platform's tlb_range_flush_limit (0 on the FU740).
#[test]
fn full_flush_threshold() {
    // Local only (no other thread): 1024 = 16 x 64, a page each; 65-page calls: 15 + 1 of 49.
    assert_eq!(madvise("64", "0"), (0, 1024));
    assert_eq!(madvise("65", "0"), (0, 15 + 49));
    assert_eq!(madvise("1024", "0"), (0, 1));
    assert_eq!(madvise("1", "0"), (0, 1024));
    // One remote thread: one SBI call a madvise; two sfence.vma (this hart, the other).
    assert_eq!(madvise("64", "1"), (16, 32));
    assert_eq!(madvise("1", "1"), (1024, 2048));
    // Three: four harts each call.
    assert_eq!(madvise("1024", "3"), (1, 4));
}

/// SiFive CIP-1200 on the FU740 (no ASIDs): each page of a local flush is a full sfence.vma
/// (ALT_FLUSH_TLB_PAGE); the TH1520's C910 flushes them by address. Above the threshold both
/// flush everything once; the FU740's firmware flushes whole address spaces (limit 0), the
/// TH1520's one page by address (limit 1 page).
#[test]
fn cip_1200_makes_each_local_page_flush_a_full_one() {
    assert_eq!(madvise_on(UNMATCHED, "64", "0"), (0, 1024, 1024));
    assert_eq!(madvise_on(TH1520, "64", "0"), (0, 1024, 0));
    assert_eq!(madvise_on(UNMATCHED, "1024", "0"), (0, 1, 1));
    assert_eq!(madvise_on(TH1520, "1024", "0"), (0, 1, 1));
    assert_eq!(madvise_on(UNMATCHED, "1", "1"), (1024, 2048, 2048));
    assert_eq!(madvise_on(TH1520, "1", "1"), (1024, 2048, 0));
}

/// The what-if that frees the batch's pages without arch_tlbbatch_flush(): the reader's hart
/// still caches translations to the freed frames: every page still in its TLB is caught at the
/// free (all 512 on TH1520's 1024-entry TLB; 496 on the Unmatched's 512 entries, where 16 were
/// evicted).
#[test]
fn skipping_the_batch_flush_is_caught() {
    for (machine, caught) in [(UNMATCHED, 496), (TH1520, 512)] {
        let j = reclaim_json(
            machine,
            NEW,
            "1",
            &[("kernel.riscv_tlbbatch_flush", "false")],
        );
        let c = &j["check"];
        assert_eq!(n(&c["by_site"]["free"]), caught, "{c}");
        assert_eq!(n(&c["by_kind"]["use-after-free"]), caught);
        assert_eq!(c["first"][0]["kind"], "use-after-free");
        assert_eq!(c["first"][0]["at"], "free");
        assert_eq!(sbi_counts(&j).0, 0);
    }
}

/// The checker stays clean over seeds that stretch busy steps and shuffle the threads, for both
/// eras on both machines.
#[test]
fn checker_clean_over_seeds() {
    let runs = common::reclaim_checker_clean_over_seeds(&[UNMATCHED, TH1520], &[OLD, NEW], &[]);
    assert_eq!(runs, 400);
}

/// Migration on riscv 6.8 batches too: fewer SBI calls than 6.7's one a page.
#[test]
fn migration_batches_its_fences() {
    let sets = [
        ("threads", "2"),
        ("memory", "2MiB"),
        ("passes", "1"),
        ("scale", "0.01"),
        ("machine.nodes", "2"),
        ("machine.cpus_per_node", "2"),
    ];
    let before = run_json("migrate", TH1520, OLD, &sets);
    let after = run_json("migrate", TH1520, NEW, &sets);
    for j in [&before, &after] {
        assert_eq!(n(&j["vmstat"]["pgmigrate_success"]), 512);
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
    assert!(
        sbi_counts(&after).0 < sbi_counts(&before).0,
        "{:?} {:?}",
        sbi_counts(&before),
        sbi_counts(&after)
    );
}

/// Same inputs and seed, same bytes.
#[test]
fn deterministic() {
    let sets = [
        ("processes", "3"),
        ("sched.jitter", "0.05"),
        ("sched.placement", "shuffled"),
    ];
    let a = run_json("reclaim", TH1520, NEW, &sets);
    let b = run_json("reclaim", TH1520, NEW, &sets);
    assert_eq!(a.to_string(), b.to_string());
}
