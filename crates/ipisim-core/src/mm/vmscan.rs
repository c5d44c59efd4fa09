//! Page reclaim (mm/vmscan.c, 4.x): kswapd per node and direct reclaim, both shrinking a node's
//! lists of one type in rounds of SWAP_CLUSTER_MAX pages from each (shrink_lruvec()): the
//! inactive list's through shrink_page_list(), the active list's deactivated.

use super::filemap::{
    PG_ACTIVE, PG_DIRTY, PG_LRU, PG_REFERENCED, PG_SWAPBACKED, PG_SWAPCACHE, PTE_DIRTY, PTE_MAPPED,
    PTE_YOUNG,
};
use super::lru::lock_lru;
use super::page_alloc::{free_page, zonelist, WMARK_HIGH};
use super::rmap::{self, TlbUbc};
use super::{ptl, thp, Backing, Host, Memory, Parts, NONE, SWAPPED};
use crate::config::named_enum;
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::Cost;
use crate::observe::check::{PageEvent, Site};
use crate::observe::{Func, Trace, Vm};
use crate::step::{Outcome, Step};

/// Pages isolated per shrink pass.
pub const SWAP_CLUSTER_MAX: usize = 32;

named_enum! {
    /// What a direct reclaimer does when too many pages are isolated (shrink_inactive_list).
    IsolatedThrottle {
        /// 2.6.32-5.15: `congestion_wait(BLK_RW_ASYNC, HZ/10)` and check again, for as long as it
        /// takes; nobody wakes it early without a congested device.
        CongestionWait = "congestion_wait",
        /// 5.16: `reclaim_throttle(pgdat, VMSCAN_THROTTLE_ISOLATED)` once, up to HZ/50, woken when a
        /// reclaimer finds the node below the limit; still too many then: scan nothing.
        ReclaimThrottle = "reclaim_throttle",
    }
}

named_enum! {
    /// When shrink_list() finds an inactive list low, so that its active list is deactivated.
    InactiveRatio {
        /// 2.6.28-4.9: anonymous `inactive * zone->inactive_ratio < active`, the ratio
        /// `int_sqrt(10 * zone GiB)` (calculate_zone_inactive_ratio(); the node's from 4.8);
        /// file `active > inactive` (inactive_file_is_low()).
        ZoneAnon = "zone_anon",
        /// 4.10: both types `inactive * int_sqrt(10 * (inactive + active) GiB) < active`
        /// (inactive_list_is_low(): 59dc76b0d4df "mm: vmscan: reduce size of inactive file list").
        LruSize = "lru_size",
    }
}

impl InactiveRatio {
    /// inactive_list_is_low() for `lists` of a zone of `zone_pages` pages.
    pub fn is_low(self, lists: &super::lru::LruLists, anon: bool, zone_pages: u64) -> bool {
        let (inactive, active) = (lists.inactive_pages() as u64, lists.active_pages() as u64);
        let gib = match (self, anon) {
            (InactiveRatio::ZoneAnon, true) => zone_pages,
            (InactiveRatio::ZoneAnon, false) => 0,
            (InactiveRatio::LruSize, _) => inactive + active,
        } >> (30 - super::PAGE_SHIFT);
        let ratio = (10 * gib).isqrt().max(1);
        inactive * ratio < active
    }
}

/// The reclaim state a task carries (the kernel keeps it in scan_control on the stack and in
/// current->tlb_ubc).
#[derive(Debug, Default)]
pub struct Reclaim {
    /// The pass's isolated pages, the LRU pages they stand for (nr_taken: a huge page's 512),
    /// and how far shrink_page_list got.
    isolated: Vec<u32>,
    nr_taken: usize,
    pub(super) pos: usize,
    node: usize,
    keep: Vec<u32>,
    pub(super) activate: Vec<u32>,
    /// The pass's reclaimed pages, and how many of them a folio batch already freed.
    free: Vec<u32>,
    freed: usize,
    /// The pass scans the anonymous lists.
    anon: bool,
    /// The pass is reclaim_pages() for MADV_PAGEOUT: reclaim_folio_list() keeps its counts in a
    /// dummy reclaim_stat, so no pgsteal and no reclaim progress (shrink_inactive_list() counts).
    madvise: bool,
    /// Isolated pages that were dirty and not under writeback (nr_unqueued_dirty).
    unqueued_dirty: usize,
    /// The page at `pos - 1` passed page_check_references() (its PTE lock released) and waits
    /// to take the lock again for try_to_unmap(): PAGEREF_RECLAIM_CLEAN if true.
    checked: Option<(u32, bool)>,
    /// The last shrink_inactive_list() slept in too_many_isolated().
    stalled: bool,
    /// Pages freed since this reclaim started, and since it began on the current zone.
    reclaimed: u32,
    zone_reclaimed: u32,
    /// Direct reclaim's place: its priority, the zonelist position, pages left to scan there.
    direct: Option<DirectScan>,
    /// kswapd's place in balance_pgdat(): the current pass.
    kswapd_pass: Option<KswapdPass>,
    /// The current allocation already went through direct reclaim, and through a drain.
    pub after_reclaim: bool,
    pub drained: bool,
    /// When this task entered __alloc_pages_direct_reclaim (for its latency).
    pub direct_since: Option<Time>,
    pub ubc: TlbUbc,
}

#[derive(Debug, Clone, Copy)]
struct DirectScan {
    priority: u32,
    zone: usize,
    to_scan: Option<ScanTargets>,
}

/// One pass of balance_pgdat()'s loop: its priority, the pages it has left to scan and the
/// inactive pages it has scanned (sc->nr_scanned).
#[derive(Debug, Clone, Copy)]
struct KswapdPass {
    priority: u32,
    left: ScanTargets,
    scanned: u64,
}

/// get_scan_count()'s nr[]: the pages shrink_lruvec() has left to scan on the inactive and the
/// active list of one type, each its list's size >> priority; and for the anonymous lists, the
/// round after the loop that keeps them in ratio (the kernel's runs after every loop while swap
/// exists; the model's only after one that scanned anonymous pages).
#[derive(Debug, Clone, Copy)]
struct ScanTargets {
    inactive: u64,
    active: u64,
    anon: bool,
    age_anon: bool,
}

impl ScanTargets {
    /// get_scan_count() on `node` at `priority`, for the type shrink_node() will scan.
    fn of(mem: &Memory, node: usize, priority: u32) -> ScanTargets {
        let lru = &mem.lru[node];
        let anon = lru.scan_anon();
        let lists = if anon { &lru.anon } else { &lru.file };
        ScanTargets {
            inactive: lists.inactive_pages() as u64 >> priority,
            active: lists.active_pages() as u64 >> priority,
            anon,
            age_anon: anon,
        }
    }

    /// shrink_lruvec()'s `while (nr[LRU_INACTIVE_ANON] || nr[LRU_ACTIVE_FILE] ||
    /// nr[LRU_INACTIVE_FILE])`: the active anonymous list's target alone does not keep it going.
    fn looping(&self) -> bool {
        self.inactive > 0 || (!self.anon && self.active > 0)
    }

    /// A round is left: of the loop, or the anonymous aging after it.
    fn left(&self) -> bool {
        self.looping() || self.age_anon
    }

    /// One round of the loop on `node`: SWAP_CLUSTER_MAX or what is left of each target. After
    /// the loop, "even if we did not try to evict anon pages at all, we want to rebalance the
    /// anon lru active/inactive ratio": shrink_active_list(SWAP_CLUSTER_MAX) if it is low.
    fn take_round(&mut self, node: usize) -> Step {
        let (nr, nr_active) = match self.looping() {
            true => {
                let nr = self.inactive.min(SWAP_CLUSTER_MAX as u64);
                let nr_active = self.active.min(SWAP_CLUSTER_MAX as u64);
                (self.inactive, self.active) = (self.inactive - nr, self.active - nr_active);
                (nr, nr_active)
            }
            false => {
                self.age_anon = false;
                (0, SWAP_CLUSTER_MAX as u64)
            }
        };
        Step::ShrinkNode {
            node: node as u32,
            nr: nr as u32,
            nr_active: nr_active as u32,
        }
    }
}

/// DEF_PRIORITY: the first pass scans lru_size >> 12 pages of each list.
const DEF_PRIORITY: u32 = 12;

fn is_kswapd(mem: &Memory, t: TaskId) -> bool {
    mem.kswapd.contains(&Some(t))
}

/// wakeup_kswapd(): wake the node's kswapd unless the zone is already balanced.
pub fn wakeup_kswapd(s: &mut impl Host, node: usize) {
    let now = s.now();
    let mem = s.mm_parts().mem;
    let Some(t) = mem.kswapd[node] else { return };
    if mem.frames.zones[node].watermark_ok_safe(WMARK_HIGH) {
        return;
    }
    mem.reclaim_started.get_or_insert(now);
    s.wake(t);
}

