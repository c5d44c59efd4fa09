//! Exact IPI counts of reclaim's TLB flushing, from the rules of each policy. Readers on CPUs
//! 1..N read `pages` file pages each; a reclaimer on CPU 0 reclaims them all, SWAP_CLUSTER_MAX
//! (32) pages per batch. With pagevec_size 32 every batch holds one reader's pages.

use ipisim_core::{run, RunRequest};
use serde_json::Value;

struct Counts {
    tlb: u64,
    ipis: u64,
    remote_flush: u64,
    stale: u64,
    written: u64,
    stale_at_pageout: u64,
    scanned: u64,
    swapped: u64,
}

fn reclaim(kernel: &str, processes: usize, remote: &str, extra: &[(&str, &str)]) -> Counts {
    let mut sets = vec![
        ("processes".to_string(), processes.to_string()),
        ("pages".to_string(), "512".to_string()),
        ("remote".to_string(), remote.to_string()),
    ];
    if !extra.iter().any(|(k, _)| *k == "kernel.pagevec_size") {
        sets.push(("kernel.pagevec_size".into(), "32".into()));
    }
    sets.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let req = RunRequest {
        scenario: "reclaim".into(),
        machine: Some("xeon-4n-48c-64g".into()),
        kernel: Some(kernel.into()),
        sets,
        seed: 1,
    };
    let j = run(&req).unwrap().json;
    let n = |v: &Value| v.as_u64().unwrap();
    Counts {
        tlb: n(&j["ops"]["tlb_shootdowns"]),
        ipis: n(&j["ipis_sent"]),
        remote_flush: n(&j["vmstat"]["nr_tlb_remote_flush"]),
        stale: n(&j["check"]["by_site"]["free"]) + n(&j["check"]["by_site"]["access"]),
        written: n(&j["vmstat"]["nr_vmscan_write"]),
        stale_at_pageout: n(&j["check"]["by_site"]["pageout"]),
        scanned: n(&j["vmstat"]["pgscan_kswapd"]) + n(&j["vmstat"]["pgscan_direct"]),
        swapped: n(&j["vmstat"]["pswpout"]),
    }
}

const PROCESSES: [usize; 3] = [1, 3, 47];

/// linux-4.2 (immediate): flush_tlb_page() for every page, one IPI to its reader's CPU.
#[test]
fn immediate_sends_one_ipi_per_page() {
    for p in PROCESSES {
        let c = reclaim("linux-4.2", p, "busy", &[]);
        let pages = 512 * p as u64;
        assert_eq!(
            (c.tlb, c.ipis, c.remote_flush),
            (pages, pages, pages),
            "{p} processes"
        );
        assert_eq!(c.stale, 0);
    }
}

/// linux-4.3 (batch_full): one IPI per target CPU per batch of 32, and the flush comes before
/// the batch is freed (no stale translation at free).
#[test]
fn batch_full_sends_one_ipi_per_cpu_per_batch() {
    for p in PROCESSES {
        let c = reclaim("linux-4.3", p, "busy", &[]);
        let batches = 512 * p as u64 / 32;
        assert_eq!(
            (c.tlb, c.ipis, c.remote_flush),
            (batches, batches, batches),
            "{p} processes"
        );
        assert_eq!(c.stale, 0);
    }
}

/// batch_pfn and batch_addr: the page list is flushed whenever it reaches batch_pfn_size entries.
#[test]
fn a_page_list_is_flushed_at_its_limit() {
    for policy in ["batch_pfn", "batch_addr"] {
        for size in [8u64, 16, 32] {
            let s = size.to_string();
            let set = [
                ("kernel.reclaim_flush", policy),
                ("kernel.batch_pfn_size", s.as_str()),
            ];
            let c = reclaim("linux-4.3", 3, "busy", &set);
            let flushes = 3 * 512 / size;
            assert_eq!(
                (c.tlb, c.remote_flush),
                (flushes, flushes),
                "{policy} {size}"
            );
        }
    }
}

/// The PFN list as posted (v6 4/4) INVLPGs `pfn << PAGE_SHIFT`, a physical address: each reader
/// keeps its 512 translations (its TLB holds 1024), so every one of the 3 x 512 pages is freed
/// while cached. The same list of user addresses leaves none.
#[test]
fn the_posted_pfn_list_flushes_physical_addresses_and_is_caught() {
    for (policy, stale) in [("batch_pfn", 3 * 512), ("batch_addr", 0)] {
        let c = reclaim("linux-4.3", 3, "busy", &[("kernel.reclaim_flush", policy)]);
        assert_eq!((c.stale, c.tlb), (stale, 3 * 512 / 32), "{policy}");
    }
}

