//! `swap-bench`: the microbenchmark of the batched-unmap-flush changelogs, arm64 43b3dfdd0455
//! (Barry Song, Yicong Yang, 6.5) and RISC-V 54d7431af73e (Alexandre Ghiti, 6.8). One process maps
//! `size` bytes `MAP_SHARED | MAP_ANONYMOUS`, `memset`s them, then `loops` times reads one byte of
//! every page (each a swap-in fault from the RAM-backed swap device, zRAM in both changelogs) and
//! `madvise(MADV_PAGEOUT)`s the region. The RISC-V version first starts `sleepers` threads pinned
//! to CPUs 0..sleepers that `sleep(1)` forever, so mm_cpumask spans those CPUs and every flush goes
//! remote; here they sleep for good after running once (their wakeups once a second are left out).
//! MADV_PAGEOUT isolates the pages and reclaims them through shrink_folio_list() with
//! TTU_BATCH_FLUSH (mm/vmscan.rs madvise_pageout); the PTEs of pages swapped in by a read are
//! clean, so try_to_unmap_flush_dirty() has nothing to flush and one batch flush covers the call.

use super::{Host, OpWindow, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, TaskId};
use crate::machine::Machine;
use crate::mm::Syscall;
use crate::sched::{self, Outcome, Step};

