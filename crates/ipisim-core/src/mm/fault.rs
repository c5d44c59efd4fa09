//! User accesses: a TLB lookup per page, a page walk on a miss, and a page fault when the PTE is
//! missing (do_anonymous_page, do_shared_fault, do_cow_fault, do_read_fault).

use super::{Backing, Host, Parts, Pte, Vma, NONE, PTRS_PER_PTE, ZERO_PFN};
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::Cost;
use crate::observe::check::{Site, Violation};
use crate::observe::{Func, Vm};
use crate::step::{Outcome, Step};

/// Pages handled per step, so other CPUs' events interleave with a long touch loop.
const TOUCH_CHUNK: u32 = 64;

pub fn touch(s: &mut impl Host, cpu: CpuId, t: TaskId, vpn: u64, n: u32, write: bool) -> Outcome {
    let chunk = n.min(TOUCH_CHUNK);
    if n > chunk {
        s.push_step(
            t,
            Step::Touch {
                vpn: vpn + chunk as u64,
                n: n - chunk,
                write,
            },
        );
    }
    let (mm, now) = (s.task_mm(t), s.now());
    let asid = crate::arch::loaded_asid(s, cpu);
    let c = &s.mm_view().1.cost;
    let (touch_cost, walk_cost) = (c[Cost::UserTouch], c[Cost::TlbMiss]);
    let (mut user, mut fault): (Time, Time) = (0, 0);
    // Of `fault`: the LRU-add drains' lru_lock rounds (lru::lock_first()).
    let mut locked: Time = 0;
    let mut vma: Option<Vma> = None;
    let mut table: Option<(u64, usize)> = None;
    let end = vpn + chunk as u64;
    // Other threads may take this mm's lock words between a fault's two atomics: the touch then
    // ends at each fault, and the fault's unlock is a step at its own time.
    let shared = s.mm_view().0.mms[mm].users > 1;
    let mut ends_at_fault: Option<Vma> = None;
    for v in vpn..end {
        user += touch_cost;
        let Parts { mem, arch, obs, .. } = s.mm_parts();
        let (hit, slot) = arch.tlb[cpu].access(asid, v);
        if let Some(e) = hit.filter(|e| !write || e.dirty) {
            // The checker: the frame must not be back in the allocator. (A hit on a page that
            // is zapped but not yet freed is the user racing its own madvise: allowed.)
            if obs.check.enabled && e.pfn != ZERO_PFN && mem.frames.is_free(e.pfn) {
                let site = Site::Access { write };
                obs.check
                    .violation(now, Violation::UseAfterFree, site, cpu, (mm, v, e.pfn));
            }
            continue;
        }
        // A miss, or a write through a clean entry: the CPU walks the page table.
        user += walk_cost;
        let tab = match table {
            Some((pmd, tab)) if pmd == v / PTRS_PER_PTE => tab,
            _ => {
                let tab = mem.table_alloc(mm, v) as usize;
                table = Some((v / PTRS_PER_PTE, tab));
                tab
            }
        };
        let idx = (v % PTRS_PER_PTE) as usize;
        let mut pte = mem.tables[tab].pte[idx];
        if !pte.present() || (write && !pte.write()) {
            if !vma.is_some_and(|x| x.start <= v && v < x.end) {
                vma = Some(
                    *mem.vma_at(mm, v)
                        .unwrap_or_else(|| panic!("workload touched unmapped page {v:#x}")),
                );
            }
            let this = vma.unwrap();
            let down = match shared {
                true => fault_lock(s, cpu, t, &this, now + user + fault),
                false => 0,
            };
            let (new, cost, lru, stop) = touch_fault(s, cpu, t, this, (v, end), write, (tab, idx));
            fault += down + cost;
            locked += lru;
            if stop {
                // (The unlock runs before the copy-on-write flush the fault did under it.)
                if shared {
                    s.push_step(t, fault_unlock_step(s, &this));
                }
                break;
            }
            pte = new;
            if shared {
                ends_at_fault = Some(this);
            }
        } else if write && !pte.dirty() {
            pte = pte.mkdirty();
        }
        let Parts { mem, arch, .. } = s.mm_parts();
        mem.tables[tab].pte[idx] = pte;
        arch.tlb[cpu].fill_at(slot, asid, v, pte.pfn(), pte.write(), pte.dirty());
        if let Some(this) = ends_at_fault {
            push_rest_of_touch(s, t, (v, end), write);
            s.push_step(t, fault_unlock_step(s, &this));
            break;
        }
    }
    s.mm_parts().obs.stats.charge(Some(t), Func::User, user);
    super::lru::lock_first(s, t, Func::User, user + fault, locked)
}

