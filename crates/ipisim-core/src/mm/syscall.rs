//! madvise(MADV_DONTNEED), munmap and mprotect: the VMA work, then the page-table walk into an
//! mmu_gather, then one flush per gather (more if the gather fills).

use super::{merge_vmas, split_at, Host, Memory, Parts, NONE, PTRS_PER_PTE};
use crate::engine::{CpuId, SpinLock, TaskId, Time};
use crate::machine::Cost;
use crate::observe::Func;
pub use crate::step::Syscall;
use crate::step::{Outcome, Step};

pub fn syscall(s: &mut impl Host, cpu: CpuId, t: TaskId, sc: Syscall) -> Outcome {
    let mm = s.task_mm(t);
    // madvise_lock(): MADV_DONTNEED reads mmap_lock unless the VMA's own lock does; munmap and
    // mprotect write it. MADV_PAGEOUT reads it too, not modelled: only swap-bench's one thread
    // calls it, so nothing contends.
    let read_locks = matches!(sc, Syscall::MadviseDontneed { .. }) && !s.mem().cfg.madvise_vma_lock;
    // The lock is taken after the entry: its atomic is asked for then.
    let at = s.now() + s.machine().cost[Cost::Syscall];
    let mut vma_lock = None;
    let down = match sc {
        _ if read_locks => mmap_read_lock(s, cpu, t, at),
        Syscall::MadviseDontneed { vpn, .. } => {
            // lock_vma_under_rcu() of the VMA at the start (MADVISE_VMA_READ_LOCK).
            vma_lock = s.mem().vma_at(mm, vpn).map(|v| v.lock);
            Some(vma_lock.map_or(0, |l| vma_lock_atomic(s, cpu, t, l, at)))
        }
        Syscall::MadvisePageout { .. } => Some(0),
        Syscall::Munmap { .. } | Syscall::MprotectRead { .. } => mmap_write_lock(s, cpu, t, at),
    };
    let Some(down) = down else {
        s.push_step(t, Step::Syscall(sc));
        return Outcome::Sleep(crate::engine::NEVER);
    };
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let mut vma = m.cost[Cost::VmaOp];
    if let Syscall::Munmap { .. } = sc {
        vma += m.cost[Cost::MunmapVma];
    }
    let entry = m.cost[Cost::Syscall] + down + vma;
    obs.stats
        .charge(Some(t), Func::Syscall, m.cost[Cost::Syscall]);
    // The VMA work besides the zap (find_vma, the VMA lock, the gather's setup), under the
    // function perf names for it (do_madvise is sys_madvise before 5.10).
    let func = match sc {
        Syscall::MadviseDontneed { .. } | Syscall::MadvisePageout { .. } => Func::DoMadvise,
        Syscall::Munmap { .. } => Func::DoMunmap,
        Syscall::MprotectRead { .. } => Func::MprotectFixup,
    };
    obs.stats.charge(Some(t), func, vma);
    mem.tasks[t].gather.init(mm);
    // tlb_gather_mmu() -> inc_tlb_flush_pending(): other threads' tlb_finish_mmu() see it; its
    // atomic is a step of its own, first after the entry (pushed last, below).
    let pending = mem.cfg.tlb_flush_pending;
    if pending {
        mem.mms[mm].tlb_flush_pending += 1;
    }
    match sc {
        Syscall::MadviseDontneed { vpn, n } => {
            // madvise_dontneed_free() -> zap_page_range_single_batched(); with CONFIG_PT_RECLAIM
            // the zap may free PTE tables it empties completely.
            let (from, end, reclaim_pt) = (vpn, vpn + n, mem.cfg.pt_reclaim);
            if read_locks {
                s.push_step(t, Step::MmapReadUnlock);
            }
            if let Some(lock) = vma_lock {
                s.push_step(t, Step::VmaEndRead { lock });
            }
            s.push_step(t, Step::TlbFinishMmu);
            s.push_step(
                t,
                Step::Zap {
                    from,
                    end,
                    reclaim_pt,
                },
            );
        }
        Syscall::MadvisePageout { vpn, n } => {
            // madvise_pageout(): the page walk (madvise_cold_or_pageout_pte_range, which calls
            // reclaim_pages()), then tlb_finish_mmu() for the accessed bits it cleared.
            s.push_step(t, Step::TlbFinishMmu);
            s.push_step(t, Step::MadvisePageout { vpn, n });
        }
        Syscall::Munmap { vpn, n } => munmap(s, t, mm, vpn, n),
        Syscall::MprotectRead { vpn, n } => mprotect_read(s, t, mm, vpn, n),
    }
    if pending {
        s.push_step(t, Step::TlbFlushPending { inc: true });
    }
    Outcome::Busy {
        ps: entry,
        irqs_off: false,
    }
}

