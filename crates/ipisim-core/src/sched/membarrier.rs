//! membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) as kernel/sched/membarrier.c does it (6.18):
//! an IPI that runs ipi_mb() on every other CPU whose rq->curr is a thread of the caller's mm,
//! sent with smp_call_function_many(wait=1), so the caller waits for every target's handler.

use super::{Host, Mode, Outcome, Step, TaskState};
use crate::engine::{CpuId, CpuMask, TaskId};
use crate::machine::Cost;
use crate::observe::Func;
use crate::smp::{self, CallFunc};

/// sys_membarrier() entry: the syscall, then membarrier_private_expedited() below.
pub fn sys_membarrier(s: &mut impl Host, t: TaskId) -> Outcome {
    let c = &s.machine().cost;
    let ps = c[Cost::Syscall] + c[Cost::Membarrier];
    s.obs().stats.charge(Some(t), Func::Syscall, ps);
    s.push_step(t, Step::MembarrierIpis);
    Outcome::Busy {
        ps,
        irqs_off: false,
    }
}

/// membarrier_private_expedited(0, -1) up to the IPIs.
pub fn membarrier_private_expedited(s: &mut impl Host, t: TaskId) -> Outcome {
    let (sched, m) = s.sched_view();
    let mm = sched.tasks[t].mm;
    // atomic_read(&mm->mm_users) == 1 || num_online_cpus() == 1: nothing to order against.
    let users = sched
        .tasks
        .iter()
        .filter(|x| x.mm == mm && x.state != TaskState::Exited)
        .count();
    if users == 1 || m.ncpus() == 1 {
        return Outcome::Next;
    }
    // smp_mb(), zalloc_cpumask_var(), cpus_read_lock(), rcu_read_lock(), then the scan below
    // and the smp_mb() after the IPIs: one measured cost.
    let own = m.cost[Cost::MembarrierMask];
    s.obs().stats.charge(Some(t), Func::Membarrier, own);
    s.push_step(t, Step::MembarrierIpiMb);
    Outcome::Busy {
        ps: own,
        irqs_off: false,
    }
}

/// for_each_online_cpu: p = rcu_dereference(cpu_rq(cpu)->curr); if (p && p->mm == mm) set the
/// CPU in tmpmask; then smp_call_function_many(tmpmask, ipi_mb, NULL, true), which skips the
/// calling CPU itself. An idle CPU's curr is its idle task (mm NULL), even while it lazily keeps
/// this mm loaded.
pub fn membarrier_ipi_mb(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    let sched = s.sched_view().0;
    let mm = sched.tasks[t].mm;
    let mut mask = CpuMask::new();
    for (c, rq) in sched.cpus.iter().enumerate() {
        let curr = rq.task.filter(|_| rq.mode != Mode::Idle);
        if curr.is_some_and(|p| sched.tasks[p].mm == mm) {
            mask.set(c);
        }
    }
    smp::smp_call_function_many(s, cpu, t, &mask, CallFunc::IpiMb)
}
