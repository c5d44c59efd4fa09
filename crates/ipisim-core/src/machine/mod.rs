//! The machine: topology (nodes, CPUs, SMT), memory per node, clock rate, and one cost table in
//! physical units shared by every scenario that runs on it.

mod cost;

pub use cost::{Cost, CostEntry, Costs, COSTS, COST_NAMES, MAX_CYCLES};

use crate::config::{named_enum, params, ConfigError, Kind, Resolved};
use crate::engine::{SpinLock, Time};

named_enum! {
    Arch {
        X86 = "x86",
        /// Book3S-64 with the radix MMU (POWER9): `tlbie` instead of flush IPIs (arch/powerpc).
        PowerpcRadix = "powerpc_radix",
        /// ARMv8 (arch/arm64): `TLBI ... IS` broadcast in hardware, completed by `DSB ISH`; no IPIs.
        Arm64 = "arm64",
        /// RISC-V (arch/riscv, 6.7-6.8): local `sfence.vma`; remote flushes through the SBI RFENCE
        /// extension, whose firmware IPIs the other harts and waits for their `sfence.vma`.
        Riscv = "riscv",
    }
}

named_enum! {
    /// How x86 sends IPIs (machine.apic): only the send loop's name in profiles depends on it.
    Apic {
        Phys = "phys",
        X2apicCluster = "x2apic_cluster",
        KvmPv = "kvm_pv",
    }
}

named_enum! {
    /// The kernel's spinlock (kernel.spinlock): the line transfers a waiter pays to take a lock
    /// its holder releases.
    Spinlock {
        /// A ticket lock (x86 from 2.6.25 to 4.1, riscv's generic one to 6.12): the release's
        /// store first invalidates the spinning waiter's copy, then the waiter's next load
        /// brings the line over and sees its ticket served; it writes nothing.
        Ticket = "ticket",
        /// A queued spinlock (x86 from 4.2, arm64 from 4.19): the release invalidates the queue
        /// head's copy, the head's load sees the lock free, then its atomic takes the line back
        /// from the releaser's cache (queued_spin_lock_slowpath(): atomic_cond_read_acquire(),
        /// then set_locked()).
        Queued = "queued",
        /// A test-and-set lock (powerpc's arch_spin_lock() to 5.8): the release, the waiter's
        /// load that sees it free, then its lwarx/stwcx. taking the line back, as a queued head's.
        TestAndSet = "test_and_set",
    }
}

impl Spinlock {
    /// Line transfers from a release to the next holder's acquisition, each a one-way latency
    /// as a CAS ping-pong measures it (`ipisim probe`: about 2 and 3; docs/kernel/spinlock.md).
    pub fn handoff_transfers(self) -> Time {
        match self {
            Spinlock::Ticket => 2,
            Spinlock::Queued | Spinlock::TestAndSet => 3,
        }
    }

    /// The hand-off with `waiters` CPUs spinning for the lock (one or more), in half transfers.
    /// A ticket or test-and-set lock's waiters all spin on the lock word: after the release
    /// their loads are served one at a time and the next holder's comes halfway on average, so
    /// each further waiter adds half a transfer (Boyd-Wickizer et al., "Non-scalable locks are
    /// dangerous", 2012). A queued lock's waiters spin on their own MCS nodes.
    pub fn handoff_half_transfers(self, waiters: usize) -> Time {
        let queue = match self {
            Spinlock::Queued => 0,
            Spinlock::Ticket | Spinlock::TestAndSet => waiters.saturating_sub(1) as Time,
        };
        2 * self.handoff_transfers() + queue
    }
}

named_enum! {
    Idle {
        Hlt = "hlt",
        Poll = "poll",
        HaltPoll = "haltpoll",
    }
}