/// munmap(vpn, n) after the entry, mmap_lock held for writing: pushes its steps.
fn munmap(s: &mut impl Host, t: TaskId, mm: usize, vpn: u64, n: u64) {
    // do_vmi_munmap(): split, detach, then unmap_region(): unmap_vmas + free_pgtables
    // between the neighbouring VMAs, all under one mmu_gather.
    let m = &mut s.mm_parts().mem.mms[mm];
    split_at(m, vpn);
    split_at(m, vpn + n);
    let i = m.vmas.partition_point(|v| v.end <= vpn);
    let j = m.vmas.partition_point(|v| v.start < vpn + n);
    let floor = if i > 0 { m.vmas[i - 1].end } else { 0 };
    let ceiling = m.vmas.get(j).map_or(0, |v| v.start);
    m.remove_vmas(i..j);
    let (start, end) = (vpn, vpn + n);
    // vms_complete_munmap_vmas(): with the VMAs detached, the zap, free_pgtables and the flush
    // go on under a read lock (4.20), which still keeps mmap out of the hole.
    let downgrade = s.mem().cfg.munmap_downgrade;
    let unlock = if downgrade {
        Step::MmapReadUnlock
    } else {
        Step::MmapWriteUnlock
    };
    s.push_step(t, unlock);
    s.push_step(t, Step::TlbFinishMmu);
    s.push_step(
        t,
        Step::FreePgtables {
            start,
            end,
            floor,
            ceiling,
        },
    );
    let reclaim_pt = false;
    s.push_step(
        t,
        Step::Zap {
            from: start,
            end,
            reclaim_pt,
        },
    );
    if downgrade {
        s.push_step(t, Step::MmapWriteDowngrade);
    }
}

/// mprotect(vpn, n, PROT_READ) after the entry, mmap_lock held for writing: pushes its steps.
fn mprotect_read(s: &mut impl Host, t: TaskId, mm: usize, vpn: u64, n: u64) {
    // mprotect_fixup(): split, change the VMA's protection, merge; change_protection()
    // under one mmu_gather.
    let m = &mut s.mm_parts().mem.mms[mm];
    split_at(m, vpn);
    split_at(m, vpn + n);
    for v in m
        .vmas
        .iter_mut()
        .filter(|v| v.start >= vpn && v.end <= vpn + n)
    {
        v.write = false;
    }
    merge_vmas(m);
    s.push_step(t, Step::MmapWriteUnlock);
    s.push_step(t, Step::TlbFinishMmu);
    let (from, end) = (vpn, vpn + n);
    s.push_step(t, Step::Protect { from, end });
}

/// A write (an atomic) or a load of the cache line `line` picks in `t`'s mm, asked for at `at` on
/// `cpu`: the wait for the line and its transfer. None for a process of one thread, which keeps
/// its mm's lines in its CPU's cache: no cost, and the line is left alone.
pub(super) fn mm_line_access(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    at: Time,
    write: bool,
    line: impl FnOnce(&mut super::Mm) -> &mut SpinLock,
) -> Option<Time> {
    let mm = s.task_mm(t);
    let Parts { m, mem, .. } = s.mm_parts();
    if mem.mms[mm].users <= 1 {
        return None;
    }
    let line = line(&mut mem.mms[mm]);
    Some(match write {
        true => m.line_write(line, cpu, at),
        false => m.line_read(line, cpu, at),
    })
}

