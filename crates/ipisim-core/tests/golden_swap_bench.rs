//! `swap-bench`, the microbenchmark of the arm64 (43b3dfdd0455, 6.5) and RISC-V (54d7431af73e,
//! 6.8) batched unmap flush changelogs: exact counts per pass of 256 pages (1 MiB), and the
//! checker on the unsafe what-ifs that skip the batch's completion.
//!
//! A pass reads every page (a swap-in fault from the second pass on) and MADV_PAGEOUTs the
//! region. In 6.5-6.8 madvise_cold_or_pageout_pte_range() first clears each young PTE's accessed
//! bit into the mmu_gather (flushed by tlb_finish_mmu(): one __flush_tlb_range of the 256 pages),
//! then reclaim_pages() unmaps the 256 pages with TTU_BATCH_FLUSH. The first pass's PTEs are the
//! memset's dirty ones, so try_to_unmap_flush_dirty() flushes before each page's pageout; later
//! passes' PTEs were mapped by a read, clean, so one try_to_unmap_flush() covers the call. From
//! the second pass on, the walk begins with flush_tlb_batched_pending() (3ea277194daa): the last
//! pass deferred flushes of this mm, so the whole mm is flushed first (arm64: only a dsb(ish)).

mod common;
use common::{n, run_json, sbi_counts, tlb, tlbi_dsb};
use serde_json::Value;

const KUNPENG: &str = "kunpeng920-96c";
const SD888: &str = "snapdragon888";
const UNMATCHED: &str = "hifive-unmatched";
const TH1520: &str = "th1520";
const PAGES: u64 = 256;
const LOOPS: u64 = 3;

fn bench(machine: &str, kernel: &str, extra: &[(&str, &str)]) -> Value {
    let mut sets = vec![("loops", "3")];
    sets.extend_from_slice(extra);
    let j = run_json("swap-bench", machine, kernel, &sets);
    assert_eq!(n(&j["ops"]["loops"]), LOOPS);
    // The memset's faults, then a swap-in a page on every pass after the first.
    assert_eq!(n(&j["vmstat"]["pgfault"]), PAGES * LOOPS);
    assert_eq!(n(&j["vmstat"]["pswpout"]), PAGES * LOOPS);
    assert_eq!(n(&j["vmstat"]["pgfree"]), PAGES * LOOPS);
    // reclaim_folio_list() counts into a dummy reclaim_stat: no pgsteal, no pgscan.
    assert_eq!(n(&j["vmstat"]["pgsteal_direct"]), 0);
    assert_eq!(n(&j["vmstat"]["pgscan_direct"]), 0);
    j
}

/// arm64: two TLBIs a page a pass (the unmap's, the accessed-bit gather's). 6.4 waits for each
/// unmap TLBI with its own DSB (ptep_clear_flush), plus one DSB for the gather: 257 a pass. 6.5:
/// the first pass's dirty PTEs still take a DSB a page (try_to_unmap_flush_dirty), later passes
/// one DSB for the batch (arch_tlbbatch_flush), one for the gather and one at the walk's start
/// (flush_tlb_batched_pending). No IPI, no TLB row.
#[test]
fn arm64_tlbis_per_page_dsbs_per_page_or_per_batch() {
    for machine in [KUNPENG, SD888] {
        let before = bench(machine, "linux-6.4-arm64", &[]);
        let after = bench(machine, "linux-6.5-arm64", &[]);
        for j in [&before, &after] {
            assert_eq!(n(&j["check"]["violations"]), 0);
            assert_eq!(tlb(j), 0);
            assert_eq!(n(&j["ipis_sent"]), 0);
        }
        assert_eq!(
            tlbi_dsb(&before),
            (2 * PAGES * LOOPS, (PAGES + 1) * LOOPS),
            "{machine}"
        );
        assert_eq!(
            tlbi_dsb(&after),
            (2 * PAGES * LOOPS, (PAGES + 1) + 3 * (LOOPS - 1)),
            "{machine}"
        );
    }
}

