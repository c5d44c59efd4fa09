//! Anonymous transparent huge pages in the regions reclaim tracks (`kernel.thp`), as 3.x
//! mm/huge_memory.c has them: a write fault at an empty, aligned 2 MiB of a private anonymous
//! region maps one huge page (do_huge_pmd_anonymous_page()); it sits on the LRU as one entry
//! counted as 512 pages, its PMD's accessed bit decides its deactivation, and reclaim splits it
//! when it adds it to swap (add_to_swap() -> split_huge_page()): before 3.10 the 511 tails go
//! onto the LRU in order (lru_add_page_tail() of an isolated head) and are reclaimed a whole
//! inactive cycle later, 511 pages of one PTE table in a row. (huge_memory.rs is the other
//! huge-page model: powerpc's PMD-mapped regions at scale, with no per-page state.)
//!
//! Simplified: the 512 frames need not be contiguous (the buddy lists are taken as unfragmented,
//! as for slabs, so no compaction is needed and no fallback comes from fragmentation); a huge
//! page's translation is cached as 512 4 KiB TLB entries, flushed alike. khugepaged's collapses
//! are not modelled.

use super::filemap::{
    PageInfo, PG_DIRTY, PG_LRU, PG_REFERENCED, PG_SWAPBACKED, PTE_DIRTY, PTE_MAPPED, PTE_YOUNG,
};
use super::page_alloc::{
    alloc_slowpath, alloc_succeeded, end_direct_reclaim, pick_zone_gfp, zone_lock_wait,
};
use super::{ptl, Host, Memory, Parts, NONE, PTRS_PER_PTE};
use crate::config::named_enum;
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::Cost;
use crate::observe::{Func, Vm};
use crate::step::{FlushRange, Outcome, Step};

named_enum! {
    /// `kernel.thp`: /sys/kernel/mm/transparent_hugepage/enabled for private anonymous memory.
    Thp {
        /// Every anonymous fault maps a 4 KiB page.
        Never = "never",
        /// A write fault at an empty, aligned 2 MiB inside the region maps a huge page.
        Always = "always",
    }
}

/// PG_head (a compound page's first page, on the LRU for all 512) and PG_tail (the others).
pub const PG_HEAD: u16 = 1 << 14;
pub const PG_TAIL: u16 = 1 << 15;

/// Pages of a huge page (HPAGE_PMD_NR).
pub const HPAGE_PMD_NR: usize = PTRS_PER_PTE as usize;

/// What one 2 MiB of a region's address space holds: its PMD (`File::pmd`).
pub const PMD_NONE: u8 = 0;
pub const PMD_TABLE: u8 = 1;
pub const PMD_HUGE: u8 = 2;

/// The LRU pages a page on a list stands for (hpage_nr_pages()): 1, or 512 for a huge page.
pub fn nr_pages(flags: u16) -> usize {
    if flags & PG_HEAD != 0 {
        HPAGE_PMD_NR
    } else {
        1
    }
}

/// 1 if `flags` are a huge page's head, else 0: an LRU list's count of heads, whose pages it
/// adds 511 each for.
pub fn heads(flags: u16) -> usize {
    (flags & PG_HEAD != 0) as usize
}

/// The PMD states of a new region of `pages` pages from `start` (one per PTE table it spans), if
/// huge pages are on.
pub fn new_pmds(thp: Thp, start: u64, pages: u64) -> Vec<u8> {
    match thp {
        Thp::Never => Vec::new(),
        Thp::Always => vec![PMD_NONE; ptl::tables_spanned(start, pages) as usize],
    }
}

/// The index into `File::pmd` of the PMD mapping `vpn` of a region that starts at `start`.
fn pmd_index(start: u64, vpn: u64) -> usize {
    (vpn / PTRS_PER_PTE - start / PTRS_PER_PTE) as usize
}

/// mm->page_table_lock, which the huge PMDs of the mm are changed under (3.x has no split PMD
/// lock): one of the PTE locks' kind, made at the mm's first huge page.
fn page_table_lock(mem: &mut Memory, mm: usize) -> u32 {
    if mem.mms[mm].page_table_lock == NONE {
        mem.mms[mm].page_table_lock = mem.ptl.add_page_table_lock();
    }
    mem.mms[mm].page_table_lock
}

