//! The page cache of mapped files (mm/filemap.c, mm/readahead.c, mm/memory.c): per-page state,
//! reads through a shared read-only mapping, fault-around, and readahead of sparse files (holes
//! read as zeros, so readahead allocates and clears pages without I/O).

use super::page_alloc::{alloc_page, alloc_slowpath, alloc_succeeded, NeedReclaim};
use super::{Backing, Host, Memory, Parts, Vma, NONE, SWAPPED};
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::{Cost, Machine};
use crate::observe::check::{Site, Violation};
use crate::observe::{Func, Vm};
use crate::step::{Outcome, Step};

/// On an LRU list.
pub const PG_LRU: u16 = 1;
/// On the active list.
pub const PG_ACTIVE: u16 = 2;
/// PG_referenced: seen referenced by an earlier reclaim scan (mark_page_accessed / page_check_references).
pub const PG_REFERENCED: u16 = 4;
/// The page's one mapping has a present PTE for it.
pub const PTE_MAPPED: u16 = 8;
/// That PTE's accessed bit.
pub const PTE_YOUNG: u16 = 16;
/// That PTE is writable and dirty (a shared writable mapping after its write fault).
pub const PTE_DIRTY: u16 = 32;
/// PG_dirty: the page must be written back before it can be freed.
pub const PG_DIRTY: u16 = 64;
/// PG_swapbacked: an anonymous page (its "file" is the region's anon_vma; it goes to swap).
pub const PG_SWAPBACKED: u16 = 128;
/// Its PTE holds a migration entry: the page is locked for migration (try_to_migrate_one).
pub const PTE_MIGRATION: u16 = 256;
/// PG_swapcache: an anonymous page with a swap slot (add_to_swap), until __remove_mapping().
pub const PG_SWAPCACHE: u16 = 512;
/// PG_writeback: its write to the swap device has not completed yet.
pub const PG_WRITEBACK: u16 = 1024;
/// Program text mapped VM_EXEC by many processes (hackbench's): its PTEs are not kept, so
/// PG_REFERENCED, set by every access, stands in for the accessed bits page_referenced() finds.
pub const PG_EXEC: u16 = 2048;
/// A page of a private anonymous mapping (do_anonymous_page, do_cow_fault): on the LRU as the
/// kernel puts it there (the per-CPU batch, then the node's lru_lock), but on no list of
/// `NodeLru`: no reclaim path of the model takes these pages (the reclaim workloads' anonymous
/// memory is the `anon` file regions of `map_new_anon`).
pub const PG_ANON_PRIVATE: u16 = 4096;
/// A PG_ANON_PRIVATE page zapped while it sat in a per-CPU LRU-add batch: the batch holds its
/// last reference, so it is freed when the batch drains (folio_batch_move_lru -> folios_put).
pub const PG_FREE_PENDING: u16 = 8192;

/// A PG_EXEC page referenced since reclaim last looked (VM_EXEC text in use).
pub fn exec_referenced(flags: u16) -> bool {
    flags & (PG_EXEC | PG_REFERENCED) == PG_EXEC | PG_REFERENCED
}

/// What the kernel's `struct page` says about a page-cache page: its file and index, flags, and
/// the CPU that last wrote it (whose cache holds its line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    pub file: u32,
    pub index: u32,
    pub flags: u16,
    pub cpu: u16,
}

impl Default for PageInfo {
    fn default() -> Self {
        PageInfo {
            file: NONE,
            index: 0,
            flags: 0,
            cpu: 0,
        }
    }
}

/// This CPU writes the page's `struct page`: its cache line moves here from the last writer.
pub fn touch_page(m: &Machine, mem: &mut Memory, cpu: CpuId, pfn: u32) -> Time {
    let p = &mut mem.page[pfn as usize];
    let last = p.cpu as usize;
    p.cpu = cpu as u16;
    if last == cpu {
        0
    } else {
        m.line_transfer(last, cpu)
    }
}

/// The file, its first page offset and the VMA start of the mapping that covers `vpn`.
fn mapping_at(mem: &Memory, mm: usize, vpn: u64) -> (usize, u64, Vma) {
    let vma = *mem
        .vma_at(mm, vpn)
        .unwrap_or_else(|| panic!("workload read unmapped page {vpn:#x}"));
    match vma.backing {
        Backing::File { file, pgoff, .. } => (file as usize, pgoff + vpn - vma.start, vma),
        Backing::Anon => panic!("file read of an anonymous mapping at {vpn:#x}"),
    }
}