/// The atomic on `t`'s mm's mmap_lock `count` asked for at `at` on `cpu`, charged to `func`: the
/// wait for its line and the transfer (every down and up of the rwsem is one; see
/// mmap_lock.rs); none for a process of one thread (mm_line_access()).
pub(super) fn rwsem_atomic(s: &mut impl Host, cpu: CpuId, t: TaskId, at: Time, func: Func) -> Time {
    let ps = mm_line_access(s, cpu, t, at, true, |mm| &mut mm.mmap_lock.line).unwrap_or(0);
    s.obs().stats.charge(Some(t), func, ps);
    ps
}

/// The atomic of mmap_read_unlock() after a fault that read mmap_lock (FaultMmapReadUnlock),
/// charged to up_read: its time.
pub fn mmap_read_unlock_atomic(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
    rwsem_atomic(s, cpu, t, s.now(), Func::UpRead)
}

/// One atomic on the lock word of `mm`'s VMA `lock` at `at` on `cpu` (vma_start_read() or
/// vma_end_read()), charged to lock_vma_under_rcu: its time (none for a one-thread process:
/// mm_line_access()).
pub fn vma_lock_atomic(s: &mut impl Host, cpu: CpuId, t: TaskId, lock: u32, at: Time) -> Time {
    let Some(ps) = mm_line_access(s, cpu, t, at, true, |mm| &mut mm.vma_locks[lock as usize])
    else {
        return 0;
    };
    s.obs().stats.charge(Some(t), Func::LockVmaUnderRcu, ps);
    ps
}

/// mmap_read_lock() at `at` on `cpu`: the time its atomic takes once `t` holds the lock for
/// reading (charged to down_read), or None: `t` is queued and sleeps (its step runs again when
/// woken, handed the lock).
fn mmap_read_lock(s: &mut impl Host, cpu: CpuId, t: TaskId, at: Time) -> Option<Time> {
    let mm = s.task_mm(t);
    if !s.mm_parts().mem.mms[mm].mmap_lock.down_read(t) {
        return None;
    }
    Some(rwsem_atomic(s, cpu, t, at, Func::DownRead))
}

/// mmap_write_lock() at `at` on `cpu`: as mmap_read_lock(), for writing (down_write). A munmap
/// keeps it, or the read lock it downgrades to, until its page tables are freed and its TLB flush
/// is done, so another thread cannot map into the hole meanwhile (it would get a table being
/// freed).
pub fn mmap_write_lock(s: &mut impl Host, cpu: CpuId, t: TaskId, at: Time) -> Option<Time> {
    let mm = s.task_mm(t);
    if !s.mm_parts().mem.mms[mm].mmap_lock.down_write(t) {
        return None;
    }
    Some(rwsem_atomic(s, cpu, t, at, Func::DownWrite))
}

/// mmap_write_unlock() on `cpu` now: the time of its atomic (charged to up_write).
pub fn mmap_write_unlock(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
    let mm = s.task_mm(t);
    let ps = rwsem_atomic(s, cpu, t, s.now(), Func::UpWrite);
    s.mm_parts().mem.mms[mm].mmap_lock.up_write(t);
    wake_mmap_lock_waiters(s, mm);
    ps
}

/// mmap_read_unlock() on `cpu` now: the time of its atomic (charged to up_read).
pub fn mmap_read_unlock(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
    let mm = s.task_mm(t);
    let ps = rwsem_atomic(s, cpu, t, s.now(), Func::UpRead);
    s.mm_parts().mem.mms[mm].mmap_lock.up_read();
    wake_mmap_lock_waiters(s, mm);
    ps
}

