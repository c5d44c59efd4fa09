//! The architecture interface: what the rest of the kernel asks of the MMU and its TLBs. Callers
//! outside `arch/` use only these functions; each matches on the machine's architecture. x86
//! shoots TLBs down by IPI (arch/x86/mm/tlb.c); powerpc radix broadcasts `tlbie` and shares the
//! per-CPU context tracking (which mm and ASID each CPU has loaded, lazy mode).

pub mod arm64;
pub mod powerpc;
pub mod riscv;
mod tlb;
pub mod x86;

pub use powerpc::{AfterPmdClear, PmdClear};
pub use tlb::{Tlb, TlbEntry};

use crate::config::{params, Kind};
use crate::engine::{CpuId, CpuMask, SharedLine, SpinLock, TaskId, Time};
use crate::machine::{Arch, Cost, Machine};
use crate::observe::{Func, Observe};
pub use crate::step::FlushRange;
use crate::step::{Outcome, Step};
use x86::{BroadcastTlbFlush, LazyTlb, MmCpumask};

params! {
    /// The kernel preset's choices for the MMU and its flushes (kernel.*), declared where they
    /// are used.
    #[derive(Debug, Clone, Copy)]
    pub struct ArchConfig;
    pub const PARAMS = {
        hz: u64 = "kernel.hz", Kind::Int { min: 100, max: 1000 }, "Hz", "250", "CONFIG_HZ: the jiffy (the mm_cpumask trim, reclaim throttling, the OOM killer's waits)";
        tlb_single_page_flush_ceiling: u64 = "kernel.tlb_single_page_flush_ceiling", Kind::Int { min: 0, max: 1 << 20 }, "pages", "33", "flush_tlb_mm_range flushes page by page up to this many pages, else the whole TLB (a5102476a2, 3.15)";
        mm_cpumask: MmCpumask = "kernel.mm_cpumask", Kind::Choice(MmCpumask::NAMES), "", "lazy_trim", "clear_on_switch: switch_mm clears the old mm's bit (to 6.12); lazy_trim: bits stay until a flush IPI finds the CPU on another mm, trimmed at most once per second (209954cbc7d0 + 6db2526c1d69, 6.13); lazy_every_flush: 209954cbc7d0 alone, every flush IPIs the mask's non-lazy CPUs, those on another mm clear their bit";
        lazy_tlb: LazyTlb = "kernel.lazy_tlb", Kind::Choice(LazyTlb::NAMES), "", "skip_lazy_cpus", "leave_mm_on_ipi: lazy CPUs get flush IPIs and leave the mm (to 4.19: merged for 4.19, reverted before its release); skip_lazy_cpus: no IPI to lazy CPUs unless page tables were freed (4.20)";
        tlb_gen_read_early: bool = "kernel.tlb_gen_read_early", Kind::Bool, "", "false", "x86 with kernel.pcid: flush_tlb_func() reads the mm's tlb_gen (a line every flush writes) on entry, even when this CPU already did the flush (4.14 to 5.19); false: only when it has not (aa44284960d5 \"x86/mm/tlb: Avoid reading mm_tlb_gen when possible\", 6.0)";
        flush_one_call: bool = "kernel.flush_one_call", Kind::Bool, "", "true", "x86: INVLPG runs in a function of its own that perf names, native_flush_tlb_one_user (a035795499ca \"x86/paravirt: Dont patch flush_tlb_single\", 4.15); false (to 4.14): paravirt patching (or !CONFIG_PARAVIRT) put the instruction inline in its caller, so its time is flush_tlb_func's";
        pcid: bool = "kernel.pcid", Kind::Bool, "", "true", "PCID with 6 dynamic ASIDs and per-mm tlb_gen (4.14); false: every mm switch flushes the TLB. On riscv the ASID allocator, used only where machine.asid_bits allows it";
        concurrent_local_flush: bool = "kernel.concurrent_local_flush", Kind::Bool, "", "true", "flush the local TLB after sending the IPIs, overlapping them (4ce94eabac16, 5.13); false: local flush first";
        broadcast_tlb_flush: BroadcastTlbFlush = "kernel.broadcast_tlb_flush", Kind::Choice(BroadcastTlbFlush::NAMES), "", "invlpgb", "x86 with machine.invlpgb: none (to 6.14: every remote flush is an IPI); invlpgb (CONFIG_BROADCAST_TLB_FLUSH, 6.15, 4afeb0ed1753): a process seen on more than global_asid_threshold CPUs at once gets a global ASID, and its flushes are INVLPGB + TLBSYNC instead of IPIs; invlpgb_no_tlbsync: an unsafe what-if that never waits with TLBSYNC, so pages are freed while broadcasts are in flight (the checker reports it); rar: a what-if with machine.rar (Intel Remote Action Request, Rik van Riel's unmerged RFC v4 of 2025): the same global ASIDs, and a flush of such a process goes to the CPUs of its mm_cpumask as a RAR, flushed by their microcode without an interrupt handler";
        global_asid_threshold: u64 = "kernel.global_asid_threshold", Kind::Int { min: 0, max: 4096 }, "CPUs", "3", "broadcast_tlb_flush = invlpgb: consider_global_asid() gives the mm a global ASID when mm_active_cpus_exceeds(mm, this): more CPUs than this run it at once, not lazy (3 as merged in 6.15: 4 or more CPUs)";
        arm64_batched_unmap: bool = "kernel.arm64_batched_unmap", Kind::Bool, "", "true", "arm64 selects ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH (43b3dfdd0455, 6.5): reclaim and migration defer their flushes, arch_tlbbatch_add_pending() issues each page's TLBI without a DSB and arch_tlbbatch_flush() is one dsb(ish); false (to 6.4): ptep_clear_flush() per page, TLBI then DSB; unused elsewhere";
        arm64_batch_min_cpus: u64 = "kernel.arm64_batch_min_cpus", Kind::Int { min: 0, max: 1024 }, "CPUs", "0", "arm64 arch_tlbbatch_should_defer() is false below this many online CPUs (num_online_cpus() < CONFIG_ARM64_NR_CPUS_FOR_BATCHED_TLB in the v5-v9 postings, 8 from v6); 0: no threshold, as merged in 6.5";
        arm64_tlbbatch_dsb: bool = "kernel.arm64_tlbbatch_dsb", Kind::Bool, "", "true", "arm64 arch_tlbbatch_flush() issues its dsb(ish), as 6.5 does; false is an unsafe what-if that frees the batch's pages with their TLBIs still outstanding, which the checker reports (use-after-free at free)";
        riscv_batched_unmap: bool = "kernel.riscv_batched_unmap", Kind::Bool, "", "true", "riscv selects ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH (54d7431af73e, 6.8): arch_tlbbatch_should_defer() is always true, arch_tlbbatch_add_pending() only ORs the mm's cpumask into the batch, and arch_tlbbatch_flush() is one __flush_tlb_range() of everything (no ASID) on the batch's harts; false (to 6.7): ptep_clear_flush() -> flush_tlb_page(), an SBI remote fence a page; unused elsewhere";
        riscv_tlbbatch_flush: bool = "kernel.riscv_tlbbatch_flush", Kind::Bool, "", "true", "riscv arch_tlbbatch_flush() flushes, as 6.8 does; false is an unsafe what-if that frees the batch's pages before any fence, which the checker reports (use-after-free at free)";
        pmd_clear: PmdClear = "kernel.pmd_clear", Kind::Choice(PmdClear::NAMES), "", "lockless_flush", "powerpc radix huge-PMD clear: serialize_ipi (serialize_against_pte_lookup, an empty waiting IPI to mm_cpumask per PMD, to 5.7), lockless (walkers tolerate a stale PMD, no IPI), lockless_flush (as merged in 5.8: also flush_pmd_tlb_range unless fullmm); x86 never did either";
    }
}

