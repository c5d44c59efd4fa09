//! Physical pages (mm/page_alloc.c): one zone per node with its free pages and watermarks, and
//! the per-CPU page lists (pcp) that batch trips to the zone under zone->lock.

use super::{Host, Memory, Parts};
use crate::engine::{CpuId, SpinLock, TaskId, Time, PS_PER_S};
use crate::machine::Cost;
use crate::observe::Func;
use crate::step::Step;

/// One node's memory as one zone (ZONE_NORMAL).
#[derive(Debug)]
pub struct Zone {
    /// Freed pages, taken first; pages in `next..end` were never used.
    free: Vec<u32>,
    next: u32,
    end: u32,
    /// The zone's first frame, and one bit per frame: out of the buddy lists (handed out, or on
    /// a pcp list). The checker reads it to catch a TLB hit on a frame back in the allocator.
    base: u32,
    taken: Vec<u64>,
    /// WMARK_MIN, WMARK_LOW, WMARK_HIGH in pages (__setup_per_zone_wmarks).
    pub wmark: [u64; 3],
    pub lock: SpinLock,
    /// zone->pages_scanned: LRU pages reclaim scanned since a page last came back to the buddy
    /// lists (free_pcppages_bulk / free_one_page reset it).
    pub pages_scanned: u64,
    /// vm_stat[NR_FREE_PAGES] as zone_page_state() reads it: a CPU's changes wait in its
    /// vm_stat_diff until they pass stat_threshold (__mod_zone_page_state()) or its
    /// vmstat_update() folds them, so it drifts from nr_free() by up to ncpus x the threshold.
    vm_free: i64,
    vm_diff: Vec<i32>,
    /// stat_threshold: calculate_normal_threshold(), or calculate_pressure_threshold() while
    /// kswapd is awake (kswapd_try_to_sleep(); Mel Gorman, "mm: page allocator: Adjust the
    /// per-cpu counter threshold when memory is low", 2.6.37).
    threshold: [i32; 2],
    /// The node's kswapd is awake: the pressure threshold applies.
    pub kswapd_awake: bool,
    /// zone->percpu_drift_mark: below it zone_watermark_ok_safe() reads the exact count
    /// (aa45484031dd, 2.6.36).
    drift_mark: u64,
    /// A jiffy (CONFIG_HZ): the unit of the folds' skew.
    jiffy: Time,
    /// Per CPU: when its vmstat_update() next folds its own diffs; and the earliest of those.
    next_fold: Vec<Time>,
    first_fold: Time,
}

pub const WMARK_MIN: usize = 0;
pub const WMARK_LOW: usize = 1;
pub const WMARK_HIGH: usize = 2;

impl Zone {
    /// NR_FREE_PAGES: pages in the buddy allocator (not those sitting in pcp lists).
    pub fn nr_free(&self) -> u64 {
        self.free.len() as u64 + (self.end - self.next) as u64
    }

    pub fn take(&mut self) -> Option<u32> {
        let p = self.free.pop().or_else(|| {
            (self.next < self.end).then(|| {
                self.next += 1;
                self.next - 1
            })
        })?;
        let i = (p - self.base) as usize;
        self.taken[i / 64] |= 1 << (i % 64);
        Some(p)
    }

    pub fn give(&mut self, pfn: u32) {
        let i = (pfn - self.base) as usize;
        self.taken[i / 64] &= !(1 << (i % 64));
        self.free.push(pfn);
        self.pages_scanned = 0;
    }

    /// __free_one_page() of each of `pfns`, then __mod_zone_page_state(NR_FREE_PAGES) for all of
    /// them on `cpu`, the CPU freeing them (free_pcppages_bulk(), free_one_page()).
    pub fn give_all(&mut self, cpu: CpuId, pfns: &[u32], now: Time) {
        for &p in pfns {
            self.give(p);
        }
        self.mod_free(cpu, pfns.len() as i64, now);
    }

    fn is_taken(&self, pfn: u32) -> bool {
        let i = (pfn - self.base) as usize;
        self.taken[i / 64] & (1 << (i % 64)) != 0
    }

    /// zone_watermark_ok() for one order-0 page.
    pub fn watermark_ok(&self, mark: usize) -> bool {
        self.watermark_ok_order(mark, 0)
    }