/// Writing the `n` contiguous `struct page`s of a huge page (64 bytes each) one after another:
/// a stream, priced per line as clear_page() writes its lines (page_clear / 64), not as `n`
/// separate line transfers.
fn struct_pages_stream(m: &crate::machine::Machine, n: usize) -> Time {
    n as Time * m.cost[Cost::PageClear] / 64
}

/// pmdp_test_and_clear_young() of huge page `head`: its PMD's accessed bit, which the model
/// keeps as the accessed bits of its 512 pages (a walk through the PMD sets the bit of the page
/// it reached, so a page access costs nothing extra): set if any is, and cleared.
pub fn pmd_test_and_clear_young(mem: &mut Memory, head: u32) -> bool {
    let info = mem.page[head as usize];
    let first = info.index as usize;
    let mut young = false;
    for k in 0..HPAGE_PMD_NR {
        let pfn = mem.files[info.file as usize].pages[first + k];
        let p = &mut mem.page[pfn as usize];
        young |= p.flags & PTE_YOUNG != 0;
        p.flags &= !PTE_YOUNG;
    }
    young
}

/// do_huge_pmd_anonymous_page() for a write fault at `vpn` (page `index` of anonymous `file`):
/// with `kernel.thp=always`, an empty PMD whose 2 MiB lies inside the region, and an order-9
/// block above the watermark, map a cleared huge page and put its head on the LRU. None: the
/// fault maps a 4 KiB page instead (the PMD gets a PTE table; a fallback is counted).
pub fn do_huge_pmd_anonymous_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    file: usize,
    index: u64,
    vpn: u64,
) -> Option<Outcome> {
    let mem = s.mem();
    if mem.cfg.thp == Thp::Never {
        return None;
    }
    let f = &mem.files[file];
    let (mm, start) = f.mapper.expect("an anonymous region is mapped");
    let end = start + f.pages.len() as u64;
    let haddr = vpn - vpn % PTRS_PER_PTE;
    let i = pmd_index(start, vpn);
    if f.pmd[i] != PMD_NONE {
        return None;
    }
    if haddr < start || haddr + PTRS_PER_PTE > end {
        // The 4 KiB fault gives the PMD its PTE table.
        mem.files[file].pmd[i] = PMD_TABLE;
        return None;
    }
    // GFP_TRANSHUGE has __GFP_NO_KSWAPD: the slow path does not wake kswapd.
    let Ok(zone) = pick_zone_gfp(s, cpu, 9, false) else {
        // And __GFP_NORETRY: one direct reclaim and its drain, each followed by a retry of this
        // fault, then the fault falls back to a 4 KiB page.
        let r = &mut s.mem().tasks[t].reclaim;
        if !(r.after_reclaim && r.drained) {
            s.push_step(t, Step::FileWriteFault { vpn });
            alloc_slowpath(s, t);
            return Some(Outcome::Next);
        }
        end_direct_reclaim(s, t);
        let mem = s.mem();
        let r = &mut mem.tasks[t].reclaim;
        (r.after_reclaim, r.drained) = (false, false);
        mem.files[file].pmd[i] = PMD_TABLE;
        s.obs().stats.vm(Vm::ThpFaultFallback, 1);
        return None;
    };
    alloc_succeeded(s, t);
    // __rmqueue() of one order-9 block under zone->lock; prep_compound_page() then writes the
    // 512 struct pages.
    let hold = s.machine().cost[Cost::BuddyPage];
    let wait = zone_lock_wait(s, zone, cpu, hold);
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let first = index - vpn % PTRS_PER_PTE;
    let lines = struct_pages_stream(m, HPAGE_PMD_NR);
    for k in 0..HPAGE_PMD_NR as u64 {
        let pfn = mem.frames.zones[zone]
            .take()
            .expect("zone passed its order-9 watermark check");
        mem.files[file].pages[(first + k) as usize] = pfn;
        let part = if k == 0 { PG_HEAD | PTE_YOUNG } else { PG_TAIL };
        mem.page[pfn as usize] = PageInfo {
            file: file as u32,
            index: (first + k) as u32,
            flags: PG_SWAPBACKED | PTE_MAPPED | PTE_DIRTY | part,
            cpu: cpu as u16,
        };
    }
    mem.frames.used += HPAGE_PMD_NR as u64;
    mem.files[file].pmd[i] = PMD_HUGE;
    obs.stats.vm(Vm::PgFault, 1);
    obs.stats.vm(Vm::ThpFaultAlloc, 1);
    let alloc = wait + hold + lines;
    obs.stats.charge(Some(t), Func::PageAlloc, alloc);
    let work = m.cost[Cost::FaultAnon];
    let clear = HPAGE_PMD_NR as Time * m.cost[Cost::PageClear];
    obs.stats
        .charge(Some(t), Func::DoHugePmdAnonymousPage, work);
    obs.stats.charge(Some(t), Func::ClearPage, clear);
    let head = mem.files[file].pages[first as usize];
    // set_pmd_at() under mm->page_table_lock, once the page is cleared.
    let id = page_table_lock(mem, mm);
    s.push_step(t, Step::PtlUnlock { id });
    s.push_step(t, Step::PtlLock { id });
    let locked = super::lru::lru_cache_add(s, cpu, t, head);
    Some(super::lru::lock_first(
        s,
        t,
        Func::DoHugePmdAnonymousPage,
        alloc + work + clear + locked,
        locked,
    ))
}

