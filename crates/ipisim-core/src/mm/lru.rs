//! The LRU lists (mm/swap.c, mm/vmscan.c): per node an inactive and an active list of file pages
//! and of anonymous pages, fed through per-CPU pagevecs of `pagevec_size` pages, all under the
//! node's lru_lock.

use std::collections::VecDeque;

use crate::engine::{CpuId, SpinLock, TaskId, Time};
use crate::machine::{Cost, Machine};
use crate::observe::Func;
use crate::step::{Outcome, Step};

use super::filemap::{touch_page, PageInfo, PG_ANON_PRIVATE, PG_FREE_PENDING};
use super::thp::{heads, HPAGE_PMD_NR};
use super::{Host, Memory, Parts, NONE};

/// An inactive and an active list. The front is the head (newest), the back the tail (reclaimed
/// first).
#[derive(Debug, Default)]
pub struct LruLists {
    pub inactive: VecDeque<u32>,
    pub active: VecDeque<u32>,
    /// Huge-page heads on each list (mm/thp.rs): each stands for 512 pages, not 1. Kept by the
    /// push and pop methods below, which the anonymous lists' changes go through.
    pub(super) huge_inactive: usize,
    pub(super) huge_active: usize,
}

impl LruLists {
    pub fn is_empty(&self) -> bool {
        self.inactive.is_empty() && self.active.is_empty()
    }

    /// The pages on the inactive list (NR_INACTIVE_*: a huge page counts 512).
    pub fn inactive_pages(&self) -> usize {
        self.inactive.len() + self.huge_inactive * (HPAGE_PMD_NR - 1)
    }

    /// The pages on the active list.
    pub fn active_pages(&self) -> usize {
        self.active.len() + self.huge_active * (HPAGE_PMD_NR - 1)
    }

    /// Page `p` (with `flags`) onto the inactive list's head.
    pub fn push_inactive(&mut self, p: u32, flags: u16) {
        self.huge_inactive += heads(flags);
        self.inactive.push_front(p);
    }

    /// Page `p` (with `flags`) onto the active list's head.
    pub fn push_active(&mut self, p: u32, flags: u16) {
        self.huge_active += heads(flags);
        self.active.push_front(p);
    }

    /// The inactive list's tail page, taken off it (`page`: the struct pages, for its flags).
    pub fn pop_inactive(&mut self, page: &[PageInfo]) -> Option<u32> {
        let p = self.inactive.pop_back()?;
        self.huge_inactive -= heads(page[p as usize].flags);
        Some(p)
    }

    /// The active list's tail page, taken off it.
    pub fn pop_active(&mut self, page: &[PageInfo]) -> Option<u32> {
        let p = self.active.pop_back()?;
        self.huge_active -= heads(page[p as usize].flags);
        Some(p)
    }
}

/// One node's lruvec.
#[derive(Debug)]
pub struct NodeLru {
    pub file: LruLists,
    pub anon: LruLists,
    pub lock: SpinLock,
    /// ZONE_DIRTY: a whole pass found only dirty pages not under writeback, so kswapd writes
    /// dirty file pages itself until the zone is balanced again.
    pub zone_dirty: bool,
    /// NR_ISOLATED_FILE and NR_ISOLATED_ANON: pages reclaimers hold off the lists.
    pub isolated: [usize; 2],
    /// Direct reclaimers asleep in reclaim_throttle(VMSCAN_THROTTLE_ISOLATED).
    pub throttled: Vec<u32>,
    /// The CPU whose cache holds the lruvec's list heads and LRU size counters: the last holder.
    pub lines_cpu: usize,
    /// The first (newest) PG_ANON_PRIVATE page of the anon list, NONE if none
    /// (`Memory::anon_lru` links the rest).
    pub anon_first: u32,
}

impl Default for NodeLru {
    fn default() -> Self {
        NodeLru {
            file: LruLists::default(),
            anon: LruLists::default(),
            lock: SpinLock::default(),
            zone_dirty: false,
            isolated: [0; 2],
            throttled: Vec::new(),
            lines_cpu: 0,
            anon_first: NONE,
        }
    }
}

impl NodeLru {
    pub fn lists(&mut self, anon: bool) -> &mut LruLists {
        if anon {
            &mut self.anon
        } else {
            &mut self.file
        }
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty() && self.anon.is_empty()
    }