/// A kernel thread with nothing queued: kswapd's loop, or a kworker going back to sleep.
pub fn kthread(s: &mut impl Host, t: TaskId) -> Outcome {
    match s.mem().kswapd.iter().position(|&k| k == Some(t)) {
        Some(node) => kswapd(s, t, node),
        None => Outcome::Sleep(crate::engine::NEVER),
    }
}

/// kswapd's main loop (balance_pgdat): passes of lru_size >> priority pages with the balance
/// checked between them, until the zone is above its high watermark; then sleep until woken.
/// Since 3.11 a pass ends once it freed the high watermark's worth (kswapd_shrink_zone()'s
/// nr_to_reclaim), and the priority rises only after a pass that scanned less than that.
fn kswapd(s: &mut impl Host, t: TaskId, node: usize) -> Outcome {
    let target = match s.mem().cfg.kswapd_reclaim_limit {
        true => s.mem().frames.zones[node].wmark[WMARK_HIGH].max(SWAP_CLUSTER_MAX as u64),
        false => u64::MAX,
    };
    let r = &s.mem().tasks[t].reclaim;
    if let Some(mut pass) = r.kswapd_pass {
        if pass.left.left() && (r.reclaimed as u64) < target && reclaimable(s.mem(), node) {
            let inactive = pass.left.inactive;
            let round = pass.left.take_round(node);
            pass.scanned += inactive - pass.left.inactive;
            s.mem().tasks[t].reclaim.kswapd_pass = Some(pass);
            s.push_step(t, round);
            return Outcome::Next;
        }
    }
    // Before 4.7 balance_pgdat() set zone->all_unreclaimable and slept once the zone stopped
    // being zone_reclaimable().
    let given_up = s.mem().cfg.zone_reclaimable_progress && !zone_reclaimable(s.mem(), node);
    if s.mem().frames.zones[node].watermark_ok_safe(WMARK_HIGH)
        || !reclaimable(s.mem(), node)
        || given_up
    {
        // balance_pgdat(): a balanced zone stops kswapd writing pages itself.
        s.mem().lru[node].zone_dirty = false;
        s.mem().tasks[t].reclaim.kswapd_pass = None;
        // kswapd_try_to_sleep(): the normal vmstat threshold while it sleeps.
        s.mem().frames.zones[node].kswapd_awake = false;
        return Outcome::Sleep(crate::engine::NEVER);
    }
    // Awake: the pressure threshold, so that drift cannot hide a breach of min.
    s.mem().frames.zones[node].kswapd_awake = true;
    let r = &s.mem().tasks[t].reclaim;
    // "Raise priority if scanning rate is too low or there was no progress"; below 1 the loop
    // ends and kswapd, still unbalanced, calls balance_pgdat() again (one pageoutrun a call).
    let (priority, new_call) = match r.kswapd_pass {
        Some(p) if p.scanned >= target && r.reclaimed > 0 => (p.priority, false),
        Some(p) if p.priority > 1 => (p.priority - 1, false),
        _ => (DEF_PRIORITY, true),
    };
    if new_call {
        s.obs().stats.vm(Vm::PageOutRun, 1);
    }
    // Lists too short to scan at the last priority are scanned whole, as at priority 0 (where
    // 3.x's balance_pgdat() loop ended), so that a call always scans something.
    let last = if priority == 1 { 0 } else { priority };
    let left = match ScanTargets::of(s.mem(), node, priority) {
        l if !l.looping() => ScanTargets::of(s.mem(), node, last),
        l => l,
    };
    s.mem().tasks[t].reclaim.reclaimed = 0;
    s.mem().tasks[t].reclaim.kswapd_pass = Some(KswapdPass {
        priority,
        left,
        scanned: 0,
    });
    kswapd(s, t, node)
}

fn reclaimable(mem: &Memory, node: usize) -> bool {
    !mem.lru[node].is_empty()
}

/// zone_reclaimable(): reclaim has not yet scanned six times the zone's LRU pages since a page
/// last went back to the buddy lists.
pub fn zone_reclaimable(mem: &Memory, node: usize) -> bool {
    let lru = &mem.lru[node];
    let pages = [&lru.file, &lru.anon]
        .iter()
        .map(|l| l.inactive_pages() + l.active_pages())
        .sum::<usize>();
    mem.frames.zones[node].pages_scanned < 6 * pages as u64
}

