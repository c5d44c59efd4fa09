//! The fair class (kernel/sched/fair.c) as far as the model needs it: which runnable task a CPU
//! runs next, when a wakeup preempts the running task, and when the tick does. Every task has
//! nice 0, so virtual time is run time; each CPU has its own queue (balance.rs moves a task
//! between them).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::config::{named_enum, params, ConfigError, Kind, Resolved};
use crate::engine::{TaskId, Time, PS_PER_S};

named_enum! {
    /// The fair class's policy (kernel.sched_fair).
    Policy {
        Cfs = "cfs",
        Eevdf = "eevdf",
    }
}

params! {
    /// The kernel preset's scheduler (kernel.*).
    #[derive(Debug, Clone)]
    pub struct FairConfig;
    pub const PARAMS = {
        balance: super::balance::Balance = "kernel.sched_balance", Kind::Choice(super::balance::Balance::NAMES), "", "migrate_load", "the periodic load balancer of a busy CPU: migrate_load (0b0695f2b34a, 5.5: a node-bound task waiting on the node's busiest CPU is pulled once its load shifted right by nr_balance_failed fits the imbalance), fix_small_imbalance (before 5.5: pulled whenever the busiest CPU's load, read through its per-tick history, is a whole task above this one's and more than imbalance_pct busier) or none (tasks stay where they are)";
        domain_init: super::balance::DomainInit = "kernel.sched_domain", Kind::Choice(super::balance::DomainInit::NAMES), "", "sd_init", "where the node-level sched_domain's parameters come from: sd_init (3.16's sd_init(): imbalance_pct 117 for a domain sharing the LLC, balance intervals of 1 to 2 ms per CPU of the node) or sd_mc_init (to 3.15, topology.h's SD_MC_INIT: imbalance_pct 125, intervals of 1 to 4 ms)";
        busy_factor: u64 = "kernel.sched_busy_factor", Kind::Int { min: 1, max: 64 }, "", "16", "sd->busy_factor: a busy CPU balances every busy_factor x its balance interval (kernel.sched_domain) ms (64 in SD_MC_INIT to 3.15, 32 in sd_init() until 5.10's 'sched/fair: Reduce busy load balance interval')";
        busy_jiffy_off: bool = "kernel.sched_busy_jiffy_off", Kind::Bool, "", "true", "get_sd_balance_interval() takes a jiffy off a busy CPU's interval so that domains' periods are not multiples of each other (from 5.10's 'sched/fair: Reduce busy load balance interval', with busy_factor 16)";
        active_balance: bool = "kernel.sched_active_balance", Kind::Bool, "", "false", "need_active_balance(): once nr_balance_failed exceeds cache_nice_tries + 2, the busiest CPU's stopper pushes its running task to the balancing CPU (every kernel to 5.11; from 5.12's e9b9734b7465 'sched/fair: Reduce cases for active balance' not on a node where every CPU is busy)";
        policy: Policy = "kernel.sched_fair", Kind::Choice(Policy::NAMES), "", "eevdf", "the fair class: cfs (to 6.5: a woken sleeper gets up to half of sysctl_sched_latency of credit and preempts when it is sysctl_sched_wakeup_granularity behind; the tick preempts after the task's share of sysctl_sched_latency) or eevdf (147f3efaa241, 6.6: a woken task keeps its lag and preempts only a task ahead of the queue's average; the tick preempts after sysctl_sched_base_slice); the times scale with 1 + ilog2(min(CPUs, 8))";
    }
}

/// sysctl_sched_latency, sysctl_sched_min_granularity, sysctl_sched_wakeup_granularity and
/// sysctl_sched_base_slice before their scaling with the CPU count.
const SCHED_LATENCY: Time = 6_000_000_000;
const SCHED_MIN_GRANULARITY: Time = 750_000_000;
const SCHED_WAKEUP_GRANULARITY: Time = 1_000_000_000;
const SCHED_BASE_SLICE: Time = 750_000_000;

/// Every CPU's virtual time when the run starts: it has been up a while, so a kernel thread that
/// slept since boot gets a sleeper's full credit at its first wakeup.
pub const BOOT_VRUNTIME: Time = PS_PER_S;

/// A task's scheduling entity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Entity {
    /// Its virtual run time, as of when it last left a CPU.
    pub vruntime: Time,
    /// EEVDF's vlag: how far behind its queue's average it was when it went to sleep.
    vlag: i64,
    /// Just forked: its first enqueue is wake_up_new_task()'s.
    fork: bool,
}

