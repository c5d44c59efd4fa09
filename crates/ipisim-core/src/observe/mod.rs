//! What a run reports: /proc/interrupts rows, /proc/vmstat counters, tracepoint counts, CPU time by
//! kernel function (the profile), and per-task user/system time. Flat arrays indexed by small enums.

pub mod check;
mod func;
pub mod tracelog;

pub use func::Func;
pub use tracelog::TraceLog;

use crate::config::named_enum;
use crate::engine::{TaskId, Time};

named_enum! {
    /// /proc/vmstat counters (the TLB ones exist only with CONFIG_DEBUG_TLBFLUSH).
    Vm {
        TlbRemoteFlush = "nr_tlb_remote_flush",
        TlbRemoteFlushReceived = "nr_tlb_remote_flush_received",
        TlbLocalFlushAll = "nr_tlb_local_flush_all",
        TlbLocalFlushOne = "nr_tlb_local_flush_one",
        PgFault = "pgfault",
        PgFree = "pgfree",
        PgScanKswapd = "pgscan_kswapd",
        PgScanDirect = "pgscan_direct",
        PgStealKswapd = "pgsteal_kswapd",
        PgStealDirect = "pgsteal_direct",
        PgActivate = "pgactivate",
        // shrink_active_list(): pages scanned on an active list, and those moved to the inactive.
        PgRefill = "pgrefill",
        PgDeactivate = "pgdeactivate",
        PgRotated = "pgrotated",
        AllocStall = "allocstall",
        PageOutRun = "pageoutrun",
        NrVmscanWrite = "nr_vmscan_write",
        PSwpOut = "pswpout",
        NrVmscanImmediateReclaim = "nr_vmscan_immediate_reclaim",
        PgMigrateSuccess = "pgmigrate_success",
        ThpFaultAlloc = "thp_fault_alloc",
        ThpFaultFallback = "thp_fault_fallback",
        ThpSplit = "thp_split",
        // The seed 004 series' debug counters (patch 8/8), never merged upstream.
        PcpGlobalDrain = "pcp_global_drain",
        PcpGlobalIpiSaved = "pcp_global_ipi_saved",
    }
}

named_enum! {
    /// x86 /proc/interrupts rows we model (arch_show_interrupts).
    Irq {
        Cal = "CAL",
        Tlb = "TLB",
    }
}

named_enum! {
    /// Tracepoints we count.
    Trace {
        TlbFlushTaskSwitch = "tlb:tlb_flush reason=flush on task switch (0)",
        TlbFlushRemoteShootdown = "tlb:tlb_flush reason=remote shootdown (1)",
        TlbFlushLocalShootdown = "tlb:tlb_flush reason=local shootdown (2)",
        TlbFlushLocalMmShootdown = "tlb:tlb_flush reason=local mm shootdown (3)",
        TlbFlushRemoteSendIpi = "tlb:tlb_flush reason=remote ipi send (4)",
        TlbFlushRemoteWrongCpu = "tlb:tlb_flush reason=remote wrong CPU (5)",
        IpiSendCpu = "ipi:ipi_send_cpu",
        IpiSendCpumask = "ipi:ipi_send_cpumask",
        CsdQueueCpu = "csd:csd_queue_cpu",
        WakeIdleWithoutIpi = "sched:sched_wake_idle_without_ipi",
        WritebackCongestionWait = "writeback:writeback_congestion_wait",
        VmscanThrottled = "vmscan:mm_vmscan_throttled",
        SchedMigrateTask = "sched:sched_migrate_task",
    }
}

impl Trace {
    /// The `tlb:tlb_flush` tracepoint for a reason number (TLB_FLUSH_ON_TASK_SWITCH = 0 ...).
    pub fn tlb_flush(reason: u8) -> Trace {
        Trace::ALL[reason as usize]
    }
}

/// Per-task accounting, as `/usr/bin/time` and `getrusage` report it.
#[derive(Debug, Clone, Default)]
pub struct TaskTimes {
    pub user: Time,
    pub system: Time,
}

/// One task's CPU time: its totals and, by kernel function, what `perf report --comm` shows.
#[derive(Debug, Clone)]
pub struct TaskAccount {
    pub times: TaskTimes,
    /// Inline, not boxed: charge_task then reaches it without a second pointer load.
    pub profile: [Time; Func::ALL.len()],
    /// The function charged last: what a stretch of the step it ends is charged to (smt_yield).
    pub last: Func,
}

/// What a run records: its counters and profiles, the TLB-coherence checker, and the trace.
pub struct Observe {
    pub stats: Stats,
    pub check: check::Checker,
    /// What `--trace` records, when asked for.
    pub trace: Option<Box<TraceLog>>,
}