    /// get_scan_count(): which lists to shrink. Anonymous pages only when no file pages are left
    /// (the SCAN_ANON case; the kernel also balances the two by swappiness, not modelled).
    pub fn scan_anon(&self) -> bool {
        self.file.is_empty() && !self.anon.is_empty()
    }
}

/// Take `node`'s lru_lock now for list operations on `pages`, whose `struct page` lines must come
/// to this CPU while it holds the lock, as must the lruvec's own two (below). Returns spin + hold
/// time.
pub fn lock_lru(s: &mut impl Host, cpu: CpuId, node: usize, pages: &[u32]) -> Time {
    let (spin, hold) = lock_lru_split(s, cpu, node, pages, 0);
    spin + hold
}

/// lock_lru(), with the spin (the wait for the lock and its line) and the hold apart; `lines`
/// is what the list neighbours' `struct page` lines took to come over (anon_list_add/del).
pub fn lock_lru_split(
    s: &mut impl Host,
    cpu: CpuId,
    node: usize,
    pages: &[u32],
    lines: Time,
) -> (Time, Time) {
    let now = s.now();
    let p = s.mm_parts();
    let (m, mem) = (p.m, p.mem);
    let mut hold = pages.len() as Time * m.cost[Cost::LruPage] + lines;
    for &pfn in pages {
        hold += touch_page(m, mem, cpu, pfn);
    }
    // struct lruvec's lists[] share a line apart from lru_lock's, and update_lru_size() writes
    // mem_cgroup_per_node's lru_zone_size[][]: both come from the last holder, once a round.
    let last = std::mem::replace(&mut mem.lru[node].lines_cpu, cpu);
    if last != cpu {
        hold += 2 * m.line_transfer(last, cpu);
    }
    let spin = m.lock(&mut mem.lru[node].lock, cpu, now, hold);
    (spin, hold)
}

/// The outcome of a step of `ps`, of which `locked` went on lru_lock rounds: every kernel takes
/// that lock with interrupts off (spin_lock_irq(), spin_lock_irqsave() in __pagevec_lru_add()
/// and release_pages(), folio_lruvec_relock_irqsave() since 5.x), so an IPI waits while the CPU
/// spins for it and holds it. lock_lru_split() takes the lock at the step's start, so that part
/// comes first; the rest follows as a step of its own (named `func` in traces), interrupts on.
pub fn lock_first(s: &mut impl Host, t: TaskId, func: Func, ps: Time, locked: Time) -> Outcome {
    if locked == 0 {
        return Outcome::Busy {
            ps,
            irqs_off: false,
        };
    }
    if ps > locked {
        s.push_step(
            t,
            Step::Charged {
                func,
                ps: ps - locked,
            },
        );
    }
    Outcome::Busy {
        ps: locked,
        irqs_off: true,
    }
}

/// list_add(&folio->lru, lruvec's anon list) of a PG_ANON_PRIVATE page: it becomes the first,
/// and the old first's prev pointer is written, so that page's `struct page` line comes here
/// (the head's own line is the lruvec's, charged once a round). Returns that transfer.
fn anon_list_add(m: &Machine, mem: &mut Memory, cpu: CpuId, node: usize, pfn: u32) -> Time {
    let old = std::mem::replace(&mut mem.lru[node].anon_first, pfn);
    mem.anon_lru[pfn as usize] = [NONE, old];
    if old == NONE {
        return 0;
    }
    mem.anon_lru[old as usize][0] = pfn;
    touch_page(m, mem, cpu, old)
}

/// list_del(&folio->lru) of a PG_ANON_PRIVATE page: its neighbours' next and prev pointers are
/// written, so both their `struct page` lines come here (a list end's neighbour is the head, in
/// the lruvec's line). Returns those transfers.
fn anon_list_del(m: &Machine, mem: &mut Memory, cpu: CpuId, node: usize, pfn: u32) -> Time {
    let [prev, next] = mem.anon_lru[pfn as usize];
    let mut lines = 0;
    if prev == NONE {
        mem.lru[node].anon_first = next;
    } else {
        mem.anon_lru[prev as usize][1] = next;
        lines += touch_page(m, mem, cpu, prev);
    }
    if next != NONE {
        mem.anon_lru[next as usize][0] = prev;
        lines += touch_page(m, mem, cpu, next);
    }
    lines
}