params! {
    /// Every `machine.*` parameter except the costs (declared in [`COSTS`]), as declared.
    #[derive(Debug, Clone)]
    pub struct MachineParams;
    pub const PARAMS = {
        name: String = "machine.name", Kind::Str, "", "custom", "profile name, shown in results";
        description: String = "machine.description", Kind::Str, "", "", "one line about the machine this profile models";
        arch: Arch = "machine.arch", Kind::Choice(Arch::NAMES), "", "x86", "how TLBs are flushed: x86 sends IPIs; powerpc_radix broadcasts tlbie, keeps mm_cpumask bits until the mm exits, and serializes huge-PMD clears against lockless walkers; arm64 broadcasts TLBI ... IS and waits for it with DSB ISH (arch/arm64); riscv flushes locally with sfence.vma and remotely through an SBI RFENCE ecall, the firmware IPIing the other harts and waiting (arch/riscv)";
        clean_write_traps: bool = "machine.clean_write_traps", Kind::Bool, "", "true", "a write through a cached clean TLB entry walks the page table to set the dirty bit, so it faults if the PTE is gone (x86; the guarantee batched reclaim relies on, seed 001 v6 2/4); false models an architecture without it";
        nodes: usize = "machine.nodes", Kind::Int { min: 1, max: 64 }, "nodes", "1", "NUMA nodes (one socket each)";
        cpus_per_node: usize = "machine.cpus_per_node", Kind::Int { min: 1, max: 1024 }, "CPUs", "2", "logical CPUs per node";
        smt: usize = "machine.smt", Kind::Int { min: 1, max: 8 }, "threads/core", "1", "hardware threads per core. CPUs are numbered as Linux numbers them: on x86 (and arm64, riscv) the first thread of every core, node by node, then the second (CPUs c and c + cores are siblings), so a workload's task i on CPU i has a core of its own while there are cores; on powerpc a core's threads in a row";
        smt_yield: f64 = "machine.smt_yield", Kind::Float { min: 1.0, max: 2.0 }, "x one thread", "2", "the work a core does with two busy threads, in units of one thread alone: a step that starts while another thread of its core runs (a step, a handler or a user spin; not a kernel spin, whose cpu_relax() pauses, nor idle) takes 2 / smt_yield times as long. 2: each thread runs as if alone (sharing not modelled); 1: SMT adds nothing";
        llc_cores: usize = "machine.llc_cores", Kind::Int { min: 0, max: 1024 }, "cores", "0", "cores that share one last-level cache, in a row within a node (a Zen 3 CCX: 8 cores and their L3): a cache line moves between two of them for line_llc, between cores of a node that share none for line_node. 0: no such level, every two cores of a node pay line_node";
        mem_per_node: u64 = "machine.mem_per_node", Kind::Size, "bytes", "4GiB", "memory per node";
        ghz: f64 = "machine.ghz", Kind::Float { min: 0.1, max: 10.0 }, "GHz", "2.5", "clock rate that converts the cost table's cycles into time (a physical range: 0.1 to 10 GHz)";
        apic: Apic = "machine.apic", Kind::Choice(Apic::NAMES), "", "phys", "x86: how IPIs are sent, which names the send loop in profiles: phys (xAPIC physical mode, an ICR write per CPU: default_send_IPI_mask_sequence_phys), x2apic_cluster (x2APIC cluster mode, a write per cluster of 16: __x2apic_send_IPI_mask), kvm_pv (a KVM guest's PV IPI hypercall, Linux 4.19+: __send_ipi_mask); its cost is ipi_send";
        idle: Idle = "machine.idle", Kind::Choice(Idle::NAMES), "", "hlt", "idle loop: hlt (halts at once), poll (never halts), haltpoll (polls for idle_poll, then halts)";
        idle_poll: Time = "machine.idle_poll", Kind::Duration, "s", "200us", "haltpoll: how long an idle CPU polls before it halts (guest_halt_poll_ns)";
        tlb_entries: usize = "machine.tlb_entries", Kind::Int { min: 16, max: 65536 }, "entries", "1536", "4 KiB entries in each CPU's (second-level) TLB";
        tlb_ways: usize = "machine.tlb_ways", Kind::Int { min: 1, max: 64 }, "ways", "12", "TLB associativity";
        swap_bandwidth: u64 = "machine.swap_bandwidth", Kind::Size, "bytes/s", "0", "swap device write bandwidth (binary units: 1GiB = 2^30 bytes a second); 0 with no latency: a RAM-backed device (brd, zram) written synchronously in pageout()";
        invlpgb: bool = "machine.invlpgb", Kind::Bool, "", "false", "x86: the CPU has AMD's INVLPGB and TLBSYNC (X86_FEATURE_INVLPGB, CPUID 0x80000008 EBX[3]; Zen 3 and later): broadcast TLB invalidation by ASID and address, which kernels with kernel.broadcast_tlb_flush = invlpgb (6.15) use for processes with a global ASID";
        rar: bool = "machine.rar", Kind::Bool, "", "false", "x86: the CPU has Intel's Remote Action Request (X86_FEATURE_RAR; a what-if: the kernel support is Rik van Riel's unmerged RFC of 2025): a flush signal whose handler is microcode, which kernels with kernel.broadcast_tlb_flush = rar use for processes with a global ASID";
        invlpgb_count_max: u64 = "machine.invlpgb_count_max", Kind::Int { min: 1, max: 65536 }, "pages", "1", "x86 with INVLPGB: the most pages one INVLPGB invalidates (invlpgb_count_max = CPUID 0x80000008 EDX[15:0] + 1, arch/x86/kernel/cpu/amd.c cpu_detect_tlb_amd); broadcast_tlb_flush() splits a longer range";
        tlbi_range: bool = "machine.tlbi_range", Kind::Bool, "", "false", "arm64 FEAT_TLBIRANGE (ARMv8.4): __flush_tlb_range() uses range TLBIs (TLBI RVALE1IS) and flushes the whole ASID only from MAX_TLBI_RANGE_PAGES pages, not from MAX_TLBI_OPS (512) strides; unused elsewhere";
        sbi_tlb_range_flush_limit: u64 = "machine.sbi_tlb_range_flush_limit", Kind::Int { min: 0, max: 1 << 20 }, "pages", "1", "riscv: the firmware's tlb_range_flush_limit (OpenSBI, per platform): a remote fence of more pages than this flushes the whole ASID on each hart (default SBI_PLATFORM_TLB_RANGE_FLUSH_LIMIT_DEFAULT, 4 KiB = 1 page; 0 on FU540/FU740 for the CIP-1200 errata); unused elsewhere";
        asid_bits: u64 = "machine.asid_bits", Kind::Int { min: 0, max: 16 }, "bits", "16", "riscv: the ASID bits the harts implement (satp.ASID's writable width, asids_init()); the kernel's ASID allocator runs only when 2^bits exceeds twice the harts (use_asid_allocator), else every mm switch flushes the hart's TLB (set_mm_noasid()) and every flush passes FLUSH_TLB_NO_ASID: 0 on the FU540/FU740; unused elsewhere";
        sfence_vma_flushes_all: bool = "machine.sfence_vma_flushes_all", Kind::Bool, "", "false", "riscv: every sfence.vma empties the hart's whole TLB whatever its operands, as QEMU's TCG does (trans_sfence_vma() -> helper_tlb_flush() -> tlb_flush(), target/riscv): page and ASID fences, the kernel's and the firmware's, are all full flushes; unused elsewhere";
        sifive_cip_1200: bool = "machine.sifive_cip_1200", Kind::Bool, "", "false", "riscv: the harts have SiFive erratum CIP-1200 (the U54/U74 of the FU540/FU740: sfence.vma with an address may leave the entry), so the kernel's local page flush is a full sfence.vma each page (ALT_FLUSH_TLB_PAGE, arch/riscv/include/asm/errata_list.h, CONFIG_ERRATA_SIFIVE_CIP_1200); unused elsewhere";
        swap_latency: Time = "machine.swap_latency", Kind::Duration, "s", "0", "swap device: from a write leaving the request queue to its completion interrupt (end_swap_bio_write)";
    }
}