/// User reads (or writes) of whole pages [vpn, vpn + n) of a file mapping, each through
/// [`access_page`], faulting where it says.
pub fn file_read(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    vpn: u64,
    n: u32,
    write: bool,
) -> Outcome {
    let mm = s.task_mm(t);
    let asid = crate::arch::loaded_asid(s, cpu);
    let Parts { m, mem, arch, .. } = s.mm_parts();
    let (file, first, _) = mapping_at(mem, mm, vpn);
    let (read, walk) = (m.cost[Cost::UserReadPage], m.cost[Cost::TlbMiss]);
    let mut user: Time = 0;
    // The loop's own text and stack: resident, but refilled after a full flush.
    let (ws, ws_n) = mem.tasks[t].working_set;
    for w in ws..ws + ws_n as u64 {
        let (hit, slot) = arch.tlb[cpu].access(asid, w);
        if hit.is_none() {
            let pte = mem.pte(mm, w);
            user += walk;
            arch.tlb[cpu].fill_at(slot, asid, w, pte.pfn(), pte.write(), pte.dirty());
        }
    }
    for i in 0..n as u64 {
        match access_page(
            s,
            cpu,
            (mm, vpn + i),
            (file as u32, (first + i) as u32),
            write,
        ) {
            Ok(ps) => user += ps + read,
            Err(fault) => {
                let retry = Step::FileRead {
                    vpn: vpn + i,
                    n: n - i as u32,
                    write,
                };
                s.push_step(t, retry);
                s.push_step(t, fault);
                break;
            }
        }
    }
    s.mm_parts().obs.stats.charge(Some(t), Func::User, user);
    Outcome::Busy {
        ps: user,
        irqs_off: false,
    }
}

/// One user load or store to page `v` of `mm`, which is page `index` of `file`, through the TLB:
/// a hit is checked (observe/check.rs); a miss walks the page table, setting the accessed bit.
/// Returns the walk time, or the fault to take before retrying: a missing or read-only PTE, or
/// a migration entry. A write needs a dirty entry: a clean one is walked again (x86).
pub fn access_page(
    s: &mut impl Host,
    cpu: CpuId,
    (mm, v): (usize, u64),
    (file, index): (u32, u32),
    write: bool,
) -> Result<Time, Step> {
    let asid = crate::arch::loaded_asid(s, cpu);
    let Parts { m, mem, arch, obs } = s.mm_parts();
    let pfn = mem.files[file as usize].pages[index as usize];
    let flags = if pfn >= SWAPPED {
        0
    } else {
        mem.page[pfn as usize].flags
    };
    let present = flags & PTE_MAPPED != 0;
    let (hit, slot) = arch.tlb[cpu].access(asid, v);
    // A write through a clean entry makes x86 walk the page table to set the dirty bit; an
    // architecture without that guarantee writes through a stale clean entry.
    let traps = m.clean_write_traps;
    if let Some(e) = hit.filter(|e| !write || e.dirty || (!traps && !present)) {
        if obs.check.enabled && !(present && e.pfn == pfn) {
            check_hit(s, cpu, (mm, v), (file, index), e.pfn, write);
        }
        return Ok(0);
    }
    if present && (!write || flags & PTE_DIRTY != 0) {
        mem.page[pfn as usize].flags |= PTE_YOUNG;
        arch.tlb[cpu].fill_at(slot, asid, v, pfn, write, write);
        return Ok(m.cost[Cost::TlbMiss]);
    }
    Err(if flags & PTE_MIGRATION != 0 {
        Step::MigrationEntryWait { pfn }
    } else if write {
        Step::FileWriteFault { vpn: v }
    } else {
        Step::FileFault { vpn: v }
    })
}

/// The checker on a TLB hit whose PTE is gone or points elsewhere: a frame that no longer holds
/// (file, index) was freed; the old frame of a migrated page is stale; the page itself, unmapped
/// but not yet freed, may still be read, and written only while its dirty bit is kept for
/// writeback (try_to_unmap_one's set_page_dirty).
fn check_hit(
    s: &mut impl Host,
    cpu: CpuId,
    (mm, v): (usize, u64),
    owner: (u32, u32),
    frame: u32,
    write: bool,
) {
    let now = s.now();
    let Parts { mem, obs, .. } = s.mm_parts();
    let f = mem.page[frame as usize];
    let current = mem.files[owner.0 as usize].pages[owner.1 as usize];
    let kind = if (f.file, f.index) != owner {
        Violation::UseAfterFree
    } else if frame != current {
        if write {
            Violation::LostWrite
        } else {
            Violation::StaleRead
        }
    } else if write && f.flags & PG_DIRTY == 0 {
        Violation::LostWrite
    } else {
        return;
    };
    obs.check
        .violation(now, kind, Site::Access { write }, cpu, (mm, v, frame));
}

