//! What a task executes: the steps of its kernel and user work (explicit continuations), what a
//! step asks of its CPU, and the calls, flushes and system calls steps carry. Data only: each
//! layer pushes steps, and the root dispatches them (`dispatch.rs`) to the code that runs them;
//! and the events the simulated time is made of.

use crate::engine::Time;
use crate::observe::Func;

/// A system call a user program makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syscall {
    /// madvise(addr, len, MADV_DONTNEED)
    MadviseDontneed { vpn: u64, n: u64 },
    /// munmap(addr, len)
    Munmap { vpn: u64, n: u64 },
    /// mprotect(addr, len, PROT_READ)
    MprotectRead { vpn: u64, n: u64 },
    /// madvise(addr, len, MADV_PAGEOUT) of a region reclaim tracks (map_new_anon / map_new_file)
    MadvisePageout { vpn: u64, n: u64 },
}

/// The arguments of flush_tlb_mm_range (addresses as page numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushRange {
    pub mm: u32,
    pub start: u64,
    pub end: u64,
    pub stride_shift: u8,
    pub freed_tables: bool,
}

/// The function a csd runs on its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFunc {
    /// flush_tlb_func with the sender's flush_tlb_info.
    FlushTlbFunc,
    /// percpu_flush_tlb_batch_pages (4.3): a full local flush.
    FlushTlbBatchPages,
    /// The PFN-list variant: INVLPG each page of the sender's batch.
    FlushTlbPfns,
    /// drain_local_pages: this CPU's pcp lists back to the buddy allocator.
    DrainLocalPages,
    /// ipi_mb (kernel/sched/membarrier.c): smp_mb() on the target, for membarrier.
    IpiMb,
    /// do_serialize (powerpc serialize_against_pte_lookup): nothing; taking the IPI is the point.
    DoSerialize,
    /// tlb_remove_table_smp_sync: nothing; once every CPU took it, no lockless walk remains.
    TlbRemoveTableSmpSync,
    /// do_nothing_ipi (the ipistorm module).
    DoNothingIpi,
}

