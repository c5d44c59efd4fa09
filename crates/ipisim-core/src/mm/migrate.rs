//! Page migration between nodes (mm/migrate.c, mm/mempolicy.c do_migrate_pages): isolate the
//! pages, then for each page unmap it (a migration entry replaces its PTE), flush the TLB, copy it
//! to a page on the new node and restore the PTE there, and free the old page. Linux 6.4 unmaps a
//! batch of NR_MAX_BATCHED_MIGRATION pages and flushes once before moving any
//! (migrate_pages_batch, 7e12beb8ca2a).

use super::filemap::{
    touch_page, PageInfo, PG_ACTIVE, PG_DIRTY, PG_LRU, PTE_DIRTY, PTE_MAPPED, PTE_MIGRATION,
};
use super::lru::{lock_first, lock_lru, lru_add_drain, lru_cache_add};
use super::page_alloc::{alloc_page_on_node, free_page};
use super::rmap::{self, flush_tlb_page};
use super::{Host, Parts};
use crate::config::named_enum;
use crate::engine::{CpuId, TaskId, Time, NEVER};
use crate::machine::Cost;
use crate::observe::check::{PageEvent, Site};
use crate::observe::{Func, Vm};
use crate::step::{Outcome, Step};

/// NR_MAX_BATCHED_MIGRATION: HPAGE_PMD_NR, 512 pages on x86-64.
pub const NR_MAX_BATCHED_MIGRATION: usize = 512;

named_enum! {
    /// `kernel.migrate_flush`: when migration flushes the TLB for the pages it unmaps.
    MigrateFlush {
        /// try_to_migrate_one's ptep_clear_flush(): one flush per page, page by page (to 6.3).
        Immediate = "immediate",
        /// 6.4: unmap up to 512 pages with TTU_BATCH_FLUSH, one try_to_unmap_flush(), then move.
        Batched = "batched",
        /// An unsafe what-if: move (copy, restore, free) the batch first and flush after, which
        /// seed 001 warned about. The checker must catch it.
        BatchedUnsafe = "batched_unsafe",
    }
}

/// One migrate_pages() call of a task: the isolated pages left, the batch in flight as
/// (source, destination) frames, and the target node.
#[derive(Debug, Default)]
pub struct Migration {
    pages: Vec<u32>,
    batch: Vec<(u32, u32)>,
    to: usize,
}

/// do_migrate_pages() -> migrate_to_node(): lru_cache_disable(), then isolate every page of `mm`
/// on node `from` (queue_pages_range + isolate_lru_page), then migrate them in batches.
pub fn migrate_pages(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    mm: usize,
    from: usize,
    to: usize,
) -> Outcome {
    // lru_cache_disable() drains every CPU's LRU-add batch, so no page is missed for sitting in
    // one. The kernel runs a work item on each CPU and waits; here the caller does the work.
    let mut ps = 0;
    for c in 0..s.mm_view().1.ncpus() {
        ps += lru_add_drain(s, c, t);
    }
    let mem = s.mm_parts().mem;
    let mut pages = std::mem::take(&mut mem.tasks[t].migrate.pages);
    pages.clear();
    let (page, files) = (&mem.page, &mem.files);
    let lists = &mut mem.lru[from].anon;
    for list in [&mut lists.active, &mut lists.inactive] {
        for p in std::mem::take(list) {
            let owner = &files[page[p as usize].file as usize];
            if owner.mapper.is_some_and(|(m, _)| m == mm) {
                pages.push(p);
            } else {
                list.push_back(p);
            }
        }
    }
    // queue_pages_range() walks the page tables: pages are migrated in address order.
    pages.sort_unstable_by_key(|&p| (page[p as usize].file, page[p as usize].index));
    for &p in &pages {
        mem.page[p as usize].flags &= !(PG_LRU | PG_ACTIVE);
    }
    let isolate = lock_lru(s, cpu, from, &pages);
    let Parts { mem, obs, .. } = s.mm_parts();
    obs.stats.charge(Some(t), Func::IsolateLruPages, isolate);
    ps += isolate;
    // pop() takes the lowest address first.
    pages.reverse();
    let m = &mut mem.tasks[t].migrate;
    (m.pages, m.to) = (pages, to);
    s.push_step(t, Step::MigrateUnmap);
    // All of it is lru_lock rounds: the batches' drains and folio_isolate_lru().
    lock_first(s, t, Func::IsolateLruPages, ps, ps)
}