/// page_cache_sync_readahead() of the missing page at `index`, then the fault (`retry`) again.
fn read_in(s: &mut impl Host, t: TaskId, file: usize, index: u64, retry: Step) -> Outcome {
    let n = s.mm_view().0.cfg.readahead_pages as u32;
    s.push_step(t, retry);
    let file = file as u32;
    s.push_step(t, Step::Readahead { file, index, n });
    Outcome::Next
}

/// filemap_fault() + do_fault_around(): read the page in if it is not cached (readahead), then
/// map every cached page of the aligned `fault_around_bytes` window around it.
pub fn file_fault(s: &mut impl Host, cpu: CpuId, t: TaskId, vpn: u64) -> Outcome {
    let mm = s.task_mm(t);
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let (file, index, vma) = mapping_at(mem, mm, vpn);
    if mem.files[file].anon && mem.files[file].pages[index as usize] == SWAPPED {
        return shmem_swapin(s, cpu, t, file, index, vpn);
    }
    if mem.files[file].pages[index as usize] == NONE {
        return read_in(s, t, file, index, Step::FileFault { vpn });
    }
    obs.stats.vm(Vm::PgFault, 1);
    let fa = mem.cfg.fault_around_pages;
    let start = (vpn - vpn % fa).max(vma.start);
    let end = (vpn - vpn % fa + fa).min(vma.end);
    let mut mapped: Time = 0;
    let mut lines = 0;
    for v in start..end {
        let pfn = mem.files[file].pages[(index + v - vpn) as usize];
        if pfn == NONE {
            continue;
        }
        if mem.page[pfn as usize].flags & PTE_MAPPED == 0 {
            // page_ref and mapcount increments write the struct page.
            lines += touch_page(m, mem, cpu, pfn);
            mem.page[pfn as usize].flags |= PTE_MAPPED | PTE_YOUNG;
            mapped += 1;
        }
    }
    // The fault itself maps its page; fault-around maps the others of the window more cheaply.
    let c = &m.cost;
    let ps = c[Cost::FaultFile] + mapped.saturating_sub(1) * c[Cost::FaultAroundPage] + lines;
    obs.stats.charge(Some(t), Func::FilemapFault, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// A write fault on a shared file mapping (do_shared_fault, or do_wp_page -> wp_page_shared on a
/// read-only PTE): read the page in if needed, then page_mkwrite, a writable dirty PTE and
/// set_page_dirty(). No fault-around: 4.x maps around only on read faults.
pub fn file_write_fault(s: &mut impl Host, cpu: CpuId, t: TaskId, vpn: u64) -> Outcome {
    let mm = s.task_mm(t);
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let (file, index, _) = mapping_at(mem, mm, vpn);
    let pfn = mem.files[file].pages[index as usize];
    if mem.files[file].anon {
        assert_ne!(pfn, SWAPPED, "swap-in (do_swap_page) is not modelled");
        if pfn == NONE {
            return do_anonymous_page(s, cpu, t, file, index, vpn);
        }
    } else if pfn == NONE {
        return read_in(s, t, file, index, Step::FileWriteFault { vpn });
    }
    obs.stats.vm(Vm::PgFault, 1);
    let ps = m.cost[Cost::FaultFile] + touch_page(m, mem, cpu, pfn);
    mem.page[pfn as usize].flags |= PTE_MAPPED | PTE_YOUNG | PTE_DIRTY | PG_DIRTY;
    obs.stats.charge(Some(t), Func::FilemapFault, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// A read fault on a swapped-out page of an `anon` region, as shmem_fault() ->
/// shmem_swapin_folio() does it for the MAP_SHARED | MAP_ANONYMOUS region of the batched-unmap
/// changelogs (the model's only swap-in; its regions' reclaim is shmem's too, add_to_swap and
/// pageout each time): a new page, read from the RAM-backed swap device (zram fills a same-filled
/// page, zram_fill_page(): a page's clear), removed from the swap cache (delete_from_swap_cache())
/// and dirtied (folio_mark_dirty(): memory holds the only copy again), back on the LRU, and mapped
/// clean and young by finish_fault(). No fault-around: its neighbours are swap entries.
fn shmem_swapin(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    file: usize,
    index: u64,
    vpn: u64,
) -> Outcome {
    let new = NewPage {
        retry: Step::FileFault { vpn },
        flags: PG_SWAPBACKED | PG_DIRTY | PTE_MAPPED | PTE_YOUNG,
        cost: Cost::FaultFile,
        func: Func::ShmemSwapin,
    };
    fault_in_new_page(s, cpu, t, file, index, new)
}

/// do_anonymous_page() on a write: a new zeroed page, mapped writable and dirty, onto the LRU.
fn do_anonymous_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    file: usize,
    index: u64,
    vpn: u64,
) -> Outcome {
    if let Some(huge) = super::thp::do_huge_pmd_anonymous_page(s, cpu, t, file, index, vpn) {
        return huge;
    }
    let new = NewPage {
        retry: Step::FileWriteFault { vpn },
        flags: PG_SWAPBACKED | PTE_MAPPED | PTE_YOUNG | PTE_DIRTY,
        cost: Cost::FaultAnon,
        func: Func::DoAnonymousPage,
    };
    fault_in_new_page(s, cpu, t, file, index, new)
}

/// How a fault fills a page of an anonymous region: the step to retry after reclaim, the new
/// page's flags, and the fault's work (besides clearing the page) and where it is charged.
struct NewPage {
    retry: Step,
    flags: u16,
    cost: Cost,
    func: Func,
}

/// A new cleared page at `index` of `file`, mapped with `new.flags`, onto the LRU; or, when the
/// allocation must reclaim first, `new.retry` after it.
fn fault_in_new_page(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    file: usize,
    index: u64,
    new: NewPage,
) -> Outcome {
    let (pfn, alloc) = match alloc_page(s, cpu, t) {
        Ok(got) => got,
        Err(NeedReclaim) => {
            s.push_step(t, new.retry);
            alloc_slowpath(s, t);
            return Outcome::Next;
        }
    };
    alloc_succeeded(s, t);
    let Parts { m, mem, obs, .. } = s.mm_parts();
    obs.stats.vm(Vm::PgFault, 1);
    mem.files[file].pages[index as usize] = pfn;
    mem.page[pfn as usize] = PageInfo {
        file: file as u32,
        index: index as u32,
        flags: new.flags,
        cpu: cpu as u16,
    };
    let work = m.cost[new.cost] + m.cost[Cost::PageClear];
    obs.stats.charge(Some(t), new.func, work);
    let locked = super::lru::lru_cache_add(s, cpu, t, pfn);
    super::lru::lock_first(s, t, new.func, alloc + work + locked, locked)
}

/// __do_page_cache_readahead() of a sparse file: allocate, clear and insert the missing pages of
/// [index, index + n), adding each to the LRU. If the allocator needs reclaim, reclaim and resume.
/// A step ends before the page that fills the pagevec, so each __pagevec_lru_add() reaches the
/// LRU after the pages before it were read, as in mpage_readpages(), between other CPUs' adds.
pub fn readahead(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    file: u32,
    index: u64,
    n: u32,
) -> Outcome {
    let (mem, m) = s.mm_view();
    let f = file as usize;
    let end = (index + n as u64).min(mem.files[f].pages.len() as u64);
    let per_page = m.cost[Cost::PageClear] + m.cost[Cost::PagecacheInsert];
    let (mut ps, mut locked): (Time, Time) = (0, 0);
    for i in index..end {
        let mem = s.mm_view().0;
        if mem.files[f].pages[i as usize] != NONE {
            continue;
        }
        if ps > 0 && super::lru::add_drains(mem, cpu) {
            s.push_step(
                t,
                Step::Readahead {
                    file,
                    index: i,
                    n: (end - i) as u32,
                },
            );
            break;
        }
        let pfn = match alloc_page(s, cpu, t) {
            Ok((pfn, cost)) => {
                ps += cost;
                alloc_succeeded(s, t);
                pfn
            }
            Err(NeedReclaim) => {
                s.push_step(
                    t,
                    Step::Readahead {
                        file,
                        index: i,
                        n: (end - i) as u32,
                    },
                );
                alloc_slowpath(s, t);
                break;
            }
        };
        let Parts { mem, obs, .. } = s.mm_parts();
        mem.files[f].pages[i as usize] = pfn;
        // The allocating CPU already holds the line (its pcp list or its refill).
        mem.page[pfn as usize] = PageInfo {
            file,
            index: i as u32,
            flags: 0,
            cpu: cpu as u16,
        };
        obs.stats.charge(Some(t), Func::Readahead, per_page);
        let lru = super::lru::lru_cache_add(s, cpu, t, pfn);
        ps += per_page + lru;
        locked += lru;
    }
    super::lru::lock_first(s, t, Func::Readahead, ps, locked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunRequest;
    use crate::resolve;
    use crate::sim::Sim;

    /// A reclaim setup with one page of the reader's file mapped writable, cached clean (it was
    /// only read) in CPU 1's TLB, then unmapped and not yet flushed: the batched-reclaim window.
    fn unmapped_clean_page(traps: bool) -> (Sim, usize, u64, u32) {
        let req = RunRequest {
            scenario: "reclaim".into(),
            machine: Some("kvm-8cpu".into()),
            sets: vec![("machine.clean_write_traps".into(), traps.to_string())],
            ..Default::default()
        };
        let mut s = Sim::new(&resolve(&req).unwrap()).unwrap();
        let (mm, vpn) = s.mem.files[0].mapper.unwrap();
        let pfn = s.mem.frames.alloc_on(0);
        s.mem.files[0].pages[0] = pfn;
        s.mem.page[pfn as usize] = PageInfo {
            file: 0,
            index: 0,
            flags: 0,
            cpu: 1,
        };
        crate::arch::load_for_test(&mut s, 1, mm);
        let asid = crate::arch::loaded_asid(&s, 1);
        s.arch.tlb[1].fill(asid, vpn, pfn, false, false);
        (s, mm, vpn, pfn)
    }

    /// x86 walks the page table for a store through a clean entry, so the store faults; an
    /// architecture without that guarantee stores through the stale entry into a page reclaim
    /// thinks clean: a lost write.
    #[test]
    fn a_store_through_a_stale_clean_entry_traps_only_where_guaranteed() {
        let (mut s, mm, vpn, _) = unmapped_clean_page(true);
        let got = access_page(&mut s, 1, (mm, vpn), (0, 0), true);
        assert_eq!(got, Err(Step::FileWriteFault { vpn }));
        assert_eq!(s.obs.check.total(), 0);

        let (mut s, mm, vpn, _) = unmapped_clean_page(false);
        assert_eq!(access_page(&mut s, 1, (mm, vpn), (0, 0), true), Ok(0));
        let json = crate::observe::check::to_json(&s.obs.check);
        assert_eq!(json["by_kind"]["lost-write"], 1, "{json}");
        assert_eq!(json["first"][0]["at"], "write");
        // A load through it is fine: the page is still the file's until it is freed.
        let (mut s, mm, vpn, _) = unmapped_clean_page(false);
        assert_eq!(access_page(&mut s, 1, (mm, vpn), (0, 0), false), Ok(0));
        assert_eq!(s.obs.check.total(), 0);
    }

    /// A 32-page readahead reaches the LRU a pagevec at a time: each step ends before the page
    /// that fills the pagevec (14), whose add then drains it at the start of the next step,
    /// interrupts off for that lru_lock round (the rest of the step follows as its own).
    #[test]
    fn readahead_adds_to_the_lru_a_pagevec_at_a_time() {
        let (mut s, ..) = unmapped_clean_page(true);
        s.mem.cfg.pagevec_size = 14; // PAGEVEC_SIZE before 5.x's folio batches of 31
        let t = 0;
        s.sched.tasks[t].steps.clear();
        let on_lru = |s: &Sim| s.mem.lru[0].file.inactive.len();
        let mut seen = vec![];
        let (mut index, mut n) = (1, 32);
        loop {
            let Outcome::Busy { irqs_off, .. } = readahead(&mut s, 0, t, 0, index, n) else {
                panic!("readahead is busy");
            };
            seen.push((on_lru(&s), s.mem.pagevec[0].len(), irqs_off));
            let steps = &mut s.sched.tasks[t].steps;
            if irqs_off {
                assert!(matches!(steps.pop(), Some(Step::Charged { .. })));
            }
            match steps.pop() {
                Some(Step::Readahead { index: i, n: m, .. }) => (index, n) = (i, m),
                None => break,
                Some(other) => panic!("unexpected step {other:?}"),
            }
        }
        // Pages 1-13 wait; the 14th drains them (LRU 14) and 15-27 wait; the 28th drains
        // (LRU 28) and 29-32 wait.
        assert_eq!(seen, [(0, 13, false), (14, 13, true), (28, 4, true)]);
    }
}