/// The resolved machine: topology, clock, costs in picoseconds.
#[derive(Debug, Clone)]
pub struct Machine {
    pub name: String,
    pub arch: Arch,
    pub apic: Apic,
    /// Writes through a clean stale TLB entry fault (machine.clean_write_traps).
    pub clean_write_traps: bool,
    pub nodes: usize,
    pub cpus_per_node: usize,
    pub smt: usize,
    pub mem_per_node: u64,
    pub ghz: f64,
    pub idle: Idle,
    pub idle_poll: Time,
    pub tlb_entries: usize,
    pub tlb_ways: usize,
    /// The swap device: write bandwidth in bytes a second (0: no device time) and latency.
    pub swap_bandwidth: u64,
    pub swap_latency: Time,
    /// INVLPGB and TLBSYNC exist (machine.invlpgb), and the most pages one INVLPGB covers.
    pub invlpgb: bool,
    pub invlpgb_count_max: u64,
    /// Intel RAR exists (machine.rar).
    pub rar: bool,
    /// arm64 FEAT_TLBIRANGE (machine.tlbi_range).
    pub tlbi_range: bool,
    /// riscv: the firmware's remote-fence range limit (machine.sbi_tlb_range_flush_limit).
    pub sbi_tlb_range_flush_limit: u64,
    /// riscv: the ASID allocator runs (use_asid_allocator: over twice as many ASIDs as harts).
    pub riscv_asids: bool,
    /// riscv: SiFive CIP-1200, each local page flush a full sfence.vma (machine.sifive_cip_1200).
    pub sifive_cip_1200: bool,
    /// riscv: every sfence.vma is a full flush (machine.sfence_vma_flushes_all; QEMU's TCG).
    pub sfence_vma_flushes_all: bool,
    pub cost: Costs,
    /// The kernel's spinlock, whose hand-offs `lock()` prices (kernel.spinlock, wired by the root).
    pub spinlock: Spinlock,
    /// A step's length, in millionths, when another thread of its core is busy (machine.smt_yield;
    /// None when the core's threads do not slow each other).
    pub smt_stretch_ppm: Option<u64>,
    /// Each CPU's node, core and last-level cache (machine.llc_cores; an LLC is unique per core
    /// without that level): lookups, as a division costs more on the hot paths, side by side so
    /// that line_transfer() reads one entry per CPU.
    cpu_place: Vec<Place>,
    /// line_transfer()'s cost by class (remote << 2 | same core << 1 | same LLC), from `cost`.
    line_by_class: [Time; 8],
}

