//! The LRU lists (mm/swap.c, mm/vmscan.c): per node an inactive and an active list of file pages
//! and of anonymous pages, fed through per-CPU pagevecs of `pagevec_size` pages, all under the
//! node's lru_lock.

use std::collections::VecDeque;

use crate::engine::{CpuId, SpinLock, TaskId, Time};
use crate::machine::Cost;
use crate::observe::Func;

use super::Host;

/// An inactive and an active list. The front is the head (newest), the back the tail (reclaimed
/// first).
#[derive(Debug, Default)]
pub struct LruLists {
    pub inactive: VecDeque<u32>,
    pub active: VecDeque<u32>,
}

impl LruLists {
    pub fn is_empty(&self) -> bool {
        self.inactive.is_empty() && self.active.is_empty()
    }
}

/// One node's lruvec.
#[derive(Debug, Default)]
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
/// to this CPU while it holds the lock. Returns spin + hold time.
pub fn lock_lru(s: &mut impl Host, cpu: CpuId, node: usize, pages: &[u32]) -> Time {
    let now = s.now();
    let p = s.mm_parts();
    let (m, mem) = (p.m, p.mem);
    let mut hold = pages.len() as Time * m.cost[Cost::LruPage];
    for &pfn in pages {
        hold += super::filemap::touch_page(m, mem, cpu, pfn);
    }
    mem.lru[node]
        .lock
        .acquire(now, cpu, hold, |a, b| m.line_transfer(a, b))
        + hold
}

/// Whether the next lru_cache_add() on this CPU fills its pagevec and so drains it.
pub fn add_drains(mem: &super::Memory, cpu: CpuId) -> bool {
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
        let mem = s.mm_parts().mem;
        // The kernel relocks whenever the next page is on another node's lruvec.
        let node = mem.frames.node_of(pv[i]);
        let mut j = i;
        while j < pv.len() && mem.frames.node_of(pv[j]) == node {
            let p = pv[j];
            let page = &mut mem.page[p as usize];
            if page.flags & super::filemap::PG_SWAPBACKED != 0 {
                // lru_cache_add_active_or_unevictable(): new anonymous pages start active (4.x).
                page.flags |= super::filemap::PG_LRU | super::filemap::PG_ACTIVE;
                mem.lru[node].anon.active.push_front(p);
            } else {
                page.flags |= super::filemap::PG_LRU;
                mem.lru[node].file.inactive.push_front(p);
            }
            j += 1;
        }
        cost += lock_lru(s, cpu, node, &pv[i..j]);
        i = j;
    }
    pv.clear();
    let p = s.mm_parts();
    p.mem.pagevec[cpu] = pv;
    p.obs.stats.charge(Some(t), Func::LruAdd, cost);
    cost
}