/// The architecture's part of each mm (`mm->context` and mm_cpumask()).
#[derive(Debug, Clone)]
pub struct MmContext {
    /// mm_cpumask(mm): CPUs that may hold TLB entries for this mm.
    pub cpumask: CpuMask,
    /// The cache line of mm_cpumask(mm) (x86): flush_tlb_mm_range() and reclaim's batch read
    /// it, switch_mm_irqs_off() sets and clears bits in it, and from 209954cbc7d0 so does
    /// flush_tlb_func() on a CPU that left the mm.
    pub cpumask_line: SharedLine,
    pub ctx_id: u64,
    pub tlb_gen: u64,
    /// The cache line of mm->context.tlb_gen (x86): inc_mm_tlb_gen() writes it at every flush
    /// and batched unmap, flush_tlb_func() on each target reads it.
    pub tlb_gen_line: SpinLock,
    /// In jiffies.
    pub next_trim_cpumask: u64,
    /// mm->context.global_asid: 0, or the mm's global ASID (6.15).
    pub global_asid: u16,
    /// mm->context.asid_transition: some CPU may still run the mm on a dynamic ASID.
    pub asid_transition: bool,
}

/// The MMU state: each CPU's hardware TLB and what it has loaded (x86's cpu_tlbstate, which
/// powerpc radix shares), and each mm's context.
pub struct ArchState {
    pub cfg: ArchConfig,
    pub tlb: Vec<Tlb>,
    pub x86: x86::X86,
    /// arm64: each CPU's outstanding TLBIs.
    pub arm64: arm64::Arm64,
    /// By mm id.
    pub mm: Vec<MmContext>,
    /// last_mm_ctx_id: the next mm's ctx_id.
    next_ctx_id: u64,
}