/// arm64 per pass, from the difference of two runs (3 and 5 passes): 512 TLBIs, and 257 DSBs in
/// 6.4 against 3 in 6.5; 6.4's ptep_clear_flush and 6.5's try_to_unmap_flush carry them.
#[test]
fn arm64_per_pass_counts_and_where_perf_shows_them() {
    for (kernel, dsbs) in [("linux-6.4-arm64", PAGES + 1), ("linux-6.5-arm64", 3)] {
        let three = tlbi_dsb(&bench(KUNPENG, kernel, &[]));
        let five = run_json("swap-bench", KUNPENG, kernel, &[("loops", "5")]);
        let five_c = tlbi_dsb(&five);
        assert_eq!(
            (five_c.0 - three.0, five_c.1 - three.1),
            (2 * 2 * PAGES, 2 * dsbs),
            "{kernel}"
        );
        let ptep = common::profile_percent(&five, "ptep_clear_flush");
        let batch = common::profile_percent(&five, "try_to_unmap_flush");
        match kernel {
            "linux-6.4-arm64" => assert!(ptep > 0.0 && batch == 0.0, "{ptep} {batch}"),
            _ => assert!(ptep == 0.0 && batch > 0.0, "{ptep} {batch}"),
        }
    }
}

/// The violations of a what-if that skips every batch completion: the first pass's dirty PTEs
/// are still cached writable at each pageout (try_to_unmap_flush_dirty() did nothing: a lost
/// write each), and every pass's pages are still cached when reclaim frees them.
fn assert_every_batch_caught(j: &Value) {
    let c = &j["check"];
    assert_eq!(n(&c["violations"]), PAGES * (LOOPS + 1), "{c}");
    assert_eq!(n(&c["by_site"]["pageout"]), PAGES);
    assert_eq!(n(&c["by_kind"]["lost-write"]), PAGES);
    assert_eq!(n(&c["by_site"]["free"]), PAGES * LOOPS);
    assert_eq!(n(&c["by_kind"]["use-after-free"]), PAGES * LOOPS);
}

/// The unsafe what-if that skips arch_tlbbatch_flush()'s dsb(ish) (kernel.arm64_tlbbatch_dsb =
/// false): the TLBIs are still outstanding at the pageouts and frees.
#[test]
fn arm64_skipping_the_batch_dsb_is_caught() {
    let j = bench(
        KUNPENG,
        "linux-6.5-arm64",
        &[("kernel.arm64_tlbbatch_dsb", "false")],
    );
    assert_every_batch_caught(&j);
}

/// RISC-V with the changelog's 4 sleeping threads on harts 0-3 (the main thread on hart 0): every
/// flush is remote. 6.7: an SBI call a page (flush_tlb_page) plus one for the gather's range, each
/// IPIing the 3 other harts and fencing all 4: 257 a pass. 6.8: the first pass's dirty pages still
/// one a page, then one call a batch (arch_tlbbatch_flush, everything on the batch's harts), one
/// for the gather and one at the walk's start (flush_tlb_batched_pending -> flush_tlb_mm): 3 a
/// pass. No kernel IPI, no TLB row.
#[test]
fn riscv_sbi_calls_and_firmware_ipis_per_batch() {
    for machine in [UNMATCHED, TH1520] {
        let before = bench(machine, "linux-6.7-riscv", &[("sleepers", "4")]);
        let after = bench(machine, "linux-6.8-riscv", &[("sleepers", "4")]);
        for j in [&before, &after] {
            assert_eq!(n(&j["check"]["violations"]), 0);
            assert_eq!(tlb(j), 0);
        }
        let calls = (PAGES + 1) * LOOPS;
        assert_eq!(
            sbi_counts(&before),
            (calls, 4 * calls, 3 * calls),
            "{machine}"
        );
        let calls = (PAGES + 1) + 3 * (LOOPS - 1);
        assert_eq!(
            sbi_counts(&after),
            (calls, 4 * calls, 3 * calls),
            "{machine}"
        );
    }
}