/// A sleeping reader's CPU is lazy. 4.2's flush_tlb_func makes it leave_mm() on the first IPI,
/// so it gets exactly one; 4.3's batch handler flushes without leaving, so it gets every one.
#[test]
fn lazy_cpus_leave_the_mm_on_the_first_immediate_flush() {
    for p in PROCESSES {
        let c = reclaim("linux-4.2", p, "sleeping", &[]);
        assert_eq!(c.tlb, p as u64, "{p} processes");
        let c = reclaim("linux-4.3", p, "sleeping", &[]);
        assert_eq!(c.tlb, 512 * p as u64 / 32, "{p} processes");
        assert_eq!(c.stale, 0);
    }
}

/// linux-6.1's arch_tlbbatch_flush() -> native_flush_tlb_multi(): no page tables are freed, so
/// on_each_cpu_cond_mask(tlb_is_not_lazy, ...) skips the sleeping readers' lazy CPUs: no IPI at
/// all. Busy readers get one per batch, as in 4.3. With lazy CPUs not skipped (4.6-4.19's
/// flush_tlb_others()), flush_tlb_func() makes a lazy CPU leave the mm on its first IPI.
#[test]
fn batch_flush_skips_lazy_cpus_from_4_20() {
    for p in PROCESSES {
        let batches = 512 * p as u64 / 32;
        let c = reclaim("linux-6.1", p, "busy", &[]);
        assert_eq!((c.tlb, c.remote_flush), (batches, batches), "{p} processes");
        let c = reclaim("linux-6.1", p, "sleeping", &[]);
        assert_eq!((c.tlb, c.ipis, c.stale), (0, 0, 0), "{p} processes");
        assert_eq!(c.remote_flush, batches, "{p} processes");
        let c = reclaim(
            "linux-6.1",
            p,
            "sleeping",
            &[("kernel.lazy_tlb", "leave_mm_on_ipi")],
        );
        assert_eq!(c.tlb, p as u64, "{p} processes");
        assert_eq!(c.stale, 0);
    }
}

/// Two readers per batch (readahead and pagevecs of 16 pages alternate on the LRU): one flush
/// call per batch, each reaching at most the two readers' CPUs, never more.
#[test]
fn a_batch_reaches_each_cpu_once() {
    let set = [
        ("kernel.pagevec_size", "16"),
        ("kernel.readahead_pages", "16"),
    ];
    let c = reclaim("linux-4.3", 2, "busy", &set);
    assert_eq!(c.remote_flush, 1024 / 32);
    assert!(
        c.tlb > c.remote_flush && c.tlb <= 2 * c.remote_flush,
        "{}",
        c.tlb
    );
}

/// The reclaim model is deterministic: the same inputs give byte-identical results.
#[test]
fn lru_file_mmap_read_is_deterministic() {
    let req = RunRequest {
        scenario: "vm-scalability/lru-file-mmap-read".into(),
        machine: Some("xeon-4n-48c-64g".into()),
        kernel: Some("linux-4.2".into()),
        sets: vec![("scale".into(), "0.004".into())],
        seed: 3,
    };
    let a = run(&req).unwrap().json.to_string();
    assert_eq!(a, run(&req).unwrap().json.to_string());
}

/// The safety check can fail: freeing pages before the batched flush leaves the readers' CPUs
/// with translations to freed pages.
#[test]
fn freeing_before_the_flush_is_caught() {
    let safe = reclaim("linux-4.3", 3, "busy", &[]);
    let unsafe_ = reclaim(
        "linux-4.3",
        3,
        "busy",
        &[("kernel.flush_before_free", "false")],
    );
    assert_eq!(safe.stale, 0);
    assert!(unsafe_.stale > 0, "{}", unsafe_.stale);
    assert_eq!(unsafe_.tlb, safe.tlb, "the same flushes, only later");
}

/// Written pages (MAP_SHARED, PROT_WRITE) are PG_dirty from their write fault. kswapd rotates
/// them (referenced), then unmaps them but keeps them (PAGEREF_RECLAIM_CLEAN: referenced pages
/// are not written from reclaim), then writes them out once ZONE_DIRTY is set. With
/// defer_writable the dirty PTEs join the batch: one IPI per CPU per 32 pages, as for clean
/// pages; without it (before seed 001's third patch) each dirty PTE is flushed at once.
#[test]
fn dirty_pages_are_flushed_before_pageout() {
    let write = [("access", "write"), ("reclaimer", "kswapd")];
    for p in [1, 3] {
        let pages = 512 * p as u64;
        let deferred = reclaim("linux-4.3", p, "busy", &write);
        assert_eq!(
            (deferred.tlb, deferred.remote_flush),
            (pages / 32, pages / 32)
        );
        let at_once = reclaim(
            "linux-4.3",
            p,
            "busy",
            &[write[0], write[1], ("kernel.defer_writable", "false")],
        );
        assert_eq!((at_once.tlb, at_once.remote_flush), (pages, pages));
        let immediate = reclaim("linux-4.2", p, "busy", &write);
        assert_eq!(immediate.tlb, pages);
        for c in [&deferred, &at_once, &immediate] {
            assert_eq!(c.scanned, 3 * pages, "rotated, kept, written");
            assert_eq!(c.written, pages, "every page is written out once");
            assert_eq!((c.stale, c.stale_at_pageout), (0, 0));
        }
    }
    // Read pages are never written.
    let read = reclaim("linux-4.3", 1, "busy", &[("reclaimer", "kswapd")]);
    assert_eq!((read.tlb, read.written, read.scanned), (16, 0, 2 * 512));
}