impl Entity {
    /// A task that exists when the run starts: a user task has been running (it starts at its
    /// CPU's virtual time), a kernel thread has slept since boot (it starts at 0).
    pub fn at_start(kthread: bool) -> Entity {
        Entity {
            vruntime: if kthread { 0 } else { BOOT_VRUNTIME },
            ..Entity::default()
        }
    }

    /// A task just forked (copy_process): placed as wake_up_new_task() places it.
    pub fn forked() -> Entity {
        Entity {
            vruntime: BOOT_VRUNTIME,
            fork: true,
            ..Entity::default()
        }
    }
}

/// The fair class of one run.
#[derive(Debug, Clone, Copy)]
pub struct Fair {
    policy: Policy,
    /// 1 + ilog2(min(CPUs, 8)): get_update_sysctl_factor(), SCHED_TUNABLESCALING_LOG.
    factor: Time,
    /// The tick period, 1/HZ.
    jiffy: Time,
}

impl Fair {
    pub fn new(r: &Resolved, ncpus: usize, hz: u64) -> Result<Fair, ConfigError> {
        Ok(Fair::with(FairConfig::from_resolved(r)?.policy, ncpus, hz))
    }

    fn with(policy: Policy, ncpus: usize, hz: u64) -> Fair {
        Fair {
            policy,
            factor: 1 + ncpus.clamp(1, 8).ilog2() as Time,
            jiffy: PS_PER_S / hz,
        }
    }

    /// sched_slice(): how long a task runs while `nr` tasks (it included) are runnable.
    fn slice(&self, nr: usize) -> Time {
        self.factor
            * match self.policy {
                // From 8 tasks the latency's share is under the granularity: no division.
                Policy::Cfs if nr >= (SCHED_LATENCY / SCHED_MIN_GRANULARITY) as usize => {
                    SCHED_MIN_GRANULARITY
                }
                Policy::Cfs => (SCHED_LATENCY / nr.max(1) as Time).max(SCHED_MIN_GRANULARITY),
                Policy::Eevdf => SCHED_BASE_SLICE,
            }
    }

    /// When the tick takes the CPU from a task picked at `picked` while `nr` tasks are runnable,
    /// others waiting since `since`: the first tick after both its slice is used and `since`
    /// (check_preempt_tick(); EEVDF's update_deadline(), whose base_slice is under a jiffy, renews
    /// a lone task's deadline at every tick, so the first tick with another waiting ends it).
    pub fn tick_at(&self, picked: Time, since: Time, nr: usize) -> Time {
        self.slice_over(picked, since, nr).div_ceil(self.jiffy) * self.jiffy
    }

    /// `now >= tick_at(picked, since, nr)`, asked at every step boundary: the tick lies within a
    /// jiffy after its lower bound, so only that window pays for the division.
    pub fn tick_passed(&self, picked: Time, since: Time, nr: usize, now: Time) -> bool {
        let x = self.slice_over(picked, since, nr);
        now >= x && (now - x >= self.jiffy || now >= x.div_ceil(self.jiffy) * self.jiffy)
    }

    /// The tick's lower bound: the slice used and others waiting since `since`.
    fn slice_over(&self, picked: Time, since: Time, nr: usize) -> Time {
        (picked + self.slice(nr)).max(since)
    }

    /// place_entity(): where a waking task goes in its CPU's virtual time. `min_vruntime` is
    /// cfs_rq->min_vruntime, `avg` EEVDF's avg_vruntime() and `queued` the tasks runnable there
    /// before it, the running one included.
    pub fn place(&self, se: &mut Entity, min_vruntime: Time, avg: Time, queued: usize) {
        se.vruntime = match (self.policy, se.fork) {
            // START_DEBIT: a new task starts a slice behind.
            (Policy::Cfs, true) => se.vruntime.max(min_vruntime + self.slice(queued + 1)),
            // GENTLE_FAIR_SLEEPERS: at most half a latency of credit for sleeping.
            (Policy::Cfs, false) => se
                .vruntime
                .max(min_vruntime.saturating_sub(self.factor * SCHED_LATENCY / 2)),
            // PLACE_LAG: the lag it left with, scaled so that it keeps it once enqueued among
            // `queued` others; none on an empty queue, nor for a new task.
            (Policy::Eevdf, fork) => {
                let lag = if fork || queued == 0 {
                    0
                } else {
                    se.vlag * (queued as i64 + 1) / queued as i64
                };
                (avg as i64 - lag).max(0) as Time
            }
        };
        se.fork = false;
    }