/// Whether the next lru_cache_add() on this CPU fills its pagevec and so drains it.
pub fn add_drains(mem: &Memory, cpu: CpuId) -> bool {
    mem.pagevec[cpu].len() + 1 >= mem.cfg.pagevec_size
}

/// lru_cache_add(): into this CPU's pagevec; a full pagevec drains to the LRU heads of its pages'
/// nodes (__pagevec_lru_add). Returns the time taken.
pub fn lru_cache_add(s: &mut impl Host, cpu: CpuId, t: TaskId, pfn: u32) -> Time {
    let mem = s.mm_parts().mem;
    let drains = add_drains(mem, cpu);
    mem.pagevec[cpu].push(pfn);
    if !drains {
        return 0;
    }
    lru_add_drain(s, cpu, t)
}

/// __pagevec_lru_add(): move the pagevec's pages to their LRU lists, one lock round per node.
pub fn lru_add_drain(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
    let mut pv = std::mem::take(&mut s.mm_parts().mem.pagevec[cpu]);
    let mut cost = 0;
    let mut i = 0;
    while i < pv.len() {
        let Parts { m, mem, .. } = s.mm_parts();
        // The kernel relocks whenever the next page is on another node's lruvec.
        let node = mem.frames.node_of(pv[i]);
        let (mut j, mut lines) = (i, 0);
        while j < pv.len() && mem.frames.node_of(pv[j]) == node {
            let p = pv[j];
            let page = &mut mem.page[p as usize];
            if page.flags & PG_ANON_PRIVATE != 0 {
                // lru_add(): onto the anon LRU's head, linked to its neighbour.
                page.flags |= super::filemap::PG_LRU;
                lines += anon_list_add(m, mem, cpu, node, p);
            } else if page.flags & super::filemap::PG_SWAPBACKED != 0 && !mem.cfg.anon_lru_inactive
            {
                // lru_cache_add_active_or_unevictable(): new anonymous pages start active (to 5.8).
                page.flags |= super::filemap::PG_LRU | super::filemap::PG_ACTIVE;
                mem.lru[node].anon.push_active(p, page.flags);
            } else if page.flags & super::filemap::PG_SWAPBACKED != 0 {
                // lru_cache_add_inactive_or_unevictable() (b518154e59aa, 5.9).
                page.flags |= super::filemap::PG_LRU;
                mem.lru[node].anon.push_inactive(p, page.flags);
            } else {
                page.flags |= super::filemap::PG_LRU;
                mem.lru[node].file.inactive.push_front(p);
            }
            j += 1;
        }
        // The wait is lock time called from here, as release_pages()' is (perf's callers).
        let (spin, hold) = lock_lru_split(s, cpu, node, &pv[i..j], lines);
        let stats = &mut s.mm_parts().obs.stats;
        stats.charge_lock(Some(t), Func::LruAdd, spin);
        stats.charge(Some(t), Func::LruAdd, hold);
        cost += spin + hold;
        i = j;
    }
    // folio_batch_move_lru() ends with folios_put(): the batch's references go, and pages zapped
    // while in the batch (their last reference) are freed, off the LRU under the lock again.
    let mem = s.mm_parts().mem;
    pv.retain(|&p| mem.page[p as usize].flags & PG_FREE_PENDING != 0);
    if !pv.is_empty() {
        cost += release_lru_pages(s, cpu, t, &pv);
    }
    pv.clear();
    s.mm_parts().mem.pagevec[cpu] = pv;
    cost
}

/// Pages release_pages() keeps the lock for before it drops it (SWAP_CLUSTER_MAX; 6.x's
/// folios_put_refs() works in folio batches of 31, free_pages_and_swap_cache() fills them).
const RELEASE_BATCH: usize = 32;

