//! Scenarios: what user space does. Each scenario declares its parameters and drives its tasks'
//! user programs (touch pages, make syscalls, spin, sleep, exit).

mod drain;
mod hackbench;
mod ipistorm;
mod lru_file_mmap_read;
mod membarrier;
mod migrate;
mod qemu_guest_ram_unplug;
mod reclaim;
mod shootdown;
mod swap_bench;
mod swapout;
mod will_it_scale;

use crate::config::{ConfigError, Param, Resolved};
use crate::engine::{CpuId, TaskId, Time};
use crate::machine::Machine;
use crate::observe::Observe;
use crate::sched::{Outcome, Step};

/// A scenario as `ipisim list` and `describe` show it.
#[derive(Debug)]
pub struct ScenarioDecl {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [Param],
    /// The `ops` entries that are the benchmark's metrics, and whether lower is better; declared
    /// so a grid's plot can be checked before anything runs.
    pub metrics: &'static [(&'static str, bool)],
    /// It models powerpc's flushes too; the others run on x86 machines only.
    pub powerpc: bool,
    /// It models arm64's flushes too (broadcast TLBI, no flush IPIs).
    pub arm64: bool,
    /// It models RISC-V's flushes too (sfence.vma, SBI remote fences).
    pub riscv: bool,
    /// Its anonymous memory may be huge pages (`kernel.thp=always`): every path it takes through
    /// such memory handles them (mm/thp.rs: faults, reclaim; not madvise, munmap or migration).
    pub thp: bool,
    /// The machine profile when none is given (else the global default, host-2cpu).
    pub machine: Option<&'static str>,
    /// The small shape `ipisim check` runs each seed at, as `--set` pairs (it may override them).
    pub check: &'static [(&'static str, &'static str)],
}

/// What a scenario needs from the machine around it, beyond sched's, mm's, arch's and smp's: the
/// observer to read its results from, and the run's end. The root implements it for `Sim`.
pub trait Host: crate::sched::Host {
    /// The observer, to read: counters, the checker, the trace.
    fn observed(&self) -> &Observe;
    /// When the run ended, once it has.
    fn end(&self) -> Option<Time>;
    /// The scenario is done: the run ends now.
    fn finish(&mut self);
}

/// What the simulator asks of a scenario, which owns its state; `s` is the kernel it drives.
pub trait Scenario {
    /// Create the processes and threads at time 0.
    fn start(&mut self, s: &mut impl Host);
    /// The next operation of task `t`'s user program, running on `cpu`.
    fn next_op(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome;
    /// Task `t` has exited (its last step returned `Outcome::Exit`).
    fn task_exited(&mut self, _s: &mut impl Host, _t: TaskId) {}
    /// Its counts and metrics for the result's `ops`.
    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value>;
    /// When the run stops if the scenario does not finish by itself.
    fn time_limit(&self) -> Time {
        crate::engine::NEVER
    }
    /// Host memory its page state will need, known before anything is allocated (0: little).
    fn host_bytes(&self, _m: &Machine) -> u64 {
        0
    }
}

/// A registered scenario: its declaration and how to build it from the resolved request.
pub struct Registered {
    pub decl: ScenarioDecl,
    pub new: fn(&Resolved, &Machine) -> Result<Workload, ConfigError>,
}

/// The `Workload` enum and SCENARIOS from one list; one match forwards, so no indirect calls.
macro_rules! registry {
    ($($variant:ident($ty:ty) { $($decl:expr => $new:expr),+ $(,)? })*) => {
        /// The running scenario: one registered scenario's state.
        pub enum Workload {
            $($variant($ty),)*
        }

        impl Scenario for Workload {
            fn start(&mut self, s: &mut impl Host) {
                match self { $(Workload::$variant(w) => w.start(s),)* }
            }
            fn next_op(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
                match self { $(Workload::$variant(w) => w.next_op(s, cpu, t),)* }
            }
            fn task_exited(&mut self, s: &mut impl Host, t: TaskId) {
                match self { $(Workload::$variant(w) => w.task_exited(s, t),)* }
            }
            fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
                match self { $(Workload::$variant(w) => w.ops(s),)* }
            }
            fn time_limit(&self) -> Time {
                match self { $(Workload::$variant(w) => w.time_limit(),)* }
            }
            fn host_bytes(&self, m: &Machine) -> u64 {
                match self { $(Workload::$variant(w) => w.host_bytes(m),)* }
            }
        }

        pub const SCENARIOS: &[Registered] = &[$($(Registered {
            decl: $decl,
            new: |r, m| Ok(Workload::$variant(($new)(r, m)?.into())),
        },)+)*];
    };
}