/// flush_tlb_range() of the 2 MiB a huge page maps (pmdp_clear_flush_young(),
/// pmdp_splitting_flush(), pmdp_invalidate()).
fn flush_pmd(mm: usize, haddr: u64) -> Step {
    Step::FlushTlbMmRange(FlushRange {
        mm: mm as u32,
        start: haddr,
        end: haddr + PTRS_PER_PTE,
        stride_shift: 12,
        freed_tables: false,
    })
}

/// The mm and PMD-aligned address of huge page `head`.
fn mapping_of_head(mem: &Memory, head: u32) -> (usize, u64) {
    let (mm, vpn) = super::rmap::mapping_of(mem, head);
    (mm, vpn - vpn % PTRS_PER_PTE)
}

/// The flush that page_referenced() of a young huge page does before 3.15, with the mm's
/// page_table_lock held (page_referenced_one() -> pmdp_clear_flush_young_notify()): the steps,
/// to push last first.
pub fn young_flush_steps(mem: &mut Memory, head: u32) -> [Step; 3] {
    let (mm, haddr) = mapping_of_head(mem, head);
    let id = page_table_lock(mem, mm);
    [
        Step::PtlUnlock { id },
        flush_pmd(mm, haddr),
        Step::PtlLock { id },
    ]
}

/// shrink_page_list() of the huge page `head` (isolated; the pass's time so far is `ps`):
/// page_referenced() through its PMD, under mm->page_table_lock; a young one is activated (and
/// before 3.15 flushed), else add_to_swap() splits it, and the pass takes the head again as a
/// 4 KiB page. None: the pass goes on to its next page; Some: the pass stops for the steps it
/// pushed (or to spin for the lock).
pub fn shrink_huge_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    head: u32,
    ps: Time,
) -> Option<Outcome> {
    let (mm, haddr) = mapping_of_head(s.mem(), head);
    let id = page_table_lock(s.mem(), mm);
    let mut ps = ps;
    match super::vmscan::lock_for_page(s, cpu, t, id, ps) {
        Ok(moved) => ps += moved,
        Err(out) => return Some(out),
    }
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let walk = m.cost[Cost::RmapWalk] + super::filemap::touch_page(m, mem, cpu, head);
    obs.stats.charge(Some(t), Func::PageReferenced, walk);
    ps += walk;
    let young = pmd_test_and_clear_young(s.mem(), head);
    let p = &mut s.mem().page[head as usize];
    p.flags &= !PG_REFERENCED;
    if young {
        // PAGEREF_ACTIVATE: an anonymous page whose PMD was referenced.
        p.flags |= PG_REFERENCED;
        s.mem().tasks[t].reclaim.activate.push(head);
        if s.mem().cfg.young_flush {
            s.push_step(t, Step::ShrinkPageList);
            s.push_step(t, Step::PtlUnlock { id });
            s.push_step(t, flush_pmd(mm, haddr));
            return Some(Outcome::Busy {
                ps,
                irqs_off: false,
            });
        }
        ptl::unlock(s, t, id);
        return None;
    }
    ptl::unlock(s, t, id);
    // add_to_swap() -> split_huge_page(): __split_huge_page_splitting() (the PMD marked
    // splitting and flushed, under page_table_lock), __split_huge_page_refcount() (the tails
    // onto the LRU under lru_lock), __split_huge_page_map() (the PTE table filled, the PMD
    // invalidated and flushed, then pointed at the table, under page_table_lock); then the pass
    // takes the head again, a 4 KiB page now.
    s.mem().tasks[t].reclaim.pos -= 1;
    let steps = [
        Step::ShrinkPageList,
        Step::PtlUnlock { id },
        flush_pmd(mm, haddr),
        Step::SplitHugePageMap { head },
        Step::PtlLock { id },
        Step::SplitHugePageRefcount { head },
        Step::PtlUnlock { id },
        flush_pmd(mm, haddr),
        Step::PtlLock { id },
    ];
    for step in steps {
        s.push_step(t, step);
    }
    Some(Outcome::Busy {
        ps,
        irqs_off: false,
    })
}