/// migrate_pages_batch(): allocate a destination for each page of the next batch and unmap it
/// (migrate_folio_unmap -> try_to_migrate_one), then flush and move as the policy says.
pub fn unmap_batch(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let now = s.now();
    let mem = s.mm_view().0;
    let policy = mem.cfg.migrate_flush;
    let size = match policy {
        MigrateFlush::Immediate => 1,
        _ => NR_MAX_BATCHED_MIGRATION,
    };
    let to = mem.tasks[t].migrate.to;
    let mut ps: Time = 0;
    let mut flushes = Vec::new();
    while s.mm_view().0.tasks[t].migrate.batch.len() < size {
        let Some(src) = s.mm_parts().mem.tasks[t].migrate.pages.pop() else {
            break;
        };
        let Some((dst, alloc)) = alloc_page_on_node(s, cpu, t, to) else {
            // -ENOMEM: the page stays where it is (putback_movable_pages).
            putback(s, cpu, t, src);
            continue;
        };
        let Parts { m, mem, arch, obs } = s.mm_parts();
        ps += alloc + touch_page(m, mem, cpu, src);
        let (mm, vpn) = rmap::mapping_of(mem, src);
        let p = &mut mem.page[src as usize];
        let dirty = p.flags & PTE_DIRTY != 0;
        // The migration entry replaces the PTE; a dirty PTE's bit moves to the folio.
        p.flags = (p.flags & !PTE_MAPPED) | PTE_MIGRATION;
        if dirty {
            p.flags |= PG_DIRTY;
        }
        let walk = m.cost[Cost::RmapWalk];
        obs.stats.charge(Some(t), Func::TryToMigrate, walk);
        ps += walk;
        // should_defer_flush() -> arch_tlbbatch_should_defer() (x86: only when another CPU may
        // cache the translation).
        let defer = policy != MigrateFlush::Immediate
            && crate::arch::tlbbatch_should_defer(arch, m, cpu, mm);
        if defer {
            let tlbi = rmap::set_tlb_ubc_flush_pending(s, cpu, t, (mm, vpn), src, dirty);
            if tlbi > 0 {
                // arm64's arch_tlbbatch_add_pending(), inlined into try_to_migrate_one().
                s.mm_parts()
                    .obs
                    .stats
                    .charge(Some(t), Func::TryToMigrate, tlbi);
                ps += tlbi;
            }
        } else {
            let unmap = PageEvent::Unmap { batch: 0 };
            obs.check.record(now, cpu, src, unmap);
            flushes.push(flush_tlb_page(mm, vpn));
        }
        s.mm_parts().mem.tasks[t].migrate.batch.push((src, dst));
    }
    if s.mm_view().0.tasks[t].migrate.batch.is_empty() {
        // All pages done: migrate_pages() returns.
        return Outcome::Busy {
            ps,
            irqs_off: false,
        };
    }
    s.push_step(t, Step::MigrateUnmap);
    if policy == MigrateFlush::BatchedUnsafe {
        s.push_step(t, Step::TryToUnmapFlush);
        s.push_step(t, Step::MigrateMove);
    } else {
        // The `move:` label: try_to_unmap_flush() before any copy or PTE restore.
        s.push_step(t, Step::MigrateMove);
        s.push_step(t, Step::TryToUnmapFlush);
    }
    for f in flushes {
        s.push_step(t, f);
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// migrate_folio_move() for every page of the batch: copy to the destination, restore the PTE
/// there (remove_migration_ptes), wake tasks waiting on the migration entry, free the source and
/// put the destination on the LRU.
pub fn move_batch(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let now = s.now();
    let batch = std::mem::take(&mut s.mm_parts().mem.tasks[t].migrate.batch);
    let (mut ps, mut locked): (Time, Time) = (0, 0);
    for &(src, dst) in &batch {
        let Parts { m, mem, obs, .. } = s.mm_parts();
        let info = mem.page[src as usize];
        // A page of a working set far beyond the LLC (pmbench's): none of its lines is cached.
        let copy = m.cost[Cost::PageCopyCold] + touch_page(m, mem, cpu, dst);
        obs.stats.charge(Some(t), Func::CopyPage, copy);
        let remap = m.cost[Cost::RmapWalk];
        obs.stats.charge(Some(t), Func::RemoveMigrationPtes, remap);
        mem.page[dst as usize] = PageInfo {
            flags: (info.flags & !(PTE_MIGRATION | PG_LRU | PG_ACTIVE)) | PTE_MAPPED,
            cpu: cpu as u16,
            ..info
        };
        mem.files[info.file as usize].pages[info.index as usize] = dst;
        let moved = PageEvent::MigrateTo { to: dst };
        obs.check.record(now, cpu, src, moved);
        wake_waiters(s, src);
        rmap::check_translations(s, src, Site::Free);
        let Parts { mem, obs, .. } = s.mm_parts();
        obs.check.record(now, cpu, src, PageEvent::Free);
        mem.page[src as usize] = PageInfo {
            cpu: info.cpu,
            ..Default::default()
        };
        let free = free_page(s, cpu, src);
        s.mm_parts().obs.stats.charge(Some(t), Func::FreePage, free);
        let lru = lru_cache_add(s, cpu, t, dst);
        ps += copy + remap + free + lru;
        locked += lru;
    }
    let Parts { mem, obs, .. } = s.mm_parts();
    obs.stats.vm(Vm::PgMigrateSuccess, batch.len() as u64);
    obs.stats.vm(Vm::PgFree, batch.len() as u64);
    let mut batch = batch;
    batch.clear();
    mem.tasks[t].migrate.batch = batch;
    lock_first(s, t, Func::CopyPage, ps, locked)
}

/// A page that could not be migrated goes back on its LRU list.
fn putback(s: &mut impl Host, cpu: CpuId, t: TaskId, pfn: u32) {
    let cost = lru_cache_add(s, cpu, t, pfn);
    s.mm_parts()
        .obs
        .stats
        .charge(Some(t), Func::PutbackLruPages, cost);
}

/// migration_entry_wait(): a fault on a migration entry sleeps on the page lock until the
/// migration restores the PTE; then the access is retried.
pub fn migration_entry_wait(s: &mut impl Host, t: TaskId, pfn: u32) -> Outcome {
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let fault = m.cost[Cost::FaultAnon];
    obs.stats.charge(Some(t), Func::MigrationEntryWait, fault);
    obs.stats.vm(Vm::PgFault, 1);
    if mem.page[pfn as usize].flags & PTE_MIGRATION == 0 {
        return Outcome::Busy {
            ps: fault,
            irqs_off: false,
        };
    }
    mem.migration_waiters.push((pfn, t));
    Outcome::Sleep(NEVER)
}

fn wake_waiters(s: &mut impl Host, pfn: u32) {
    let mut i = 0;
    while let Some(&(p, _)) = s.mm_view().0.migration_waiters.get(i) {
        if p == pfn {
            let (_, t) = s.mm_parts().mem.migration_waiters.swap_remove(i);
            s.wake(t);
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Time;
    use crate::machine::Cost;
    use crate::observe::{Func, Vm};

    /// (copy_page time, pages migrated, page_copy_cold) of one 6.4 pass of 4 MiB with `sets`.
    fn copied(sets: &[(&str, &str)]) -> (Time, u64, Time) {
        let mut all = vec![("scale", "0.01"), ("memory", "4MiB"), ("passes", "1")];
        all.extend_from_slice(sets);
        let mut s = crate::testing::sim("migrate", "xeon-2s-2013", "linux-6.4", &all);
        let limit = crate::sim::time_limit(&s);
        s.run(limit, &mut |_, _| {});
        let moved = s.obs.stats.vm[Vm::PgMigrateSuccess as usize];
        let cold = s.m.cost[Cost::PageCopyCold];
        (s.obs.stats.profile[Func::CopyPage as usize], moved, cold)
    }

    #[test]
    fn a_migrated_page_is_copied_cold() {
        let (base, pages, cold) = copied(&[]);
        // Threads 0-15 of 31 (CPUs 0-15, node 0) first touch 16 shares of 1024 pages: 16 x 33.
        assert_eq!(pages, 528);
        let (dearer, _, colder) = copied(&[("machine.cost.page_copy_cold", "9999")]);
        assert_eq!(
            dearer - base,
            pages * (colder - cold),
            "each page pays it once"
        );
        let (hot, _, _) = copied(&[("machine.cost.page_copy", "9999")]);
        assert_eq!(hot, base, "page_copy (a cached copy) is not migration's");
    }
}