/// mmap_write_downgrade() on `cpu` now (its atomic is charged to up_write, where
/// downgrade_write()'s time shows in no profile we compare with).
pub fn mmap_write_downgrade(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
    let mm = s.task_mm(t);
    let ps = rwsem_atomic(s, cpu, t, s.now(), Func::UpWrite);
    s.mm_parts().mem.mms[mm].mmap_lock.downgrade(t);
    wake_mmap_lock_waiters(s, mm);
    ps
}

/// An unlock step: busy for its atomic, if it took any time.
pub fn unlock_step(ps: Time) -> Outcome {
    match ps {
        0 => Outcome::Next,
        _ => Outcome::Busy {
            ps,
            irqs_off: false,
        },
    }
}

/// Wake the tasks the lock's last release handed it to.
fn wake_mmap_lock_waiters(s: &mut impl Host, mm: usize) {
    let woken = std::mem::take(&mut s.mm_parts().mem.mms[mm].mmap_lock.woken);
    for &w in &woken {
        s.wake(w);
    }
    s.mm_parts().mem.mms[mm].mmap_lock.woken = woken;
}

/// zap_pmd_range() / zap_pte_range() over [from, end): clear present PTEs into the gather. If the
/// gather fills, flush and come back for the rest (force_flush).
pub fn zap_step(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    from: u64,
    end: u64,
    reclaim_pt: bool,
) -> Outcome {
    let mm = s.task_mm(t);
    let resume = Step::Zap {
        from,
        end,
        reclaim_pt,
    };
    let func = Func::ZapPteRange;
    let read = match super::rmap::flush_tlb_batched_pending(s, cpu, t, mm, resume, func) {
        Ok(read) => read,
        Err(out) => return out,
    };
    let Parts { m, mem, obs, .. } = s.mm_parts();
    // Where the zap resumes after a forced flush, and whether it flushes before returning.
    let (mut resume, mut flush) = (None, false);
    let mut zapped: u64 = 0;
    let mut freed_tables: u64 = 0;
    let mut vpn = from;
    while vpn < end {
        let pmd_start = vpn - vpn % PTRS_PER_PTE;
        let pmd_end = (pmd_start + PTRS_PER_PTE).min(end);
        let Some(tab) = mem.table_of(mm, vpn) else {
            vpn = pmd_start + PTRS_PER_PTE;
            continue;
        };
        let tab = tab as usize;
        let (v, n, force_flush, delay_rmap) = zap_pte_range(mem, t, tab, vpn, pmd_end);
        zapped += n;
        // CONFIG_PT_RECLAIM: a zap that covered this whole PTE table and left it empty frees it
        // (reclaim_pt_is_enabled() wants end - start >= PMD_SIZE).
        let whole = vpn == pmd_start && pmd_end - pmd_start == PTRS_PER_PTE;
        if reclaim_pt && whole && !force_flush && mem.tables[tab].present == 0 {
            free_pte_table(mem, t, mm, pmd_start);
            freed_tables += 1;
        }
        // The last table of the range with delay_rmap: flush now; tlb_finish_mmu() finds
        // nothing left.
        flush |= delay_rmap;
        if force_flush || (delay_rmap && pmd_end < end) {
            (resume, flush) = (Some(v), true);
            break;
        }
        vpn = pmd_end;
    }
    let ps = zapped * m.cost[Cost::PteZap];
    obs.stats.charge(Some(t), Func::ZapPteRange, ps);
    let pt = freed_tables * m.cost[Cost::PgtableFree];
    obs.stats.charge(Some(t), Func::FreePgtables, pt);
    if let Some(from) = resume {
        s.push_step(
            t,
            Step::Zap {
                from,
                end,
                reclaim_pt,
            },
        );
    }
    if flush {
        s.push_step(t, Step::TlbFlushMmu);
    }
    Outcome::Busy {
        ps: read + ps + pt,
        irqs_off: false,
    }
}

