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
mod swapout;
mod will_it_scale;

use crate::config::{ConfigError, Param, Resolved};
use crate::engine::Time;
use crate::engine::{CpuId, TaskId};
use crate::machine::Machine;
use crate::sched::Outcome;
use crate::sim::Sim;

/// A scenario as `ipisim list` and `describe` show it.
#[derive(Debug)]
pub struct ScenarioDecl {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [Param],
    pub kind: ScenarioKind,
    /// The machine profile when none is given (else the global default, host-2cpu).
    pub machine: Option<&'static str>,
    /// The small shape `ipisim check` runs each seed at, as `--set` pairs (it may override them).
    pub check: &'static [(&'static str, &'static str)],
}

/// Which workload model a scenario runs, with its fixed shape.
#[derive(Debug, Clone, Copy)]
pub enum ScenarioKind {
    Shootdown,
    /// will-it-scale tlb_flush*: what each task maps, and how many bytes.
    WillItScale(will_it_scale::Mapping, u64),
    LruFileMmapRead,
    Reclaim,
    Drain,
    Membarrier,
    Swapout,
    Hackbench,
    Migrate,
    QemuGuestRamUnplug,
    Ipistorm,
}

pub const SCENARIOS: &[ScenarioDecl] = &[
    shootdown::DECL,
    will_it_scale::TLB_FLUSH1,
    will_it_scale::TLB_FLUSH2,
    will_it_scale::TLB_FLUSH3,
    lru_file_mmap_read::DECL,
    reclaim::DECL,
    drain::DECL,
    membarrier::DECL,
    ipistorm::DECL,
    swapout::DECL,
    hackbench::DECL,
    migrate::DECL,
    qemu_guest_ram_unplug::DECL,
];

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

/// The measured loop of a microbenchmark: when it started and ended, and the interrupt rows
/// (TLB, CAL) when it started, so only its own interrupts count.
#[derive(Debug, Default)]
pub struct OpWindow {
    pub start: Time,
    pub end: Time,
    irqs_at_start: [Vec<u64>; 2],
}

impl OpWindow {
    pub fn begin(&mut self, s: &Sim, now: Time) {
        self.start = now;
        self.irqs_at_start = s.stats.irqs.clone();
    }

    pub fn seconds(&self) -> f64 {
        crate::engine::secs(self.end.saturating_sub(self.start))
    }

    /// Nanoseconds of the loop per call.
    pub fn ns_per(&self, calls: u64) -> f64 {
        self.end.saturating_sub(self.start) as f64 / 1000.0 / calls.max(1) as f64
    }

    /// Interrupts of `row` taken on all CPUs during the loop.
    pub fn irqs(&self, s: &Sim, row: crate::observe::Irq) -> u64 {
        let now: u64 = s.stats.irqs[row as usize].iter().sum();
        now - self.irqs_at_start[row as usize].iter().sum::<u64>()
    }
}

/// A new process's mm: mm_alloc() + init_new_context() now.
fn mm_alloc(s: &mut Sim) -> usize {
    let j = crate::arch::jiffies(s);
    s.mem.new_mm(j, s.k.hz)
}