impl ArchState {
    pub fn new(mut cfg: ArchConfig, m: &Machine) -> ArchState {
        // riscv without the ASID allocator has one address space: each switch_mm() flushes.
        cfg.pcid &= m.arch != Arch::Riscv || m.riscv_asids;
        let n = m.ncpus();
        ArchState {
            cfg,
            tlb: (0..n)
                .map(|_| Tlb::new(m.tlb_entries, m.tlb_ways))
                .collect(),
            x86: x86::X86::new(n),
            arm64: arm64::Arm64::new(n),
            mm: Vec::new(),
            next_ctx_id: INIT_MM_CTX_ID + 1,
        }
    }

    /// init_new_context() of the next mm, at time `jiffies`.
    pub fn init_new_context(&mut self, jiffies: u64) {
        self.mm.push(MmContext {
            cpumask: CpuMask::new(),
            cpumask_line: SharedLine::default(),
            ctx_id: self.next_ctx_id,
            tlb_gen: 0,
            tlb_gen_line: SpinLock::in_memory(),
            next_trim_cpumask: jiffies + self.cfg.hz,
            global_asid: 0,
            asid_transition: false,
        });
        self.next_ctx_id += 1;
    }

    /// The mm loaded on `cpu` (its page tables in CR3), if any.
    pub fn loaded_mm(&self, cpu: CpuId) -> Option<usize> {
        self.x86.cpu[cpu].loaded_mm
    }

    /// `cpu` is in lazy TLB mode: idle or a kernel thread, with a user mm still loaded.
    pub fn is_lazy(&self, cpu: CpuId) -> bool {
        self.x86.cpu[cpu].is_lazy
    }

    /// The address-space id `cpu` runs its loaded mm under: the TLB tag of its translations.
    pub fn loaded_asid(&self, cpu: CpuId) -> u8 {
        self.x86.cpu[cpu].loaded_asid
    }
}

/// The state arch works on, borrowed together from the machine around it.
pub struct Parts<'a> {
    pub m: &'a Machine,
    pub arch: &'a mut ArchState,
    pub obs: &'a mut Observe,
}

/// What arch needs from the machine around it, beyond smp's: its state and the observer, and
/// what the scheduler knows of a CPU and a task. The root implements it for `Sim` (sim.rs).
pub trait Host: crate::smp::Host {
    /// The machine, the MMU state and the observer, borrowed together.
    fn arch_parts(&mut self) -> Parts<'_>;
    /// The MMU state and the machine, to read.
    fn arch_view(&self) -> (&ArchState, &Machine);
    /// The task running on `cpu`.
    fn current(&self, cpu: CpuId) -> Option<TaskId>;
    /// Task `t`'s mm.
    fn task_mm(&self, t: TaskId) -> usize;
    /// INVLPG `i` of the page-list batch task `t` is flushing, if it has so many: the mm it is
    /// meant for and the page number (None: a physical page number, mm/rmap.rs's batch_pfn).
    fn batch_page(&self, t: TaskId, i: usize) -> Option<(Option<u32>, u64)>;
}

/// 4 KiB pages per PMD (HPAGE_PMD_NR with 4 KiB pages; the model's page numbers are 4 KiB).
pub const PMD_PAGES: u64 = 512;

/// init_mm's context id; real mms count up from 2 (last_mm_ctx_id starts at 1).
pub const INIT_MM_CTX_ID: u64 = 1;

/// The mm id meaning "flush everything": `flush_tlb_info.end == TLB_FLUSH_ALL`.
pub const TLB_FLUSH_ALL: u64 = u64::MAX;

/// The jiffies counter at the current time (CONFIG_HZ ticks since boot).
pub fn jiffies(s: &impl Host) -> u64 {
    x86::jiffies(s.now(), s.arch_view().0.cfg.hz)
}