    /// check_preempt_wakeup(): does a task woken at virtual time `woken` preempt the running one,
    /// now at `curr`, with `avg` the queue's average once the woken task is in it?
    pub fn wakeup_preempts(&self, curr: Time, woken: Time, avg: Time) -> bool {
        match self.policy {
            // wakeup_preempt_entity(): it must be more than the wakeup granularity behind.
            Policy::Cfs => curr > woken + self.factor * SCHED_WAKEUP_GRANULARITY,
            // pick_eevdf(): an eligible running task keeps the CPU for its slice (RUN_TO_PARITY,
            // 63304558ba5d); one ahead of the average loses it to an eligible task.
            Policy::Eevdf => curr > avg && woken <= avg,
        }
    }

    /// put_prev_entity(): a task leaves its CPU after running `ran`; one going to sleep keeps its
    /// lag (dequeue_entity()'s update_entity_lag(), within max(2 slices, a tick)), with `avg` the
    /// queue's average, itself included.
    pub fn put_prev(&self, se: &mut Entity, ran: Time, avg: Time, sleeping: bool) {
        se.vruntime += ran;
        if sleeping && self.policy == Policy::Eevdf {
            let limit = (2 * SCHED_BASE_SLICE * self.factor).max(self.jiffy) as i64;
            se.vlag = (avg as i64 - se.vruntime as i64).clamp(-limit, limit);
        }
    }
}

/// A CPU's runnable tasks, leftmost (smallest vruntime) first; ties in the order they came.
#[derive(Debug, Default)]
pub struct RunQueue {
    heap: BinaryHeap<Reverse<(Time, u64, TaskId)>>,
    seq: u64,
    /// The sum of the queued tasks' vruntimes, for avg_vruntime().
    sum: u128,
}

impl RunQueue {
    pub fn push(&mut self, vruntime: Time, t: TaskId) {
        self.seq += 1;
        self.sum += vruntime as u128;
        self.heap.push(Reverse((vruntime, self.seq, t)));
    }

