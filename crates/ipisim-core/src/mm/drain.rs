//! drain_all_pages() (mm/page_alloc.c): pull every CPU's per-CPU free pages back to the buddy
//! allocator, as four kernel eras did it (`kernel.pcp_drain`).

use super::page_alloc::Frames;
use super::{Host, Parts};
use crate::config::named_enum;
use crate::engine::{CpuId, CpuMask, TaskId, Time, NEVER};
use crate::machine::Cost;
use crate::observe::{Func, Vm};
use crate::smp::{self, CallFunc, Cond};
use crate::step::{Outcome, Step};

named_enum! {
    PcpDrain {
        /// on_each_cpu(drain_local_pages, NULL, 1): an IPI to every CPU (before 3.4).
        AllCpus = "all_cpus",
        /// on_each_cpu_mask(cpus_with_pcps, ...): only CPUs holding pages (74046494ea68, 3.4).
        CpusWithPages = "cpus_with_pages",
        /// A work item on each CPU with pages, then flush_work, under pcpu_drain_mutex (0ccce3b92421, 4.11).
        Workqueue = "workqueue",
        /// The caller drains every CPU's lists itself under each pcp->lock, holding
        /// pcpu_drain_mutex as 4.11 does: no IPI, no work (443c2accd1b6, 6.0).
        RemoteNoIpi = "remote_no_ipi",
    }
}

/// CPUs whose pcp lists hold a page in any zone (the cpus_with_pcps mask).
pub fn cpus_with_pcps(f: &Frames) -> CpuMask {
    let mut m = CpuMask::new();
    for (cpu, lists) in f.pcp.iter().enumerate() {
        if lists.iter().any(|l| !l.is_empty()) {
            m.set(cpu);
        }
    }
    m
}

/// drain_pages(cpu) run by `by`: every page of `cpu`'s lists back to its zone under zone->lock.
pub fn drain_pages(s: &mut impl Host, by: CpuId, cpu: CpuId) -> Time {
    let mut ps = 0;
    for zone in 0..s.mm_view().0.frames.zones.len() {
        let Parts { m, mem, .. } = s.mm_parts();
        // An empty list keeps its buffer: taking it would free one the next refill grows again.
        if mem.frames.pcp[cpu][zone].is_empty() {
            continue;
        }
        let pages = std::mem::take(&mut mem.frames.pcp[cpu][zone]);
        let hold = pages.len() as Time * m.cost[Cost::BuddyPage];
        ps += super::page_alloc::zone_lock_wait(s, zone, by, hold) + hold;
        let now = s.now();
        let frames = &mut s.mm_parts().mem.frames;
        // free_pcppages_bulk() counts them on the CPU that runs it.
        frames.zones[zone].give_all(by, &pages, now);
        frames.pcp[cpu][zone] = pages;
        frames.pcp[cpu][zone].clear();
    }
    ps
}

/// drain_local_pages(): the call-function (or work item) that drains the CPU it runs on.
pub fn drain_local_pages(s: &mut impl Host, cpu: CpuId, task: Option<TaskId>) -> Time {
    let ps = drain_pages(s, cpu, cpu);
    s.mm_parts().obs.stats.charge(task, Func::DrainPages, ps);
    ps
}