    /// __zone_watermark_ok() for a block of 2^order pages, on zone_page_state(NR_FREE_PAGES):
    /// the zone keeps more than the mark after it. The buddy lists are taken as unfragmented, so
    /// the loop over the lower orders (each halving the mark for the pages above it) subtracts
    /// nothing.
    pub fn watermark_ok_order(&self, mark: usize, order: u32) -> bool {
        self.zone_page_state() > self.wmark[mark] + (1 << order) - 1
    }

    /// get_page_from_freelist()'s test of this zone for 2^order pages: the watermark check, and
    /// the buddy lists really holding them (a count drifted above them fails in
    /// buffered_rmqueue(), and the zonelist walk goes on to the next zone).
    pub fn can_allocate(&self, mark: usize, order: u32) -> bool {
        self.watermark_ok_order(mark, order) && self.nr_free() >= 1 << order
    }

    /// zone_page_state(zone, NR_FREE_PAGES): the count the allocator's watermark checks read.
    pub fn zone_page_state(&self) -> u64 {
        self.vm_free.max(0) as u64
    }

    /// zone_watermark_ok_safe(), kswapd's check: below percpu_drift_mark, the count with every
    /// CPU's diff summed in (zone_page_state_snapshot()), which is nr_free().
    pub fn watermark_ok_safe(&self, mark: usize) -> bool {
        let free = self.zone_page_state();
        let free = if free < self.drift_mark {
            self.nr_free()
        } else {
            free
        };
        free > self.wmark[mark]
    }

    /// __mod_zone_page_state(zone, NR_FREE_PAGES, delta) on `cpu` at `now`.
    pub fn mod_free(&mut self, cpu: CpuId, delta: i64, now: Time) {
        if now >= self.first_fold {
            self.fold_due(now);
        }
        let t = self.threshold[self.kswapd_awake as usize] as i64;
        let x = self.vm_diff[cpu] as i64 + delta;
        if x > t || x < -t {
            self.vm_free += x;
            self.vm_diff[cpu] = 0;
        } else {
            self.vm_diff[cpu] = x as i32;
        }
    }

    /// refresh_cpu_vm_stats() of each CPU whose vmstat_update() is due by `now`: it folds its
    /// own diffs only, and re-arms itself with round_jiffies_relative(HZ).
    fn fold_due(&mut self, now: Time) {
        for (cpu, due) in self.next_fold.iter_mut().enumerate() {
            if now >= *due {
                self.vm_free += self.vm_diff[cpu] as i64;
                self.vm_diff[cpu] = 0;
                *due = next_vmstat_update(now, cpu, self.jiffy);
            }
        }
        self.first_fold = *self.next_fold.iter().min().expect("a CPU");
    }
}

/// When `cpu`'s vmstat_update() runs next after `now`: round_jiffies_relative() rounds to a
/// whole second less 3 x cpu jiffies ("we don't want all cpus firing their timers at once").
fn next_vmstat_update(now: Time, cpu: CpuId, jiffy: Time) -> Time {
    let skew = 3 * cpu as Time * jiffy % PS_PER_S;
    ((now + skew) / PS_PER_S + 1) * PS_PER_S - skew
}

/// calculate_normal_threshold() and calculate_pressure_threshold() (mm/vmstat.c) of a zone of
/// `pages` with watermarks `wmark` on `ncpus` CPUs, and the percpu_drift_mark they set
/// (refresh_zone_stat_thresholds(): high + the largest drift, where that passes low - min).
fn stat_thresholds(pages: u64, wmark: [u64; 3], ncpus: usize) -> ([i32; 2], u64) {
    let fls = |x: u64| (u64::BITS - x.leading_zeros()) as i64;
    let normal = (2 * fls(ncpus as u64) * (1 + fls(pages >> 15))).min(125);
    let distance = (wmark[WMARK_LOW] - wmark[WMARK_MIN]) as i64;
    let pressure = (distance / ncpus as i64).clamp(1, 125);
    let drift = ncpus as u64 * normal as u64;
    let drift_mark = if drift as i64 > distance {
        wmark[WMARK_HIGH] + drift
    } else {
        0
    };
    ([normal as i32, pressure as i32], drift_mark)
}

/// min_free_kbytes as init_per_zone_wmark_min() sets it: sqrt(lowmem_kbytes * 16), clamped to
/// 128..65536 KiB.
pub fn min_free_kbytes(total_bytes: u64) -> u64 {
    ((total_bytes >> 10) * 16).isqrt().clamp(128, 65536)
}