    /// pick_next_entity(): take the leftmost task.
    pub fn pop(&mut self) -> Option<TaskId> {
        let Reverse((v, _, t)) = self.heap.pop()?;
        self.sum -= v as u128;
        Some(t)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// dequeue_entity() of a waiting task (the load balancer's detach_task()).
    pub fn remove(&mut self, t: TaskId) {
        let mut sum = self.sum;
        self.heap.retain(|Reverse((v, _, x))| {
            let keep = *x != t;
            if !keep {
                sum -= *v as u128;
            }
            keep
        });
        self.sum = sum;
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// avg_vruntime(): the mean virtual time of the queued tasks and `curr`, the running one's
    /// now (every task has nice 0, so every weight is equal); `empty` when there are none.
    pub fn avg(&self, curr: Option<Time>, empty: Time) -> Time {
        let n = self.heap.len() as u128 + curr.is_some() as u128;
        if n == 0 {
            return empty;
        }
        ((self.sum + curr.unwrap_or(0) as u128) / n) as Time
    }

    /// The leftmost queued task that `pred` accepts, without allocating (the balancer's walk).
    pub fn leftmost(&self, pred: impl Fn(TaskId) -> bool) -> Option<TaskId> {
        let accepted = self.heap.iter().map(|r| r.0).filter(|&(_, _, t)| pred(t));
        accepted.min().map(|(_, _, t)| t)
    }

    /// The queued tasks, leftmost first.
    pub fn tasks(&self) -> Vec<TaskId> {
        let mut v: Vec<_> = self.heap.iter().map(|r| r.0).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, _, t)| t).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fair(policy: Policy, ncpus: usize) -> Fair {
        Fair::with(policy, ncpus, 250)
    }

    const MS: Time = crate::engine::PS_PER_MS;

    #[test]
    fn slices_scale_with_the_cpu_count_and_end_on_a_tick() {
        // 8 CPUs: factor 4; CFS shares 24 ms, EEVDF gives 3 ms; ticks every 4 ms at HZ=250.
        let cfs = fair(Policy::Cfs, 8);
        assert_eq!(cfs.slice(2), 12 * MS);
        assert_eq!(cfs.slice(100), 3 * MS);
        assert_eq!(cfs.tick_at(MS, 0, 2), 16 * MS);
        // A task that ran alone past its slice keeps the CPU until the tick after one waits.
        assert_eq!(cfs.tick_at(MS, 21 * MS, 2), 24 * MS);
        let eevdf = fair(Policy::Eevdf, 64);
        assert_eq!(eevdf.slice(2), 3 * MS);
        assert_eq!(eevdf.tick_at(0, 0, 2), 4 * MS);
        assert_eq!(fair(Policy::Cfs, 1).slice(2), 3 * MS);
        assert_eq!(cfs.slice(7), 24 * MS / 7);
        assert_eq!(cfs.slice(8), 3 * MS);
    }

    #[test]
    fn tick_passed_is_now_at_or_after_tick_at() {
        let cfs = fair(Policy::Cfs, 8);
        for (picked, since, nr) in [(MS, 0, 2), (MS, 21 * MS, 2), (7, 3 * MS + 1, 9), (0, 0, 1)] {
            let tick = cfs.tick_at(picked, since, nr);
            for now in [0, tick - MS, tick - 1, tick, tick + 1, tick + 5 * MS] {
                assert_eq!(
                    cfs.tick_passed(picked, since, nr, now),
                    now >= tick,
                    "{now}"
                );
            }
        }
    }

    #[test]
    fn cfs_gives_a_sleeper_half_a_latency_and_preempts_past_the_granularity() {
        let f = fair(Policy::Cfs, 8);
        // A kernel thread asleep since boot: 12 ms of credit (half of 4 x 6 ms).
        let mut se = Entity::at_start(true);
        f.place(&mut se, 100 * MS, 0, 1);
        assert_eq!(se.vruntime, 88 * MS);
        assert!(f.wakeup_preempts(93 * MS, se.vruntime, 0));
        assert!(!f.wakeup_preempts(92 * MS, se.vruntime, 0));
        // A task that slept briefly keeps its vruntime; a new one starts a slice behind.
        let mut short = Entity {
            vruntime: 99 * MS,
            ..Entity::default()
        };
        f.place(&mut short, 100 * MS, 0, 1);
        assert_eq!(short.vruntime, 99 * MS);
        let mut new = Entity::forked();
        f.place(&mut new, BOOT_VRUNTIME, 0, 1);
        assert_eq!(new.vruntime, BOOT_VRUNTIME + 12 * MS);
        // A user task there at the start has been running: no credit on its CPU's clock.
        let mut user = Entity::at_start(false);
        f.place(&mut user, BOOT_VRUNTIME, 0, 0);
        assert_eq!(user.vruntime, BOOT_VRUNTIME);
    }

    #[test]
    fn eevdf_keeps_the_lag_and_runs_an_eligible_task_to_its_slice() {
        let f = fair(Policy::Eevdf, 8);
        // It ran 2 ms past its queue's average and slept: it comes back 2 ms ahead of the new
        // average once enqueued beside one other task (its lag scaled by 2/1 before).
        let mut se = Entity::at_start(false);
        f.place(&mut se, 0, 10 * MS, 1);
        assert_eq!(se.vruntime, 10 * MS);
        f.put_prev(&mut se, 2 * MS, 10 * MS, true);
        assert_eq!(se.vlag, -2 * MS as i64);
        f.place(&mut se, 0, 50 * MS, 1);
        assert_eq!(se.vruntime, 54 * MS);
        let avg = (50 * MS + se.vruntime) / 2;
        assert_eq!(se.vruntime - avg, 2 * MS);
        assert!(!f.wakeup_preempts(50 * MS, se.vruntime, avg));
        // One that left behind is eligible and preempts a task ahead of the new average.
        let mut behind = Entity {
            vlag: 3 * MS as i64,
            ..Entity::default()
        };
        f.place(&mut behind, 0, 50 * MS, 1);
        assert_eq!(behind.vruntime, 44 * MS);
        assert!(f.wakeup_preempts(50 * MS, behind.vruntime, 47 * MS));
        // On an empty queue a task keeps no lag, and the lag kept is within two slices.
        f.place(&mut behind, 0, 50 * MS, 0);
        assert_eq!(behind.vruntime, 50 * MS);
        f.put_prev(&mut behind, 0, 90 * MS, true);
        assert_eq!(behind.vlag, 6 * MS as i64);
    }

    #[test]
    fn the_leftmost_task_runs_first_and_ties_go_in_order() {
        let mut q = RunQueue::default();
        q.push(5, 1);
        q.push(3, 2);
        q.push(5, 0);
        assert_eq!(q.tasks(), [2, 1, 0]);
        assert_eq!(q.avg(Some(7), 0), 5);
        assert_eq!(
            (q.pop(), q.pop(), q.pop(), q.pop()),
            (Some(2), Some(1), Some(0), None)
        );
        assert_eq!(q.avg(None, 42), 42);
    }
}