registry! {
    Shootdown(shootdown::Shootdown) { shootdown::DECL => shootdown::Shootdown::new }
    WillItScale(will_it_scale::WillItScale) {
        will_it_scale::TLB_FLUSH1 => will_it_scale::tlb_flush1,
        will_it_scale::TLB_FLUSH2 => will_it_scale::tlb_flush2,
        will_it_scale::TLB_FLUSH3 => will_it_scale::tlb_flush3,
    }
    LruFileMmapRead(lru_file_mmap_read::LruFileMmapRead) {
        lru_file_mmap_read::DECL => lru_file_mmap_read::LruFileMmapRead::new
    }
    Reclaim(reclaim::Reclaim) { reclaim::DECL => reclaim::Reclaim::new }
    Drain(drain::Drain) { drain::DECL => drain::Drain::new }
    Membarrier(membarrier::Membarrier) { membarrier::DECL => membarrier::Membarrier::new }
    Ipistorm(ipistorm::Ipistorm) { ipistorm::DECL => ipistorm::Ipistorm::new }
    Swapout(swapout::Swapout) { swapout::DECL => swapout::Swapout::new }
    // Boxed: its state is far larger than the others'.
    Hackbench(Box<hackbench::Hackbench>) { hackbench::DECL => hackbench::Hackbench::new }
    Migrate(migrate::Migrate) { migrate::DECL => migrate::Migrate::new }
    QemuGuestRamUnplug(qemu_guest_ram_unplug::QemuGuestRamUnplug) {
        qemu_guest_ram_unplug::DECL => qemu_guest_ram_unplug::QemuGuestRamUnplug::new
    }
    SwapBench(swap_bench::SwapBench) { swap_bench::DECL => swap_bench::SwapBench::new }
}

/// A scenario's CPU demand against the machine: "<what> need <cpus> CPUs; the machine has N".
fn need_cpus(
    r: &Resolved,
    m: &Machine,
    key: &str,
    what: String,
    cpus: usize,
) -> Result<(), ConfigError> {
    if cpus <= m.ncpus() {
        return Ok(());
    }
    let msg = format!("{what} need {cpus} CPUs; the machine has {}", m.ncpus());
    Err(r.error(key, msg))
}

/// A user loop reading or writing pages [*next, end): the next up to 16 pages (the loop's
/// granularity, not a kernel batch) as one step.
fn touch_next_pages(
    s: &mut impl Host,
    t: TaskId,
    next: &mut u64,
    end: u64,
    write: bool,
) -> Outcome {
    let n = 16.min(end - *next);
    let vpn = *next;
    *next += n;
    s.push_step(
        t,
        Step::FileRead {
            vpn,
            n: n as u32,
            write,
        },
    );
    Outcome::Next
}

/// The measured loop of a microbenchmark: when it started and ended, and the interrupt rows
/// (TLB, CAL) when it started, so only its own interrupts count.
#[derive(Debug, Default)]
pub struct OpWindow {
    pub start: Time,
    pub end: Time,
    irqs_at_start: [Vec<u64>; 2],
}

impl OpWindow {
    pub fn begin(&mut self, s: &impl Host, now: Time) {
        self.start = now;
        self.irqs_at_start = s.observed().stats.irqs.clone();
    }

    pub fn seconds(&self) -> f64 {
        crate::engine::secs(self.end.saturating_sub(self.start))
    }

    /// Nanoseconds of the loop per call.
    pub fn ns_per(&self, calls: u64) -> f64 {
        self.end.saturating_sub(self.start) as f64 / 1000.0 / calls.max(1) as f64
    }

    /// Interrupts of `row` taken on all CPUs during the loop.
    pub fn irqs(&self, s: &impl Host, row: crate::observe::Irq) -> u64 {
        let now: u64 = s.observed().stats.irqs[row as usize].iter().sum();
        now - self.irqs_at_start[row as usize].iter().sum::<u64>()
    }
}

/// A new process's mm: mm_alloc() + init_new_context() now.
pub(crate) fn mm_alloc(s: &mut impl Host) -> usize {
    let j = crate::arch::jiffies(s);
    s.arch_parts().arch.init_new_context(j);
    s.mem().new_mm()
}

/// A microbenchmark's threads: the main one on CPU 0 and `remotes` more of the same mm on CPUs
/// 1..=remotes, all named `comm`. Returns the main thread.
fn spawn_main_and_remotes(s: &mut impl Host, mm: usize, remotes: usize, comm: &str) -> TaskId {
    let main = crate::sched::spawn(s, mm, 0);
    s.sched().tasks[main].comm = comm.into();
    for i in 0..remotes {
        let t = crate::sched::spawn(s, mm, 1 + i);
        s.sched().tasks[t].comm = comm.into();
    }
    main
}

/// What a microbenchmark's idle thread does: spin in user space (`busy`) or sleep for good.
fn remote_op(busy: bool) -> Outcome {
    if busy {
        Outcome::Spin(crate::sched::SpinOn::UserForever)
    } else {
        Outcome::Sleep(crate::engine::NEVER)
    }
}

