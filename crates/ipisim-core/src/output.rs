//! The result of a run as JSON: every counter, the times, the profile and the resolved config.
//! A root module: it reads every layer's state.

use crate::config::Resolved;
use crate::engine::{secs, Time};
use crate::observe::{latency_json, Func, Irq, Stats, Trace, Vm};
use crate::sim::Sim;
use serde_json::{json, Map, Value};

pub struct RunOutput {
    pub json: Value,
    /// Events the engine handled (for the benchmark).
    pub events: u64,
}

pub fn to_json(s: &Sim, r: &Resolved) -> RunOutput {
    let end = s.end.unwrap_or(s.now());
    let st = &s.obs.stats;
    let (user, system) = s
        .sched
        .tasks
        .iter()
        .zip(&st.tasks)
        // As `time` reports the benchmark's processes: kernel threads (kswapd) are not counted.
        .filter(|(t, _)| t.mm != crate::sched::KTHREAD)
        .fold((0, 0), |(u, y), (_, a)| {
            (u + a.times.user, y + a.times.system)
        });

    let interrupts = interrupts_json(st, s.k.cal_counts_tlb);
    let vmstat: Map<String, Value> = Vm::ALL
        .iter()
        .map(|&c| (c.name().into(), st.vm[c as usize].into()))
        .collect();
    let tracepoints: Map<String, Value> = Trace::ALL
        .iter()
        .map(|&t| (t.name().into(), st.trace[t as usize].into()))
        .collect();

    let profile = profile_json(st);

    let profile_by_comm = profile_by_comm_json(s);

    let mut config = r.to_json();
    if let Some(bytes) = s.mem_floor {
        // Only runs whose scale fell under the floor carry it, so other results are unchanged.
        config["machine.simulated_mem_per_node"] = bytes.into();
    }
    let mut json = json!({
        "scenario": r.scenario,
        "machine": s.m.name,
        "kernel": s.k.name,
        "elapsed_s": secs(end),
        "user_s": secs(user),
        "system_s": secs(system),
        "interrupts": interrupts,
        "call_function_interrupts_per_s": per_second(&st.irq_bins),
        "vmstat": vmstat,
        "tracepoints": tracepoints,
        "ops": crate::sim::workload_ops(s),
        "metrics": crate::sim::workload_metrics(r).iter().map(|(name, lower)| json!({"name": name, "better": if *lower { "lower" } else { "higher" }})).collect::<Vec<_>>(),
        "check": crate::observe::check::to_json(&s.obs.check),
        "latency": {
            "direct_reclaim": latency_json(&st.direct_reclaim_latency),
            "direct_reclaim_drained": latency_json(&st.direct_reclaim_drained_latency),
        },
        "drain_cpus_with_pages": st.drain_cpus_with_pages,
        "oom": {"kills": st.oom_kills, "no_killable_task": st.oom_no_victim},
        "profile": profile,
        "profile_by_comm": profile_by_comm,
        "idle_s": st.idle.iter().map(|&t| secs(t)).collect::<Vec<_>>(),
        "ipis_sent": st.ipis_sent,
        "events": s.q.popped(),
        "config": config,
    });
    if s.m.invlpgb || s.m.rar {
        // Only machines with INVLPGB (or RAR) carry the block, so other results are unchanged.
        json["broadcast"] = broadcast_json(s);
    }
    if s.m.arch == crate::machine::Arch::Arm64 {
        // The broadcast TLB maintenance (no kernel counter has it); only arm64 results carry it.
        json["arm64"] = json!({"tlbi": st.tlbis, "dsb_ish": st.dsbs});
    }
    if s.m.arch == crate::machine::Arch::Riscv {
        // The SBI remote fences (no kernel counter has them); only riscv results carry it.
        json["riscv"] = json!({
            "sbi_rfence": st.sbi_rfences,
            "sbi_fenced": st.sbi_fenced,
            "sfence_vma": st.sfences,
            "sfence_vma_all": st.sfences_all,
        });
    }
    RunOutput {
        json,
        events: s.q.popped(),
    }
}

/// INVLPGB, TLBSYNC and the global ASIDs (no kernel counter has them).
fn broadcast_json(s: &Sim) -> Value {
    let b = &s.arch.x86.bstats;
    let held: Vec<Value> = (s.arch.mm.iter().enumerate())
        .filter(|(_, c)| c.global_asid != 0)
        .map(|(mm, c)| json!({"mm": mm, "asid": c.global_asid, "transition": c.asid_transition}))
        .collect();
    let mut out = json!({
        "invlpgb": b.invlpgb,
        "tlbsync": b.tlbsync,
        "tlbsync_invlpgbs": b.tlbsync_invlpgbs,
        "broadcast_flushes": b.broadcast_flushes,
        "transition_flushes": b.transition_flushes,
        "batch_flushes": b.batch_flushes,
        "global_asids_allocated": b.allocated,
        "global_asids_freed": b.freed,
        "asid_space_resets": b.resets,
        "global_asids_held": held,
    });
    if s.m.rar {
        out["rar_calls"] = json!(b.rar_calls);
        out["rar_signals"] = json!(b.rar_signals);
    }
    out
}

