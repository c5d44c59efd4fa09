//! `qemu-guest-ram-unplug` (seed 002): QEMU frees the RAM of a THP-backed KVM guest. The process
//! has `vcpus` vCPU threads, one per CPU, that have run and touched all of `guest_ram` as 2 MiB
//! PMDs; `busy_vcpus` of them keep running guest code and take guest faults whose host handler
//! walks the page table with IRQs off (__find_linux_pte), the others are idle (ceded). QEMU's
//! call_rcu thread then munmaps the region. The metric is the munmap time in ms.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, TaskId, Time, NEVER};
use crate::machine::{Cost, Machine};
use crate::mm::huge_memory;
use crate::observe::{Func, Irq};
use crate::sched::{Outcome, Step};

params! {
    /// The qemu-guest-ram-unplug parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        vcpus: usize = "vcpus", Kind::Int { min: 0, max: 1024 }, "threads", "0", "vCPU threads, one per CPU from CPU 0; 0: one per CPU";
        guest_ram: u64 = "guest_ram", Kind::Size, "bytes", "496GiB", "the guest RAM QEMU unmaps, all of it touched and mapped by 2 MiB PMDs";
        busy_vcpus: usize = "busy_vcpus", Kind::Int { min: 0, max: 1024 }, "threads", "8", "vCPUs that keep running guest code (chosen: the guest is mostly idle while its memory is unplugged); the others are ceded and their CPUs idle";
        guest_fault_interval: Time = "guest_fault_interval", Kind::Duration, "s", "100us", "a busy vCPU runs this long in the guest between faults that exit to the host (chosen)";
        walk_irqs_off: Time = "walk_irqs_off", Kind::Duration, "s", "1us", "the host fault handler's lockless walk (__find_linux_pte) with IRQs off (chosen: a 4-level walk with cache misses; no published figure)";
        settle: Time = "settle", Kind::Duration, "s", "1ms", "the munmap starts this long after the vCPU threads";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "qemu-guest-ram-unplug",
    description:
        "QEMU munmaps the THP-backed RAM of a KVM guest whose vCPU threads ran on every CPU",
    params: PARAMS,
    metrics: &[("munmap_ms", true)],
    powerpc: true,
    arm64: false,
    riscv: false,
    thp: false,
    machine: Some("power9-128c"),
    check: &[],
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Settle,
    Unmap,
    Done,
}

pub struct QemuGuestRamUnplug {
    vcpus: usize,
    busy_vcpus: usize,
    pmds: u64,
    fault_interval: Time,
    walk: Time,
    settle: Time,
    /// The call_rcu thread that unmaps the guest RAM.
    unmapper: TaskId,
    /// The first vCPU thread; vCPU i is task first_vcpu + i.
    first_vcpu: TaskId,
    /// Where the call_rcu thread is: settling, unmapping, or done.
    phase: Phase,
    window: super::OpWindow,
}

impl QemuGuestRamUnplug {
    pub fn new(r: &Resolved, m: &Machine) -> Result<QemuGuestRamUnplug, ConfigError> {
        let p = Params::from_resolved(r)?;
        let vcpus = match p.vcpus {
            0 => m.ncpus(),
            n => n,
        };
        super::need_cpus(r, m, "vcpus", format!("{vcpus} vCPU threads"), vcpus)?;
        let busy_vcpus = p.busy_vcpus;
        if busy_vcpus > vcpus {
            return Err(r.error("busy_vcpus", format!("more than the {vcpus} vCPUs")));
        }
        let bytes = p.guest_ram;
        let pmds = bytes >> 21;
        if pmds == 0 || bytes % (2 << 20) != 0 {
            return Err(r.error("guest_ram", "must be a positive multiple of 2MiB"));
        }
        let ram = m.mem_per_node * m.nodes as u64;
        if bytes > ram {
            let msg = format!(
                "{} GiB do not fit in the machine's {} GiB",
                bytes >> 30,
                ram >> 30
            );
            return Err(r.error("guest_ram", msg));
        }
        Ok(QemuGuestRamUnplug {
            vcpus,
            busy_vcpus,
            pmds,
            fault_interval: p.guest_fault_interval,
            walk: p.walk_irqs_off,
            settle: p.settle,
            unmapper: 0,
            first_vcpu: 0,
            phase: Phase::Settle,
            window: Default::default(),
        })
    }
}

impl Scenario for QemuGuestRamUnplug {
    fn start(&mut self, s: &mut impl Host) {
        let mm = super::mm_alloc(s);
        self.first_vcpu = s.sched().tasks.len();
        for cpu in 0..self.vcpus {
            let t = crate::sched::spawn(s, mm, cpu);
            s.sched().tasks[t].comm = "qemu-system-ppc".into();
        }
        let last = s.machine().ncpus() - 1;
        let t = crate::sched::spawn(s, mm, last);
        // QEMU names no threads without -name debug-threads=on: perf shows call_rcu as the process.
        s.sched().tasks[t].comm = "qemu-system-ppc".into();
        self.unmapper = t;
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        let now = s.now();
        if t != self.unmapper {
            if t - self.first_vcpu >= self.busy_vcpus {
                // H_CEDE: the vCPU thread blocks and its CPU idles (with the mm still loaded).
                return Outcome::Sleep(NEVER);
            }
            // Guest code, then a guest fault: exit, and the host handler's walk with IRQs off.
            let (run, walk) = (self.fault_interval, self.walk);
            let exit = s.machine().cost[Cost::GuestExit];
            let steps = &mut s.sched().tasks[t].steps;
            steps.push(Step::Work {
                func: Func::FindLinuxPte,
                ps: walk,
                irqs_off: true,
            });
            steps.push(Step::Work {
                func: Func::GuestExit,
                ps: exit,
                irqs_off: true,
            });
            steps.push(Step::Guest { ps: run });
            return Outcome::Next;
        }
        match self.phase {
            Phase::Settle => {
                self.phase = Phase::Unmap;
                return Outcome::Sleep(now + self.settle);
            }
            Phase::Unmap => self.phase = Phase::Done,
            Phase::Done => {
                self.window.end = now;
                return Outcome::Exit;
            }
        }
        self.window.begin(s, now);
        // munmap(): syscall entry and the VMA work, then unmap_region() under one mmu_gather.
        huge_memory::unmap_huge_region(s, t, 0, self.pmds);
        let ps = s.machine().cost[Cost::Syscall]
            + s.machine().cost[Cost::VmaOp]
            + s.machine().cost[Cost::MunmapVma];
        s.obs().stats.charge(Some(t), Func::Syscall, ps);
        Outcome::Busy {
            ps,
            irqs_off: false,
        }
    }

    /// The run ends when the call_rcu thread has unmapped the guest's RAM.
    fn task_exited(&mut self, s: &mut impl Host, t: TaskId) {
        if t == self.unmapper {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("munmap_ms".into(), (self.window.seconds() * 1e3).into());
        m.insert("huge_pmds".into(), self.pmds.into());
        m.insert("ns_per_pmd".into(), self.window.ns_per(self.pmds).into());
        m.insert(
            "call_function_interrupts".into(),
            self.window.irqs(s, Irq::Cal).into(),
        );
        m.insert("tlbie".into(), s.observed().stats.tlbies.into());
        m
    }
}
