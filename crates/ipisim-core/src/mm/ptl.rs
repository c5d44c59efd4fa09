//! The PTE lock: one spinlock per PTE table (split page-table locks), taken by
//! page_check_address() in reclaim's rmap walks. Before 4.3 reclaim flushed the TLB with it held
//! (ptep_clear_flush(_young) inside the locked region), so other CPUs wanting the table spin for
//! a whole IPI round trip. Only the reclaim model's mappings (files and anonymous regions) have
//! these locks, and faults do not take them yet (pte_offset_map_lock).

use crate::engine::{CpuId, HeldLock, TaskId, Time, NEVER};
use crate::observe::Func;
use crate::step::{Outcome, SpinOn, Step};

use super::{Host, Memory, PTRS_PER_PTE};

pub struct PteLocks {
    locks: Vec<HeldLock>,
    /// Per lock: the function perf names as its spinners' caller.
    caller: Vec<Func>,
    /// Per CPU: the lock it last queued for.
    waiting: Vec<u32>,
    /// Per CPU: the next CPU queued on the same lock.
    next: Vec<u16>,
    /// Per CPU: when the lock it spins for becomes its (NEVER: not yet).
    pub granted_at: Vec<Time>,
    /// Acquisitions of any of these locks, free or handed over.
    pub taken: u64,
}

impl PteLocks {
    pub fn new(ncpus: usize) -> PteLocks {
        PteLocks {
            locks: Vec::new(),
            caller: Vec::new(),
            waiting: vec![0; ncpus],
            next: vec![0; ncpus],
            granted_at: vec![NEVER; ncpus],
            taken: 0,
        }
    }

    /// Locks for the PTE tables of a new mapping [start, start + pages); returns the first id.
    pub fn add_tables(&mut self, start: u64, pages: u64) -> u32 {
        let first = self.locks.len() as u32;
        let tables = tables_spanned(start, pages);
        self.locks
            .extend(std::iter::repeat_n(HeldLock::default(), tables as usize));
        self.caller
            .extend(std::iter::repeat_n(Func::PageCheckAddress, tables as usize));
        first
    }

    /// An mm's page_table_lock (mm/thp.rs), whose spinners perf shows under split_huge_page
    /// (also page_referenced_one's and the huge fault's, here). Returns its id.
    pub fn add_page_table_lock(&mut self) -> u32 {
        self.locks.push(HeldLock::default());
        self.caller.push(Func::SplitHugePage);
        (self.locks.len() - 1) as u32
    }
}

/// The function the spin of `cpu` on a PTE lock is charged to (perf's caller of _raw_spin_lock).
pub fn spin_caller(mem: &Memory, cpu: CpuId) -> Func {
    mem.ptl.caller[mem.ptl.waiting[cpu] as usize]
}

/// The PTE tables a mapping of `pages` pages from `start` spans.
pub fn tables_spanned(start: u64, pages: u64) -> u64 {
    (start + pages.max(1) - 1) / PTRS_PER_PTE - start / PTRS_PER_PTE + 1
}

/// The PTE lock of the table mapping page `pfn` (of a mapped file or anonymous region).
pub fn ptl_of_page(mem: &Memory, pfn: u32) -> u32 {
    let p = mem.page[pfn as usize];
    let f = &mem.files[p.file as usize];
    let (_, start) = f.mapper.expect("a mapped file");
    f.ptl_base + ((start + p.index as u64) / PTRS_PER_PTE - start / PTRS_PER_PTE) as u32
}

fn holds(mem: &Memory, cpu: CpuId, id: u32) -> bool {
    mem.ptl.locks[id as usize].held_by() == Some(cpu)
}

/// Nobody holds the lock, or this CPU does.
pub fn free_or_mine(mem: &Memory, cpu: CpuId, id: u32) -> bool {
    mem.ptl.locks[id as usize]
        .held_by()
        .is_none_or(|c| c == cpu)
}

/// spin_lock(ptl): true once this CPU holds it (paying the line transfer, charged and added to
/// `ps`); false if it had to queue behind the holder.
fn take(s: &mut impl Host, cpu: CpuId, t: TaskId, id: u32, ps: &mut Time) -> bool {
    let p = s.mm_parts();
    if holds(p.mem, cpu, id) {
        return true;
    }
    let (m, l) = (p.m, &mut p.mem.ptl);
    let Some(moved) = l.locks[id as usize].try_lock(cpu, &mut l.next, |a, b| m.line_transfer(a, b))
    else {
        l.waiting[cpu] = id;
        return false;
    };
    l.taken += 1;
    p.obs
        .stats
        .charge_lock(Some(t), l.caller[id as usize], moved);
    *s.locks_held(t) += 1;
    *ps += moved;
    true
}

/// spin_lock(ptl) inside a step: Ok(line transfer) once this CPU holds it; otherwise `retry` is
/// pushed, the CPU is queued, and the returned outcome spins until the lock is handed over.
pub fn lock_or_spin(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    id: u32,
    retry: Step,
) -> Result<Time, Outcome> {
    let mut moved = 0;
    if take(s, cpu, t, id, &mut moved) {
        return Ok(moved);
    }
    s.push_step(t, retry);
    Err(Outcome::Spin(SpinOn::Ptl))
}

/// The PtlLock step: take the lock, or spin until it is handed over.
pub fn lock_step(s: &mut impl Host, cpu: CpuId, t: TaskId, id: u32) -> Outcome {
    let mut ps = 0;
    if !take(s, cpu, t, id, &mut ps) {
        return Outcome::Spin(SpinOn::Ptl);
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// spin_unlock(ptl) by task `t`: the first waiting CPU gets the lock once its line arrives.
pub fn unlock(s: &mut impl Host, t: TaskId, id: u32) -> Outcome {
    *s.locks_held(t) -= 1;
    let now = s.now();
    let p = s.mm_parts();
    let (m, l) = (p.m, &mut p.mem.ptl);
    if let Some((next, moved)) =
        l.locks[id as usize].unlock(&l.next, |a, b, n| m.lock_handoff(a, b, n))
    {
        l.granted_at[next] = now + moved;
        l.taken += 1;
        let waiter = s
            .current(next)
            .expect("a CPU spinning for a lock runs a task");
        *s.locks_held(waiter) += 1;
        s.kick_lock_spinner(next);
    }
    Outcome::Next
}