/// Load `mm` on `cpu` as a switch would, without its costs or flushes (unit tests' setup).
#[cfg(test)]
pub fn load_for_test(s: &mut impl Host, cpu: CpuId, mm: usize) {
    s.arch_parts().arch.x86.cpu[cpu].loaded_mm = Some(mm);
}

/// The mm `cpu` has loaded (lazy or not), if any.
pub fn loaded_mm(s: &impl Host, cpu: CpuId) -> Option<usize> {
    s.arch_view().0.loaded_mm(cpu)
}

/// `cpu` is in lazy TLB mode: idle or a kernel thread, with a user mm still loaded.
pub fn is_lazy(s: &impl Host, cpu: CpuId) -> bool {
    s.arch_view().0.is_lazy(cpu)
}

/// The address-space id `cpu` runs its loaded mm under: the TLB tag of its translations.
pub fn loaded_asid(s: &impl Host, cpu: CpuId) -> u8 {
    s.arch_view().0.loaded_asid(cpu)
}

/// switch_mm_irqs_off(): load `next` (None: no mm) on `cpu`; the time of the switch.
pub fn switch_mm_irqs_off(s: &mut impl Host, cpu: CpuId, next: Option<usize>) -> Time {
    let (a, m) = s.arch_view();
    let clear_old = match m.arch {
        Arch::X86 => a.cfg.mm_cpumask == MmCpumask::ClearOnSwitch,
        // powerpc's switch_mm_irqs_off() never clears the old mm's bit (mm/mmu_context.c).
        Arch::PowerpcRadix => false,
        // arm64 keeps no mm_cpumask; __switch_to()'s dsb(ish) completes this CPU's TLBIs.
        Arch::Arm64 => {
            arm64::complete(&mut s.arch_parts(), cpu);
            false
        }
        // riscv's set_mm() clears the old mm's bit only without the ASID allocator: entries tagged
        // with the old mm's ASID stay in this hart's TLB (82dd33fde026, 6.3; context.c to 6.12).
        Arch::Riscv => a.cfg.mm_cpumask == MmCpumask::ClearOnSwitch && !a.cfg.pcid,
    };
    x86::switch_mm_irqs_off(s, cpu, next, clear_old)
}

/// enter_lazy_tlb(): the idle task keeps the old mm loaded, marked lazy.
pub fn enter_lazy_tlb(s: &mut impl Host, cpu: CpuId) {
    x86::enter_lazy_tlb(s.arch_parts().arch, cpu)
}

/// flush_tlb_mm_range(): flush `r` on every CPU that may cache it, waiting for them.
pub fn flush_tlb_mm_range(s: &mut impl Host, cpu: CpuId, t: TaskId, r: FlushRange) -> Outcome {
    match s.arch_view().1.arch {
        Arch::Arm64 => arm64::flush_tlb_range(s.arch_parts(), cpu, t, r),
        Arch::Riscv => riscv::flush_tlb_range(s.arch_parts(), cpu, t, r),
        _ => x86::flush_tlb_mm_range(s, cpu, t, r),
    }
}

/// should_defer_flush() -> arch_tlbbatch_should_defer(): may reclaim or migration on `cpu` defer
/// the flush of a page of `mm` to the end of its batch?
pub fn tlbbatch_should_defer(a: &ArchState, m: &Machine, cpu: CpuId, mm: usize) -> bool {
    match m.arch {
        // x86: only when another CPU may cache the translation (arch/x86/include/asm/tlbflush.h).
        Arch::X86 | Arch::PowerpcRadix => a.mm[mm].cpumask.any_but(cpu),
        Arch::Arm64 => arm64::arch_tlbbatch_should_defer(&a.cfg, m),
        Arch::Riscv => riscv::arch_tlbbatch_should_defer(a),
    }
}