/// release_pages() / folios_put_refs() of pages whose last reference goes: those on the LRU
/// (`pages`, every one PG_ANON_PRIVATE and PG_LRU) come off it under their node's lru_lock,
/// relocked when the node changes or after RELEASE_BATCH pages, then go back to the allocator.
/// Returns the time taken; the wait for the lock is `_raw_spin_lock_irqsave` time called from
/// release_pages.
pub fn release_lru_pages(s: &mut impl Host, cpu: CpuId, t: TaskId, pages: &[u32]) -> Time {
    let mut cost = 0;
    let mut i = 0;
    while i < pages.len() {
        let mem = s.mm_parts().mem;
        let node = mem.frames.node_of(pages[i]);
        let mut j = i;
        while j < pages.len() && j - i < RELEASE_BATCH && mem.frames.node_of(pages[j]) == node {
            j += 1;
        }
        // lruvec_del_folio(): each page leaves the anon list, its neighbours' lines come over.
        let Parts { m, mem, .. } = s.mm_parts();
        let lines = pages[i..j]
            .iter()
            .map(|&pfn| anon_list_del(m, mem, cpu, node, pfn))
            .sum();
        let (spin, hold) = lock_lru_split(s, cpu, node, &pages[i..j], lines);
        let p = s.mm_parts();
        for &pfn in &pages[i..j] {
            p.mem.page[pfn as usize].flags &= !(super::filemap::PG_LRU | PG_FREE_PENDING);
            p.mem.frames.free(pfn);
        }
        p.obs.stats.charge_lock(Some(t), Func::ReleasePages, spin);
        p.obs.stats.charge(Some(t), Func::ReleasePages, hold);
        cost += spin + hold;
        i = j;
    }
    cost
}

/// free_pages_and_swap_cache() -> release_pages() of an mmu_gather's pages, after the flush
/// (and after the LRU-add drain before it until 6.14: tlb_batch_pages_flush() runs that as a
/// step of its own). A PG_ANON_PRIVATE page on the LRU comes off it under the lock; one still in
/// a per-CPU batch is left to that batch's drain (PG_FREE_PENDING); any other page (untracked, or
/// the reclaim workloads' regions) goes back to the allocator at once. `pages` is reordered.
pub fn free_pages_and_swap_cache(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    pages: &mut Vec<u32>,
) -> Time {
    let mut cost = 0;
    let mem = s.mm_parts().mem;
    let mut k = 0;
    for i in 0..pages.len() {
        let pfn = pages[i];
        let flags = mem.page.get(pfn as usize).map_or(0, |p| p.flags);
        if flags & PG_ANON_PRIVATE == 0 {
            mem.frames.free(pfn);
        } else if flags & super::filemap::PG_LRU != 0 {
            pages[k] = pfn;
            k += 1;
        } else {
            mem.page[pfn as usize].flags |= PG_FREE_PENDING;
        }
    }
    pages.truncate(k);
    if k > 0 {
        cost += release_lru_pages(s, cpu, t, pages);
    }
    cost
}

#[cfg(test)]
mod tests {
    use crate::testing::{machine, tlb_flush2_threads, Then};

    /// will-it-scale tlb_flush2, one thread, `loops` loops on the Milan: the node's lru_lock
    /// acquisitions, and the frames still in use when it ends.
    fn tlb_flush2(kernel: &str, loops: u64, sets: &[(&str, &str)]) -> (u64, usize) {
        let s = tlb_flush2_threads(kernel, 1, loops, sets);
        (s.mem.lru[0].lock.acquisitions, s.mem.pagevec[0].len())
    }

    /// A round of the lru_lock from another CPU than the last holder's moves the lruvec's list
    /// heads and LRU size lines as it holds the lock: two transfers, whatever its pages; the
    /// same CPU again, none.
    #[test]
    fn a_round_from_another_cpu_moves_the_lruvecs_two_lines() {
        let mut s = machine(2, "linux-6.14", Then::Sleep, &[]);
        let (_, first) = super::lock_lru_split(&mut s, 0, 0, &[], 0);
        let (_, again) = super::lock_lru_split(&mut s, 0, 0, &[], 0);
        let (_, other) = super::lock_lru_split(&mut s, 1, 0, &[], 0);
        assert_eq!((first, again), (0, 0));
        assert_eq!(other, 2 * s.m.line_transfer(0, 1));
        assert!(other > 0);
    }