/// The real 6.12 riscv kernel under QEMU, 100 passes with 4 sleepers and the region in one PMD
/// (`python3 examples/riscv_guest.py`, ftrace). arch_tlbbatch_flush(): 1147 in each of five boots,
/// 256 on the first, dirty pass and 9 on each later one: from bc2ff4cbc329 shrink_folio_list()
/// frees in folio batches of 31, each after a try_to_unmap_flush(), 8 of 256 and the end.
/// __flush_tlb_range(): 1281-1283, those, flush_tlb_batched_pending() at each later pass's walk
/// (99) and at exit (1), and 35 of exec and exit (a run that exits at once). 6.12 no longer
/// clears accessed bits in the walk (2864f3d0f583): no gather flush. `linux-6.12-riscv` makes the
/// same 1246 in the loop.
#[test]
fn riscv_remote_fences_as_the_6_12_kernel_counts_them() {
    let j = bench(UNMATCHED, "linux-6.12-riscv", &[("sleepers", "4")]);
    assert_eq!(n(&j["check"]["violations"]), 0);
    let calls = PAGES + (9 + 1) * (LOOPS - 1);
    assert_eq!(sbi_counts(&j), (calls, 4 * calls, 3 * calls));
    let sets = [("loops", "100"), ("sleepers", "4")];
    let j = run_json("swap-bench", UNMATCHED, "linux-6.12-riscv", &sets);
    assert_eq!(n(&j["riscv"]["sbi_rfence"]), 1147 + 99);
    // 6.8 had neither free batches nor ignored references: the first pass's 256 dirty-page
    // fences and its gather's, then the pending flush, the gather's and one batch fence a pass.
    let j = run_json("swap-bench", UNMATCHED, "linux-6.8-riscv", &sets);
    assert_eq!(n(&j["riscv"]["sbi_rfence"]), 257 + 3 * 99);
}