/// on_each_cpu_cond_mask's per-CPU condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Always,
    /// should_flush_tlb (x86) with the sender's flush_tlb_info.
    ShouldFlushTlb,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinOn {
    /// csd_lock_wait(): until every csd this CPU queued has been run and unlocked.
    CsdLockWait,
    /// csd_lock(): until the target of `smp.csd_lock_on` has run this CPU's earlier csd to it.
    CsdLock,
    /// A user thread spinning on a flag forever (the "busy" remote thread).
    UserForever,
    /// spin_lock() on a PTE lock another CPU holds, until it is handed over.
    Ptl,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Ask the task's user program for its next operation.
    User,
    /// Time already decided: charge it to `func` and keep the CPU busy.
    Work {
        func: Func,
        ps: Time,
        irqs_off: bool,
    },
    /// Time already decided and charged to `func`: keep the CPU busy, interrupts on (the rest
    /// of a step whose lock rounds ran first with them off: mm::lru::lock_first()).
    Charged { func: Func, ps: Time },
    /// The body of a system call.
    Syscall(Syscall),
    /// A vCPU runs guest code for `ps` (KVM): interrupts meanwhile cost a guest exit and entry.
    Guest { ps: Time },
    /// zap_pmd_range over huge PMDs [next, end) (2 MiB units) of the task's mm: zap_huge_pmd each.
    ZapHugePmds { next: u64, end: u64 },
    /// powerpc serialize_against_pte_lookup(): wait for every lockless walker of the mm.
    SerializeAgainstPteLookup,
    /// free_pgtables of `n` more page-table pages through tlb_remove_table().
    TlbRemoveTables { n: u64 },
    /// tlb_remove_table_sync_one(): an empty IPI to every online CPU, waiting.
    TlbRemoveTableSyncOne,
    /// User stores (or loads) to `n` pages from `vpn`, faulting them in as needed.
    Touch { vpn: u64, n: u32, write: bool },
    /// zap_page_range: zap PTEs in [from, end) into the task's mmu_gather.
    Zap {
        from: u64,
        end: u64,
        reclaim_pt: bool,
    },
    /// change_protection: write-protect PTEs in [from, end).
    Protect { from: u64, end: u64 },
    /// free_pgtables: free PTE tables wholly inside [start, end) and [floor, ceiling).
    FreePgtables {
        start: u64,
        end: u64,
        floor: u64,
        ceiling: u64,
    },
    /// tlb_flush_mmu / tlb_finish_mmu: flush the TLB for what the task's mmu_gather collected.
    TlbFlushMmu,
    /// tlb_finish_mmu: the last flush of a gather, a full one if another gather is open.
    TlbFinishMmu,
    /// inc_tlb_flush_pending() (`inc`) or dec_tlb_flush_pending(): the atomic on the mm's line.
    TlbFlushPending { inc: bool },
    /// tlb_batch_pages_flush: free the gathered pages once the TLB is clean.
    TlbBatchPagesFlush,
    /// flush_tlb_mm_range(mm, start, end, stride_shift, freed_tables).
    FlushTlbMmRange(FlushRange),
    /// consider_global_asid(mm) after flush_tlb_mm_range()'s IPIs (6.15).
    ConsiderGlobalAsid { mm: u32 },
    /// finish_asid_transition() inside broadcast_tlb_flush() (6.15).
    FinishAsidTransition,
    /// tlbsync(): wait for the INVLPGBs this CPU issued (AMD, 6.15).
    Tlbsync,
    /// flush_tlb_others(): the remote half of a flush whose local half ran first (before 5.13).
    FlushTlbOthers,
    /// The local part of on_each_cpu_cond_mask: run `func` here with IRQs off.
    LocalCall(CallFunc),
    /// csd_lock_wait on every csd this CPU queued.
    CsdLockWait,
    /// smp_call_function_many_cond() once csd_lock() got the csd it spun on (`csd_lock_call`).
    SmpCallFunctionMany,
    /// The rest of smp_call_function_many_cond()'s loop over its targets (`Smp::sending`).
    QueueCsds,
    /// 3.8's IPI loop over the sender's live cfd cpumask, IRQs off
    /// (default_send_IPI_mask_sequence_phys).
    SendCfdIpis,
    /// User reads (or writes) of `n` whole pages of a file mapping from `vpn`.
    FileRead { vpn: u64, n: u32, write: bool },
    /// migration_entry_wait(): the PTE is a migration entry for `pfn`; sleep until it is gone.
    MigrationEntryWait { pfn: u32 },
    /// do_migrate_pages(): isolate the task's pages on node `from` for a move to `to`.
    MigratePages { mm: u32, from: u8, to: u8 },
    /// migrate_pages_batch(): unmap the next batch of the isolated pages.
    MigrateUnmap,
    /// migrate_folio_move() for each page of the batch: copy, restore the PTE, free the source.
    MigrateMove,
    /// filemap_fault + fault-around for `vpn`.
    FileFault { vpn: u64 },
    /// A write fault on a shared file mapping at `vpn`.
    FileWriteFault { vpn: u64 },
    /// Readahead of `n` pages of `file` from `index`.
    Readahead { file: u32, index: u64, n: u32 },
    /// try_to_free_pages: reclaim until `want` pages were freed.
    DirectReclaim { want: u32 },
    /// One round of shrink_lruvec's loop on a node: up to `nr` inactive pages isolated, up to
    /// `nr_active` active ones deactivated.
    ShrinkNode { node: u32, nr: u32, nr_active: u32 },
    /// shrink_page_list over the isolated pages.
    ShrinkPageList,
    /// madvise_cold_or_pageout_pte_range() over [vpn, vpn + n), then reclaim_pages().
    MadvisePageout { vpn: u64, n: u64 },
    /// pageout() of a dirty page, then on with shrink_page_list.
    Pageout { pfn: u32 },
    /// Free the reclaimed pages and put the others back.
    ShrinkFinish,
    /// free_unref_folios() of a full folio batch of reclaimed pages, mid-pass.
    ShrinkFreeBatch,
    /// __split_huge_page_refcount() of huge page `head` (mm/thp.rs).
    SplitHugePageRefcount { head: u32 },
    /// __split_huge_page_map() of huge page `head` (mm/thp.rs).
    SplitHugePageMap { head: u32 },
    /// try_to_unmap_flush.
    TryToUnmapFlush,
    /// mmap_write_unlock at the end of munmap or mprotect.
    MmapWriteUnlock,
    /// mmap_read_unlock at the end of madvise, or of a munmap that downgraded.
    MmapReadUnlock,
    /// munmap's mmap_write_downgrade once its VMAs are detached.
    MmapWriteDowngrade,
    /// vma_end_read() of the VMA lock `lock` (an index into the mm's `vma_locks`) at the end of
    /// a madvise that took it.
    VmaEndRead { lock: u32 },
    /// mmap_read_unlock() after a fault that read mmap_lock (before per-VMA locks): its atomic.
    FaultMmapReadUnlock,
    /// Take a PTE lock (spinning if another CPU holds it).
    PtlLock { id: u32 },
    /// Release a PTE lock.
    PtlUnlock { id: u32 },
    /// Empty the task's tlb_ubc once its flush is done.
    TlbUbcClear,
    /// drain_all_pages(NULL).
    DrainAllPages,
    /// __alloc_pages_may_oom() -> out_of_memory(): reclaim freed nothing.
    OutOfMemory,
    /// A kworker's drain work item (the workqueue era).
    DrainWork,
    /// mutex_unlock(&pcpu_drain_mutex) after a drain of every CPU's lists by the caller (6.0).
    DrainUnlock,
    /// sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): syscall entry.
    Membarrier,
    /// membarrier_private_expedited(): its own work up to the IPIs.
    MembarrierIpis,
    /// membarrier_private_expedited(): the rq->curr scan, the ipi_mb IPIs and the wait.
    MembarrierIpiMb,
}

