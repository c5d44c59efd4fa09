//! What a run reports: /proc/interrupts rows, /proc/vmstat counters, tracepoint counts, CPU time by
//! kernel function (the profile), and per-task user/system time. Flat arrays indexed by small enums.

mod func;
mod result;
pub mod tracelog;

pub use func::Func;
pub use result::{to_json, RunOutput};
pub use tracelog::TraceLog;

use crate::engine::Time;

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($variant,)* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }
        }
    };
}
pub(crate) use named_enum;

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
        PgRotated = "pgrotated",
        AllocStall = "allocstall",
        PageOutRun = "pageoutrun",
        NrVmscanWrite = "nr_vmscan_write",
        PSwpOut = "pswpout",
        NrVmscanImmediateReclaim = "nr_vmscan_immediate_reclaim",
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
    /// Simulated IPIs actually sent (APIC writes), all vectors.
    pub ipis_sent: u64,
    /// Call-function interrupts taken.
    pub ipis_received: u64,
    /// Call-function interrupts taken, per IRQ_BIN of simulated time (for steady-phase rates).
    pub irq_bins: Vec<u32>,
    /// Safety: reads through a TLB entry whose PTE was gone or pointed elsewhere.
    pub stale_tlb_use: u64,
    /// Safety: pages freed while a CPU still cached a translation to them.
    pub stale_tlb_at_free: u64,
    /// Safety: pages written out while a CPU still cached a translation to them (a write
    /// through it after the I/O started would be lost).
    pub stale_tlb_at_pageout: u64,
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
            ipis_sent: 0,
            ipis_received: 0,
            irq_bins: Vec::new(),
            stale_tlb_use: 0,
            stale_tlb_at_free: 0,
            stale_tlb_at_pageout: 0,
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

    pub fn charge(&mut self, f: Func, t: Time) {
        self.profile[f as usize] += t;
    }

    /// `_raw_spin_lock` time spent for `caller`.
    pub fn charge_lock(&mut self, caller: Func, t: Time) {
        self.profile[Func::RawSpinLock as usize] += t;
        self.lock_callers[caller as usize] += t;
    }
}