    /// list_add() at the anon list's head writes the old first page's `struct page` (its prev),
    /// list_del() both neighbours' (their next and prev): each line comes from the CPU that
    /// wrote it last. Pages a (CPU 0), b and c (CPU 1) go on in turn; a comes off on CPU 0.
    #[test]
    fn anon_list_operations_move_the_neighbours_lines() {
        let mut s = machine(2, "linux-6.14", Then::Sleep, &[]);
        let [a, b, c] = [100, 101, 102];
        for pfn in [a, b, c] {
            s.mem.new_anon_page(pfn);
        }
        let line = s.m.line_transfer(0, 1);
        let (m, mem) = (&s.m, &mut s.mem);
        // A round writes its own pages' lines first (lock_lru_split()), then links them.
        let mut add = |cpu, pfn| {
            super::touch_page(m, mem, cpu, pfn);
            super::anon_list_add(m, mem, cpu, 0, pfn)
        };
        assert_eq!(add(0, a), 0, "the list was empty");
        assert_eq!(add(1, b), line, "a's line, from CPU 0");
        assert_eq!(add(1, c), 0, "b's line is here");
        assert_eq!(mem.lru[0].anon_first, c);
        // b: next to c (written on CPU 1) and a (CPU 1 wrote its prev when b went on).
        assert_eq!(super::anon_list_del(m, mem, 0, 0, b), 2 * line);
        assert_eq!(mem.anon_lru[c as usize], [super::NONE, a]);
        assert_eq!(mem.anon_lru[a as usize], [c, super::NONE]);
        assert_eq!(
            super::anon_list_del(m, mem, 0, 0, a),
            0,
            "c's line came with b's delete"
        );
        assert_eq!(
            super::anon_list_del(m, mem, 0, 0, c),
            0,
            "the last: only the head's line"
        );
        assert_eq!(mem.lru[0].anon_first, super::NONE);
    }

    /// With the drain, tlb_batch_pages_flush() takes its two lru_lock rounds in two steps: the
    /// LRU-add drain's first (interrupts off), then, as a step of its own, release_pages()'s,
    /// which asks for the lock again after CPUs that queued meanwhile.
    #[test]
    fn the_drain_and_release_pages_are_two_steps() {
        use crate::mm::Host;
        use crate::step::{Outcome, Step};
        use crate::testing::{spawn, MM};
        let sets = [("kernel.zap_lru_add_drain", "true")];
        let mut s = machine(2, "linux-6.14", Then::Sleep, &sets);
        let t = spawn(&mut s, MM, 1, &[]);
        let pfn = s.mem.frames.alloc_on(0);
        s.mem.new_anon_page(pfn);
        s.mem.pagevec[1].push(pfn);
        s.gather(t).pages.push(pfn);
        let first = crate::mm::tlb_batch_pages_flush(&mut s, 1, t);
        assert!(matches!(first, Outcome::Busy { irqs_off: true, ps } if ps > 0));
        assert_eq!(
            s.sched.tasks[t].steps.last(),
            Some(&Step::TlbBatchPagesFlush)
        );
        assert_eq!(s.mem.lru[0].lock.acquisitions, 1, "the drain's round only");
        assert_eq!(s.gather(t).pages, [pfn], "not released yet");
        s.sched.tasks[t].steps.pop();
        let second = crate::mm::tlb_batch_pages_flush(&mut s, 1, t);
        assert!(matches!(second, Outcome::Busy { irqs_off: true, ps } if ps > 0));
        assert_eq!(s.mem.lru[0].lock.acquisitions, 2);
        assert!(s.gather(t).pages.is_empty());
        assert_eq!(
            s.mem.page[pfn as usize].flags & super::super::filemap::PG_LRU,
            0
        );
    }

    /// Waiting for the lru_lock in the LRU-add drain is lock time with that caller, as in
    /// release_pages(): with the drain, four threads' rounds interleave, and both callers wait.
    #[test]
    fn the_drains_wait_is_lock_time_called_from_lru_add() {
        use crate::observe::Func;
        let s = tlb_flush2_threads(
            "linux-6.14",
            4,
            200,
            &[("kernel.zap_lru_add_drain", "true")],
        );
        let st = &s.obs.stats;
        let [add, release] =
            [Func::LruAdd, Func::ReleasePages].map(|f| st.lock_callers[f as usize]);
        assert!(add > 0 && release > 0, "{add} {release}");
        assert_eq!(
            st.lock_callers.iter().sum::<u64>(),
            st.profile[Func::RawSpinLock as usize]
        );
    }

