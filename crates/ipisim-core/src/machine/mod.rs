//! The machine: topology (nodes, CPUs, SMT), memory per node, clock rate, and one cost table in
//! physical units shared by every scenario that runs on it.

mod cost;

pub use cost::{Cost, CostEntry, Costs, COSTS, MAX_CYCLES};

use crate::config::{ConfigError, Kind, Param, Resolved};
use crate::engine::Time;

pub const ARCHS: &[&str] = &["x86", "powerpc_radix"];
pub const IDLE: &[&str] = &["hlt", "poll", "haltpoll"];
pub const APICS: &[&str] = &["phys", "x2apic_cluster", "kvm_pv"];

/// Every `machine.*` parameter except the costs (declared in [`COSTS`]).
pub const PARAMS: &[Param] = &[
    Param { key: "machine.name", kind: Kind::Str, unit: "", default: "custom", doc: "profile name, shown in results" },
    Param { key: "machine.description", kind: Kind::Str, unit: "", default: "", doc: "one line about the machine this profile models" },
    Param { key: "machine.arch", kind: Kind::Choice(ARCHS), unit: "", default: "x86", doc: "how TLBs are flushed: x86 sends IPIs; powerpc_radix broadcasts tlbie, keeps mm_cpumask bits until the mm exits, and serializes huge-PMD clears against lockless walkers" },
    Param { key: "machine.clean_write_traps", kind: Kind::Bool, unit: "", default: "true", doc: "a write through a cached clean TLB entry walks the page table to set the dirty bit, so it faults if the PTE is gone (x86; the guarantee batched reclaim relies on, seed 001 v6 2/4); false models an architecture without it" },
    Param { key: "machine.nodes", kind: Kind::Int { min: 1, max: 64 }, unit: "nodes", default: "1", doc: "NUMA nodes (one socket each)" },
    Param { key: "machine.cpus_per_node", kind: Kind::Int { min: 1, max: 1024 }, unit: "CPUs", default: "2", doc: "logical CPUs per node" },
    Param { key: "machine.smt", kind: Kind::Int { min: 1, max: 8 }, unit: "threads/core", default: "1", doc: "hardware threads per core" },
    Param { key: "machine.mem_per_node", kind: Kind::Size, unit: "bytes", default: "4GiB", doc: "memory per node" },
    Param { key: "machine.ghz", kind: Kind::Float { min: 0.1, max: 10.0 }, unit: "GHz", default: "2.5", doc: "clock rate that converts the cost table's cycles into time (a physical range: 0.1 to 10 GHz)" },
    Param { key: "machine.apic", kind: Kind::Choice(APICS), unit: "", default: "phys", doc: "x86: how IPIs are sent, which names the send loop in profiles: phys (xAPIC physical mode, an ICR write per CPU: default_send_IPI_mask_sequence_phys), x2apic_cluster (x2APIC cluster mode, a write per cluster of 16: __x2apic_send_IPI_mask), kvm_pv (a KVM guest's PV IPI hypercall, Linux 4.19+: __send_ipi_mask); its cost is ipi_send" },
    Param { key: "machine.idle", kind: Kind::Choice(IDLE), unit: "", default: "hlt", doc: "idle loop: hlt (halts at once), poll (never halts), haltpoll (polls for idle_poll, then halts)" },
    Param { key: "machine.idle_poll", kind: Kind::Duration, unit: "s", default: "200us", doc: "haltpoll: how long an idle CPU polls before it halts (guest_halt_poll_ns)" },
    Param { key: "machine.tlb_entries", kind: Kind::Int { min: 16, max: 65536 }, unit: "entries", default: "1536", doc: "4 KiB entries in each CPU's (second-level) TLB" },
    Param { key: "machine.tlb_ways", kind: Kind::Int { min: 1, max: 64 }, unit: "ways", default: "12", doc: "TLB associativity" },
    Param { key: "machine.swap_bandwidth", kind: Kind::Size, unit: "bytes/s", default: "0", doc: "swap device write bandwidth (binary units: 1GiB = 2^30 bytes a second); 0 with no latency: a RAM-backed device (brd, zram) written synchronously in pageout()" },
    Param { key: "machine.swap_latency", kind: Kind::Duration, unit: "s", default: "0", doc: "swap device: from a write leaving the request queue to its completion interrupt (end_swap_bio_write)" },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86,
    /// Book3S-64 with the radix MMU (POWER9): `tlbie` instead of flush IPIs (arch/powerpc).
    PowerpcRadix,
}

/// How x86 sends IPIs (machine.apic): only the send loop's name in profiles depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apic {
    Phys,
    X2apicCluster,
    KvmPv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    Hlt,
    Poll,
    HaltPoll,
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
    pub cost: Costs,
}

impl Machine {
    pub fn from_resolved(r: &Resolved) -> Result<Machine, ConfigError> {
        let nodes = r.int("machine.nodes") as usize;
        let cpus_per_node = r.int("machine.cpus_per_node") as usize;
        let smt = r.int("machine.smt") as usize;
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
        let mem_per_node = r.uint("machine.mem_per_node");
        if mem_per_node < 64 << 20 {
            return Err(r.error("machine.mem_per_node", "at least 64MiB per node"));
        }
        let ghz = r.float("machine.ghz");
        if ghz <= 0.0 {
            return Err(r.error("machine.ghz", "must be positive"));
        }
        let ways = r.int("machine.tlb_ways") as usize;
        let entries = r.int("machine.tlb_entries") as usize;
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
        Ok(Machine {
            name: r.str("machine.name").to_string(),
            arch: match r.str("machine.arch") {
                "x86" => Arch::X86,
                _ => Arch::PowerpcRadix,
            },
            apic: match r.str("machine.apic") {
                "phys" => Apic::Phys,
                "x2apic_cluster" => Apic::X2apicCluster,
                _ => Apic::KvmPv,
            },
            clean_write_traps: r.bool("machine.clean_write_traps"),
            nodes,
            cpus_per_node,
            smt,
            mem_per_node,
            ghz,
            idle: match r.str("machine.idle") {
                "hlt" => Idle::Hlt,
                "poll" => Idle::Poll,
                _ => Idle::HaltPoll,
            },
            idle_poll: r.uint("machine.idle_poll"),
            tlb_entries: entries,
            tlb_ways: ways,
            swap_bandwidth: r.uint("machine.swap_bandwidth"),
            swap_latency: r.uint("machine.swap_latency"),
            cost,
        })
    }

    pub fn ncpus(&self) -> usize {
        self.nodes * self.cpus_per_node
    }

    pub fn node_of(&self, cpu: usize) -> usize {
        cpu / self.cpus_per_node
    }

    /// Cost of moving one cache line from `from` to `to`, by distance.
    pub fn line_transfer(&self, from: usize, to: usize) -> Time {
        if from == to {
            0
        } else if self.node_of(from) != self.node_of(to) {
            self.cost[Cost::LineRemote]
        } else if from / self.smt == to / self.smt {
            self.cost[Cost::LineSmt]
        } else {
            self.cost[Cost::LineNode]
        }
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