/// x86 (6.1, 4 CPUs, a sleeper on each, the main thread on CPU 0): the sleepers' CPUs are idle and
/// lazy, skipped by the page and batch flushes. The second pass's walk begins with
/// flush_tlb_batched_pending() -> flush_tlb_mm(), page tables freed, which reaches lazy CPUs: one
/// IPI each, and each switches to init_mm and leaves the mm. From then on should_defer_flush()
/// finds no other CPU: no remote flush at all, however many passes.
#[test]
fn x86_the_pending_flush_sends_lazy_cpus_away_once() {
    let shape = [
        ("sleepers", "4"),
        ("machine.nodes", "1"),
        ("machine.cpus_per_node", "4"),
    ];
    let run = |loops: &str, pending: &str| {
        let mut sets = vec![
            ("loops", loops),
            ("kernel.flush_tlb_batched_pending", pending),
        ];
        sets.extend_from_slice(&shape);
        run_json("swap-bench", "xeon-4n-48c-64g", "linux-6.1", &sets)
    };
    let remote = |j: &Value| n(&j["vmstat"]["nr_tlb_remote_flush"]);
    let (three, five) = (run("3", "true"), run("5", "true"));
    for j in [&three, &five] {
        assert_eq!(j["interrupts"]["TLB"], serde_json::json!([0, 1, 1, 1]));
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
    assert_eq!(remote(&five), remote(&three));
    // Without it the lazy CPUs stay in the mask: two remote flushes a pass, none of them an IPI.
    let (three, five) = (run("3", "false"), run("5", "false"));
    assert_eq!(tlb(&five), 0);
    assert_eq!(remote(&five) - remote(&three), 2 * 2);
}

/// Without the sleepers the mm runs on hart 0 alone: every flush is a local sfence.vma, no SBI
/// call, no firmware IPI, in both kernels (what the RISC-V changelog's threads are there to avoid).
#[test]
fn riscv_without_sleepers_flushes_locally() {
    for kernel in ["linux-6.7-riscv", "linux-6.8-riscv"] {
        let j = bench(UNMATCHED, kernel, &[]);
        assert_eq!(n(&j["riscv"]["sbi_rfence"]), 0, "{kernel}");
        assert_eq!(n(&j["ipis_sent"]), 0, "{kernel}");
        assert!(n(&j["riscv"]["sfence_vma"]) > 0, "{kernel}");
        assert_eq!(n(&j["check"]["violations"]), 0);
    }
}

/// The unsafe what-if whose batch flush fences nothing (kernel.riscv_tlbbatch_flush = false): the
/// first pass's pages are caught at their pageout and free. From the second pass on the walk
/// starts with flush_tlb_batched_pending()'s flush_tlb_mm(), which empties the TLBs of the pages
/// the pass then unmaps (read before the madvise call): nothing stale is left to catch.
#[test]
fn riscv_skipping_the_batch_fence_is_caught() {
    let sets = [("sleepers", "4"), ("kernel.riscv_tlbbatch_flush", "false")];
    let c = &bench(UNMATCHED, "linux-6.8-riscv", &sets)["check"];
    assert_eq!(n(&c["violations"]), 2 * PAGES, "{c}");
    assert_eq!(n(&c["by_kind"]["lost-write"]), PAGES);
    assert_eq!(n(&c["by_kind"]["use-after-free"]), PAGES);
}

/// The same inputs give the same bytes.
#[test]
fn deterministic() {
    let a = bench(SD888, "linux-6.5-arm64", &[]);
    let b = bench(SD888, "linux-6.5-arm64", &[]);
    assert_eq!(a.to_string(), b.to_string());
}

/// The same guest, counted by OpenSBI's own PMU firmware events over the 100 passes
/// (`python3 examples/riscv_guest.py --counts`: SFENCE_VMA and SFENCE_VMA_ASID requests sent,
/// and received summed over the harts; two boots). QEMU's harts have ASIDs, so set_mm() never
/// clears a hart's bit (82dd33fde026): a program that exec ran on hart 3 and that then pinned
/// itself to hart 0 fences hart 3 too on every flush though it runs alone, even while another
/// process runs there; one that stays where exec ran it fences nobody. Real (calls, harts
/// fenced): 4 sleepers 1246, 4984; exec on 3 1247, 2494; with the neighbour 1250-1251,
/// 2500-2502 (its fork's copy-on-write faults flush the program's mm); alone 0, 0. The model
/// differs in those few single-page flushes only, and where set_mm() cleared the bit (without
/// ASIDs, as before this rule) it would fence nobody once the neighbour runs.
#[test]
fn riscv_a_hart_exec_left_keeps_getting_fences() {
    type Sets = &'static [(&'static str, &'static str)];
    // (the placement, SBI calls, harts they fenced, the caller included: OpenSBI's sent and
    // received).
    let placements: [(Sets, u64, u64); 4] = [
        (&[("sleepers", "4")], 1246, 4 * 1246),
        (&[("exec_cpu", "3")], 1246, 2 * 1246),
        (&[("exec_cpu", "3"), ("neighbour", "3")], 1246, 2 * 1246),
        (&[], 0, 0),
    ];
    for (placement, calls, fenced) in placements {
        let mut sets = vec![("loops", "100")];
        sets.extend_from_slice(placement);
        let j = run_json("swap-bench", "qemu-virt-riscv", "linux-6.12-riscv", &sets);
        assert_eq!(n(&j["check"]["violations"]), 0, "{placement:?}");
        let riscv = (n(&j["riscv"]["sbi_rfence"]), n(&j["riscv"]["sbi_fenced"]));
        assert_eq!(riscv, (calls, fenced), "{placement:?}");
    }
}

/// 72 harts (`examples/riscv_guest.py`'s boot with `-smp 72`, 72 sleepers, 100 passes): an SBI
/// call names at most 64 hart ids (__sbi_rfence_v02()), so each fence is two calls, and reaches all
/// 72 harts. OpenSBI counted flush_tlb_batched_pending()'s 99 fences as 198 SFENCE_VMA_ASID calls
/// sent and 7128 received. The batch's SFENCE_VMA counters also hold fences of every hart that
/// the kernel makes on its own at 72 harts (500-3,350 calls a run; none at 4 harts), so they are
/// not read here. A pass took 456 ms there, 30 ms at 4 harts.
#[test]
fn riscv_each_fence_is_one_sbi_call_per_64_harts() {
    let sets = [
        ("loops", "100"),
        ("sleepers", "72"),
        ("machine.cpus_per_node", "72"),
    ];
    let j = run_json("swap-bench", "qemu-virt-riscv", "linux-6.12-riscv", &sets);
    assert_eq!(n(&j["check"]["violations"]), 0);
    let (calls, fences, ipis) = sbi_counts(&j);
    assert_eq!((calls, fences, ipis), (2 * 1246, 72 * 1246, 71 * 1246));
    assert_eq!(n(&j["riscv"]["sbi_fenced"]), 72 * 1246);
}