#[derive(Debug, Clone)]
pub struct Stats {
    pub vm: [u64; Vm::ALL.len()],
    /// interrupts[row][cpu]
    pub irqs: [Vec<u64>; Irq::ALL.len()],
    pub trace: [u64; Trace::ALL.len()],
    /// Simulated CPU time by kernel function, over all CPUs.
    pub profile: [Time; Func::ALL.len()],
    /// `_raw_spin_lock` time by the function that took the lock (perf's call-graph children).
    pub lock_callers: [Time; Func::ALL.len()],
    /// Idle time per CPU.
    pub idle: Vec<Time>,
    /// CPU time of each task, by task id.
    pub tasks: Vec<TaskAccount>,
    /// Simulated IPIs actually sent (APIC writes), all vectors.
    pub ipis_sent: u64,
    /// Call-function interrupts taken.
    pub ipis_received: u64,
    /// Call-function interrupts taken, per IRQ_BIN of simulated time (for steady-phase rates).
    pub irq_bins: Vec<u32>,
    /// Direct-reclaim latencies: from entering __alloc_pages_direct_reclaim to leaving it (the
    /// drain_all_pages after a failed retry included), one sample per call, in call order.
    pub direct_reclaim_latency: Vec<Time>,
    /// The same for the calls that went on to drain_all_pages() (reclaim made progress, the
    /// retry failed).
    pub direct_reclaim_drained_latency: Vec<Time>,
    /// drain_all_pages() calls by how many CPUs held per-CPU pages (index = that count).
    pub drain_cpus_with_pages: Vec<u64>,
    /// out_of_memory(): tasks oom_kill_process() killed, and calls that found no killable task
    /// (the kernel panics there; the run ends instead).
    pub oom_kills: u64,
    pub oom_no_victim: bool,
    /// Broadcast tlbie sequences issued (powerpc radix; the kernel has no counter for them).
    pub tlbies: u64,
    /// arm64: broadcast TLBI ... IS instructions issued, and dsb(ish) barriers executed (the
    /// kernel has no counter for either).
    pub tlbis: u64,
    pub dsbs: u64,
    /// RISC-V: SBI RFENCE calls (ecalls into the firmware, each waiting for its remote harts),
    /// the harts those calls fenced (the caller's own included: OpenSBI's *_RCVD events), and
    /// sfence.vma instructions run by the kernel or, for those calls, the firmware; of those,
    /// the ones without an address (a whole ASID or every translation).
    pub sbi_rfences: u64,
    pub sbi_fenced: u64,
    pub sfences: u64,
    pub sfences_all: u64,
}

/// The width of a bin of `Stats::irq_bins`.
pub const IRQ_BIN: Time = crate::engine::PS_PER_MS * 10;

impl Stats {
    pub fn new(ncpus: usize) -> Stats {
        Stats {
            vm: [0; Vm::ALL.len()],
            irqs: std::array::from_fn(|_| vec![0; ncpus]),
            trace: [0; Trace::ALL.len()],
            profile: [0; Func::ALL.len()],
            lock_callers: [0; Func::ALL.len()],
            idle: vec![0; ncpus],
            tasks: Vec::new(),
            ipis_sent: 0,
            ipis_received: 0,
            tlbies: 0,
            tlbis: 0,
            dsbs: 0,
            sbi_rfences: 0,
            sbi_fenced: 0,
            sfences: 0,
            sfences_all: 0,
            irq_bins: Vec::new(),
            direct_reclaim_latency: Vec::new(),
            direct_reclaim_drained_latency: Vec::new(),
            drain_cpus_with_pages: vec![0; ncpus + 1],
            oom_kills: 0,
            oom_no_victim: false,
        }
    }

    pub fn vm(&mut self, c: Vm, n: u64) {
        self.vm[c as usize] += n;
    }

    pub fn irq(&mut self, row: Irq, cpu: usize) {
        self.irqs[row as usize][cpu] += 1;
    }

    pub fn trace(&mut self, t: Trace) {
        self.trace[t as usize] += 1;
    }

    /// An interrupt taken at `now`.
    pub fn interrupt_at(&mut self, now: Time) {
        self.ipis_received += 1;
        let bin = (now / IRQ_BIN) as usize;
        if bin >= self.irq_bins.len() {
            self.irq_bins.resize(bin + 1, 0);
        }
        self.irq_bins[bin] += 1;
    }