/// A fault's lock taken at `at`: vma_start_read() on the VMA's lock word, or before per-VMA locks
/// (kernel.fault_vma_lock false) mmap_read_trylock() on the rwsem's count. The time of its
/// atomic. Only for an mm other threads share: a lone thread's lock words stay in its cache.
fn fault_lock(s: &mut impl Host, cpu: CpuId, t: TaskId, vma: &Vma, at: Time) -> Time {
    if s.mem().cfg.fault_vma_lock {
        return super::syscall::vma_lock_atomic(s, cpu, t, vma.lock, at);
    }
    super::syscall::rwsem_atomic(s, cpu, t, at, Func::DownReadTrylock)
}

/// The touch of [v + 1, end) goes on as a step of its own, after what the fault at `v` pushed.
fn push_rest_of_touch(s: &mut impl Host, t: TaskId, (v, end): (u64, u64), write: bool) {
    if v + 1 < end {
        let n = (end - v - 1) as u32;
        s.push_step(
            t,
            Step::Touch {
                vpn: v + 1,
                n,
                write,
            },
        );
    }
}

/// The step that drops a fault's lock (vma_end_read() or mmap_read_unlock()) after it.
fn fault_unlock_step(s: &impl Host, vma: &Vma) -> Step {
    match s.mm_view().0.cfg.fault_vma_lock {
        true => Step::VmaEndRead { lock: vma.lock },
        false => Step::FaultMmapReadUnlock,
    }
}

/// The fault of a touch at `v` (of [v, end)) whose PTE at `at` (table, index) is none, or
/// read-only for a write: handle_mm_fault(), then fault-around or a copy-on-write flush. The PTE
/// to use, the fault's time, the part of it in lru_lock rounds, and whether the touch stops
/// here for the flush.
fn touch_fault(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    vma: Vma,
    (v, end): (u64, u64),
    write: bool,
    (tab, idx): (usize, usize),
) -> (Pte, Time, Time, bool) {
    let pte = s.mm_view().0.tables[tab].pte[idx];
    let (new, mut cost, lru) = handle_mm_fault(s, cpu, t, vma, v, write);
    if !pte.present() {
        s.mm_parts().mem.tables[tab].present += 1;
        if !write {
            cost += fault_around(s, t, vma, v, tab);
        }
    } else if new.pfn() != pte.pfn() {
        // do_wp_page() -> wp_page_copy() of a present PTE (a read-only page-cache page of a
        // private mapping, or the zero page): ptep_clear_flush() before the new PTE is used, so
        // other CPUs drop the old translation. Resume after the flush.
        s.mm_parts().mem.tables[tab].pte[idx] = new;
        push_rest_of_touch(s, t, (v, end), write);
        s.push_step(t, crate::mm::rmap::flush_tlb_page(s.task_mm(t), v));
        return (new, cost, lru, true);
    }
    (new, cost, lru, false)
}

/// do_fault_around() on a read fault of a file mapping (3.15): map every page-cache page of the
/// aligned `fault_around_bytes` window around `v`, within its VMA and PTE table, whose PTE is
/// none, read-only (filemap_map_pages). Returns the time, `fault_around_page` per page mapped.
fn fault_around(s: &mut impl Host, t: TaskId, vma: Vma, v: u64, tab: usize) -> Time {
    let Backing::File { file, pgoff, .. } = vma.backing else {
        return 0;
    };
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let fa = mem.cfg.fault_around_pages;
    let table_start = v - v % PTRS_PER_PTE;
    let start = (v - v % fa).max(vma.start).max(table_start);
    let end = (v - v % fa + fa)
        .min(vma.end)
        .min(table_start + PTRS_PER_PTE);
    let mut mapped = 0;
    for u in (start..end).filter(|&u| u != v) {
        let idx = (u % PTRS_PER_PTE) as usize;
        let page = mem.files[file as usize].pages[(pgoff + u - vma.start) as usize];
        if page == NONE || mem.tables[tab].pte[idx].present() {
            continue;
        }
        mem.tables[tab].pte[idx] = Pte::new(page, false, false);
        mem.tables[tab].present += 1;
        mapped += 1;
    }
    let cost = mapped * m.cost[Cost::FaultAroundPage];
    obs.stats.charge(Some(t), Func::FilemapFault, cost);
    cost
}