/// arch_tlbbatch_add_pending() for page `vpn` of `mm` at `now`: its time on `cpu`.
pub fn tlbbatch_add_pending(p: Parts, cpu: CpuId, now: Time, mm: usize, vpn: u64) -> Time {
    match p.m.arch {
        // With PCID (4.14) x86 bumps the mm's tlb_gen (inc_mm_tlb_gen(), a write of its line),
        // so a CPU that switches back to the mm flushes the ASID it left behind; then the
        // caller's cpumask_or() loads mm_cpumask's line (set_tlb_ubc_flush_pending() in 4.3).
        Arch::X86 => {
            let (a, m) = (&mut *p.arch, p.m);
            let inc = match a.cfg.pcid {
                true => x86::inc_mm_tlb_gen(a, m, cpu, now, mm).1,
                false => 0,
            };
            inc + x86::cpumask_read(a, m, cpu, now + inc, mm)
        }
        // riscv (6.8): cpumask_or() only, which the caller does; tlb_gen as x86's (a stand-in
        // with no line: see riscv/).
        Arch::PowerpcRadix | Arch::Riscv => {
            if p.arch.cfg.pcid {
                p.arch.mm[mm].tlb_gen += 1;
            }
            0
        }
        Arch::Arm64 => arm64::arch_tlbbatch_add_pending(p, cpu, mm, vpn),
    }
}

/// arch_flush_tlb_batched_pending(): flush_tlb_mm() of `mm` (a step pushed), or on arm64, whose
/// batch's TLBIs are already issued, dsb(ish) to wait for them (43b3dfdd0455).
pub fn flush_tlb_batched_pending(s: &mut impl Host, cpu: CpuId, t: TaskId, mm: usize) -> Outcome {
    if s.arch_view().1.arch == Arch::Arm64 {
        let ps = arm64::arch_flush_tlb_batched_pending(s.arch_parts(), cpu, t);
        return Outcome::Busy {
            ps,
            irqs_off: false,
        };
    }
    let all = FlushRange {
        mm: mm as u32,
        start: 0,
        end: TLB_FLUSH_ALL,
        stride_shift: 12,
        freed_tables: true,
    };
    s.push_step(t, Step::FlushTlbMmRange(all));
    Outcome::Next
}

/// arch_tlbbatch_flush() where it is no kernel call to other CPUs (arm64: one dsb(ish); riscv:
/// one SBI remote fence of the batch's `mask`): its time, charged; None where the batch is
/// flushed by IPIs, as mm's `tlbbatch_flush` policy says.
pub fn tlbbatch_flush_broadcast(
    s: &mut impl Host,
    cpu: CpuId,
    t: TaskId,
    mask: &CpuMask,
) -> Option<Time> {
    match s.arch_view().1.arch {
        Arch::X86 | Arch::PowerpcRadix => None,
        Arch::Arm64 => Some(arm64::arch_tlbbatch_flush(s.arch_parts(), cpu, t)),
        Arch::Riscv => Some(riscv::arch_tlbbatch_flush(s.arch_parts(), cpu, t, mask)),
    }
}

/// The CPUs whose TLB may hold a translation of `mm` (the checker's candidates).
pub fn may_cache<'a>(a: &'a ArchState, m: &Machine, mm: usize) -> &'a CpuMask {
    match m.arch {
        Arch::X86 | Arch::PowerpcRadix | Arch::Riscv => &a.mm[mm].cpumask,
        // TLBs are tagged by ASID and nothing flushes on a switch: any CPU may.
        Arch::Arm64 => &a.arm64.all,
    }
}

/// The TLB tag under which `cpu` holds translations of `mm` that user code can reach without a
/// flush first, if any.
pub fn cached_asid(a: &ArchState, m: &Machine, cpu: CpuId, mm: usize) -> Option<u8> {
    match m.arch {
        // A lazy CPU runs no user code of the mm until switch_mm_irqs_off() takes it back, which
        // flushes the ASID if the mm's tlb_gen moved on (with PCID every batch bumps it): why
        // 4.20's flush may skip it (tlb_is_not_lazy). A use before that is caught at the access.
        // riscv: as x86 (switch_mm() clears the old mm's bit; the mm's tlb_gen moves with every
        // flush, so a hart that comes back flushes its ASID).
        Arch::X86 | Arch::PowerpcRadix | Arch::Riscv => (a.loaded_mm(cpu) == Some(mm)
            && !(a.is_lazy(cpu) && a.cfg.pcid))
            .then(|| a.loaded_asid(cpu)),
        // The mm's ASID, loaded or not: arm64 flushes nothing when it switches back.
        Arch::Arm64 => arm64::asid_slot(a, cpu, mm),
    }
}

/// The remote half of a flush whose local half already ran (flush_tlb_others, before 5.13).
pub fn flush_tlb_others(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    x86::flush_tlb_multi(s, cpu, t, false)
}

/// flush_tlb_func() on `cpu` at `at` for the flush `sender` is making: the handler's time.
pub fn flush_tlb_func(
    s: &mut impl Host,
    cpu: CpuId,
    task: Option<TaskId>,
    sender: CpuId,
    at: Time,
) -> Time {
    x86::flush_tlb_func(s, cpu, task, sender, at)
}