/// Where a CPU sits.
#[derive(Debug, Clone, Copy)]
struct Place {
    node: u16,
    core: u16,
    llc: u16,
}

impl Machine {
    pub fn from_resolved(r: &Resolved, spinlock: Spinlock) -> Result<Machine, ConfigError> {
        let p = MachineParams::from_resolved(r)?;
        let (nodes, cpus_per_node, smt) = (p.nodes, p.cpus_per_node, p.smt);
        let ncpus = nodes * cpus_per_node;
        if ncpus > crate::engine::MAX_CPUS {
            return Err(r.error(
                "machine.cpus_per_node",
                format!(
                    "{ncpus} CPUs in all; at most {} are supported",
                    crate::engine::MAX_CPUS
                ),
            ));
        }
        if cpus_per_node % smt != 0 {
            return Err(r.error(
                "machine.smt",
                format!("cpus_per_node ({cpus_per_node}) is not a multiple of smt ({smt})"),
            ));
        }
        if p.invlpgb && p.arch != Arch::X86 {
            return Err(r.error(
                "machine.invlpgb",
                "INVLPGB is an x86 (AMD) instruction; machine.arch is not x86",
            ));
        }
        if p.rar && p.arch != Arch::X86 {
            return Err(r.error(
                "machine.rar",
                "Remote Action Request is an x86 (Intel) feature; machine.arch is not x86",
            ));
        }
        let mem_per_node = p.mem_per_node;
        if mem_per_node < 64 << 20 {
            return Err(r.error("machine.mem_per_node", "at least 64MiB per node"));
        }
        let ghz = p.ghz;
        if ghz <= 0.0 {
            return Err(r.error("machine.ghz", "must be positive"));
        }
        let ways = p.tlb_ways;
        let entries = p.tlb_entries;
        if entries % ways != 0 || !(entries / ways).is_power_of_two() {
            return Err(r.error(
                "machine.tlb_entries",
                "entries / ways must be a power of two",
            ));
        }
        let cost = Costs::new(&r.costs, ghz).map_err(|i| {
            let (e, name) = (&r.costs[i], COSTS[i].1);
            let msg = format!(
                "{} cycles at {ghz} GHz is more than 10 s for one operation",
                e.cycles
            );
            ConfigError::new("", format!("machine.cost.{name}"), msg)
        })?;
        let cores_per_node = cpus_per_node / smt;
        // An LLC never spans nodes: number them node by node. Without the level (0), each core
        // is its own, so two CPUs share one only if they share a core.
        let llc_cores = p.llc_cores.max(1);
        let llcs_per_node = cores_per_node.div_ceil(llc_cores);
        let cpu_place = (0..ncpus)
            .map(|c| {
                let core = Self::linux_core(p.arch, c, ncpus, smt);
                let node = core / cores_per_node;
                let llc = node * llcs_per_node + core % cores_per_node / llc_cores;
                Place {
                    node: node as u16,
                    core: core as u16,
                    llc: llc as u16,
                }
            })
            .collect();
        // A core's threads share its LLC, and no LLC spans nodes: classes 2 and 5-7 never occur.
        let (node, r) = (cost[Cost::LineNode], cost[Cost::LineRemote]);
        let (llc, sibling) = (cost[Cost::LineLlc], cost[Cost::LineSmt]);
        let line_by_class = [node, llc, sibling, sibling, r, r, r, r];
        Ok(Machine {
            name: p.name,
            arch: p.arch,
            apic: p.apic,
            clean_write_traps: p.clean_write_traps,
            nodes,
            cpus_per_node,
            smt,
            mem_per_node,
            ghz,
            idle: p.idle,
            idle_poll: p.idle_poll,
            tlb_entries: entries,
            tlb_ways: ways,
            swap_bandwidth: p.swap_bandwidth,
            swap_latency: p.swap_latency,
            invlpgb: p.invlpgb,
            invlpgb_count_max: p.invlpgb_count_max,
            rar: p.rar,
            tlbi_range: p.tlbi_range,
            sbi_tlb_range_flush_limit: p.sbi_tlb_range_flush_limit,
            // asids_init(): the allocator runs with at least twice as many ASIDs as harts.
            riscv_asids: p.asid_bits > 0 && 1u64 << p.asid_bits > 2 * ncpus as u64,
            sifive_cip_1200: p.sifive_cip_1200,
            sfence_vma_flushes_all: p.sfence_vma_flushes_all,
            cost,
            spinlock,
            smt_stretch_ppm: (smt > 1 && p.smt_yield < 2.0)
                .then(|| (2e6 / p.smt_yield).round() as u64),
            cpu_place,
            line_by_class,
        })
    }