/// Anonymous pages start active; shrink_active_list clears their accessed bits and deactivates
/// them, so one inactive scan swaps each out. add_to_swap makes the page dirty and its PTE was
/// dirty, so the deferred batch is writable: try_to_unmap_flush_dirty() flushes it before every
/// pageout. That is one IPI per page whatever the policy (Mel Gorman's note that swap-heavy
/// reclaim gains little from batching).
#[test]
fn anonymous_pages_are_flushed_before_every_swap_write() {
    let anon = [("memory", "anon"), ("access", "write")];
    for p in [1, 3] {
        let pages = 512 * p as u64;
        for kernel in ["linux-4.2", "linux-4.3"] {
            let c = reclaim(kernel, p, "busy", &anon);
            assert_eq!(
                (c.tlb, c.remote_flush),
                (pages, pages),
                "{kernel}, {p} processes"
            );
            assert_eq!((c.swapped, c.written, c.scanned), (pages, pages, pages));
            assert_eq!((c.stale, c.stale_at_pageout), (0, 0));
        }
    }
}

/// The pageout check can fail: writing the page out before the writable batch is flushed leaves
/// the writer's CPU able to store to it after the I/O started.
#[test]
fn writing_out_before_the_dirty_flush_is_caught() {
    let unsafe_ = [
        ("memory", "anon"),
        ("access", "write"),
        ("kernel.flush_dirty_before_pageout", "false"),
    ];
    // batch_full: the first pass's 32 pages are written while cached; that pass's full flush
    // then empties the writer's TLB of the rest.
    let c = reclaim("linux-4.3", 1, "busy", &unsafe_);
    assert_eq!(c.stale_at_pageout, 32);
    // The batch is still flushed before the pages are freed: one IPI per 32.
    assert_eq!((c.stale, c.tlb), (0, 16));
    // batch_addr flushes only the listed pages, so every page is still cached when written but
    // the 32nd of each pass, whose unmap filled the list and flushed it at once.
    let list = [
        unsafe_[0],
        unsafe_[1],
        unsafe_[2],
        ("kernel.reclaim_flush", "batch_addr"),
    ];
    let c = reclaim("linux-4.3", 1, "busy", &list);
    assert_eq!((c.stale_at_pageout, c.stale, c.tlb), (512 - 16, 0, 16));
}

/// Before 3.15, clearing an accessed bit flushed the page (ptep_clear_flush_young): anonymous
/// pages, deactivated while young, cost one flush there and one at unmap, two IPIs per page.
#[test]
fn young_flush_adds_a_flush_per_deactivated_page() {
    let anon = [("memory", "anon"), ("access", "write")];
    for p in [1, 3] {
        let pages = 512 * p as u64;
        let c = reclaim("linux-3.9", p, "busy", &anon);
        assert_eq!((c.tlb, c.swapped), (2 * pages, pages), "{p} processes");
        assert_eq!((c.stale, c.stale_at_pageout), (0, 0));
    }
}

/// From 5.9 (b518154e59aa) new anonymous pages start on the inactive list: the first scan finds
/// the accessed bit and keeps the page, the second swaps it out, so every page is scanned twice
/// (as a clean file page is). Before, they started active and one inactive scan swapped them.
/// One flush a page either way: its PTE is dirty (try_to_unmap_flush_dirty() before pageout()).
#[test]
fn anonymous_pages_start_inactive_from_5_9() {
    let anon = [("memory", "anon"), ("access", "write")];
    for (kernel, scans) in [("linux-4.3", 1), ("linux-6.1", 2)] {
        let c = reclaim(kernel, 3, "busy", &anon);
        let pages = 3 * 512;
        assert_eq!((c.scanned, c.swapped), (scans * pages, pages), "{kernel}");
        assert_eq!(
            (c.tlb, c.stale, c.stale_at_pageout),
            (pages, 0, 0),
            "{kernel}"
        );
    }
}

/// `touch = in_turn`: each reader's pages lie together on the LRU, so with a 15-page pagevec
/// (the pages reach the LRU in other batches than reclaim's 32) every reclaim batch still holds
/// one reader's pages, but where one reader's pages end and the next one's begin.
#[test]
fn readers_in_turn_leave_one_reader_per_batch() {
    let in_turn = [("kernel.pagevec_size", "15"), ("touch", "in_turn")];
    let c = reclaim("linux-6.1", 3, "busy", &in_turn);
    // 1536 pages in 48 batches; the boundaries at 512 and 1024 fall on batch edges.
    assert_eq!(c.tlb, 48);
    let together = [("kernel.pagevec_size", "15")];
    assert!(reclaim("linux-6.1", 3, "busy", &together).tlb > 48);
}