/// zap_pte_range() over [from, to) of PTE table `tab`: clear present PTEs into task `t`'s gather.
/// Where it stopped, the PTEs cleared, whether the gather filled (force_flush), and whether a
/// dirty page-cache PTE was cleared: its rmap removal waits for the TLB flush, which must happen
/// before the PTE lock is dropped (zap_present_folio_ptes: delay_rmap, 5df397dec7c4).
fn zap_pte_range(
    mem: &mut Memory,
    t: TaskId,
    tab: usize,
    from: u64,
    to: u64,
) -> (u64, u64, bool, bool) {
    let (mut zapped, mut force_flush, mut delay_rmap) = (0, false, false);
    let (mut lo, mut hi) = (u64::MAX, 0);
    let mut v = from;
    while v < to {
        let idx = (v % PTRS_PER_PTE) as usize;
        let pte = mem.tables[tab].pte[idx];
        v += 1;
        if !pte.present() {
            continue;
        }
        mem.tables[tab].pte[idx] = super::Pte::NONE;
        mem.tables[tab].present -= 1;
        zapped += 1;
        (lo, hi) = (lo.min(v - 1), v);
        delay_rmap |= !pte.is_anon() && pte.dirty();
        // Anonymous pages are freed after the flush; page-cache pages and the zero page stay.
        if pte.is_anon() && mem.tasks[t].gather.remove_page(pte.pfn()) {
            force_flush = true;
            break;
        }
    }
    if hi > 0 {
        let g = &mut mem.tasks[t].gather;
        g.adjust_range(lo, hi);
        g.cleared_ptes = true;
    }
    (v, zapped, force_flush, delay_rmap)
}

/// pte_free_tlb(): unhook the PTE table at `pmd_start` and tell the gather a table was freed.
fn free_pte_table(mem: &mut Memory, t: TaskId, mm: usize, pmd_start: u64) {
    let i = (pmd_start / PTRS_PER_PTE - super::MMAP_BASE_VPN / PTRS_PER_PTE) as usize;
    let tab = mem.mms[mm].pmds[i];
    mem.mms[mm].pmds[i] = NONE;
    mem.free_table(tab);
    let g = &mut mem.tasks[t].gather;
    g.freed_tables = true;
    g.cleared_pmds = true;
    g.adjust_range(pmd_start, pmd_start + 1);
}