    /// Interrupts taken in [from, to), counting partial bins pro rata.
    pub fn interrupts_between(&self, from: Time, to: Time) -> f64 {
        let mut n = 0.0;
        for (i, &c) in self.irq_bins.iter().enumerate() {
            let (lo, hi) = (i as Time * IRQ_BIN, (i as Time + 1) * IRQ_BIN);
            let overlap = hi.min(to).saturating_sub(lo.max(from));
            n += c as f64 * overlap as f64 / IRQ_BIN as f64;
        }
        n
    }

    /// Start accounting a new task (its id is the number of tasks before it).
    pub fn add_task(&mut self) {
        let profile = [0; Func::ALL.len()];
        let times = TaskTimes::default();
        self.tasks.push(TaskAccount {
            times,
            profile,
            last: Func::User,
        });
    }

    /// CPU time spent in `f`, by `task` if a task was current (else by the idle task).
    pub fn charge(&mut self, task: Option<TaskId>, f: Func, ps: Time) {
        self.profile[f as usize] += ps;
        self.charge_task(task, f, ps);
    }

    /// More time for the function `task` was charged last (its step took longer than charged).
    pub fn charge_last(&mut self, task: TaskId, ps: Time) {
        let f = self.tasks[task].last;
        self.charge(Some(task), f, ps);
    }

    /// Spinning on a lock for `caller`: `_raw_spin_lock` time, with its caller kept for the
    /// profile (perf's call-graph children).
    pub fn charge_lock(&mut self, task: Option<TaskId>, caller: Func, ps: Time) {
        self.profile[Func::RawSpinLock as usize] += ps;
        self.lock_callers[caller as usize] += ps;
        self.charge_task(task, Func::RawSpinLock, ps);
    }

    /// Guest-mode time: the vCPU thread's user time, but in no profile. perf on the host samples
    /// no guest cycles (exclude_guest is its default outside `perf kvm`; POWER9's
    /// kvmhv_p9_guest_entry also saves the host PMU before entering the guest).
    pub fn charge_guest(&mut self, t: TaskId, ps: Time) {
        self.tasks[t].times.user += ps;
    }

    fn charge_task(&mut self, task: Option<TaskId>, f: Func, ps: Time) {
        if let Some(t) = task {
            let a = &mut self.tasks[t];
            a.profile[f as usize] += ps;
            a.last = f;
            if f == Func::User {
                a.times.user += ps;
            } else {
                a.times.system += ps;
            }
        }
    }
}

/// `p` (0..=100) percentile of sorted samples: the nearest-rank value.
fn percentile(sorted: &[Time], p: u64) -> Time {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p as usize * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// count, mean, p50/p90/p99/max (microseconds) and a histogram with power-of-two bucket bounds
/// (`le_us`: samples at most that many microseconds, above the previous bound).
pub fn latency_json(samples: &[Time]) -> serde_json::Value {
    let mut v = samples.to_vec();
    v.sort_unstable();
    let us = |t: Time| t as f64 / crate::engine::PS_PER_US as f64;
    let mean = if v.is_empty() {
        0.0
    } else {
        us(v.iter().sum::<Time>()) / v.len() as f64
    };
    let mut hist = Vec::new();
    let mut i = 0;
    let mut bound = crate::engine::PS_PER_US;
    while i < v.len() {
        let n = v[i..].partition_point(|&t| t <= bound);
        if n > 0 || !hist.is_empty() {
            hist.push(serde_json::json!({"le_us": us(bound), "count": n}));
        }
        i += n;
        bound *= 2;
    }
    serde_json::json!({
        "count": v.len(),
        "mean_us": mean,
        "p50_us": us(percentile(&v, 50)),
        "p90_us": us(percentile(&v, 90)),
        "p99_us": us(percentile(&v, 99)),
        "max_us": us(v.last().copied().unwrap_or(0)),
        "histogram": hist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Time> = (1..=100).collect();
        assert_eq!(
            (percentile(&v, 50), percentile(&v, 90), percentile(&v, 99)),
            (50, 90, 99)
        );
        assert_eq!(percentile(&[7], 50), 7);
        assert_eq!(percentile(&[], 50), 0);
        let us = crate::engine::PS_PER_US;
        let j = latency_json(&[us, 3 * us, 3 * us, 10 * us]);
        assert_eq!(j["count"], 4);
        assert_eq!(j["p50_us"], 3.0);
        assert_eq!(j["max_us"], 10.0);
        let h: Vec<(f64, u64)> = j["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["le_us"].as_f64().unwrap(), b["count"].as_u64().unwrap()))
            .collect();
        assert_eq!(h, [(1.0, 1), (2.0, 0), (4.0, 2), (8.0, 0), (16.0, 1)]);
    }
}