    pub fn ncpus(&self) -> usize {
        self.nodes * self.cpus_per_node
    }

    /// The core `cpu` is a hardware thread of, as Linux numbers CPUs. x86 servers (the MADT's
    /// order): the first thread of every core, node by node, then the second, so CPUs c and
    /// c + cores are siblings. powerpc: a core's threads in a row (c / smt).
    fn linux_core(arch: Arch, cpu: usize, ncpus: usize, smt: usize) -> usize {
        match arch {
            Arch::PowerpcRadix => cpu / smt,
            _ => cpu % (ncpus / smt),
        }
    }

    /// `cpu`'s core (a table lookup: these run on every lock, page touch and IPI).
    pub fn core_of(&self, cpu: usize) -> usize {
        self.cpu_place[cpu].core as usize
    }

    /// The other hardware threads of `cpu`'s core, as Linux numbers them (linux_core()).
    pub fn siblings(&self, cpu: usize) -> impl Iterator<Item = usize> + '_ {
        let (smt, cores) = (self.smt, self.ncpus() / self.smt);
        let first = match self.arch {
            Arch::PowerpcRadix => cpu - cpu % smt,
            _ => cpu % cores,
        };
        let stride = if self.arch == Arch::PowerpcRadix {
            1
        } else {
            cores
        };
        (0..smt)
            .map(move |i| first + i * stride)
            .filter(move |&c| c != cpu)
    }

    pub fn node_of(&self, cpu: usize) -> usize {
        self.cpu_place[cpu].node as usize
    }

    /// Cost of moving one cache line from `from` to `to`, by distance.
    pub fn line_transfer(&self, from: usize, to: usize) -> Time {
        // Without branches: the pairs on the IPI path vary too much for a predictor.
        let (a, b) = (self.cpu_place[from], self.cpu_place[to]);
        let class = ((a.node != b.node) as usize) << 2
            | ((a.core == b.core) as usize) << 1
            | (a.llc == b.llc) as usize;
        self.line_by_class[class] * (from != to) as Time
    }

    /// One write of `line` (an atomic read-modify-write, or a store to a line others read) on
    /// `cpu` at `at`: the wait for the accesses before it and the line's transfer, the time it
    /// takes.
    pub fn line_write(&self, line: &mut SpinLock, cpu: usize, at: Time) -> Time {
        line.acquire(at, cpu, 0, 1, |a, b| self.line_transfer(a, b))
    }

    /// Take `lock` on `cpu` at `at` and hold it for `hold`: the wait until it is taken, its line
    /// moved from the last holder included (a hand-off from a holder, as the kernel's spinlock
    /// takes it).
    pub fn lock(&self, lock: &mut SpinLock, cpu: usize, at: Time, hold: Time) -> Time {
        let handoff = self.spinlock.handoff_transfers();
        lock.acquire(at, cpu, hold, handoff, |a, b| self.line_transfer(a, b))
    }

    /// The time from a spinlock's release on `from` until `to`, one of `waiters` CPUs spinning
    /// for it, holds it.
    pub fn lock_handoff(&self, from: usize, to: usize, waiters: usize) -> Time {
        self.spinlock.handoff_half_transfers(waiters) * self.line_transfer(from, to) / 2
    }

    /// One load of `line` on `cpu` at `at`: the wait for the write in progress and the line's
    /// transfer, the time until the data is here.
    pub fn line_read(&self, line: &mut SpinLock, cpu: usize, at: Time) -> Time {
        line.read(at, cpu, |a, b| self.line_transfer(a, b))
    }

    /// Time from the sender's ICR write to the target taking the interrupt.
    pub fn ipi_wire(&self, from: usize, to: usize) -> Time {
        if self.node_of(from) == self.node_of(to) {
            self.cost[Cost::IpiWireNode]
        } else {
            self.cost[Cost::IpiWireRemote]
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::Cost::{LineLlc, LineNode, LineRemote, LineSmt};
    use crate::testing::{machine, Then};

    /// Two nodes of 10 SMT-2 cores in LLCs of 4 (the last of 2): a line moves inside an LLC for
    /// line_llc, between LLCs of a node for line_node, between nodes for line_remote; siblings
    /// (c and c + 20 on x86) share their core's.
    #[test]
    fn a_line_costs_what_the_caches_between_the_cpus_say() {
        let s = machine(
            20,
            "linux-6.18",
            Then::Sleep,
            &[
                ("machine.nodes", "2"),
                ("machine.smt", "2"),
                ("machine.llc_cores", "4"),
                ("machine.cost.line_llc", "11"),
            ],
        );
        let m = &s.m;
        assert_ne!(m.cost[LineLlc], m.cost[LineNode]);
        let [llc, node, remote, smt] = [LineLlc, LineNode, LineRemote, LineSmt].map(|c| m.cost[c]);
        assert_eq!(m.line_transfer(0, 3), llc);
        assert_eq!(m.line_transfer(0, 4), node);
        assert_eq!(
            m.line_transfer(8, 9),
            llc,
            "the node's last LLC has cores 8 and 9"
        );
        assert_eq!(m.line_transfer(9, 10), remote, "core 10 is node 1's first");
        assert_eq!(m.line_transfer(10, 13), llc);
        assert_eq!(
            m.line_transfer(0, 20),
            smt,
            "CPU 20 is core 0's second thread"
        );
        assert_eq!(m.line_transfer(20, 3), llc);
        assert_eq!(m.line_transfer(20, 4), node);
        let flat = machine(8, "linux-6.18", Then::Sleep, &[]);
        assert_eq!(
            flat.m.line_transfer(0, 7),
            flat.m.cost[LineNode],
            "llc_cores = 0"
        );
    }

    /// A lock that is busy when asked for comes over twice after its release on a ticket kernel
    /// (3.x: the release's invalidation, the waiter's load), three times on a queued one (4.2 on:
    /// then the head's atomic); one that is free comes over once on both. Plain line writes never
    /// pay the hand-off.
    #[test]
    fn a_busy_spinlock_changes_hands_as_the_kernels_spinlock_does() {
        // The last column: half transfers each waiter beyond the first adds (ticket and
        // test-and-set waiters all spin on the lock word; a queued lock's on their MCS nodes).
        for (kernel, transfers, per_waiter) in [
            ("linux-3.8", 2, 1),
            ("linux-4.2", 3, 0),
            ("linux-5.7", 3, 1),
        ] {
            let s = machine(4, kernel, Then::Sleep, &[]);
            let m = &s.m;
            let line = m.line_transfer(0, 1);
            let mut lock = crate::engine::SpinLock::on(0);
            assert_eq!(m.lock(&mut lock, 0, 0, 1000), 0);
            assert_eq!(
                m.lock(&mut lock, 1, 10, 1000),
                990 + transfers * line,
                "{kernel}"
            );
            assert_eq!(m.lock(&mut lock, 0, 1_000_000, 0), line, "{kernel}: free");
            assert_eq!(m.lock_handoff(0, 1, 1), transfers * line, "{kernel}");
            // Four waiters: a ticket lock's next holder waits for 1.5 more loads on average.
            assert_eq!(
                m.lock_handoff(0, 1, 4),
                transfers * line + 3 * per_waiter * line / 2,
                "{kernel}"
            );
            // A write that waits for a load in progress (CPU 2's) takes the line once after it.
            let mut written = crate::engine::SpinLock::on(0);
            assert_eq!(m.line_read(&mut written, 2, 0), line);
            let waited = m.line_write(&mut written, 1, 0);
            assert_eq!(
                waited,
                line + m.line_transfer(2, 1),
                "{kernel}: a plain write"
            );
        }
    }

    /// Picoseconds per atomic on the line each CPU shares with the CPUs of its index in `lines`,
    /// each asking again `gap` (plus or minus half, from a fixed seed) after its last one ended:
    /// the mean over `ops` atomics a CPU.
    fn mean_atomic(
        m: &crate::machine::Machine,
        lines: &[usize],
        gap: crate::engine::Time,
        ops: u32,
    ) -> f64 {
        use std::cmp::Reverse;
        let nlines = lines.iter().max().map_or(0, |&l| l + 1);
        let mut line: Vec<_> = (0..nlines)
            .map(|_| crate::engine::SpinLock::default())
            .collect();
        let mut rng = crate::engine::Rng::new(1);
        let mut asks: std::collections::BinaryHeap<_> = (0..lines.len())
            .map(|c| Reverse((rng.below(gap), c)))
            .collect();
        let (mut total, mut done) = (0, vec![0u32; lines.len()]);
        while let Some(Reverse((at, cpu))) = asks.pop() {
            let took = m.line_write(&mut line[lines[cpu]], cpu, at);
            total += took;
            done[cpu] += 1;
            if done[cpu] < ops {
                asks.push(Reverse((at + took + gap / 2 + rng.below(gap), cpu)));
            }
        }
        total as f64 / (lines.len() as f64 * ops as f64)
    }

    /// A published measurement of contended lines on Milan (K Prateek Nayak, LKML 2026-04-09,
    /// "Re: [PATCH v2 4/4] sched/rt: Split cpupri_vec->cpumask to per NUMA node"): 2 sockets of
    /// 64 SMT-2 cores in LLCs of 8, two threads on every CPU yielding to each other, each switch
    /// one atomic on a cpumask. The cycles in those atomics, against one global mask: a mask per
    /// node 32.92 %, a mask per LLC 1.30 %. Here the lines cost the two-CPU ping-pong
    /// (nviennot/core-to-core-latency, results/AMD EPYC 7R13 48-Core Processor.csv, a 2-socket
    /// Milan, medians: 9.78 ns between siblings, 22.69 ns inside a CCX, 197.16 ns between
    /// sockets; 107 ns between CCXs as amd-milan-72c; 2.45 GHz), each write waits for the ones
    /// asked before it, and a CPU asks again a yield after its last (460 ns: native/costs.c's
    /// `yield_switch`, 454-463 ns on the 2026 VM). The node masks come out at
    /// 31.89 % (31.2-32.7 % for yields of 100-1000 ns): a queue of ping-pong transfers is what
    /// 128 and 256 CPUs on one line cost, no transfer grows with the queue. The LLC masks come
    /// out at 0.10 %, 13 times short, pinned as the model's miss: 16 CPUs at 23 ns a transfer
    /// barely queue behind a 460 ns yield, and even with no yield at all they reach 0.97 %.
    /// Inside a CCX a contended line costs more than its ping-pong.
    #[test]
    fn contended_lines_on_milan_queue_as_a_published_measurement_says() {
        let s = machine(
            128,
            "linux-6.18",
            Then::Sleep,
            &[
                ("machine.nodes", "2"),
                ("machine.smt", "2"),
                ("machine.llc_cores", "8"),
                ("machine.ghz", "2.45"),
                ("machine.cost.line_smt", "24"),
                ("machine.cost.line_llc", "55.6"),
                ("machine.cost.line_node", "262"),
                ("machine.cost.line_remote", "483"),
            ],
        );
        let m = &s.m;
        let place = |f: fn(&super::Place) -> u16| -> Vec<usize> {
            m.cpu_place.iter().map(|p| f(p) as usize).collect()
        };
        let gap = 460 * crate::engine::PS_PER_NS;
        let global = mean_atomic(m, &vec![0; m.ncpus()], gap, 200);
        let per_node = mean_atomic(m, &place(|p| p.node), gap, 200);
        let per_llc = mean_atomic(m, &place(|p| p.llc), gap, 200);
        let (node_pct, llc_pct) = (100.0 * per_node / global, 100.0 * per_llc / global);
        assert!((node_pct - 32.92).abs() < 2.0, "per node {node_pct:.2} %");
        assert!(
            (0.05..0.15).contains(&llc_pct),
            "per LLC {llc_pct:.2} % (the model's 0.10 %; 1.30 % published)"
        );
    }
}