/// do_try_to_free_pages(): for each priority from DEF_PRIORITY down, shrink every node of the
/// zonelist by each list's size >> priority pages, SWAP_CLUSTER_MAX at a time, until `want`
/// pages were freed. At DEF_PRIORITY a node is scanned to the end (shrink_lruvec's scan_adjusted);
/// below it, a node stops once it has given `want` pages.
pub fn direct_reclaim(s: &mut impl Host, cpu: CpuId, t: TaskId, want: u32) -> Outcome {
    let home = s.machine().node_of(cpu);
    let nodes = s.machine().nodes;
    let mut d = s.mem().tasks[t].reclaim.direct.unwrap_or(DirectScan {
        priority: DEF_PRIORITY,
        zone: 0,
        to_scan: None,
    });
    loop {
        let mem = s.mm_view().0;
        let r = &mem.tasks[t].reclaim;
        if d.zone < nodes {
            let node = zonelist(nodes, home).nth(d.zone).expect("in range");
            let mut left = d
                .to_scan
                .unwrap_or_else(|| ScanTargets::of(mem, node, d.priority));
            let satisfied = d.priority < DEF_PRIORITY && r.zone_reclaimed >= want;
            // shrink_zones(): below DEF_PRIORITY an unreclaimable zone is left to kswapd.
            let skip = mem.cfg.zone_reclaimable_progress
                && d.priority < DEF_PRIORITY
                && !zone_reclaimable(mem, node);
            if left.left() && reclaimable(mem, node) && !satisfied && !skip {
                let round = left.take_round(node);
                d.to_scan = Some(left);
                s.mem().tasks[t].reclaim.direct = Some(d);
                s.push_step(t, Step::DirectReclaim { want });
                s.push_step(t, round);
                return Outcome::Next;
            }
            d.zone += 1;
            d.to_scan = None;
            s.mem().tasks[t].reclaim.zone_reclaimed = 0;
            continue;
        }
        if r.reclaimed >= want || d.priority == 0 {
            break;
        }
        d.priority -= 1;
        d.zone = 0;
    }
    let r = &mut s.mem().tasks[t].reclaim;
    let progress = r.reclaimed;
    (r.direct, r.reclaimed, r.zone_reclaimed) = (None, 0, 0);
    if progress > 0 {
        return Outcome::Next;
    }
    // do_try_to_free_pages(): "top priority shrink_zones still had more to do? don't OOM, then".
    let still_reclaimable = s.mem().cfg.zone_reclaimable_progress
        && zonelist(nodes, home).any(|node| zone_reclaimable(s.mem(), node));
    if !still_reclaimable {
        // __alloc_pages_direct_reclaim(): "if (unlikely(!(*did_some_progress))) return NULL"
        // (no retry, no drain); the slowpath then calls __alloc_pages_may_oom().
        s.mem().tasks[t].reclaim.after_reclaim = false;
        s.push_step(t, Step::OutOfMemory);
    }
    // A call that frees nothing still made every priority's pass over the zones and the
    // shrinkers (shrink_zones(), shrink_slab()): their time, measured whole.
    let ps = s.machine().cost[Cost::ReclaimEmpty];
    s.obs().stats.charge(Some(t), Func::DoTryToFreePages, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// touch_page() for the reclaimer on `cpu`.
fn touch_page(s: &mut impl Host, cpu: CpuId, pfn: u32) -> Time {
    let Parts { m, mem, .. } = s.mm_parts();
    super::filemap::touch_page(m, mem, cpu, pfn)
}

/// One round of shrink_lruvec()'s loop: shrink_list() on the active list deactivates up to
/// `nr_active` pages while the inactive list is low by `kernel.inactive_ratio`
/// (shrink_active_list; the kernel runs it after the inactive list's turn), and
/// shrink_inactive_list() isolates up to `nr` pages from the inactive list's tail.
pub fn shrink_node(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    node: usize,
    nr: usize,
    nr_active: usize,
) -> Outcome {
    let now = s.now();
    super::page_io::complete(s, now);
    let anon = s.mem().lru[node].scan_anon();
    if nr > 0 {
        if let Some(out) = too_many_isolated_wait(s, t, node, anon, nr, nr_active) {
            return out;
        }
    }
    let mem = s.mem();
    let (ratio, zone_pages) = (mem.cfg.inactive_ratio, mem.frames.zone_pages());
    let deactivate = nr_active > 0 && ratio.is_low(mem.lru[node].lists(anon), anon, zone_pages);
    if nr == 0 && !deactivate {
        // shrink_list() of an active list that is not too long does nothing.
        return Outcome::Next;
    }
    // shrink_inactive_list() and shrink_active_list() begin with lru_add_drain(): this CPU's
    // pagevec goes onto the LRU before anything is isolated (charged there, as __pagevec_lru_add).
    let drain = super::lru::lru_add_drain(s, cpu, t);
    let (mut ps, walk, young, nr_young) = match deactivate {
        true => shrink_active_list(s, cpu, node, anon, nr_active),
        false => (0, 0, [0; SWAP_CLUSTER_MAX], 0),
    };
    if nr > 0 {
        ps += shrink_inactive_list(s, cpu, t, node, anon, nr);
    }
    if s.mem().cfg.young_flush {
        // Before 3.15, shrink_active_list's ptep_clear_flush_young() flushed each page whose
        // accessed bit it cleared, under its PTE lock; those flushes come before shrink_page_list.
        for &p in young[..nr_young].iter().rev() {
            if s.mem().page[p as usize].flags & thp::PG_HEAD != 0 {
                // A huge page's: pmdp_clear_flush_young(), its 2 MiB under page_table_lock.
                for step in thp::young_flush_steps(s.mem(), p) {
                    s.push_step(t, step);
                }
                continue;
            }
            let (mm, vpn) = rmap::mapping_of(s.mem(), p);
            let id = ptl::ptl_of_page(s.mem(), p);
            // page_referenced_one(): the flush runs with the page's PTE lock held.
            s.push_step(t, Step::PtlUnlock { id });
            s.push_step(t, rmap::flush_tlb_page(mm, vpn));
            s.push_step(t, Step::PtlLock { id });
        }
    }
    s.obs().stats.charge(Some(t), Func::IsolateLruPages, ps);
    s.obs().stats.charge(Some(t), Func::PageReferenced, walk);
    // spin_lock_irq(&zone->lru_lock): interrupts wait while we spin for it and hold it; the
    // active list's page_referenced() walks run after, between its two lock rounds, with them on.
    super::lru::lock_first(s, t, Func::PageReferenced, drain + ps + walk, drain + ps)
}

/// shrink_inactive_list()'s isolation: up to `nr` pages from the inactive list's tail under the
/// lru_lock, then shrink_page_list() on them. Its lock time.
fn shrink_inactive_list(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    node: usize,
    anon: bool,
    nr: usize,
) -> Time {
    let mut isolated = std::mem::take(&mut s.mem().tasks[t].reclaim.isolated);
    isolated.clear();
    let take = nr.min(SWAP_CLUSTER_MAX);
    let mem = s.mem();
    // The tail's pages were last touched long ago: ask for all their lines before the first.
    for &p in mem.lru[node].lists(anon).inactive.iter().rev().take(take) {
        crate::engine::prefetch(&mem.page[p as usize]);
    }
    // isolate_lru_pages() scans entries and takes pages: a huge page is one entry of 512.
    let mut nr_taken = 0;
    let (lists, pages) = (mem.lru[node].lists(anon), &mut mem.page);
    for _ in 0..take {
        let Some(p) = lists.pop_inactive(pages) else {
            break;
        };
        let page = &mut pages[p as usize];
        nr_taken += thp::nr_pages(page.flags);
        page.flags &= !PG_LRU;
        isolated.push(p);
    }
    let n = isolated.len();
    s.mem().lru[node].isolated[anon as usize] += nr_taken;
    let ps = lock_lru(s, cpu, node, &isolated);
    s.mem().frames.zones[node].pages_scanned += n as u64;
    let scan = if is_kswapd(s.mem(), t) {
        Vm::PgScanKswapd
    } else {
        Vm::PgScanDirect
    };
    s.obs().stats.vm(scan, n as u64);
    begin_shrink_page_list(s, t, isolated, nr_taken, node, anon, false);
    ps
}

/// shrink_active_list(): page_referenced() clears the accessed bits (no flush on x86 since 3.15),
/// then every page but executable file pages is deactivated; the pages scanned count towards
/// zone_reclaimable(). Its lru_lock time, its rmap walks' time (between the two lock rounds,
/// interrupts on), and the pages whose accessed bit was set (the first `n` of the array).
fn shrink_active_list(
    s: &mut impl Host,
    cpu: CpuId,
    node: usize,
    anon: bool,
    nr: usize,
) -> (Time, Time, [u32; SWAP_CLUSTER_MAX], usize) {
    let mut walk: Time = 0;
    let mut young = [0u32; SWAP_CLUSTER_MAX];
    let mut nr_young = 0;
    let Parts { m, mem, .. } = s.mm_parts();
    let n = nr
        .min(SWAP_CLUSTER_MAX)
        .min(mem.lru[node].lists(anon).active.len());
    let mut moved = [0u32; SWAP_CLUSTER_MAX];
    let mut rotated = 0;
    for slot in moved.iter_mut().take(n) {
        let lists = mem.lru[node].lists(anon);
        let p = lists.pop_active(&mem.page).expect("counted");
        *slot = p;
        let page = &mut mem.page[p as usize];
        if super::filemap::exec_referenced(page.flags) {
            // "give them one more trip around the active list" (VM_EXEC, 2.6.31).
            page.flags &= !PG_REFERENCED;
            lists.push_active(p, page.flags);
            walk += m.cost[Cost::RmapWalk];
            rotated += 1;
            continue;
        }
        page.flags &= !PG_ACTIVE;
        lists.push_inactive(p, page.flags);
        if page.flags & thp::PG_HEAD != 0 {
            // page_referenced() of a huge page reads and clears its PMD's accessed bit.
            if thp::pmd_test_and_clear_young(mem, p) {
                young[nr_young] = p;
                nr_young += 1;
            }
            walk += m.cost[Cost::RmapWalk];
        } else if page.flags & PTE_MAPPED != 0 {
            if page.flags & PTE_YOUNG != 0 {
                young[nr_young] = p;
                nr_young += 1;
            }
            page.flags &= !PTE_YOUNG;
            walk += m.cost[Cost::RmapWalk];
        }
    }
    let ps = lock_lru(s, cpu, node, &moved[..n]);
    s.mem().frames.zones[node].pages_scanned += n as u64;
    s.obs().stats.vm(Vm::PgRefill, n as u64);
    s.obs().stats.vm(Vm::PgDeactivate, (n - rotated) as u64);
    (ps, walk, young, nr_young)
}

/// too_many_isolated(): a direct reclaimer (never kswapd) finds more of this type isolated than
/// left on the node's inactive list (from 3.8 an eighth of it: its allocation may do I/O and
/// enter the filesystem). The kernel asks only in shrink_inactive_list(), which shrink_lruvec()
/// calls only when get_scan_count() gave the list inactive >> priority pages.
fn too_many_isolated(mem: &Memory, t: TaskId, node: usize, anon: bool) -> bool {
    if is_kswapd(mem, t) {
        return false;
    }
    let lru = &mem.lru[node];
    let listed = if anon { &lru.anon } else { &lru.file }.inactive_pages();
    let shift = if mem.cfg.isolated_iofs_eighth { 3 } else { 0 };
    if lru.isolated[anon as usize] <= listed >> shift {
        // Not too many even before counting pages under writeback: skip walking the bios.
        return false;
    }
    let inactive = match anon {
        true => listed + super::page_io::under_writeback(mem, node),
        false => listed,
    };
    let priority = mem.tasks[t].reclaim.direct.map_or(0, |d| d.priority);
    // "GFP_NOIO/GFP_NOFS callers are allowed to isolate more pages" (3cf23841b4b7).
    inactive >> priority > 0 && lru.isolated[anon as usize] > inactive >> shift
}

/// The loop at the top of shrink_inactive_list(): sleep while too many pages are isolated, or
/// give up. Returns the outcome when this call does not go on to isolate.
fn too_many_isolated_wait(
    s: &mut impl Host,
    t: TaskId,
    node: usize,
    anon: bool,
    nr: usize,
    nr_active: usize,
) -> Option<Outcome> {
    let stalled = std::mem::take(&mut s.mem().tasks[t].reclaim.stalled);
    if stalled {
        // Off the wait queue, whether woken or timed out.
        s.mem().lru[node].throttled.retain(|&w| w != t as u32);
    }
    if stalled && s.mem().oom_killed[t] {
        // "We are about to die and free our memory. Return now.": SWAP_CLUSTER_MAX reclaimed.
        let r = &mut s.mem().tasks[t].reclaim;
        r.reclaimed += SWAP_CLUSTER_MAX as u32;
        r.zone_reclaimed += SWAP_CLUSTER_MAX as u32;
        return Some(Outcome::Next);
    }
    if !too_many_isolated(s.mem(), t, node, anon) {
        if s.mem().cfg.isolated_throttle == IsolatedThrottle::ReclaimThrottle {
            // wake_throttle_isolated(): whoever sees the node below the limit wakes the sleepers.
            for i in 0..s.mem().lru[node].throttled.len() {
                let w = s.mem().lru[node].throttled[i];
                s.wake(w as usize);
            }
            s.mem().lru[node].throttled.clear();
        }
        return None;
    }
    let jiffy = crate::engine::PS_PER_S / s.arch_view().0.cfg.hz;
    let until = match s.mem().cfg.isolated_throttle {
        IsolatedThrottle::CongestionWait => {
            s.obs().stats.trace(Trace::WritebackCongestionWait);
            s.now() + s.arch_view().0.cfg.hz / 10 * jiffy
        }
        IsolatedThrottle::ReclaimThrottle if stalled => return Some(Outcome::Next),
        IsolatedThrottle::ReclaimThrottle => {
            s.obs().stats.trace(Trace::VmscanThrottled);
            s.mem().lru[node].throttled.push(t as u32);
            s.now() + s.arch_view().0.cfg.hz / 50 * jiffy
        }
    };
    s.mem().tasks[t].reclaim.stalled = true;
    s.set_uninterruptible(t);
    s.push_step(
        t,
        Step::ShrinkNode {
            node: node as u32,
            nr: nr as u32,
            nr_active: nr_active as u32,
        },
    );
    Some(Outcome::Sleep(until))
}

/// madvise_pageout() -> madvise_cold_or_pageout_pte_range() over [vpn, vpn + n) of a region
/// reclaim tracks: flush_tlb_batched_pending(); lru_add_drain(); for each mapped page, before 6.9 a
/// set accessed bit is cleared (ptep_get_and_clear_full(), pte_mkold(), tlb_remove_tlb_entry():
/// the page joins the mmu_gather, flushed at tlb_finish_mmu(); from 6.9 reclaim ignores references
/// instead, kernel.madvise_pageout_ignore_references), folio_clear_referenced(), and
/// folio_isolate_lru() onto a private list; then reclaim_pages() ->
/// reclaim_folio_list() -> shrink_folio_list(), whose unmaps use TTU_BATCH_FLUSH like any
/// reclaim, with try_to_unmap_flush() before the free. One PMD's pages at a time in the kernel
/// (one pte-range walk each); the model takes the call's pages as one list.
pub fn madvise_pageout(s: &mut impl Host, cpu: CpuId, t: TaskId, vpn: u64, n: u64) -> Outcome {
    let mm = s.task_mm(t);
    let resume = Step::MadvisePageout { vpn, n };
    let func = Func::MadvisePageout;
    let read = match super::rmap::flush_tlb_batched_pending(s, cpu, t, mm, resume, func) {
        Ok(read) => read,
        Err(out) => return out,
    };
    let drain = super::lru::lru_add_drain(s, cpu, t);
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let vma = *mem
        .vma_at(mm, vpn)
        .expect("MADV_PAGEOUT of an unmapped range");
    let Backing::File { file, pgoff, .. } = vma.backing else {
        panic!(
            "MADV_PAGEOUT is modelled on the regions reclaim tracks (map_new_anon, map_new_file)"
        );
    };
    let (file, anon) = (file as usize, mem.files[file as usize].anon);
    let clear_young = !mem.cfg.madvise_pageout_ignore_references;
    let mut isolated = std::mem::take(&mut mem.tasks[t].reclaim.isolated);
    isolated.clear();
    let mut walk: Time = 0;
    for v in vpn..(vpn + n).min(vma.end) {
        let pfn = mem.files[file].pages[(pgoff + v - vma.start) as usize];
        // pte_none() or a swap entry: nothing to do.
        if pfn >= SWAPPED || mem.page[pfn as usize].flags & PTE_MAPPED == 0 {
            continue;
        }
        // The walk's work a present PTE (read it, vm_normal_folio(), the checks, clear the
        // accessed bit): change_pte_range()'s per-PTE cost stands in for it.
        walk += m.cost[Cost::PteProtect];
        let p = &mut mem.page[pfn as usize];
        if clear_young && p.flags & PTE_YOUNG != 0 {
            p.flags &= !PTE_YOUNG;
            let g = &mut mem.tasks[t].gather;
            g.adjust_range(v, v + 1);
            g.cleared_ptes = true;
        }
        p.flags &= !PG_REFERENCED;
        if p.flags & PG_LRU != 0 {
            // folio_isolate_lru(); reclaim_pages() then clears PG_active.
            p.flags &= !(PG_LRU | PG_ACTIVE);
            isolated.push(pfn);
        }
    }
    obs.stats.charge(Some(t), Func::MadvisePageout, walk);
    let Some(&first) = isolated.first() else {
        mem.tasks[t].reclaim.isolated = isolated;
        return super::lru::lock_first(s, t, Func::MadvisePageout, read + drain + walk, drain);
    };
    let node = mem.frames.node_of(first);
    debug_assert!(isolated.iter().all(|&p| mem.frames.node_of(p) == node));
    let lists = mem.lru[node].lists(anon);
    let page = &mem.page;
    lists
        .active
        .retain(|&p| page[p as usize].flags & PG_LRU != 0);
    lists
        .inactive
        .retain(|&p| page[p as usize].flags & PG_LRU != 0);
    mem.lru[node].isolated[anon as usize] += isolated.len();
    let lock = lock_lru(s, cpu, node, &isolated);
    s.obs().stats.charge(Some(t), Func::IsolateLruPages, lock);
    let nr_taken = isolated.len();
    begin_shrink_page_list(s, t, isolated, nr_taken, node, anon, true);
    super::lru::lock_first(
        s,
        t,
        Func::MadvisePageout,
        read + drain + walk + lock,
        drain + lock,
    )
}

/// Hand `isolated`, taken off `node`'s `anon` or file lists (by MADV_PAGEOUT if `madvise`), to
/// shrink_page_list() as task `t`'s reclaim pass.
fn begin_shrink_page_list(
    s: &mut impl Host,
    t: TaskId,
    isolated: Vec<u32>,
    nr_taken: usize,
    node: usize,
    anon: bool,
    madvise: bool,
) {
    let r = &mut s.mem().tasks[t].reclaim;
    r.isolated = isolated;
    r.nr_taken = nr_taken;
    r.pos = 0;
    r.checked = None;
    r.node = node;
    r.anon = anon;
    r.unqueued_dirty = 0;
    r.madvise = madvise;
    s.push_step(t, Step::ShrinkPageList);
}

/// shrink_page_list(): decide each isolated page (page_check_references), unmap the ones to
/// reclaim and take them out of the page cache. Stops when an unmap needs a flush now.
pub fn shrink_page_list(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let mut ps: Time = 0;
    while s.mem().tasks[t].reclaim.pos < s.mem().tasks[t].reclaim.isolated.len() {
        let mem = s.mem();
        let r = &mut mem.tasks[t].reclaim;
        let batch = mem.cfg.reclaim_free_batch;
        if batch > 0 && r.free.len() - r.freed >= batch {
            // folio_batch_add() filled free_folios: try_to_unmap_flush(), free_unref_folios(),
            // then on down the list (bc2ff4cbc329).
            s.push_step(t, Step::ShrinkPageList);
            push_flush_and_free(s, t, Step::ShrinkFreeBatch);
            return Outcome::Busy {
                ps,
                irqs_off: false,
            };
        }
        let pfn = r.isolated[r.pos];
        r.pos += 1;
        // The next page's line went cold while other CPUs ran: ask for it while this one is done.
        if let Some(&next) = r.isolated.get(r.pos) {
            crate::engine::prefetch(&mem.page[next as usize]);
        }
        if mem.page[pfn as usize].flags & thp::PG_HEAD != 0 {
            match thp::shrink_huge_page(s, cpu, t, pfn, ps) {
                Some(out) => return out,
                None => continue,
            }
        }
        let (spent, stop) = match shrink_page(s, cpu, t, pfn, ps) {
            Ok(done) => done,
            Err(out) => return out,
        };
        ps += spent;
        if stop {
            return Outcome::Busy {
                ps,
                irqs_off: false,
            };
        }
    }
    // End of the list: the last flush and free.
    push_flush_and_free(s, t, Step::ShrinkFinish);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// Push try_to_unmap_flush() and then `free` (or, in the unsafe what-if, the other way round).
fn push_flush_and_free(s: &mut impl Host, t: TaskId, free: Step) {
    let steps = match s.mem().cfg.flush_before_free {
        true => [free, Step::TryToUnmapFlush],
        false => [Step::TryToUnmapFlush, free],
    };
    for step in steps {
        s.push_step(t, step);
    }
}

/// page_check_address() in an rmap walk: the page's PTE lock, once for page_referenced() and
/// again for try_to_unmap(). Ok: the lock (None if the page is not mapped) and the time taking it
/// moved on; Err: come back to this page, after the pass's time `ps` so far or a spin.
fn lock_page_ptl(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    pfn: u32,
    ps: Time,
) -> Result<(Option<u32>, Time), Outcome> {
    if s.mem().page[pfn as usize].flags & PTE_MAPPED == 0 {
        return Ok((None, 0));
    }
    let id = ptl::ptl_of_page(s.mem(), pfn);
    lock_for_page(s, cpu, t, id, ps).map(|moved| (Some(id), moved))
}

/// Take PTE lock `id` (mm/ptl.rs) for the page shrink_page_list() is at. Ok: the time taking it
/// moved on; Err: come back to this page, after the pass's time `ps` so far or a spin.
pub(super) fn lock_for_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    id: u32,
    ps: Time,
) -> Result<Time, Outcome> {
    if ps > 0 && !ptl::free_or_mine(s.mem(), cpu, id) {
        // Spend this pass's time first, then come back to this page and wait.
        s.mem().tasks[t].reclaim.pos -= 1;
        s.push_step(t, Step::ShrinkPageList);
        return Err(Outcome::Busy {
            ps,
            irqs_off: false,
        });
    }
    ptl::lock_or_spin(s, cpu, t, id, Step::ShrinkPageList).inspect_err(|_| {
        s.mem().tasks[t].reclaim.pos -= 1;
    })
}

/// One page of shrink_page_list, after the pass's time `ps` so far. Ok: its time, and whether the
/// pass stops here for the steps it pushed; Err: come back to this page (a PTE lock is busy).
fn shrink_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    pfn: u32,
    pass: Time,
) -> Result<(Time, bool), Outcome> {
    let mut ps = 0;
    let clean = match s.mem().tasks[t].reclaim.checked.take() {
        // Back for the second lock: the references check and add_to_swap() are done.
        Some((p, clean)) if p == pfn => clean,
        _ => {
            let r = &s.mem().tasks[t].reclaim;
            let walk = !(r.madvise && s.mem().cfg.madvise_pageout_ignore_references);
            // page_referenced()'s page_check_address(), unless references are ignored.
            let ptl = match walk {
                true => {
                    let (ptl, moved) = lock_page_ptl(s, cpu, t, pfn, pass)?;
                    ps += moved;
                    ptl
                }
                false => None,
            };
            // trylock_page() and the rest write the struct page.
            ps += touch_page(s, cpu, pfn);
            let flags = s.mem().page[pfn as usize].flags;
            // page_check_dirty_writeback(): PG_dirty before the unmap (writeback is synchronous).
            if flags & PG_DIRTY != 0 {
                s.mem().tasks[t].reclaim.unqueued_dirty += 1;
            }
            let (walked, verdict) = match walk {
                true => page_check_references(s, t, pfn, ptl, flags),
                // reclaim_pages(folio_list, ignore_references): PAGEREF_RECLAIM, no rmap walk (6.9).
                false => (0, PageRef::Reclaim { clean: false }),
            };
            ps += walked;
            let clean = match verdict {
                PageRef::Done { stop } => return Ok((ps, stop)),
                PageRef::Reclaim { clean } => clean,
            };
            // page_referenced_one() unlocks before shrink_page_list() goes on.
            if let Some(id) = ptl {
                ptl::unlock(s, t, id);
            }
            ps += add_to_swap(s, t, pfn);
            clean
        }
    };
    // try_to_unmap()'s page_check_address(): the lock again, which a waiter may have taken.
    let ptl = match lock_page_ptl(s, cpu, t, pfn, pass + ps) {
        Ok((ptl, moved)) => {
            ps += moved;
            ptl
        }
        Err(out) => {
            // The pass's time, this page's included, or a spin; then back for the lock.
            s.mem().tasks[t].reclaim.checked = Some((pfn, clean));
            return Err(out);
        }
    };
    let flags = s.mem().page[pfn as usize].flags;
    let (spent, stop) = reclaim_page(s, cpu, t, pfn, ptl, flags, clean);
    Ok((ps + spent, stop))
}

/// add_to_swap() of an anonymous page not yet in the swap cache: a swap slot and a place in the
/// swap cache; dirty until written. Its time.
fn add_to_swap(s: &mut impl Host, t: TaskId, pfn: u32) -> Time {
    let flags = s.mem().page[pfn as usize].flags;
    if flags & PG_SWAPBACKED == 0 || flags & PG_SWAPCACHE != 0 {
        return 0;
    }
    let add = s.machine().cost[Cost::PagecacheInsert];
    s.obs().stats.charge(Some(t), Func::AddToSwap, add);
    s.mem().page[pfn as usize].flags |= PG_DIRTY | PG_SWAPCACHE;
    add
}

/// What page_check_references() decided for a page.
enum PageRef {
    /// Activated or kept; `stop`: the pass stops for the flush steps it pushed.
    Done { stop: bool },
    /// PAGEREF_RECLAIM, or PAGEREF_RECLAIM_CLEAN (`clean`: reclaim only if clean).
    Reclaim { clean: bool },
}

/// page_check_references(): activate or keep a page in use, else reclaim it. Its time (the rmap
/// walk) and the decision; a page it keeps has its PTE lock released.
fn page_check_references(
    s: &mut impl Host,
    t: TaskId,
    pfn: u32,
    ptl: Option<u32>,
    flags: u16,
) -> (Time, PageRef) {
    let walk = s.machine().cost[Cost::RmapWalk];
    if super::filemap::exec_referenced(flags) {
        // "Activate file-backed executable pages after first usage".
        s.mem().page[pfn as usize].flags &= !PG_REFERENCED;
        s.obs().stats.charge(Some(t), Func::PageReferenced, walk);
        s.mem().tasks[t].reclaim.activate.push(pfn);
        return (walk, PageRef::Done { stop: false });
    }
    // page_referenced(): an rmap walk if mapped; clearing the accessed bit needs no flush
    // on x86 (ptep_clear_flush_young).
    let mapped = flags & PTE_MAPPED != 0;
    let referenced_ptes = mapped && flags & PTE_YOUNG != 0;
    let mut ps = 0;
    if mapped {
        ps += walk;
        s.obs().stats.charge(Some(t), Func::PageReferenced, walk);
    }
    let referenced_page = flags & PG_REFERENCED != 0;
    let swapbacked = flags & PG_SWAPBACKED != 0;
    let p = &mut s.mem().page[pfn as usize];
    p.flags &= !(PTE_YOUNG | PG_REFERENCED);
    if !referenced_ptes {
        // PAGEREF_RECLAIM_CLEAN: a file page referenced before is reclaimed only if clean.
        let clean = referenced_page && !swapbacked;
        return (ps, PageRef::Reclaim { clean });
    }
    p.flags |= PG_REFERENCED;
    // PAGEREF_ACTIVATE for anonymous pages and pages referenced before, else KEEP.
    let r = &mut s.mem().tasks[t].reclaim;
    if referenced_page || swapbacked {
        r.activate.push(pfn);
    } else {
        r.keep.push(pfn);
    }
    let id = ptl.expect("a young page is mapped");
    if s.mem().cfg.young_flush {
        // ptep_clear_flush_young() before 3.15: flush the page with its PTE lock held,
        // then on down the list.
        let (mm, vpn) = rmap::mapping_of(s.mem(), pfn);
        s.push_step(t, Step::ShrinkPageList);
        s.push_step(t, Step::PtlUnlock { id });
        s.push_step(t, rmap::flush_tlb_page(mm, vpn));
        return (ps, PageRef::Done { stop: true });
    }
    ptl::unlock(s, t, id);
    (ps, PageRef::Done { stop: false })
}

/// PAGEREF_RECLAIM(_CLEAN) of a page with `flags`, its PTE lock `ptl` held if it is mapped:
/// unmap, then write out if dirty, then __remove_mapping(). Its time, and whether the pass stops
/// here for the flush and pageout steps it pushed.
fn reclaim_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    pfn: u32,
    ptl: Option<u32>,
    flags: u16,
    reclaim_clean: bool,
) -> (Time, bool) {
    let mut ps = 0;
    let swapbacked = flags & PG_SWAPBACKED != 0;
    let mut flush_now = false;
    if let Some(id) = ptl {
        let (cost, pushed) = rmap::try_to_unmap_one(s, cpu, t, pfn, flags & PTE_DIRTY != 0);
        ps += cost;
        flush_now = pushed;
        if !flush_now {
            ptl::unlock(s, t, id);
        }
    }
    let dirty = s.mem().page[pfn as usize].flags & PG_DIRTY != 0;
    let node = s.mem().tasks[t].reclaim.node;
    let kswapd_writes = is_kswapd(s.mem(), t) && s.mem().lru[node].zone_dirty;
    // Anonymous pages go to swap from any reclaimer. Only kswapd writes file pages, once the
    // zone is ZONE_DIRTY, and a RECLAIM_CLEAN page is kept rather than written.
    let write = dirty && (swapbacked || (kswapd_writes && !reclaim_clean));
    if dirty && !write {
        if !kswapd_writes {
            s.obs().stats.vm(Vm::NrVmscanImmediateReclaim, 1);
        }
        s.mem().tasks[t].reclaim.keep.push(pfn);
    } else if !dirty {
        ps += remove_mapping(s, t, pfn, s.machine().cost[Cost::PagecacheDelete]);
    }
    if !(flush_now || write) {
        return (ps, false);
    }
    // The unmap's own flush, then try_to_unmap_flush_dirty() (no writable TLB entry may outlive
    // the start of the I/O), then pageout(), then on down the list. ptep_clear_flush() runs with
    // the PTE lock held; the lock goes after it.
    let flush = if flush_now { s.pop_step(t) } else { None };
    s.push_step(t, Step::ShrinkPageList);
    if write {
        s.push_step(t, Step::Pageout { pfn });
        let mem = s.mem();
        if mem.tasks[t].reclaim.ubc.writable && mem.cfg.flush_dirty_before_pageout {
            s.push_step(t, Step::TryToUnmapFlush);
        }
    }
    if let Some(flush) = flush {
        let id = ptl.expect("an unmap flush is of a mapped page");
        s.push_step(t, Step::PtlUnlock { id });
        s.push_step(t, flush);
    }
    (ps, true)
}

