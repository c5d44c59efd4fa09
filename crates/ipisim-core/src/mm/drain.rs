//! drain_all_pages() (mm/page_alloc.c): pull every CPU's per-CPU free pages back to the buddy
//! allocator, as four kernel eras did it (`kernel.pcp_drain`).

use super::page_alloc::Frames;
use super::Hooks as _;
use crate::config::named_enum;
use crate::engine::{CpuId, CpuMask, TaskId, Time, NEVER};
use crate::machine::Cost;
use crate::observe::{Func, Vm};
use crate::sim::Sim;
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
        /// The caller drains every CPU's lists itself under each pcp->lock: no IPI, no work (6.0).
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
pub fn drain_pages(s: &mut Sim, by: CpuId, cpu: CpuId) -> Time {
    let mut ps = 0;
    for zone in 0..s.mem.frames.zones.len() {
        let pages = std::mem::take(&mut s.mem.frames.pcp[cpu][zone]);
        if pages.is_empty() {
            continue;
        }
        let hold = pages.len() as Time * s.m.cost[Cost::BuddyPage];
        ps += super::page_alloc::zone_lock_wait(s, zone, by, hold) + hold;
        for &p in &pages {
            s.mem.frames.zones[zone].give(p);
        }
        s.mem.frames.pcp[cpu][zone] = pages;
        s.mem.frames.pcp[cpu][zone].clear();
    }
    ps
}

/// drain_local_pages(): the call-function (or work item) that drains the CPU it runs on.
pub fn drain_local_pages(s: &mut Sim, cpu: CpuId, task: Option<TaskId>) -> Time {
    let ps = drain_pages(s, cpu, cpu);
    s.obs.stats.charge(task, Func::DrainPages, ps);
    ps
}

/// drain_all_pages(NULL) from task `t` on `cpu`.
pub fn drain_all_pages(s: &mut Sim, cpu: CpuId, t: TaskId) -> Outcome {
    let with = cpus_with_pcps(&s.mem.frames);
    let ncpus = s.m.ncpus();
    // The seed's unmerged debug counters (patch 8/8): every call, and calls where fewer than
    // half the online CPUs held pages.
    s.obs.stats.vm(Vm::PcpGlobalDrain, 1);
    s.obs.stats.drain_cpus_with_pages[with.weight()] += 1;
    if with.weight() < ncpus / 2 {
        s.obs.stats.vm(Vm::PcpGlobalIpiSaved, 1);
    }
    match s.mem.cfg.pcp_drain {
        PcpDrain::AllCpus | PcpDrain::CpusWithPages => {
            let mask = if s.mem.cfg.pcp_drain == PcpDrain::AllCpus {
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
            s.obs.stats.charge(Some(t), Func::DrainPages, ps);
            Outcome::Busy {
                ps,
                irqs_off: false,
            }
        }
        PcpDrain::Workqueue => {
            // mutex_trylock(&pcpu_drain_mutex): a NULL-zone caller gives up if a drain runs.
            if s.mem.drain.owner.is_some() {
                return Outcome::Next;
            }
            s.mem.drain.owner = Some(t);
            s.mem.drain.pending = with.weight() as u32;
            for c in with.iter() {
                let w = kworker(s, c);
                s.sched.tasks[w].steps.push(Step::DrainWork);
                s.wake(w);
            }
            if s.mem.drain.pending == 0 {
                s.mem.drain.owner = None;
                return Outcome::Next;
            }
            // flush_work() on each: sleep until the last work item completes.
            Outcome::Sleep(NEVER)
        }
    }
}

/// The per-CPU kworker that runs drain work items on `cpu` (created on first use).
fn kworker(s: &mut Sim, cpu: CpuId) -> TaskId {
    if let Some(t) = s.mem.drain.kworkers[cpu] {
        return t;
    }
    let t = s.spawn_kthread(cpu);
    s.sched.tasks[t].comm = format!("kworker/{cpu}:1");
    s.mem.drain.kworkers[cpu] = Some(t);
    t
}

/// A kworker's drain work item: drain this CPU, then wake the drainer if it was the last.
pub fn drain_work(s: &mut Sim, cpu: CpuId, t: TaskId) -> Outcome {
    let ps = drain_local_pages(s, cpu, Some(t));
    s.mem.drain.pending -= 1;
    if s.mem.drain.pending == 0 {
        let owner = s.mem.drain.owner.take().expect("a drain is running");
        s.wake(owner);
    }
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// State of the workqueue era's drains.
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