params! {
    /// The swap-bench parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        size: u64 = "size", Kind::Size, "bytes", "1MiB", "the MAP_SHARED | MAP_ANONYMOUS region (SIZE in the changelogs: 1 MiB)" => |b: u64| b.div_ceil(4096);
        loops: u64 = "loops", Kind::Int { min: 1, max: 1 << 30 }, "loops", "10000", "swap-in and MADV_PAGEOUT passes over the region (10000 in the changelogs)";
        sleepers: usize = "sleepers", Kind::Int { min: 0, max: 1023 }, "threads", "0", "threads of the process pinned to CPUs 0..N that only sleep, started first (4 in the RISC-V changelog, 0 in the arm64 one)";
        cpu: usize = "cpu", Kind::Int { min: 0, max: 1023 }, "", "0", "the CPU the main thread runs on (taskset -c)";
        neighbour: i64 = "neighbour", Kind::Int { min: -1, max: 1023 }, "", "-1", "a process of its own (fork) that spins on this CPU from the start (-1: none): it takes that CPU off this mm, and on riscv without ASIDs out of its mm_cpumask";
        exec_cpu: i64 = "exec_cpu", Kind::Int { min: -1, max: 1023 }, "", "-1", "the CPU exec ran the program on before it pinned itself to `cpu` (-1: `cpu` itself); that CPU goes idle with the mm still loaded, so it stays in mm_cpumask (for good on riscv with ASIDs, whose switch_mm never clears it)";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "swap-bench",
    description: "the batched-unmap changelogs' microbenchmark: memset a 1 MiB shared anonymous region, then swap it in by reading and out by MADV_PAGEOUT, loops times",
    params: PARAMS,
    metrics: &[("ms_per_loop", true), ("loops_per_s", false)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: None,
    check: &[("loops", "20")],
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// memset(): writing page `next`.
    Memset,
    /// The read loop of pass `done + 1`, at page `next`.
    Read,
}

pub struct SwapBench {
    pages: u64,
    loops: u64,
    sleepers: usize,
    cpu: CpuId,
    exec_cpu: Option<CpuId>,
    neighbour: Option<CpuId>,
    main: TaskId,
    start: u64,
    next: u64,
    phase: Phase,
    /// This pass's MADV_PAGEOUT was issued.
    paged_out: bool,
    done: u64,
    window: OpWindow,
}

impl SwapBench {
    pub fn new(r: &Resolved, m: &Machine) -> Result<SwapBench, ConfigError> {
        let p = Params::from_resolved(r)?;
        super::need_cpus(
            r,
            m,
            "sleepers",
            format!("{} sleepers", p.sleepers),
            p.sleepers,
        )?;
        super::need_cpus(
            r,
            m,
            "cpu",
            format!("the main thread on CPU {} would", p.cpu),
            p.cpu + 1,
        )?;
        let exec_cpu = usize::try_from(p.exec_cpu).ok().filter(|&c| c != p.cpu);
        if let Some(c) = exec_cpu {
            super::need_cpus(r, m, "exec_cpu", format!("exec on CPU {c} would"), c + 1)?;
        }
        let neighbour = usize::try_from(p.neighbour).ok();
        if let Some(c) = neighbour {
            super::need_cpus(
                r,
                m,
                "neighbour",
                format!("a neighbour on CPU {c} would"),
                c + 1,
            )?;
        }
        if p.size == 0 {
            return Err(r.error("size", "the region must hold at least one page"));
        }
        if p.size * 4096 > m.mem_per_node * m.nodes as u64 / 2 {
            return Err(r.error("size", "more than half the machine's memory"));
        }
        Ok(SwapBench {
            pages: p.size,
            loops: p.loops,
            sleepers: p.sleepers,
            cpu: p.cpu,
            exec_cpu,
            neighbour,
            main: 0,
            start: 0,
            next: 0,
            phase: Phase::Memset,
            paged_out: false,
            done: 0,
            window: OpWindow::default(),
        })
    }
}

impl Scenario for SwapBench {
    fn start(&mut self, s: &mut impl Host) {
        let mm = super::mm_alloc(s);
        self.start = s.mem().map_new_anon(mm, self.pages);
        self.next = self.start;
        if let Some(c) = self.exec_cpu {
            // exec_mmap() -> activate_mm() loaded the mm there; sched_setaffinity() then moved the
            // program to `cpu`, and that CPU went idle on the mm (lazy TLB, no switch_mm()).
            crate::arch::switch_mm_irqs_off(s, c, Some(mm));
            crate::arch::enter_lazy_tlb(s, c);
        }
        self.main = sched::spawn(s, mm, self.cpu);
        s.sched().tasks[self.main].comm = "a.out".into();
        for c in 0..self.sleepers {
            let t = sched::spawn(s, mm, c);
            s.sched().tasks[t].comm = "a.out".into();
        }
        if let Some(c) = self.neighbour {
            let other = super::mm_alloc(s);
            let t = sched::spawn(s, other, c);
            s.sched().tasks[t].comm = "a.out".into();
        }
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        if s.sched().tasks[t].mm != s.sched().tasks[self.main].mm {
            // The neighbour: for (;;);
            return super::remote_op(true);
        }
        if t != self.main {
            // sleep(1) in a loop: asleep for good here.
            return super::remote_op(false);
        }
        let end = self.start + self.pages;
        let now = s.now();
        match self.phase {
            Phase::Memset if self.next < end => {
                return super::touch_next_pages(s, t, &mut self.next, end, true);
            }
            Phase::Memset => {
                // The timed passes start after the memset.
                self.phase = Phase::Read;
                self.next = self.start;
                self.window.begin(s, now);
            }
            Phase::Read if self.next == end && !self.paged_out => {
                // madvise(p, SIZE, MADV_PAGEOUT) after the pass's reads.
                self.paged_out = true;
                let (vpn, n) = (self.start, self.pages);
                s.push_step(t, Step::Syscall(Syscall::MadvisePageout { vpn, n }));
                return Outcome::Next;
            }
            Phase::Read if self.next == end => {
                self.done += 1;
                if self.done == self.loops {
                    self.window.end = now;
                    return Outcome::Exit;
                }
                self.next = self.start;
                self.paged_out = false;
            }
            Phase::Read => {}
        }
        // (void)p[i] for each page.
        super::touch_next_pages(s, t, &mut self.next, end, false)
    }

    /// The run ends when the main thread exits.
    fn task_exited(&mut self, s: &mut impl Host, t: TaskId) {
        if t == self.main {
            s.finish();
        }
    }

    fn ops(&self, _s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let loops = self.done;
        let mut m = serde_json::Map::new();
        m.insert("loops".into(), loops.into());
        m.insert("pages".into(), self.pages.into());
        let secs = self.window.seconds();
        m.insert("loops_s".into(), secs.into());
        m.insert(
            "ms_per_loop".into(),
            (self.window.ns_per(loops) / 1e6).into(),
        );
        let rate = if secs > 0.0 { loops as f64 / secs } else { 0.0 };
        m.insert("loops_per_s".into(), rate.into());
        m
    }
}