/// drain_all_pages(NULL) from task `t` on `cpu`.
pub fn drain_all_pages(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let Parts { m, mem, obs, .. } = s.mm_parts();
    let policy = mem.cfg.pcp_drain;
    // mutex_trylock(&pcpu_drain_mutex) since 0ccce3b92421 (4.11): a NULL-zone caller gives up
    // while another drain runs, before it looks at any CPU's lists.
    if matches!(policy, PcpDrain::Workqueue | PcpDrain::RemoteNoIpi) {
        if mem.drain.owner.is_some() {
            return Outcome::Next;
        }
        mem.drain.owner = Some(t);
    }
    let with = cpus_with_pcps(&mem.frames);
    let ncpus = m.ncpus();
    // The seed's unmerged debug counters (patch 8/8): every drain that computes cpus_with_pcps,
    // and those where fewer than half the online CPUs held pages.
    obs.stats.vm(Vm::PcpGlobalDrain, 1);
    obs.stats.drain_cpus_with_pages[with.weight()] += 1;
    if with.weight() < ncpus / 2 {
        obs.stats.vm(Vm::PcpGlobalIpiSaved, 1);
    }
    match policy {
        PcpDrain::AllCpus | PcpDrain::CpusWithPages => {
            let mask = if policy == PcpDrain::AllCpus {
                CpuMask::first_n(ncpus)
            } else {
                with
            };
            smp::smp_call_function_many_cond(
                s,
                cpu,
                t,
                &mask,
                CallFunc::DrainLocalPages,
                Cond::Always,
                true,
                true,
            )
        }
        PcpDrain::RemoteNoIpi => {
            let mut ps = 0;
            for c in with.iter() {
                ps += drain_pages(s, cpu, c);
            }
            s.mm_parts().obs.stats.charge(Some(t), Func::DrainPages, ps);
            s.push_step(t, Step::DrainUnlock);
            Outcome::Busy {
                ps,
                irqs_off: false,
            }
        }
        PcpDrain::Workqueue => {
            mem.drain.pending = with.weight() as u32;
            for c in with.iter() {
                let w = kworker(s, c);
                s.push_step(w, Step::DrainWork);
                s.wake(w);
            }
            let drain = &mut s.mm_parts().mem.drain;
            if drain.pending == 0 {
                drain.owner = None;
                return Outcome::Next;
            }
            // flush_work() on each: sleep until the last work item completes.
            Outcome::Sleep(NEVER)
        }
    }
}

/// mutex_unlock(&pcpu_drain_mutex) once the caller has drained every CPU's lists (6.0).
pub fn drain_unlock(s: &mut impl Host) -> Outcome {
    s.mm_parts().mem.drain.owner = None;
    Outcome::Next
}

/// The per-CPU kworker that runs drain work items on `cpu` (created on first use).
fn kworker(s: &mut impl Host, cpu: CpuId) -> TaskId {
    if let Some(t) = s.mm_view().0.drain.kworkers[cpu] {
        return t;
    }
    let t = s.spawn_kthread(cpu, format!("kworker/{cpu}:1"));
    s.mm_parts().mem.drain.kworkers[cpu] = Some(t);
    t
}

/// A kworker's drain work item: drain this CPU, then wake the drainer if it was the last.
pub fn drain_work(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let ps = drain_local_pages(s, cpu, Some(t));
    let drain = &mut s.mm_parts().mem.drain;
    drain.pending -= 1;
    if drain.pending == 0 {
        let owner = drain.owner.take().expect("a drain is running");
        s.wake(owner);
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// State of the drains under pcpu_drain_mutex (the workqueue and remote-drain eras).
#[derive(Debug)]
pub struct DrainState {
    /// Who holds pcpu_drain_mutex.
    pub owner: Option<TaskId>,
    /// Work items not yet done.
    pub pending: u32,
    pub kworkers: Vec<Option<TaskId>>,
}

impl DrainState {
    pub fn new(ncpus: usize) -> DrainState {
        DrainState {
            owner: None,
            pending: 0,
            kworkers: vec![None; ncpus],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{machine, Then};

    /// drain_all_pages() visits every CPU; one whose list is empty keeps the list's buffer, so
    /// its next refill does not allocate it again. Its pages go back to the zone either way.
    #[test]
    fn draining_keeps_the_lists_buffers() {
        let mut s = machine(2, "linux-3.4", Then::Sleep, &[]);
        let pages: Vec<u32> = (0..3).map(|_| s.mem.frames.alloc_on(0)).collect();
        s.mem.frames.pcp[1][0].reserve(64);
        s.mem.frames.pcp[0][0].extend(&pages);
        let free = |s: &crate::sim::Sim| s.mem.frames.zones[0].nr_free();
        let before = free(&s);
        drain_pages(&mut s, 0, 0);
        drain_pages(&mut s, 0, 1);
        assert_eq!(free(&s), before + 3);
        assert!(s.mem.frames.pcp[0][0].is_empty() && s.mem.frames.pcp[0][0].capacity() >= 3);
        assert!(s.mem.frames.pcp[1][0].capacity() >= 64);
    }
}