/// free_pgtables() -> free_pgd_range(): free the PTE tables of whole PMDs in [start, end) that no
/// VMA between `floor` and `ceiling` still needs. Page numbers; `ceiling == 0` means no limit.
pub fn free_pgtables(
    s: &mut impl Host,
    t: TaskId,
    start: u64,
    end: u64,
    floor: u64,
    ceiling: u64,
) -> Outcome {
    let mm = s.task_mm(t);
    let Parts { m, mem, obs, .. } = s.mm_parts();
    // The kernel's arithmetic, in pages: round to PMDs inside the floor and ceiling.
    let mut addr = start - start % PTRS_PER_PTE;
    if addr < floor {
        addr += PTRS_PER_PTE;
    }
    let mut end = end;
    if ceiling != 0 {
        let c = ceiling - ceiling % PTRS_PER_PTE;
        if c == 0 {
            return Outcome::Next;
        }
        if end.wrapping_sub(1) > c.wrapping_sub(1) {
            end = end.saturating_sub(PTRS_PER_PTE);
        }
    }
    let mut freed: u64 = 0;
    while addr < end {
        if mem.table_of(mm, addr).is_some() {
            free_pte_table(mem, t, mm, addr);
            freed += 1;
        }
        addr += PTRS_PER_PTE;
    }
    if freed == 0 {
        return Outcome::Next;
    }
    let ps = freed * m.cost[Cost::PgtableFree];
    obs.stats.charge(Some(t), Func::FreePgtables, ps);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// change_pte_range(): write-protect present PTEs in [from, end), gathering the range to flush.
pub fn protect_step(s: &mut impl Host, cpu: CpuId, t: TaskId, from: u64, end: u64) -> Outcome {
    let mm = s.task_mm(t);
    let resume = Step::Protect { from, end };
    let func = Func::ChangePteRange;
    let read = match super::rmap::flush_tlb_batched_pending(s, cpu, t, mm, resume, func) {
        Ok(read) => read,
        Err(out) => return out,
    };
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let mut changed: u64 = 0;
    for v in from..end {
        let Some(tab) = mem.table_of(mm, v) else {
            continue;
        };
        let idx = (v % PTRS_PER_PTE) as usize;
        let pte = mem.tables[tab as usize].pte[idx];
        if pte.present() && pte.write() {
            mem.tables[tab as usize].pte[idx] = pte.wrprotect();
            changed += 1;
            let g = &mut mem.tasks[t].gather;
            g.adjust_range(v, v + 1);
            g.cleared_ptes = true;
        }
    }
    let ps = changed * m.cost[Cost::PteProtect];
    obs.stats.charge(Some(t), Func::ChangePteRange, ps);
    Outcome::Busy {
        ps: read + ps,
        irqs_off: false,
    }
}

#[cfg(test)]
mod tests {
    use crate::observe::Func;
    use crate::testing::tlb_flush2_threads;

    /// will-it-scale tlb_flush2 (256-page region), `tasks` threads of `loops` loops each on the
    /// Milan with `kernel` (madvise reads mmap_lock): the count line's atomics, its total wait,
    /// and the time charged to the rwsem's functions and to lock_vma_under_rcu.
    fn tlb_flush2(kernel: &str, tasks: usize, loops: u64) -> (u64, u64, u64, u64) {
        let s = tlb_flush2_threads(kernel, tasks, loops, &[]);
        let line = &s.mem.mms[0].mmap_lock.line;
        let rwsem = [
            Func::DownRead,
            Func::DownReadTrylock,
            Func::UpRead,
            Func::DownWrite,
            Func::UpWrite,
        ];
        let profile = &s.obs.stats.profile;
        let charged = rwsem.iter().map(|&f| profile[f as usize]).sum();
        let vma = profile[Func::LockVmaUnderRcu as usize];
        (line.acquisitions, line.wait, charged, vma)
    }

    /// Every down and up of mmap_lock is one atomic on its count line: per thread, a madvise a
    /// loop takes two; each of the 3 munmaps of 1000 loops takes three (down_write, the
    /// downgrade, up_read), each of the 4 mmaps two. Before per-VMA locks (6.3) the loop's two
    /// faults take two more each; since (6.14) they take the VMA's lock word instead. Two threads
    /// (whose regions merge into one VMA) take turns for the lines, and every wait is charged. A
    /// process of one thread keeps them in its cache: none is modelled.
    #[test]
    fn each_lock_word_atomic_takes_its_line() {
        let per_thread = 2000 + 3 * 3 + 4 * 2;
        // (Once one thread has exited, the other's last few atomics are a lone thread's.)
        let lone = |atomics: u64, all: u64| (all - 8..=all).contains(&atomics);
        let (atomics, wait, charged, vma) = tlb_flush2("linux-6.14", 2, 1000);
        assert!(lone(atomics, 2 * per_thread), "{atomics}");
        assert!(wait > 0 && vma > 0);
        assert_eq!(charged, wait);
        let (atomics, wait, charged, vma) = tlb_flush2("linux-6.3", 2, 1000);
        assert!(lone(atomics, 2 * (per_thread + 4000)), "{atomics}");
        assert!(wait > 0);
        assert_eq!((charged, vma), (wait, 0));
        for kernel in ["linux-6.14", "linux-6.3"] {
            assert_eq!(tlb_flush2(kernel, 1, 1000), (0, 0, 0, 0));
        }
    }
}