/// __split_huge_page_refcount() of isolated huge page `head`: under its node's lru_lock
/// (interrupts off), each tail takes the head's flags (and PG_dirty) and goes onto the inactive
/// anon list's head, in order (lru_add_page_tail() of a head that is not PageLRU). Every PTE
/// gets the PMD's accessed bit (__split_huge_page_map()).
pub fn split_refcount(s: &mut impl Host, cpu: CpuId, t: TaskId, head: u32) -> Outcome {
    let young = match pmd_test_and_clear_young(s.mem(), head) {
        true => PTE_YOUNG,
        false => 0,
    };
    let mem = s.mem();
    mem.page[head as usize].flags |= young;
    let info = mem.page[head as usize];
    let (file, first) = (info.file as usize, info.index as usize);
    let inherited = info.flags & (PG_REFERENCED | PG_SWAPBACKED) | young;
    let node = mem.frames.node_of(head);
    let mut tails = [0u32; HPAGE_PMD_NR - 1];
    for (k, tail) in tails.iter_mut().enumerate() {
        *tail = mem.files[file].pages[first + 1 + k];
    }
    for &tail in tails.iter().rev() {
        let p = &mut mem.page[tail as usize];
        p.flags = (p.flags & !PG_TAIL) | inherited | PG_DIRTY | PG_LRU;
        p.cpu = cpu as u16;
        let flags = p.flags;
        mem.lru[node].anon.push_inactive(tail, flags);
    }
    mem.page[head as usize].flags &= !PG_HEAD;
    // Each tail's work under the lock (lru_page), its struct page streamed in order.
    let m = s.machine();
    let work = tails.len() as Time * m.cost[Cost::LruPage] + struct_pages_stream(m, tails.len());
    let (spin, hold) = super::lru::lock_lru_split(s, cpu, node, &[], work);
    let stats = &mut s.obs().stats;
    stats.vm(Vm::ThpSplit, 1);
    stats.charge_lock(Some(t), Func::SplitHugePage, spin);
    stats.charge(Some(t), Func::SplitHugePage, hold);
    Outcome::Busy {
        ps: spin + hold,
        irqs_off: true,
    }
}