pub struct Frames {
    pub zones: Vec<Zone>,
    pages_per_node: u32,
    /// Pages handed out and not freed, pcp lists included.
    pub used: u64,
    /// Per CPU, per node: the pcp list of that CPU for that node's zone.
    pub pcp: Vec<Vec<Vec<u32>>>,
}

impl Frames {
    /// `nodes` zones of `bytes_per_node`; frame `reserved` and below are never handed out; `hz`
    /// (CONFIG_HZ) times each CPU's vmstat folds.
    pub fn new(nodes: usize, bytes_per_node: u64, ncpus: usize, reserved: u32, hz: u64) -> Frames {
        let per = (bytes_per_node >> super::PAGE_SHIFT).min((u32::MAX as u64 - 1) / nodes as u64);
        let per = per as u32;
        let min_pages = min_free_kbytes(bytes_per_node * nodes as u64) / 4 / nodes as u64;
        let wmark = [
            min_pages,
            min_pages + min_pages / 4,
            min_pages + min_pages / 2,
        ];
        let (threshold, drift_mark) = stat_thresholds(per as u64, wmark, ncpus);
        let jiffy = PS_PER_S / hz;
        let next_fold: Vec<Time> = (0..ncpus)
            .map(|c| next_vmstat_update(0, c, jiffy))
            .collect();
        let first_fold = *next_fold.iter().min().expect("a CPU");
        let zones = (0..nodes as u32)
            .map(|n| {
                let next = (n * per).max(reserved + 1);
                let end = (n + 1) * per;
                Zone {
                    free: Vec::new(),
                    next,
                    end,
                    base: n * per,
                    taken: vec![0; (per as usize).div_ceil(64)],
                    wmark,
                    lock: SpinLock::default(),
                    pages_scanned: 0,
                    vm_free: (end - next) as i64,
                    vm_diff: vec![0; ncpus],
                    threshold,
                    kswapd_awake: false,
                    drift_mark,
                    jiffy,
                    next_fold: next_fold.clone(),
                    first_fold,
                }
            })
            .collect();
        Frames {
            zones,
            pages_per_node: per,
            used: 0,
            pcp: vec![vec![Vec::new(); nodes]; ncpus],
        }
    }

    pub fn node_of(&self, pfn: u32) -> usize {
        (pfn / self.pages_per_node) as usize
    }

    /// A zone's pages (zone->managed_pages; every node has one zone of the same size).
    pub fn zone_pages(&self) -> u64 {
        self.pages_per_node as u64
    }

    pub fn total(&self) -> u64 {
        self.pages_per_node as u64 * self.zones.len() as u64
    }

    /// Is this frame back in the buddy allocator (free, or never handed out)?
    pub fn is_free(&self, pfn: u32) -> bool {
        !self.zones[self.node_of(pfn)].is_taken(pfn)
    }

    /// A page for a CPU of `node`, for workloads that never reclaim: that node's, else the next
    /// in zonelist order (the default mempolicy allocates on the local node). NR_FREE_PAGES
    /// counts it at once.
    pub fn alloc_on(&mut self, node: usize) -> u32 {
        let nodes = self.zones.len();
        let (z, pfn) = zonelist(nodes, node)
            .find_map(|z| Some((z, self.zones[z].take()?)))
            .expect(
                "out of memory: this workload needs more than the machine has and does not reclaim",
            );
        self.zones[z].vm_free -= 1;
        self.used += 1;
        pfn
    }

    /// Give a page straight back to its zone; NR_FREE_PAGES counts it at once.
    pub fn free(&mut self, pfn: u32) {
        self.used -= 1;
        let n = self.node_of(pfn);
        self.zones[n].give(pfn);
        self.zones[n].vm_free += 1;
    }
}

// ---- The allocator as reclaiming workloads use it: pcp lists, watermarks, kswapd, direct reclaim.

/// No zone had a page above its min watermark: the caller must reclaim (direct reclaim) first.
pub struct NeedReclaim;

/// The zonelist of `node`: itself first, then the others in order (node distance is not modelled
/// beyond local/remote).
pub fn zonelist(nodes: usize, node: usize) -> impl Iterator<Item = usize> {
    (0..nodes).map(move |i| (node + i) % nodes)
}

/// spin_lock(&zone->lock) by `cpu` now, held for `hold`: the wait for it (its line included).
pub fn zone_lock_wait(s: &mut impl Host, zone: usize, cpu: CpuId, hold: Time) -> Time {
    let now = s.now();
    let Parts { m, mem, .. } = s.mm_parts();
    m.lock(&mut mem.frames.zones[zone].lock, cpu, now, hold)
}