/// Call-function interrupts taken in each second of simulated time (the last second partial), as
/// `vmstat 1`'s `in` column shows them, less the local timer: a steady phase's dips show here.
fn per_second(bins: &[u32]) -> Vec<u64> {
    let per_s = (crate::engine::PS_PER_S / crate::observe::IRQ_BIN) as usize;
    bins.chunks(per_s)
        .map(|c| c.iter().map(|&n| u64::from(n)).sum())
        .collect()
}

/// /proc/interrupts: each row per CPU.
fn interrupts_json(st: &Stats, cal_counts_tlb: bool) -> Map<String, Value> {
    let mut interrupts = Map::new();
    for &row in Irq::ALL {
        let mut v = st.irqs[row as usize].clone();
        if row == Irq::Cal && !cal_counts_tlb {
            // Before 4.8 CAL was printed as irq_call_count - irq_tlb_count.
            for (c, t) in v.iter_mut().zip(&st.irqs[Irq::Tlb as usize]) {
                *c = c.saturating_sub(*t);
            }
        }
        interrupts.insert(row.name().into(), json!(v));
    }
    interrupts
}

/// perf report: CPU time by kernel function over all CPUs, with _raw_spin_lock's callers.
fn profile_json(st: &Stats) -> Vec<Value> {
    let busy: u64 = st.profile.iter().sum();
    let prof = ranked(&st.profile);
    let mut profile: Vec<Value> = prof
        .iter()
        .map(|(f, t)| json!({"function": f.name(), "seconds": secs(*t), "percent": 100.0 * *t as f64 / busy.max(1) as f64}))
        .collect();
    // perf's call graph under _raw_spin_lock: who took the lock, as shares of its time.
    let lock = st.profile[Func::RawSpinLock as usize];
    if let Some(row) = profile
        .iter_mut()
        .find(|p| p["function"] == Func::RawSpinLock.name())
    {
        row["callers"] = ranked(&st.lock_callers)
            .iter()
            .map(|(f, t)| json!({"function": f.name(), "percent": 100.0 * *t as f64 / lock.max(1) as f64}))
            .collect();
    }

    profile
}

/// perf report --comm: each command's own profile, and "swapper" for time with no task.
fn profile_by_comm_json(s: &Sim) -> Vec<Value> {
    let st = &s.obs.stats;
    // Time with no task current is the idle task's (interrupts taken on idle CPUs).
    let mut comms: Vec<(&str, [Time; Func::ALL.len()])> = Vec::new();
    let mut swapper = st.profile;
    for (t, a) in s.sched.tasks.iter().zip(&st.tasks) {
        let i = match comms.iter().position(|(c, _)| *c == t.comm) {
            Some(i) => i,
            None => {
                comms.push((&t.comm, [0; Func::ALL.len()]));
                comms.len() - 1
            }
        };
        for (f, &ps) in a.profile.iter().enumerate() {
            comms[i].1[f] += ps;
            swapper[f] -= ps;
        }
    }
    comms.push(("swapper", swapper));
    comms
        .iter()
        .filter(|(_, p)| p.iter().any(|&t| t > 0))
        .map(|(comm, p)| {
            let total: u64 = p.iter().sum();
            let functions: Vec<Value> = ranked(p)
                .iter()
                .map(|(f, t)| json!({"function": f.name(), "seconds": secs(*t), "percent": 100.0 * *t as f64 / total as f64}))
                .collect();
            json!({"comm": comm, "seconds": secs(total), "functions": functions})
        })
        .collect()
}

/// The functions with time in `times`, most first (ties in declaration order).
fn ranked(times: &[Time; Func::ALL.len()]) -> Vec<(Func, Time)> {
    let mut v: Vec<(Func, Time)> = Func::ALL
        .iter()
        .map(|&f| (f, times[f as usize]))
        .filter(|p| p.1 > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then((a.0 as usize).cmp(&(b.0 as usize))));
    v
}

#[cfg(test)]
mod tests {
    /// 10 ms bins add up to whole seconds, the last one partial: 1.5 s of one interrupt a bin.
    #[test]
    fn interrupts_per_second_sum_a_hundred_bins_each() {
        assert_eq!(super::per_second(&[1; 150]), [100, 50]);
        assert_eq!(super::per_second(&[]), [0u64; 0]);
    }
}