/// __split_huge_page_map(): the deposited PTE table gets the 512 PTEs (each install charged as a
/// fault-around page's, the nearest measured cost), and the PMD will point to it.
pub fn split_map(s: &mut impl Host, t: TaskId, head: u32) -> Outcome {
    let mem = s.mem();
    let info = mem.page[head as usize];
    let (start, vpn) = {
        let f = &mem.files[info.file as usize];
        let (_, start) = f.mapper.expect("a mapped region");
        (start, start + info.index as u64)
    };
    mem.files[info.file as usize].pmd[pmd_index(start, vpn)] = PMD_TABLE;
    let ps = HPAGE_PMD_NR as Time * s.machine().cost[Cost::FaultAroundPage];
    s.obs().stats.charge(Some(t), Func::SplitHugePage, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Vm;
    use crate::sched::KTHREAD;
    use crate::sim::Sim;
    use crate::testing::{machine, run_until, spawn, spawn_reader, Then, MM};

    const MS: u64 = 1_000_000_000;

    fn vm(s: &Sim, c: Vm) -> u64 {
        s.obs.stats.vm[c as usize]
    }

    /// Linux 3.8 on three CPUs with `kernel.thp=always`: CPU 1 writes a 2 x 2 MiB anonymous
    /// region of the process, then spins in user space; CPU 2 runs another thread of it.
    fn written_by_cpu_1() -> Sim {
        let sets = [("kernel.pagevec_size", "1"), ("check.enabled", "true")];
        let mut s = machine(3, "linux-3.8", Then::Spin, &sets);
        s.mem.cfg.thp = Thp::Always;
        let vpn = spawn_reader(&mut s, 1, 2 * PTRS_PER_PTE as u32, true);
        assert_eq!(
            vpn % PTRS_PER_PTE,
            0,
            "a region of whole PMDs is PMD-aligned"
        );
        spawn(&mut s, MM, 2, &[]);
        run_until(&mut s, 10 * MS);
        s
    }

    /// Two write faults map the region: two huge pages, whose heads alone are on the (active,
    /// before 5.9) anon list, counting 512 pages each.
    #[test]
    fn a_write_fault_maps_a_huge_page_whose_head_alone_is_on_the_lru() {
        let s = written_by_cpu_1();
        assert_eq!(vm(&s, Vm::ThpFaultAlloc), 2);
        assert_eq!(vm(&s, Vm::ThpFaultFallback), 0);
        assert_eq!(vm(&s, Vm::PgFault), 2);
        let anon = &s.mem.lru[0].anon;
        assert_eq!((anon.active.len(), anon.huge_active), (2, 2));
        assert_eq!((anon.active_pages(), anon.inactive_pages()), (1024, 0));
        let file = s.mem.files.last().unwrap();
        assert_eq!(file.pmd, [PMD_HUGE, PMD_HUGE]);
        let mut heads = file.pages.iter().step_by(HPAGE_PMD_NR);
        assert!(heads.all(|&p| s.mem.page[p as usize].flags & PG_HEAD != 0));
        assert_eq!(s.obs.check.total(), 0);
    }

    /// A region that holds no aligned 2 MiB gets 4 KiB pages, without a fallback counted.
    #[test]
    fn a_region_without_a_whole_pmd_gets_small_pages() {
        let sets = [("kernel.pagevec_size", "1")];
        let mut s = machine(2, "linux-3.8", Then::Spin, &sets);
        s.mem.cfg.thp = Thp::Always;
        spawn_reader(&mut s, 1, 300, true);
        run_until(&mut s, 10 * MS);
        assert_eq!(vm(&s, Vm::ThpFaultAlloc) + vm(&s, Vm::ThpFaultFallback), 0);
        assert_eq!(vm(&s, Vm::PgFault), 300);
        assert_eq!(s.mem.lru[0].anon.active_pages(), 300);
    }

    /// One direct-reclaim pass of 3.8 over the two huge pages: shrink_active_list() deactivates
    /// both (their PMDs were young: one 2 MiB flush each), shrink_page_list() splits each
    /// (the splitting flush and the invalidating flush) and swaps its head out (its own flush),
    /// and the 511 tails of each go onto the inactive list in a row, in order. Every flush
    /// interrupts CPUs 1 and 2: 4 flushes x 2 huge pages x 2 CPUs.
    #[test]
    fn reclaim_splits_a_huge_page_and_lines_its_tails_up_on_the_lru() {
        let mut s = written_by_cpu_1();
        spawn(
            &mut s,
            KTHREAD,
            0,
            &[Step::ShrinkNode {
                node: 0,
                nr: 32,
                nr_active: 32,
            }],
        );
        let now = s.now();
        run_until(&mut s, now + 10 * MS);
        assert_eq!(vm(&s, Vm::ThpSplit), 2);
        assert_eq!((vm(&s, Vm::PgStealDirect), vm(&s, Vm::PSwpOut)), (2, 2));
        assert_eq!(s.obs.stats.ipis_sent, 16);
        let anon = &s.mem.lru[0].anon;
        assert_eq!((anon.inactive.len(), anon.huge_inactive), (1022, 0));
        assert_eq!((anon.active.len(), s.mem.lru[0].isolated), (0, [0, 0]));
        let file = s.mem.files.last().unwrap();
        assert_eq!(file.pmd, [PMD_TABLE, PMD_TABLE]);
        // From the list's head: huge page 2's tails 1..511, then huge page 1's.
        let index = |p: &u32| s.mem.page[*p as usize].index as usize;
        let order: Vec<usize> = anon.inactive.iter().map(index).collect();
        let expect: Vec<usize> = (513..1024).chain(1..512).collect();
        assert_eq!(order, expect);
        assert!(anon.inactive.iter().all(|&p| s.mem.page[p as usize].flags
            & (PG_TAIL | PG_LRU | PG_DIRTY)
            == PG_LRU | PG_DIRTY));
        assert_eq!(s.obs.check.total(), 0);
    }
}