/// One page from `zone` through this CPU's pcp list, refilling a batch under zone->lock.
fn take_pcp(s: &mut impl Host, cpu: CpuId, zone: usize) -> (u32, Time) {
    let mut cost = 0;
    let now = s.now();
    let Parts { m, mem, .. } = s.mm_parts();
    if mem.frames.pcp[cpu][zone].is_empty() {
        // rmqueue_bulk(): a batch from the buddy lists.
        let mut hold = 0;
        let mut got = 0;
        for _ in 0..mem.cfg.pcp_batch {
            match mem.frames.zones[zone].take() {
                Some(p) => {
                    hold += m.cost[Cost::BuddyPage] + super::filemap::touch_page(m, mem, cpu, p);
                    mem.frames.pcp[cpu][zone].push(p);
                    got += 1;
                }
                None => break,
            }
        }
        mem.frames.zones[zone].mod_free(cpu, -got, now);
        cost += zone_lock_wait(s, zone, cpu, hold) + hold;
    }
    let frames = &mut s.mm_parts().mem.frames;
    let pfn = frames.pcp[cpu][zone]
        .pop()
        .expect("zone passed its watermark check but had no page");
    frames.used += 1;
    (pfn, cost)
}

/// __alloc_pages_nodemask() for one page-cache page on `cpu`'s node: the fast path against the
/// low watermark over the zonelist, then wake kswapd and try against min; else the caller
/// reclaims. Returns the page and the time taken.
pub fn alloc_page(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Result<(u32, Time), NeedReclaim> {
    let zone = pick_zone(s, cpu, 0)?;
    let (pfn, cost) = take_pcp(s, cpu, zone);
    s.mm_parts()
        .obs
        .stats
        .charge(Some(t), Func::PageAlloc, cost);
    Ok((pfn, cost))
}

/// The zone an allocation of 2^order pages on `cpu` comes from: the fast path against the low
/// watermark over the zonelist, then wake kswapd and try against min.
fn pick_zone(s: &mut impl Host, cpu: CpuId, order: u32) -> Result<usize, NeedReclaim> {
    pick_zone_gfp(s, cpu, order, true)
}

/// pick_zone(), waking kswapd on the slow path only if `wake_kswapd` (no __GFP_NO_KSWAPD).
pub(super) fn pick_zone_gfp(
    s: &mut impl Host,
    cpu: CpuId,
    order: u32,
    wake_kswapd: bool,
) -> Result<usize, NeedReclaim> {
    let (mem, m) = s.mm_view();
    let (nodes, home) = (m.nodes, m.node_of(cpu));
    // zone_watermark_ok() counts NR_FREE_PAGES only: pages on pcp lists (this CPU's included)
    // do not count, which is why a failed retry after reclaim drains them (drain_all_pages).
    let pick = |mem: &Memory, mark: usize| {
        zonelist(nodes, home).find(|&z| mem.frames.zones[z].can_allocate(mark, order))
    };
    if let Some(z) = pick(mem, WMARK_LOW) {
        return Ok(z);
    }
    // __alloc_pages_slowpath(): wake_all_kswapds(), then ALLOC_WMARK_MIN.
    if wake_kswapd {
        for z in zonelist(nodes, home) {
            super::vmscan::wakeup_kswapd(s, z);
        }
    }
    pick(s.mm_view().0, WMARK_MIN).ok_or(NeedReclaim)
}

/// buffered_rmqueue() of a block of 2^order pages (a SLUB slab): order 0 through this CPU's pcp
/// list, as alloc_page; above it no pcp list, the pages straight from the buddy lists under
/// zone->lock (__rmqueue). Appends them to `out` and returns the time taken.
pub fn alloc_block(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    order: u32,
    out: &mut Vec<u32>,
) -> Result<Time, NeedReclaim> {
    if order == 0 {
        let (pfn, cost) = alloc_page(s, cpu, t)?;
        out.push(pfn);
        return Ok(cost);
    }
    let zone = pick_zone(s, cpu, order)?;
    let mut hold = 0;
    let now = s.now();
    let Parts { m, mem, .. } = s.mm_parts();
    for _ in 0..1u32 << order {
        let p = mem.frames.zones[zone]
            .take()
            .expect("zone passed its watermark check for the block");
        hold += m.cost[Cost::BuddyPage] + super::filemap::touch_page(m, mem, cpu, p);
        out.push(p);
    }
    mem.frames.zones[zone].mod_free(cpu, -(1 << order), now);
    mem.frames.used += 1 << order;
    let cost = zone_lock_wait(s, zone, cpu, hold) + hold;
    s.mm_parts()
        .obs
        .stats
        .charge(Some(t), Func::PageAlloc, cost);
    Ok(cost)
}

/// __free_pages() of a block: one page onto this CPU's pcp list (free_page); more straight back
/// to the buddy lists under zone->lock (__free_pages_ok, free_one_page). Returns the time taken.
pub fn free_block(s: &mut impl Host, cpu: CpuId, pfns: &[u32]) -> Time {
    if let [pfn] = pfns {
        return free_page(s, cpu, *pfn);
    }
    let now = s.now();
    let Parts { m, mem, .. } = s.mm_parts();
    let zone = mem.frames.node_of(pfns[0]);
    let mut hold = 0;
    for &p in pfns {
        hold += m.cost[Cost::BuddyPage] + super::filemap::touch_page(m, mem, cpu, p);
    }
    mem.frames.zones[zone].give_all(cpu, pfns, now);
    mem.frames.used -= pfns.len() as u64;
    zone_lock_wait(s, zone, cpu, hold) + hold
}

/// alloc_pages_node(node, __GFP_THISNODE) for a migration target: a page from `node` only, if
/// it is above its low watermark; else wake its kswapd and fail (the page is not migrated).
pub fn alloc_page_on_node(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    node: usize,
) -> Option<(u32, Time)> {
    if !s.mm_view().0.frames.zones[node].can_allocate(WMARK_LOW, 0) {
        super::vmscan::wakeup_kswapd(s, node);
        return None;
    }
    let (pfn, cost) = take_pcp(s, cpu, node);
    s.mm_parts()
        .obs
        .stats
        .charge(Some(t), Func::PageAlloc, cost);
    Some((pfn, cost))
}

/// The allocation of task `t` succeeded: if it was in __alloc_pages_direct_reclaim (the retry
/// after reclaim, or after the drain), that call returns now.
pub fn alloc_succeeded(s: &mut impl Host, t: TaskId) {
    end_direct_reclaim(s, t);
    let r = &mut s.mm_parts().mem.tasks[t].reclaim;
    (r.after_reclaim, r.drained) = (false, false);
}

/// __alloc_pages_direct_reclaim() returns: one latency sample, from entering it.
pub fn end_direct_reclaim(s: &mut impl Host, t: TaskId) {
    let now = s.now();
    let Parts { mem, obs, .. } = s.mm_parts();
    let r = &mut mem.tasks[t].reclaim;
    if let Some(from) = r.direct_since.take() {
        obs.stats.direct_reclaim_latency.push(now - from);
        if r.drained {
            obs.stats.direct_reclaim_drained_latency.push(now - from);
        }
    }
}

/// __alloc_pages_slowpath() after a failed attempt (3.4): __alloc_pages_direct_reclaim() is
/// try_to_free_pages(), a retry, and if that fails drain_all_pages() and one more retry; a reclaim
/// that freed nothing returns at once and goes to __alloc_pages_may_oom() (see
/// vmscan::direct_reclaim). The caller pushed its own retry first.
pub fn alloc_slowpath(s: &mut impl Host, t: TaskId) {
    let r = &mut s.mm_parts().mem.tasks[t].reclaim;
    if r.after_reclaim && !r.drained {
        // "pages are pinned on the per-cpu lists. Drain them and try again" (drained = true).
        r.drained = true;
        s.push_step(t, Step::DrainAllPages);
        return;
    }
    // The retry after the drain failed too: this direct reclaim returns NULL; rebalance.
    end_direct_reclaim(s, t);
    let now = s.now();
    let Parts { mem, obs, .. } = s.mm_parts();
    let r = &mut mem.tasks[t].reclaim;
    (r.after_reclaim, r.drained) = (true, false);
    r.direct_since = Some(now);
    obs.stats.vm(crate::observe::Vm::AllocStall, 1);
    s.push_step(t, Step::DirectReclaim { want: 32 });
}

/// free_hot_cold_page(): onto this CPU's pcp list for the page's zone; past `pcp_high`, a batch
/// goes back to the buddy lists under zone->lock (free_pcppages_bulk). Returns the time taken.
pub fn free_page(s: &mut impl Host, cpu: CpuId, pfn: u32) -> Time {
    let Parts { m, mem, .. } = s.mm_parts();
    let zone = mem.frames.node_of(pfn);
    mem.frames.used -= 1;
    mem.frames.pcp[cpu][zone].push(pfn);
    let touch = super::filemap::touch_page(m, mem, cpu, pfn);
    if mem.frames.pcp[cpu][zone].len() < mem.cfg.pcp_high {
        return touch;
    }
    let batch = mem.cfg.pcp_batch;
    let hold = batch as u64 * m.cost[Cost::BuddyPage];
    let wait = zone_lock_wait(s, zone, cpu, hold);
    let now = s.now();
    let f = &mut s.mm_parts().mem.frames;
    // The coldest pages (the list's far end) go back first.
    f.zones[zone].give_all(cpu, &f.pcp[cpu][zone][..batch], now);
    f.pcp[cpu][zone].drain(..batch);
    touch + wait + hold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_of_a_64g_4_node_machine() {
        // sqrt(64 GiB in KiB * 16) = 32768 KiB = 8192 pages, 2048 per node.
        assert_eq!(min_free_kbytes(64 << 30), 32768);
        let f = Frames::new(4, 16 << 30, 48, 0, 250);
        assert_eq!(f.zones[1].wmark, [2048, 2560, 3072]);
        assert_eq!(f.node_of(f.zones[2].next), 2);
    }

    /// NR_FREE_PAGES as the watermark checks read it (mm/vmstat.c): a CPU's change waits in its
    /// diff until the diff passes stat_threshold, or until that CPU's once-a-second fold; kswapd
    /// awake lowers the threshold; kswapd's own check reads the exact count below
    /// percpu_drift_mark.
    #[test]
    fn free_pages_drift_by_each_cpus_pending_diff() {
        // 1 GiB on 8 CPUs: min 1024, low 1280, high 1536 pages; normal threshold
        // 2 * fls(8) * (1 + fls(8)) = 40, pressure (1280 - 1024) / 8 = 32, drift mark 1536 + 320.
        let f = Frames::new(1, 1 << 30, 8, 0, 250);
        let mut z = f.zones.into_iter().next().unwrap();
        assert_eq!((z.threshold, z.drift_mark), ([40, 32], 1856));
        let all = z.nr_free();
        assert_eq!(z.zone_page_state(), all);
        let t = PS_PER_S / 2;
        // rmqueue_bulk() of a batch of 31 on CPU 0: pending, not yet counted.
        z.mod_free(0, -31, t);
        assert_eq!((z.zone_page_state(), z.vm_diff[0]), (all, -31));
        // A second batch passes the threshold: all 62 are counted at once.
        z.mod_free(0, -31, t);
        assert_eq!((z.zone_page_state(), z.vm_diff[0]), (all - 62, 0));
        // With kswapd awake, 33 pending pages pass the pressure threshold of 32.
        z.kswapd_awake = true;
        z.mod_free(1, 31, t);
        assert_eq!(z.zone_page_state(), all - 62);
        z.mod_free(1, 2, t);
        assert_eq!((z.zone_page_state(), z.vm_diff[1]), (all - 29, 0));
        // vmstat_update(): each CPU folds its own diffs once a second, CPU c 3 x c jiffies (12 ms
        // at HZ=250) before the whole second: at 970 ms CPU 3's (964 ms) has run, CPU 2's (976 ms)
        // not yet.
        let ms = PS_PER_S / 1000;
        z.mod_free(2, 5, t);
        z.mod_free(3, -2, t);
        z.mod_free(3, 1, 970 * ms);
        assert_eq!(
            (z.zone_page_state(), z.vm_diff[2], z.vm_diff[3]),
            (all - 31, 5, 1)
        );
        z.mod_free(3, 0, 976 * ms);
        assert_eq!((z.zone_page_state(), z.vm_diff[2]), (all - 26, 0));
        // Drift can hide a breach of the high mark from the allocator, not from kswapd: the
        // buddy lists hold 1500 pages, 80 of them taken by CPU 4 and not yet counted.
        while z.nr_free() > 1500 {
            z.take();
        }
        z.vm_diff[4] = -80;
        let pending: i64 = z.vm_diff.iter().map(|&d| d as i64).sum();
        z.vm_free = 1500 - pending;
        assert_eq!(z.zone_page_state(), 1579);
        assert!(z.watermark_ok(WMARK_HIGH));
        assert!(!z.watermark_ok_safe(WMARK_HIGH));
    }
}