    /// Two CPUs, an LRU-add batch of one page, and a task on CPU 1 whose one step writes a new
    /// anonymous page (its fault's add drains the batch at once).
    fn one_page_write() -> (crate::sim::Sim, crate::engine::TaskId) {
        use crate::mm::Backing;
        use crate::step::Step;
        use crate::testing::{spawn, MM};
        let sets = [("kernel.pagevec_size", "1")];
        let mut s = machine(2, "linux-6.14", Then::Sleep, &sets);
        let vpn = s.mem.mmap(MM, 1, true, Backing::Anon, false);
        let write = Step::Touch {
            vpn,
            n: 1,
            write: true,
        };
        let t = spawn(&mut s, MM, 1, &[write]);
        (s, t)
    }

    /// folio_batch_move_lru() takes the lru_lock with spin_lock_irqsave(): a write fault whose
    /// LRU-add batch fills keeps the CPU's interrupts off for that lock round, at the start of
    /// its step, so an IPI arriving meanwhile is taken when the round ends, not at once.
    #[test]
    fn an_ipi_waits_out_a_faults_lru_lock_round() {
        use crate::testing::{busy_until, cal, ipi_at, run_until, switch_in};
        let (mut s, _) = one_page_write();
        let start = switch_in(&s);
        run_until(&mut s, start);
        let round_end = busy_until(&s, 1);
        assert!(s.sched.cpus[1].irqs_off && round_end > start);
        assert_eq!(s.mem.lru[0].lock.acquisitions, 1);
        ipi_at(&mut s, 1, start + 1);
        run_until(&mut s, round_end - 1);
        assert!(s.sched.cpus[1].irq_pending != 0);
        assert_eq!(cal(&s, 1), 0);
        run_until(&mut s, round_end + 1);
        assert_eq!(cal(&s, 1), 1);
    }

    /// release_pages() takes the lru_lock with spin_lock_irqsave() too: the freeing step after a
    /// zap's flush, all lock rounds, runs with interrupts off.
    #[test]
    fn freeing_a_zapped_lru_page_keeps_interrupts_off() {
        use crate::mm::filemap::{PG_ANON_PRIVATE, PG_LRU};
        use crate::mm::Host;
        use crate::step::Outcome;
        let (mut s, t) = one_page_write();
        crate::testing::run_until(&mut s, 1_000_000_000);
        let on_lru = PG_LRU | PG_ANON_PRIVATE;
        let pfn = s.mem.page.iter().position(|p| p.flags & on_lru == on_lru);
        let pfn = pfn.expect("the written page is on the LRU") as u32;
        s.gather(t).pages.push(pfn);
        let out = crate::mm::tlb_batch_pages_flush(&mut s, 1, t);
        assert!(matches!(out, Outcome::Busy { irqs_off: true, ps } if ps > 0));
        assert_eq!(s.mem.lru[0].lock.acquisitions, 2);
    }

    /// Before 1aa43598c03b (6.13 and older), each loop's madvise drains the one page its write
    /// fault put in the per-CPU batch (one lru_lock round: lru_add) and release_pages() takes it
    /// off the LRU (a second round): 2 per loop. After it (6.14), the batch fills to
    /// PAGEVEC_SIZE (31) pages, all zapped but the last: one round adds the 31, one frees the 30
    /// the batch held last, one frees the 31st at its madvise: 3 per 31 loops, and the last
    /// 1000 - 32 x 31 = 8 pages are still in the batch at the end.
    #[test]
    fn lru_lock_rounds_per_madvise_loop() {
        assert_eq!(tlb_flush2("linux-6.1", 1000, &[]), (2000, 0));
        assert_eq!(
            tlb_flush2("linux-6.14", 1000, &[("kernel.zap_lru_add_drain", "true")]),
            (2000, 0)
        );
        assert_eq!(tlb_flush2("linux-6.14", 1000, &[]), (32 * 3, 8));
        assert_eq!(tlb_flush2("linux-6.15", 1000, &[]), (32 * 3, 8));
        // 4.x's pagevec of 14: 71 full batches of 14 pages in 1000 loops, 6 left over.
        assert_eq!(
            tlb_flush2("linux-6.14", 1000, &[("kernel.pagevec_size", "14")]),
            (71 * 3, 6)
        );
    }
}