/// should_flush_tlb(): does `cpu` need the flush `sender` is sending?
pub fn should_flush_tlb(s: &impl Host, cpu: CpuId, sender: CpuId) -> bool {
    x86::should_flush_tlb(s.arch_view().0, cpu, sender)
}

/// arch_tlbbatch_flush() from 4.6: the batch as one full flush with no mm, through the arch's
/// remote flush (`kernel.tlbbatch_flush = flush_tlb_func`).
pub fn tlbbatch_flush_multi(s: &mut impl Host, cpu: CpuId, t: TaskId, mask: &CpuMask) -> Outcome {
    x86::arch_tlbbatch_flush(s, cpu, t, mask)
}

/// arch_tlbbatch_flush() on one CPU of a reclaim batch: the handler's time.
pub fn tlbbatch_flush(s: &mut impl Host, cpu: CpuId, task: Option<TaskId>) -> Time {
    x86::flush_tlb_batch_pages(s.arch_parts(), cpu, task)
}

/// The page-list batch handler (the v1-v6 series' PFN list): one INVLPG per entry of `sender`'s
/// batch.
pub fn tlbbatch_flush_pfns(
    s: &mut impl Host,
    cpu: CpuId,
    task: Option<TaskId>,
    sender: CpuId,
) -> Time {
    x86::flush_tlb_pfns(s, cpu, task, sender)
}

/// consider_global_asid(mm) after a flush's IPIs (6.15): a busy mm may get a global ASID.
pub fn consider_global_asid(s: &mut impl Host, cpu: CpuId, t: TaskId, mm: usize) -> Outcome {
    x86::consider_global_asid(s, cpu, t, mm)
}

/// finish_asid_transition() of the flush `cpu` is making (6.15).
pub fn finish_asid_transition(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    x86::finish_asid_transition(s, cpu, t)
}

/// tlbsync(): wait for the INVLPGBs `cpu` issued, its own only (6.15).
pub fn tlbsync(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
    x86::tlbsync_step(s, cpu, t)
}

/// An INVLPGB `cpu` issued has completed: its translations are gone from every TLB.
pub fn invlpgb_done(s: &mut impl Host, cpu: CpuId) {
    x86::invlpgb_done(s, cpu)
}

/// destroy_context() when the last task of the process exits: mm_free_global_asid().
pub fn destroy_context(s: &mut impl Host, mm: usize) {
    x86::mm_free_global_asid(s.arch_parts().arch, mm)
}

/// What each huge-PMD clear of munmap asks of this architecture and kernel.
pub fn after_huge_pmd_clear(s: &impl Host) -> AfterPmdClear {
    let (a, m) = s.arch_view();
    match m.arch {
        // x86's pmdp_huge_get_and_clear_full() is the generic one: the gather flushes at the end.
        Arch::X86 => AfterPmdClear::Nothing,
        // munmap's gather is never fullmm.
        Arch::PowerpcRadix => powerpc::pmdp_huge_get_and_clear_full(a.cfg.pmd_clear, false),
        // The generic pmdp_huge_get_and_clear_full(); the gather flushes at the end.
        Arch::Arm64 | Arch::Riscv => AfterPmdClear::Nothing,
    }
}

/// The gather's last flush after munmap zapped huge PMDs [first, end) (2 MiB units) of `mm`.
pub fn flush_huge_range(s: &mut impl Host, mm: u32, first: u64, end: u64) -> Step {
    let p = s.arch_parts();
    match p.m.arch {
        // tlb_finish_mmu -> flush_tlb_mm_range(2 MiB stride): above the ceiling, a full flush.
        // arm64: tlb_flush() -> __flush_tlb_range(PMD_SIZE stride), the same range.
        Arch::X86 | Arch::Arm64 | Arch::Riscv => Step::FlushTlbMmRange(FlushRange {
            mm,
            start: first * PMD_PAGES,
            end: end * PMD_PAGES,
            stride_shift: 21,
            freed_tables: true,
        }),
        // radix__tlb_flush -> a range above tlb_single_page_flush_ceiling: _tlbie_pid().
        Arch::PowerpcRadix => {
            p.obs.stats.tlbies += 1;
            Step::Work {
                func: Func::FlushTlbMm,
                ps: p.m.cost[Cost::Tlbie],
                irqs_off: false,
            }
        }
    }
}