/// __remove_mapping(): out of the page cache, onto the pass's free list.
fn remove_mapping(s: &mut impl Host, t: TaskId, pfn: u32, delete: Time) -> Time {
    let info = s.mem().page[pfn as usize];
    let f = &mut s.mem().files[info.file as usize];
    // An anonymous page leaves the swap cache; its PTE would now hold the swap entry.
    f.pages[info.index as usize] = if f.anon { SWAPPED } else { NONE };
    s.obs().stats.charge(Some(t), Func::RemoveMapping, delete);
    s.mem().tasks[t].reclaim.free.push(pfn);
    delete
}

/// pageout() of a dirty page (->writepage, or swap_writepage for an anonymous one). To a
/// RAM-backed device (brd, zram: bdev_write_page) the write is synchronous: clear PG_dirty, copy
/// the page out, and reclaim it in this pass ("a synchronous write - probably a ramdisk"). To a
/// swap device with its own time (mm/page_io.rs) it is a bio: the page stays in the swap cache,
/// under writeback and off the LRU, until the write completes.
pub fn pageout(s: &mut impl Host, cpu: CpuId, t: TaskId, pfn: u32) -> Outcome {
    let to_swap = s.mem().page[pfn as usize].flags & PG_SWAPBACKED != 0;
    let bio = to_swap && super::page_io::is_async(s);
    if bio {
        let now = s.now();
        if let Err(until) = super::page_io::submit(s, now, pfn) {
            // get_request(): the request queue is full; sleep until a write completes.
            s.push_step(t, Step::Pageout { pfn });
            return Outcome::Sleep(until);
        }
    }
    rmap::check_translations(s, pfn, Site::Pageout);
    let now = s.now();
    s.obs().check.record(now, cpu, pfn, PageEvent::Pageout);
    s.mem().page[pfn as usize].flags &= !PG_DIRTY;
    if to_swap {
        s.obs().stats.vm(Vm::PSwpOut, 1);
    }
    s.obs().stats.vm(Vm::NrVmscanWrite, 1);
    let mut ps = touch_page(s, cpu, pfn);
    if !bio {
        ps += s.machine().cost[Cost::PageCopy];
    }
    s.obs().stats.charge(Some(t), Func::Pageout, ps);
    if !bio {
        ps += remove_mapping(s, t, pfn, s.machine().cost[Cost::PagecacheDelete]);
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// A full folio batch of the pass's reclaimed pages, freed mid-pass after its flush.
pub fn shrink_free_batch(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let ps = free_reclaimed(s, cpu, t);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// Free the pass's reclaimed pages not freed yet (their TLB entries are gone by now); their time.
fn free_reclaimed(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
    let now = s.now();
    let mut ps: Time = 0;
    let r = &mut s.mem().tasks[t].reclaim;
    let (free, from) = (std::mem::take(&mut r.free), r.freed);
    for &pfn in &free[from..] {
        let mem = s.mem();
        if mem.files[mem.page[pfn as usize].file as usize]
            .mapper
            .is_some()
        {
            rmap::check_translations(s, pfn, Site::Free);
        }
        s.obs().check.record(now, cpu, pfn, PageEvent::Free);
        let last = s.mem().page[pfn as usize].cpu;
        s.mem().page[pfn as usize] = super::filemap::PageInfo {
            cpu: last,
            ..Default::default()
        };
        ps += free_page(s, cpu, pfn);
    }
    s.obs().stats.charge(Some(t), Func::FreePage, ps);
    let r = &mut s.mem().tasks[t].reclaim;
    r.freed = free.len();
    r.free = free;
    ps
}

/// The end of a pass: free_hot_cold_page_list() for the reclaimed pages (their TLB entries are
/// gone by now), then putback_inactive_pages() for the rest.
pub fn shrink_finish(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let mut ps = free_reclaimed(s, cpu, t);
    let r = &mut s.mem().tasks[t].reclaim;
    r.freed = 0;
    let free = std::mem::take(&mut r.free);
    let madvise = std::mem::take(&mut s.mem().tasks[t].reclaim.madvise);
    if !madvise {
        let steal = if is_kswapd(s.mem(), t) {
            Vm::PgStealKswapd
        } else {
            Vm::PgStealDirect
        };
        s.obs().stats.vm(steal, free.len() as u64);
    }
    s.obs().stats.vm(Vm::PgFree, free.len() as u64);
    let r = &mut s.mem().tasks[t].reclaim;
    if !madvise {
        r.reclaimed += free.len() as u32;
        r.zone_reclaimed += free.len() as u32;
    }
    let node = r.node;
    // shrink_inactive_list(): dirty pages the flushers have not queued fill the whole pass.
    if !madvise && r.unqueued_dirty > 0 && r.unqueued_dirty == r.isolated.len() {
        s.mem().lru[node].zone_dirty = true;
    }
    let mem = s.mem();
    let r = &mut mem.tasks[t].reclaim;
    let anon = r.anon;
    mem.lru[node].isolated[anon as usize] -= r.nr_taken;
    let (keep, activate) = (std::mem::take(&mut r.keep), std::mem::take(&mut r.activate));
    for &p in &keep {
        mem.page[p as usize].flags |= PG_LRU;
        mem.lru[node]
            .lists(anon)
            .push_inactive(p, mem.page[p as usize].flags);
    }
    for &p in &activate {
        mem.page[p as usize].flags |= PG_LRU | PG_ACTIVE;
        mem.lru[node]
            .lists(anon)
            .push_active(p, mem.page[p as usize].flags);
    }
    s.obs().stats.vm(Vm::PgActivate, activate.len() as u64);
    let putback = lock_lru(s, cpu, node, &keep) + lock_lru(s, cpu, node, &activate);
    s.obs()
        .stats
        .charge(Some(t), Func::PutbackLruPages, putback);
    ps += putback;
    // Hand the vectors back so the next pass reuses their capacity.
    let r = &mut s.mem().tasks[t].reclaim;
    (r.free, r.keep, r.activate) = (free, keep, activate);
    r.free.clear();
    r.keep.clear();
    r.activate.clear();
    // zone->lock and lru_lock are taken with interrupts off.
    Outcome::Busy { ps, irqs_off: true }
}

#[cfg(test)]
mod tests {
    use crate::observe::{Irq, Vm};
    use crate::sched::KTHREAD;
    use crate::sim::Sim;
    use crate::step::Step;
    use crate::testing::{machine, run_until, spawn, spawn_reader, Then, MM};

    const MS: u64 = 1_000_000_000;

    fn vm(s: &Sim, c: Vm) -> u64 {
        s.obs.stats.vm[c as usize]
    }

    fn row(s: &Sim, irq: Irq) -> Vec<u64> {
        s.obs.stats.irqs[irq as usize].clone()
    }

    /// Three CPUs: CPU 1 reads (or writes) `pages` pages of a region of the process (a shared
    /// file, or anonymous memory) and then spins in user space with their translations cached;
    /// CPU 2 runs another thread of the process (in mm_cpumask, no translations); CPU 0 is idle.
    /// Each LRU add drains at once (pagevec_size 1), so all pages are on the LRU at 1 ms.
    fn read_by_cpu_1(sets: &[(&str, &str)], pages: u32, anon: bool) -> Sim {
        let mut all = vec![("kernel.pagevec_size", "1"), ("check.enabled", "true")];
        all.extend_from_slice(sets);
        let mut s = machine(3, "linux-6.3", Then::Spin, &all);
        spawn_reader(&mut s, 1, pages, anon);
        spawn(&mut s, MM, 2, &[]);
        run_until(&mut s, MS);
        let lists = &s.mem.lru[0];
        let on_lru = [&lists.file, &lists.anon]
            .iter()
            .map(|l| l.inactive.len() + l.active.len())
            .sum::<usize>();
        assert_eq!(on_lru, pages as usize);
        s
    }

    /// One shrink_node() pass of up to 32 pages by a kernel thread on CPU 0 (direct reclaim), run
    /// to its end (well within 1 ms).
    fn shrink_pass(s: &mut Sim) {
        spawn(
            s,
            KTHREAD,
            0,
            &[Step::ShrinkNode {
                node: 0,
                nr: 32,
                nr_active: 32,
            }],
        );
        let now = s.now();
        run_until(s, now + MS);
    }

    /// 32 mapped clean file pages, just read: the first pass isolates all 32 and puts them back
    /// (their PTEs were young: PAGEREF_KEEP, accessed bit cleared, PG_referenced set), the second
    /// unmaps and frees all 32 (PAGEREF_RECLAIM_CLEAN). pgscan counts both passes, pgsteal the
    /// second; the inactive list ends empty.
    #[test]
    fn a_shrink_pass_isolates_unmaps_and_frees_exact_counts() {
        let mut s = read_by_cpu_1(&[], 32, false);
        shrink_pass(&mut s);
        assert_eq!(
            (vm(&s, Vm::PgScanDirect), vm(&s, Vm::PgStealDirect)),
            (32, 0)
        );
        assert_eq!(s.mem.lru[0].file.inactive.len(), 32);
        assert_eq!(s.mem.lru[0].isolated, [0, 0]);
        assert_eq!(
            s.obs.stats.ipis_sent, 0,
            "nothing unmapped, nothing flushed"
        );
        // page_referenced() took each page's PTE lock once and kept the page.
        assert_eq!(s.mem.ptl.taken, 32);
        shrink_pass(&mut s);
        assert_eq!(
            (vm(&s, Vm::PgScanDirect), vm(&s, Vm::PgStealDirect)),
            (64, 32)
        );
        // Twice a page now: page_referenced(), then try_to_unmap() (one hold until 2026-11-30).
        assert_eq!(s.mem.ptl.taken, 32 + 64);
        assert_eq!(vm(&s, Vm::PgFree), 32);
        assert!(s.mem.lru[0].file.is_empty());
        let file = s.mem.files.last().unwrap();
        assert!(
            file.pages.iter().all(|&p| p == crate::mm::NONE),
            "out of the page cache"
        );
        assert_eq!(s.obs.check.total(), 0);
    }

    /// `pages` pages read by CPU 0 of a 1-CPU machine, `active` of them then moved to the active
    /// list (file pages, or anonymous ones written); every LRU add drains at once.
    fn lists_of(pages: u32, active: usize, anon: bool) -> Sim {
        let mut s = machine(1, "linux-6.3", Then::Spin, &[("kernel.pagevec_size", "1")]);
        spawn_reader(&mut s, 0, pages, anon);
        run_until(&mut s, 100 * MS);
        let mem = &mut s.mem;
        for _ in 0..active {
            let lists = mem.lru[0].lists(anon);
            let p = lists.pop_inactive(&mem.page).expect("read");
            mem.page[p as usize].flags |= super::PG_ACTIVE;
            lists.push_active(p, mem.page[p as usize].flags);
        }
        assert_eq!(
            mem.lru[0].lists(anon).inactive_pages(),
            pages as usize - active
        );
        s
    }

    /// too_many_isolated() of a direct reclaimer (task 0, the reader) on 256 inactive file pages:
    /// from 3.8 more than an eighth of them isolated (33) is too many, before only more than all.
    #[test]
    fn from_3_8_more_than_an_eighth_of_the_inactive_list_isolated_is_too_many() {
        for (eighth, isolated, too_many) in [
            (true, 32, false),
            (true, 33, true),
            (false, 33, false),
            (false, 256, false),
            (false, 257, true),
        ] {
            let mut s = lists_of(256, 0, false);
            s.mem.cfg.isolated_iofs_eighth = eighth;
            s.mem.lru[0].isolated[0] = isolated;
            assert_eq!(
                super::too_many_isolated(&s.mem, 0, 0, false),
                too_many,
                "eighth {eighth}, {isolated} isolated"
            );
        }
    }

    /// inactive_list_is_low(): to 4.9 an anonymous list keeps one inactive page to
    /// int_sqrt(10 x the zone's GiB) active ones (12 on a 16 GiB zone), a file list one to one;
    /// from 4.10 both keep the ratio of their own size (3 at 1 GiB, 1 below).
    #[test]
    fn an_inactive_list_is_low_by_the_kernels_ratio() {
        use super::super::lru::LruLists;
        use super::InactiveRatio::{LruSize, ZoneAnon};
        let lists = |inactive: u32, active: u32| {
            let mut l = LruLists::default();
            (0..inactive).for_each(|p| l.push_inactive(p, 0));
            (0..active).for_each(|p| l.push_active(p, 0));
            l
        };
        let gib: u32 = 1 << 18;
        let zone = 16 * gib as u64;
        assert!(!ZoneAnon.is_low(&lists(1, 12), true, zone));
        assert!(ZoneAnon.is_low(&lists(1, 13), true, zone));
        assert!(!ZoneAnon.is_low(&lists(2, 2), false, zone));
        assert!(ZoneAnon.is_low(&lists(2, 3), false, zone));
        // The zone's size no longer counts: 13 small lists' pages keep the ratio 1.
        assert!(LruSize.is_low(&lists(1, 12), true, zone));
        assert!(!LruSize.is_low(&lists(1, 1), true, zone));
        let (inactive, active) = (gib / 4, 3 * gib / 4);
        assert!(!LruSize.is_low(&lists(inactive, active), false, zone));
        assert!(LruSize.is_low(&lists(inactive, active + 1), false, zone));
    }

    /// get_scan_count() gives each list its own size >> priority, and shrink_lruvec() takes
    /// SWAP_CLUSTER_MAX of each a round while the inactive file, active file or inactive anon
    /// target lasts. 2,048 inactive and 4,096 active file pages: (inactive, active) rounds of
    /// (0, 1) at DEF_PRIORITY, then (1, 2), (2, 4) and (4, 8), one a priority; before, 6,144 >>
    /// priority inactive pages. An anonymous list all active is only aged, 32 pages after the
    /// loop, at every priority.
    #[test]
    fn direct_reclaim_scans_each_list_by_its_own_size_shifted_by_priority() {
        use super::direct_reclaim;
        use crate::sched::Outcome;
        for (anon, want) in [
            (false, [(0, 1), (1, 2), (2, 4), (4, 8)]),
            (true, [(0, 32); 4]),
        ] {
            let (pages, active) = if anon { (4096, 4096) } else { (6144, 4096) };
            let mut s = lists_of(pages, active, anon);
            let t = spawn(&mut s, KTHREAD, 0, &[]);
            let mut rounds = vec![];
            for _ in 0..4 {
                assert_eq!(direct_reclaim(&mut s, 0, t, 32), Outcome::Next);
                match s.sched.tasks[t].steps.pop() {
                    Some(Step::ShrinkNode {
                        node: 0,
                        nr,
                        nr_active,
                    }) => rounds.push((nr, nr_active)),
                    other => panic!("{other:?}"),
                }
                assert_eq!(
                    s.sched.tasks[t].steps.pop(),
                    Some(Step::DirectReclaim { want: 32 })
                );
            }
            assert_eq!(rounds, want, "anon {anon}");
        }
    }

    /// A direct reclaim that frees nothing still makes its passes over the zones and the
    /// shrinkers: reclaim_empty, charged to do_try_to_free_pages, and then the OOM killer.
    #[test]
    fn a_direct_reclaim_that_frees_nothing_takes_its_passes_time() {
        use super::direct_reclaim;
        use crate::machine::Cost;
        use crate::observe::Func;
        use crate::sched::Outcome;
        let mut s = machine(1, "linux-6.3", Then::Spin, &[]);
        let t = spawn(&mut s, KTHREAD, 0, &[]);
        let ps = s.m.cost[Cost::ReclaimEmpty];
        assert!(ps > 0);
        let busy = Outcome::Busy {
            ps,
            irqs_off: false,
        };
        assert_eq!(direct_reclaim(&mut s, 0, t, 32), busy);
        assert_eq!(s.sched.tasks[t].steps.pop(), Some(Step::OutOfMemory));
        assert_eq!(s.obs.stats.profile[Func::DoTryToFreePages as usize], ps);
    }

    /// A round with no inactive pages to take deactivates only while the inactive list is low
    /// (shrink_list(); on 6.3 and lists this small, the shorter); otherwise it does nothing, at no
    /// cost, and takes no lru_lock.
    #[test]
    fn an_active_only_round_deactivates_only_when_the_inactive_list_is_low() {
        use super::shrink_node;
        use crate::sched::Outcome;
        let mut s = lists_of(6144, 2048, false);
        let t = spawn(&mut s, KTHREAD, 0, &[]);
        let taken = s.mem.lru[0].lock.acquisitions;
        assert_eq!(shrink_node(&mut s, 0, t, 0, 0, 32), Outcome::Next);
        assert_eq!(s.mem.lru[0].lock.acquisitions, taken);
        assert_eq!(s.mem.lru[0].file.active_pages(), 2048);
        let mut s = lists_of(6144, 4096, false);
        let t = spawn(&mut s, KTHREAD, 0, &[]);
        let out = shrink_node(&mut s, 0, t, 0, 0, 32);
        assert!(matches!(out, Outcome::Busy { ps, .. } if ps > 0), "{out:?}");
        assert_eq!(s.mem.lru[0].file.active_pages(), 4096 - 32);
        assert_eq!(s.mem.lru[0].file.inactive_pages(), 2048 + 32);
        assert_eq!((vm(&s, Vm::PgRefill), vm(&s, Vm::PgDeactivate)), (32, 32));
        assert_eq!(vm(&s, Vm::PgScanDirect), 0, "nothing isolated");
    }

    /// balance_pgdat()'s passes: kswapd shrinks lru_size >> priority pages before it looks at
    /// the watermark again, from DEF_PRIORITY, and raises the priority after a pass that freed
    /// nothing or scanned less than the high watermark's worth. With 4,096 pages on the LRU and
    /// a zone it cannot balance: passes of 1, 2, 4 and 8 pages (not 32 at a time), in both eras,
    /// and one pageoutrun for the one balance_pgdat() call. A balanced zone ends it.
    #[test]
    fn kswapd_shrinks_lru_size_shifted_by_priority_between_balance_checks() {
        use super::{kswapd, WMARK_HIGH};
        use crate::sched::Outcome;
        for limit in ["true", "false"] {
            let sets = [
                ("kernel.kswapd_reclaim_limit", limit),
                ("kernel.pagevec_size", "1"),
            ];
            let mut s = machine(1, "linux-6.3", Then::Spin, &sets);
            spawn_reader(&mut s, 0, 4096, false);
            run_until(&mut s, 100 * MS);
            assert_eq!(s.mem.lru[0].file.inactive.len(), 4096);
            let t = spawn(&mut s, KTHREAD, 0, &[]);
            s.mem.kswapd[0] = Some(t);
            s.mem.frames.zones[0].wmark[WMARK_HIGH] = u64::MAX / 4;
            let mut sizes = vec![];
            for _ in 0..4 {
                assert_eq!(kswapd(&mut s, t, 0), Outcome::Next);
                match s.sched.tasks[t].steps.pop() {
                    Some(Step::ShrinkNode {
                        node: 0,
                        nr,
                        nr_active: 0,
                    }) => sizes.push(nr),
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(sizes, [1, 2, 4, 8], "{limit}");
            assert_eq!(vm(&s, Vm::PageOutRun), 1, "{limit}");
            s.mem.frames.zones[0].wmark[WMARK_HIGH] = 0;
            assert_eq!(kswapd(&mut s, t, 0), Outcome::Sleep(u64::MAX), "{limit}");
            assert!(s.mem.tasks[t].reclaim.kswapd_pass.is_none());
        }
    }

    /// The flush of the second pass's 32 unmaps: batch_full (4.3) sends one IPI to each other
    /// CPU of mm_cpumask (CPUs 1 and 2) for the whole batch; immediate (to 4.2) flushes each
    /// page as it is unmapped, one IPI to each of them per page.
    #[test]
    fn batched_reclaim_flushes_once_per_cpu_per_batch_immediate_once_per_page() {
        for (flush, per_cpu) in [("batch_full", 1), ("immediate", 32)] {
            let mut s = read_by_cpu_1(&[("kernel.reclaim_flush", flush)], 32, false);
            shrink_pass(&mut s);
            shrink_pass(&mut s);
            assert_eq!(vm(&s, Vm::PgStealDirect), 32, "{flush}");
            assert_eq!(s.obs.stats.ipis_sent, 2 * per_cpu, "{flush}");
            assert_eq!(row(&s, Irq::Cal), [0, per_cpu, per_cpu], "{flush}");
            assert_eq!(row(&s, Irq::Tlb), [0, per_cpu, per_cpu], "{flush}");
            assert_eq!(s.obs.check.total(), 0, "{flush}");
        }
    }

    /// The batch is flushed before its pages are freed: CPU 1 still caches all 32 translations
    /// when they are unmapped, and the checker finds none at the free. The unsafe what-if that
    /// frees first shows the checker would see it: 32 use-after-free on CPU 1.
    #[test]
    fn the_batch_flush_comes_before_the_pages_are_freed() {
        for (before, caught) in [("true", 0), ("false", 32)] {
            let sets = [("kernel.flush_before_free", before)];
            let mut s = read_by_cpu_1(&sets, 32, false);
            shrink_pass(&mut s);
            shrink_pass(&mut s);
            assert_eq!(vm(&s, Vm::PgStealDirect), 32);
            let json = crate::observe::check::to_json(&s.obs.check);
            assert_eq!(
                s.obs.check.total(),
                caught,
                "flush_before_free={before}: {json}"
            );
            assert_eq!(
                json["by_site"]["free"], caught,
                "flush_before_free={before}"
            );
        }
    }

    /// Dirty pages go through pageout(): 4 anonymous pages written by CPU 1 are deactivated,
    /// unmapped (dirty PTEs, deferred), written to the RAM-backed swap device and freed in one
    /// pass. try_to_unmap_flush_dirty() flushes before each pageout(), so each page's batch
    /// costs one IPI to CPUs 1 and 2: 8. Without that flush, the only flush is the one before
    /// the free (2 IPIs), and each pageout finds CPU 1 still able to write: 4 lost writes.
    #[test]
    fn a_dirty_page_is_flushed_then_written_out_then_freed() {
        for (flush_dirty, ipis, lost) in [("true", 8, 0), ("false", 2, 4)] {
            // 4.x: new anonymous pages start active, so one pass swaps them (b518154e59aa, 5.9).
            let sets = [
                ("kernel.flush_dirty_before_pageout", flush_dirty),
                ("kernel.anon_lru_inactive", "false"),
            ];
            let mut s = read_by_cpu_1(&sets, 4, true);
            assert_eq!(
                s.mem.lru[0].anon.active.len(),
                4,
                "new anonymous pages start active"
            );
            shrink_pass(&mut s);
            let counts = [
                Vm::PgScanDirect,
                Vm::PgStealDirect,
                Vm::NrVmscanWrite,
                Vm::PSwpOut,
            ]
            .map(|c| vm(&s, c));
            assert_eq!(
                counts,
                [4, 4, 4, 4],
                "flush_dirty_before_pageout={flush_dirty}"
            );
            assert!(s.mem.lru[0].anon.is_empty());
            assert_eq!(
                s.obs.stats.ipis_sent, ipis,
                "flush_dirty_before_pageout={flush_dirty}"
            );
            let json = crate::observe::check::to_json(&s.obs.check);
            assert_eq!(json["by_kind"]["lost-write"], lost, "{json}");
            assert_eq!(s.obs.check.total(), lost);
        }
    }
}