impl Step {
    /// The step runs with IRQs off from its start: a pending interrupt is not taken before it,
    /// nor the tick's softirq run, but waits until it ends.
    pub fn irqs_stay_off(&self) -> bool {
        matches!(self, Step::SendCfdIpis)
    }

    /// The kernel (or user) function a trace names this step by.
    pub fn name(&self) -> &'static str {
        match self {
            Step::User => "[user]",
            Step::Work { func, .. } => func.name(),
            Step::Charged { func, .. } => func.name(),
            Step::Syscall(_) => "entry_SYSCALL_64",
            Step::Touch { .. } | Step::FileRead { .. } => "[user]",
            Step::Guest { .. } => "[guest]",
            Step::ZapHugePmds { .. } => "zap_huge_pmd",
            Step::SerializeAgainstPteLookup => "serialize_against_pte_lookup",
            Step::TlbRemoveTables { .. } => "free_pgtables",
            Step::TlbRemoveTableSyncOne => "tlb_remove_table_sync_one",
            Step::MigrationEntryWait { .. } => "migration_entry_wait",
            Step::MigratePages { .. } => "do_migrate_pages",
            Step::MigrateUnmap => "migrate_folio_unmap",
            Step::MigrateMove => "migrate_folio_move",
            Step::Zap { .. } => "zap_pte_range",
            Step::Protect { .. } => "change_pte_range",
            Step::FreePgtables { .. } => "free_pgtables",
            Step::TlbFlushMmu => "tlb_flush_mmu",
            Step::TlbFinishMmu => "tlb_finish_mmu",
            Step::TlbFlushPending { inc: true } => "tlb_gather_mmu",
            Step::TlbFlushPending { inc: false } => "tlb_finish_mmu",
            Step::TlbBatchPagesFlush => "tlb_batch_pages_flush",
            Step::FlushTlbMmRange(_) => "flush_tlb_mm_range",
            Step::FlushTlbOthers => "smp_call_function_many_cond",
            Step::ConsiderGlobalAsid { .. } => "consider_global_asid",
            Step::FinishAsidTransition => "finish_asid_transition",
            Step::Tlbsync => "tlbsync",
            Step::LocalCall(_) => "flush_tlb_func",
            Step::CsdLockWait => "csd_lock_wait",
            Step::SmpCallFunctionMany | Step::QueueCsds => "smp_call_function_many",
            Step::SendCfdIpis => "default_send_IPI_mask_sequence_phys",
            Step::FileFault { .. } => "filemap_map_pages",
            Step::FileWriteFault { .. } => "do_shared_fault",
            Step::Readahead { .. } => "__do_page_cache_readahead",
            Step::DirectReclaim { .. } => "try_to_free_pages",
            Step::ShrinkNode { .. } => "shrink_inactive_list",
            Step::ShrinkPageList => "shrink_page_list",
            Step::MadvisePageout { .. } => "madvise_cold_or_pageout_pte_range",
            Step::ShrinkFinish => "putback_inactive_pages",
            Step::ShrinkFreeBatch => "free_unref_folios",
            Step::SplitHugePageRefcount { .. } => "__split_huge_page_refcount",
            Step::SplitHugePageMap { .. } => "__split_huge_page_map",
            Step::Pageout { .. } => "pageout",
            Step::TryToUnmapFlush => "try_to_unmap_flush",
            Step::MmapWriteUnlock => "up_write",
            Step::MmapReadUnlock => "up_read",
            Step::MmapWriteDowngrade => "downgrade_write",
            Step::VmaEndRead { .. } => "lock_vma_under_rcu",
            Step::FaultMmapReadUnlock => "up_read",
            Step::PtlLock { .. } => "_raw_spin_lock",
            Step::PtlUnlock { .. } => "_raw_spin_unlock",
            Step::TlbUbcClear => "try_to_unmap_flush",
            Step::DrainAllPages => "drain_all_pages",
            Step::OutOfMemory => "out_of_memory",
            Step::DrainWork => "drain_local_pages_wq",
            Step::DrainUnlock => "mutex_unlock",
            Step::Membarrier => "entry_SYSCALL_64",
            Step::MembarrierIpis => "membarrier_private_expedited",
            Step::MembarrierIpiMb => "smp_call_function_many_cond",
        }
    }
}

