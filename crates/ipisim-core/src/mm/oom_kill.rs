//! The OOM killer (mm/oom_kill.c): when direct reclaim at every priority freed nothing,
//! __alloc_pages_may_oom() calls out_of_memory(), which kills the task with the most points so
//! that its exit frees memory, and the allocation is retried. How points are counted, which of
//! equals is chosen and whether a child dies in its place changed over the eras
//! (`kernel.oom_select`).

use super::{Host, Memory, KTHREAD};
use crate::config::named_enum;
use crate::engine::{TaskId, Time, NEVER, PS_PER_S};
use crate::step::Outcome;

named_enum! {
    /// oom_badness(), the tie rule of select_bad_process() and oom_kill_process()'s sacrifice.
    OomSelect {
        /// Thousandths of the memory (rss x 1000 / totalpages, at least 1), the first of equals in
        /// the task list (`points > *ppoints`): a63d83f427fb "oom: badness heuristic rewrite"
        /// (2.6.36) to 3.4. Every task under 0.1 % of memory scores 1.
        PermilleFirst = "permille_first",
        /// Pages (rss, page tables, swap entries), still the first of equals: a7f638f999ff "mm,
        /// oom: normalize oom scores to oom_score_adj scale only for userspace" (3.5), then
        /// d49ad9355420 "mm, oom: prefer thread group leaders for display purposes" keeping the
        /// one chosen among equals.
        PagesFirst = "pages_first",
        /// Pages, the last of equals: oom_evaluate_task() replaces the chosen one unless it has
        /// fewer points, once Tetsuo Handa's 2019 patch removed d49ad9355420's check (gone by 5.8);
        /// no child is sacrificed (bbbe480297, 5.1).
        PagesLast = "pages_last",
    }
}

impl OomSelect {
    /// oom_kill_process() kills the chosen task's child with the most points instead, if it has
    /// one with any (victim_points starts at 0), until bbbe480297 "mm, oom: remove 'prefer
    /// children over parent' heuristic" (5.1).
    fn sacrifices_child(self) -> bool {
        self != OomSelect::PagesLast
    }
}

/// What select_bad_process() found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected {
    /// The task with the most points (ties as `kernel.oom_select` says).
    Victim(TaskId),
    /// A task chosen before has not exited yet (TIF_MEMDIE): ERR_PTR(-1UL), kill nothing more.
    Exiting,
    /// No killable task ("Out of memory and no killable processes...").
    Nothing,
}

/// oom_badness(): the task's points, from the pages it holds (its `rss`). Kernel threads, exited
/// tasks and tasks holding nothing are not candidates (oom_unkillable_task, find_lock_task_mm).
/// CAP_SYS_ADMIN's 3 % bonus (to 3.4) and oom_score_adj are not modelled: no task has either.
pub fn oom_badness(s: &impl Host, t: TaskId) -> Option<u64> {
    let mem = s.mm_view().0;
    let rss = mem.tasks[t].rss;
    let alive = !s.exited(t) && s.task_mm(t) != KTHREAD;
    if !alive || rss == 0 {
        return None;
    }
    Some(match mem.cfg.oom_select {
        // totalpages: totalram_pages + total_swap_pages (constrained_alloc(), no swap here).
        OomSelect::PermilleFirst => (rss * 1000 / mem.frames.total()).clamp(1, 1000),
        OomSelect::PagesFirst | OomSelect::PagesLast => rss,
    })
}

/// select_bad_process(): walk the task list (in fork order) and keep the one with the most
/// points; among equals, the first or the last as `kernel.oom_select` says.
pub fn select_bad_process(s: &impl Host) -> Selected {
    let mem: &Memory = s.mm_view().0;
    // The walk stops at any victim that has not exited, wherever it is in the list: look at the
    // ones oom_kill_process() chose first (16,000 hackbench tasks call this every jiffy).
    if mem.oom_victims.iter().any(|&v| oom_badness(s, v).is_some()) {
        return Selected::Exiting;
    }
    let last = mem.cfg.oom_select == OomSelect::PagesLast;
    let mut chosen: Option<(TaskId, u64)> = None;
    for &t in &mem.tasklist {
        let Some(points) = oom_badness(s, t) else {
            continue;
        };
        if mem.oom_killed[t] {
            return Selected::Exiting;
        }
        if chosen.is_none_or(|(_, best)| points > best || (last && points == best)) {
            chosen = Some((t, points));
        }
    }
    chosen.map_or(Selected::Nothing, |(t, _)| Selected::Victim(t))
}

/// oom_kill_process() -> oom_kill_task(): SIGKILL and TIF_MEMDIE for the chosen task, or for the
/// child it sacrifices (to 5.1); the victim is woken from an interruptible sleep and exits
/// (freeing its memory) at its next user step.
pub fn oom_kill_process(s: &mut impl Host, chosen: TaskId) {
    let victim = if s.mm_view().0.cfg.oom_select.sacrifices_child() {
        sacrifice_child(s, chosen)
    } else {
        chosen
    };
    let p = s.mm_parts();
    p.mem.oom_killed[victim] = true;
    p.mem.oom_victims.push(victim);
    p.obs.stats.oom_kills += 1;
    s.signal_wake_up(victim);
}

/// "Kill process ... or sacrifice child": of `chosen`'s children with an mm of their own, the one
/// with the most points, the first of equals in fork order (`t->children`); `chosen` if none has
/// any.
fn sacrifice_child(s: &impl Host, chosen: TaskId) -> TaskId {
    let mem = s.mm_view().0;
    let mut victim = (chosen, 0);
    for &c in &mem.tasklist {
        if mem.tasks[c].real_parent != Some(chosen) || s.task_mm(c) == s.task_mm(chosen) {
            continue;
        }
        if let Some(points) = oom_badness(s, c).filter(|&p| p > victim.1) {
            victim = (c, points);
        }
    }
    victim.0
}

/// out_of_memory() from task `t`'s allocation, with no cpuset or mempolicy constraint.
pub fn out_of_memory(s: &mut impl Host, t: TaskId) -> Outcome {
    // __alloc_pages_direct_reclaim() returned NULL just before: its latency sample ends here.
    super::page_alloc::end_direct_reclaim(s, t);
    // "If current has a pending SIGKILL ... automatically select it": it may use the reserves
    // and exits at its next user step.
    if s.mm_view().0.oom_killed[t] {
        return Outcome::Next;
    }
    // Victims that exited are candidates no more.
    let mut victims = std::mem::take(&mut s.mm_parts().mem.oom_victims);
    victims.retain(|&v| oom_badness(s, v).is_some());
    s.mm_parts().mem.oom_victims = victims;
    match select_bad_process(s) {
        Selected::Victim(v) => oom_kill_process(s, v),
        Selected::Exiting => {}
        Selected::Nothing => {
            // The kernel panics here; the run ends and the result says why.
            s.mm_parts().obs.stats.oom_no_victim = true;
            s.panic();
            return Outcome::Sleep(NEVER);
        }
    }
    if s.mm_view().0.oom_killed[t] {
        return Outcome::Next;
    }
    // schedule_timeout_uninterruptible(1): give the victim a jiffy to exit, then retry.
    let jiffy: Time = PS_PER_S / s.arch_view().0.cfg.hz;
    s.set_uninterruptible(t);
    Outcome::Sleep(s.now() + jiffy)
}