/// A microbenchmark's threads: the main one on CPU 0 and `remotes` more of the same mm on CPUs
/// 1..=remotes, all named `comm`. Returns the main thread.
fn spawn_main_and_remotes(s: &mut Sim, mm: usize, remotes: usize, comm: &str) -> TaskId {
    let main = crate::sched::spawn(s, mm, 0);
    s.tasks[main].comm = comm.into();
    for i in 0..remotes {
        let t = crate::sched::spawn(s, mm, 1 + i);
        s.tasks[t].comm = comm.into();
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

/// kswapd<n> for each node of a reclaiming workload, sleeping until the allocator wakes it; it
/// shares the node's first CPU.
fn spawn_kswapds(s: &mut Sim) {
    for node in 0..s.m.nodes {
        let t = crate::sched::spawn_at(
            s,
            crate::sched::KTHREAD,
            node * s.m.cpus_per_node,
            crate::engine::NEVER,
        );
        s.tasks[t].comm = format!("kswapd{node}");
        s.mem.kswapd[node] = Some(t);
    }
}

/// The steady phase of a reclaiming workload: from kswapd's first wakeup to the first task
/// finishing (of `finished`, each task's end if it has ended).
fn steady_phase(s: &Sim, finished: impl Iterator<Item = Option<Time>>) -> (Time, Time) {
    let from = s.mem.reclaim_started.unwrap_or(0);
    let to = finished.flatten().min().unwrap_or(s.now()).max(from + 1);
    (from, to)
}

pub fn find(name: &str) -> Option<&'static ScenarioDecl> {
    SCENARIOS.iter().find(|s| s.name == name)
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

pub enum Workload {
    Shootdown(shootdown::Shootdown),
    WillItScale(will_it_scale::WillItScale),
    LruFileMmapRead(lru_file_mmap_read::LruFileMmapRead),
    Reclaim(reclaim::Reclaim),
    Drain(drain::Drain),
    Membarrier(membarrier::Membarrier),
    Swapout(swapout::Swapout),
    Hackbench(Box<hackbench::Hackbench>),
    Migrate(migrate::Migrate),
    QemuGuestRamUnplug(qemu_guest_ram_unplug::QemuGuestRamUnplug),
    Ipistorm(ipistorm::Ipistorm),
}

/// Host memory per simulated GiB of a scenario that fills the machine's memory, for its page
/// state (measured: lru-file-mmap-read 14.7 MB, swapout 6.9, hackbench 5.2, migrate, reclaim 3).
pub const HOST_BYTES_PER_GIB: f64 = 15e6;

impl Workload {
    /// Host memory the run's page state will need, estimated before anything is allocated; the
    /// other scenarios touch pages bounded by their own parameters, whatever the machine's size.
    pub fn host_bytes(&self, m: &Machine) -> u64 {
        match self {
            Workload::LruFileMmapRead(_)
            | Workload::Reclaim(_)
            | Workload::Swapout(_)
            | Workload::Hackbench(_)
            | Workload::Migrate(_) => {
                let gib = m.mem_per_node as f64 * m.nodes as f64 / (1u64 << 30) as f64;
                (gib * HOST_BYTES_PER_GIB) as u64
            }
            _ => 0,
        }
    }

    pub fn from_resolved(r: &Resolved, m: &Machine) -> Result<Workload, ConfigError> {
        // Only the huge-PMD scenario and ipistorm have powerpc paths; the others flush the x86 way.
        let kind = decl(r).kind;
        let any_arch = matches!(
            kind,
            ScenarioKind::QemuGuestRamUnplug | ScenarioKind::Ipistorm
        );
        if m.arch != crate::machine::Arch::X86 && !any_arch {
            let msg = format!(
                "scenario {} models x86 TLB flushes only; machine {} is powerpc_radix",
                r.scenario, m.name
            );
            return Err(r.error("machine.arch", msg));
        }
        match kind {
            ScenarioKind::Shootdown => shootdown::Shootdown::new(r, m).map(Workload::Shootdown),
            ScenarioKind::WillItScale(mapping, bytes) => {
                will_it_scale::WillItScale::new(r, m, mapping, bytes).map(Workload::WillItScale)
            }
            ScenarioKind::LruFileMmapRead => {
                lru_file_mmap_read::LruFileMmapRead::new(r, m).map(Workload::LruFileMmapRead)
            }
            ScenarioKind::Reclaim => reclaim::Reclaim::new(r, m).map(Workload::Reclaim),
            ScenarioKind::Drain => drain::Drain::new(r, m).map(Workload::Drain),
            ScenarioKind::Membarrier => membarrier::Membarrier::new(r, m).map(Workload::Membarrier),
            ScenarioKind::Swapout => swapout::Swapout::new(r, m).map(Workload::Swapout),
            ScenarioKind::Hackbench => {
                hackbench::Hackbench::new(r, m).map(|w| Workload::Hackbench(Box::new(w)))
            }
            ScenarioKind::Migrate => migrate::Migrate::new(r, m).map(Workload::Migrate),
            ScenarioKind::Ipistorm => ipistorm::Ipistorm::new(r, m).map(Workload::Ipistorm),
            ScenarioKind::QemuGuestRamUnplug => {
                qemu_guest_ram_unplug::QemuGuestRamUnplug::new(r, m)
                    .map(Workload::QemuGuestRamUnplug)
            }
        }
    }

    /// When the run stops if the workload does not finish by itself.
    pub fn time_limit(&self) -> Time {
        match self {
            Workload::Shootdown(_) => crate::engine::NEVER,
            Workload::WillItScale(w) => w.duration,
            Workload::LruFileMmapRead(_)
            | Workload::Reclaim(_)
            | Workload::Drain(_)
            | Workload::Membarrier(_)
            | Workload::Swapout(_)
            | Workload::Hackbench(_)
            | Workload::Migrate(_)
            | Workload::QemuGuestRamUnplug(_)
            | Workload::Ipistorm(_) => crate::engine::NEVER,
        }
    }
}

/// Create the processes and threads at time 0.
pub fn start(s: &mut Sim) -> Result<(), ConfigError> {
    match s.work {
        Workload::Shootdown(_) => shootdown::start(s),
        Workload::WillItScale(_) => will_it_scale::start(s),
        Workload::LruFileMmapRead(_) => lru_file_mmap_read::start(s),
        Workload::Reclaim(_) => reclaim::start(s),
        Workload::Drain(_) => drain::start(s),
        Workload::Membarrier(_) => membarrier::start(s),
        Workload::Swapout(_) => swapout::start(s),
        Workload::Hackbench(_) => hackbench::start(s),
        Workload::Migrate(_) => migrate::start(s),
        Workload::QemuGuestRamUnplug(_) => qemu_guest_ram_unplug::start(s),
        Workload::Ipistorm(_) => ipistorm::start(s),
    }
    Ok(())
}

/// The next operation of task `t`'s user program.
pub fn next_op(s: &mut Sim, cpu: CpuId, t: TaskId) -> Outcome {
    match s.work {
        Workload::Shootdown(_) => shootdown::next_op(s, cpu, t),
        Workload::WillItScale(_) => will_it_scale::next_op(s, cpu, t),
        Workload::LruFileMmapRead(_) => lru_file_mmap_read::next_op(s, cpu, t),
        Workload::Reclaim(_) => reclaim::next_op(s, cpu, t),
        Workload::Drain(_) => drain::next_op(s, cpu, t),
        Workload::Membarrier(_) => membarrier::next_op(s, cpu, t),
        Workload::Swapout(_) => swapout::next_op(s, cpu, t),
        Workload::Hackbench(_) => hackbench::next_op(s, cpu, t),
        Workload::Migrate(_) => migrate::next_op(s, cpu, t),
        Workload::QemuGuestRamUnplug(_) => qemu_guest_ram_unplug::next_op(s, cpu, t),
        Workload::Ipistorm(_) => ipistorm::next_op(s, cpu, t),
    }
}

pub fn task_exited(s: &mut Sim, t: TaskId) {
    match &s.work {
        Workload::Shootdown(w) if t == w.main => s.end = Some(s.now()),
        Workload::Membarrier(w) if t == w.main => s.end = Some(s.now()),
        Workload::QemuGuestRamUnplug(w) if t == w.unmapper => s.end = Some(s.now()),
        Workload::LruFileMmapRead(_) => lru_file_mmap_read::task_exited(s),
        Workload::WillItScale(_) => will_it_scale::task_exited(s),
        Workload::Swapout(_) => swapout::task_exited(s),
        Workload::Hackbench(_) => hackbench::task_exited(s),
        Workload::Ipistorm(_) => ipistorm::task_exited(s),
        _ => {}
    }
}

/// Workload metrics for the result's `ops`.
pub fn ops(s: &Sim) -> serde_json::Map<String, serde_json::Value> {
    match &s.work {
        Workload::Shootdown(w) => w.ops(s),
        Workload::WillItScale(w) => w.ops(s),
        Workload::LruFileMmapRead(w) => w.ops(s),
        Workload::Reclaim(w) => w.ops(s),
        Workload::Drain(w) => w.ops(s),
        Workload::Membarrier(w) => w.ops(s),
        Workload::Swapout(w) => w.ops(s),
        Workload::Hackbench(w) => w.ops(s),
        Workload::Migrate(w) => w.ops(s),
        Workload::QemuGuestRamUnplug(w) => w.ops(s),
        Workload::Ipistorm(w) => w.ops(s),
    }
}

/// The `ops` entries that are the benchmark's metrics, and whether lower is better.
/// Declared per scenario, so a grid's plot can be checked before anything runs.
pub fn metrics(kind: ScenarioKind) -> &'static [(&'static str, bool)] {
    match kind {
        ScenarioKind::Shootdown => &[("ns_per_syscall", true)],
        ScenarioKind::WillItScale(..) => &[("loops_per_s", false)],
        ScenarioKind::Reclaim => &[("tlb_shootdowns", true)],
        ScenarioKind::Drain => &[("drain_s", true)],
        ScenarioKind::Membarrier => &[("ns_per_call", true)],
        ScenarioKind::Swapout => &[("swapout_mb_per_s", false)],
        ScenarioKind::Hackbench => &[("hackbench_s", true)],
        ScenarioKind::Migrate => &[("pages_migrated_per_s", false), ("tlb_shootdowns", true)],
        ScenarioKind::QemuGuestRamUnplug => &[("munmap_ms", true)],
        ScenarioKind::Ipistorm => &[("interrupts_per_s", false)],
        ScenarioKind::LruFileMmapRead => &[
            ("lru-file-mmap-read-elapsed", true),
            ("lru-file-mmap-read-time_range", true),
            ("lru-file-mmap-read-time_stddv", true),
        ],
    }
}

/// The OOM killer sent task `t` SIGKILL: wake it if it sleeps in its own (interruptible) wait.
pub fn signal_kill(s: &mut Sim, t: TaskId) {
    if let Workload::Hackbench(_) = s.work {
        hackbench::signal_kill(s, t);
    }
}