/// handle_mm_fault(): the PTE to install for `v`, the kernel time spent, and the part of it that
/// a full LRU-add batch's drain spent in lru_lock rounds. A new private anonymous page goes onto
/// the LRU through this CPU's batch (folio_add_lru_vma()).
fn handle_mm_fault(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    vma: Vma,
    v: u64,
    write: bool,
) -> (Pte, Time, Time) {
    assert!(
        !write || vma.write,
        "workload wrote to read-only page {v:#x}"
    );
    let Parts { m, mem, obs, .. } = s.mm_parts();
    obs.stats.vm(Vm::PgFault, 1);
    let c = &m.cost;
    // alloc_pages() under the default mempolicy: the faulting CPU's node first.
    let node = m.node_of(cpu);
    let (pte, cost, extra, extra_func) = match vma.backing {
        // do_anonymous_page(): a read maps the shared zero page read-only.
        Backing::Anon if !write => (
            Pte::new(ZERO_PFN, false, false),
            c[Cost::FaultAnon],
            0,
            Func::ClearPage,
        ),
        Backing::Anon => {
            // do_anonymous_page() (or do_wp_page() on the zero page): a zeroed page of our own.
            let pfn = mem.frames.alloc_on(node);
            mem.new_anon_page(pfn);
            (
                Pte::anon(pfn, vma.write, write),
                c[Cost::FaultAnon],
                c[Cost::PageClear],
                Func::ClearPage,
            )
        }
        Backing::File {
            file,
            pgoff,
            shared,
        } => {
            let idx = (pgoff + v - vma.start) as usize;
            let mut page = mem.files[file as usize].pages[idx];
            let mut extra = 0;
            if page == NONE {
                // A hole of a sparse file: a zeroed page-cache page, no I/O.
                page = mem.frames.alloc_on(node);
                mem.files[file as usize].pages[idx] = page;
                extra = c[Cost::PageClear];
            }
            if shared || !write {
                // do_shared_fault() / do_read_fault(): map the page-cache page.
                (
                    Pte::new(page, vma.write && shared, write),
                    c[Cost::FaultFile],
                    extra,
                    Func::ClearPage,
                )
            } else {
                // do_cow_fault(): copy the page-cache page into a private anonymous one.
                let pfn = mem.frames.alloc_on(node);
                mem.new_anon_page(pfn);
                (
                    Pte::anon(pfn, true, true),
                    c[Cost::FaultCow],
                    extra + c[Cost::PageCopy],
                    Func::CopyPage,
                )
            }
        }
    };
    obs.stats.charge(Some(t), Func::HandleMmFault, cost);
    obs.stats.charge(Some(t), extra_func, extra);
    let lru = if pte.is_anon() {
        super::lru::lru_cache_add(s, cpu, t, pte.pfn())
    } else {
        0
    };
    (pte, cost + extra + lru, lru)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunRequest;
    use crate::resolve;
    use crate::sim::Sim;

    /// A store through a translation whose frame went back to the allocator (as if a flush were
    /// skipped) is a use-after-free; the same store before the free is not.
    #[test]
    fn a_hit_on_a_freed_frame_is_caught() {
        let req = RunRequest {
            scenario: "shootdown".into(),
            ..Default::default()
        };
        let mut s = Sim::new(&resolve(&req).unwrap()).unwrap();
        let mm = s.sched.tasks[0].mm;
        let vpn = s.mem.mms[mm].vmas[0].start;
        crate::arch::load_for_test(&mut s, 0, mm);
        touch(&mut s, 0, 0, vpn, 1, true);
        assert_eq!(s.obs.check.total(), 0);
        let pfn = s.mem.pte(mm, vpn).pfn();
        s.mem.frames.free(pfn);
        touch(&mut s, 0, 0, vpn, 1, true);
        assert_eq!(s.obs.check.total(), 1);
        let json = crate::observe::check::to_json(&s.obs.check);
        assert_eq!(json["first"][0]["kind"], "use-after-free");
        assert_eq!(json["first"][0]["at"], "write");
    }

    /// A fault takes its page from the faulting CPU's node (alloc_pages() under the default
    /// mempolicy), not from the first node with free pages: a 2-node machine, CPUs 2 and 3 on
    /// node 1.
    #[test]
    fn a_fault_takes_a_page_of_its_cpus_node() {
        let sets = [("machine.nodes", "2"), ("machine.cpus_per_node", "2")];
        let req = RunRequest::new("shootdown", "host-2cpu", "linux-6.18", &sets);
        let mut s = Sim::new(&resolve(&req).unwrap()).unwrap();
        let mm = s.sched.tasks[0].mm;
        let vpn = s.mem.mms[mm].vmas[0].start;
        for (i, cpu) in [0, 2, 3, 1].into_iter().enumerate() {
            crate::arch::load_for_test(&mut s, cpu, mm);
            touch(&mut s, cpu, 0, vpn + i as u64, 1, true);
            let pfn = s.mem.pte(mm, vpn + i as u64).pfn();
            assert_eq!(s.mem.frames.node_of(pfn), s.m.node_of(cpu), "CPU {cpu}");
        }
    }
}