/// What a step asks of the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Go straight on to the next step.
    Next,
    /// Busy for `ps` (already charged), then the next step.
    Busy { ps: Time, irqs_off: bool },
    /// Spin, IRQs on, until the condition holds.
    Spin(SpinOn),
    /// The task sleeps until the given time (`NEVER`: until woken).
    Sleep(Time),
    /// The task exits.
    Exit,
}

/// The interrupt vector a call-function IPI raises. x86 has two, each its own bit in the local
/// APIC's IRR (arch/x86/include/asm/irq_vectors.h): two IPIs of one vector before the handler
/// takes one make one interrupt, of the two vectors two. arm64, powerpc and riscv raise one
/// IPI message for both (IPI_CALL_FUNC, PPC_MSG_CALL_FUNCTION).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Vector {
    /// CALL_FUNCTION_VECTOR (0xfc): arch_send_call_function_ipi_mask().
    #[default]
    CallFunction = 0,
    /// CALL_FUNCTION_SINGLE_VECTOR (0xfb): arch_send_call_function_single_ipi().
    CallFunctionSingle = 1,
}

/// Everything that happens at a point in simulated time (CPUs as u16: 8 bytes, a 24-byte entry).
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// A CPU's current step ended, or the condition it spun on came true. Stale if `gen` moved on.
    Resume { cpu: u16, gen: u32 },
    /// An IPI reaches a CPU's local APIC.
    IpiArrive { cpu: u16, vector: Vector, flow: u32 },
    /// A polling idle CPU notices work queued for it without an IPI (set_nr_if_polling).
    PollKick { cpu: u16 },
    /// A CPU's interrupt handler, entered earlier, starts its pass over the call queue.
    HandlerStart { cpu: u16 },
    /// A CPU's handler pass, stopped for an event due first, goes on.
    HandlerContinue { cpu: u16 },
    /// A CPU returns from its interrupt handler.
    IrqExit { cpu: u16 },
    /// The INVLPGBs a CPU issued that are due by now have completed on every CPU (AMD).
    InvlpgbDone { cpu: u16 },
    /// A sleeping task's timer fires.
    Wake { task: u32 },
    /// The run's time limit.
    Stop,
}

const _: () = assert!(std::mem::size_of::<Event>() == 8);