/// kswapd<n> for each node of a reclaiming workload, sleeping until the allocator wakes it, on
/// the node's CPU with the fewest tasks (the lowest of a tie): kswapd is bound to its node, and
/// a wakeup puts it on an idle CPU there if there is one (select_idle_sibling()).
fn spawn_kswapds(s: &mut impl Host) {
    let m = s.machine();
    let (ncpus, nodes) = (m.ncpus(), m.nodes);
    let mut tasks = vec![0usize; ncpus];
    for t in &s.sched().tasks {
        tasks[t.cpu] += 1;
    }
    for node in 0..nodes {
        let m = s.machine();
        let cpu = (0..ncpus)
            .filter(|&c| m.node_of(c) == node)
            .min_by_key(|&c| (tasks[c], c))
            .expect("every node has CPUs");
        tasks[cpu] += 1;
        let t = crate::sched::spawn_at(s, crate::sched::KTHREAD, cpu, crate::engine::NEVER);
        s.sched().tasks[t].comm = format!("kswapd{node}");
        // kswapd(): set_cpus_allowed_ptr(tsk, cpumask_of_node(pgdat->node_id)).
        s.sched().tasks[t].affinity = crate::sched::balance::Affinity::Node;
        s.mem().kswapd[node] = Some(t);
    }
}

/// The steady phase of a reclaiming workload: from kswapd's first wakeup to the first task
/// finishing (of `finished`, each task's end if it has ended).
fn steady_phase(s: &impl Host, finished: impl Iterator<Item = Option<Time>>) -> (Time, Time) {
    let from = s.mm_view().0.reclaim_started.unwrap_or(0);
    let to = finished.flatten().min().unwrap_or(s.now()).max(from + 1);
    (from, to)
}

/// The registered scenarios' declarations, in `ipisim list` order.
pub fn decls() -> impl Iterator<Item = &'static ScenarioDecl> {
    SCENARIOS.iter().map(|e| &e.decl)
}

/// The declaration of the scenario named `name`.
pub fn find(name: &str) -> Option<&'static ScenarioDecl> {
    decls().find(|d| d.name == name)
}

/// The declaration of the scenario `r` was resolved for.
pub fn decl(r: &Resolved) -> &'static ScenarioDecl {
    find(r.scenario).expect("a resolved scenario is declared")
}

/// The key of the `scale` that scenarios with large memory declare: the fraction of the machine's
/// memory to simulate.
pub const SCALE: &str = "scale";

/// The scenario's `scale`, when it declares one.
pub fn scale(r: &Resolved) -> Result<Option<f64>, ConfigError> {
    if decl(r).params.iter().any(|p| p.key == SCALE) {
        r.typed(SCALE).map(Some)
    } else {
        Ok(None)
    }
}

/// Host memory per simulated GiB of a scenario that fills the machine's memory, for its page
/// state (measured: lru-file-mmap-read 14.7 MB, swapout 6.9, hackbench 5.2, migrate, reclaim 3).
pub const HOST_BYTES_PER_GIB: f64 = 15e6;

/// host_bytes() of a scenario that fills the machine's memory.
fn fills_memory(m: &Machine) -> u64 {
    let gib = m.mem_per_node as f64 * m.nodes as f64 / (1u64 << 30) as f64;
    (gib * HOST_BYTES_PER_GIB) as u64
}

impl Workload {
    /// The registered scenario `r` resolved, built for machine `m`.
    pub fn from_resolved(r: &Resolved, m: &Machine) -> Result<Workload, ConfigError> {
        // A scenario without powerpc paths flushes the x86 way only.
        if m.arch == crate::machine::Arch::Arm64 && !decl(r).arm64 {
            let msg = format!(
                "scenario {} has no arm64 flush paths; machine {} is arm64",
                r.scenario, m.name
            );
            return Err(r.error("machine.arch", msg));
        }
        if m.arch == crate::machine::Arch::Riscv && !decl(r).riscv {
            let msg = format!(
                "scenario {} has no riscv flush paths; machine {} is riscv",
                r.scenario, m.name
            );
            return Err(r.error("machine.arch", msg));
        }
        if m.arch == crate::machine::Arch::PowerpcRadix && !decl(r).powerpc {
            let msg = format!(
                "scenario {} models x86 TLB flushes only; machine {} is powerpc_radix",
                r.scenario, m.name
            );
            return Err(r.error("machine.arch", msg));
        }
        let thp = crate::mm::MmConfig::from_resolved(r)?.thp;
        if thp == crate::mm::thp::Thp::Always && !decl(r).thp {
            let msg = format!(
                "scenario {} has no paths for anonymous huge pages (modelled for swapout only)",
                r.scenario
            );
            return Err(r.error("kernel.thp", msg));
        }
        let entry = SCENARIOS.iter().find(|e| e.decl.name == r.scenario);
        (entry.expect("resolved from SCENARIOS").new)(r, m)
    }
}
