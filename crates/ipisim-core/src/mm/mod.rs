//! Memory management: address spaces (VMAs, 4 KiB page tables), physical frames, a page cache,
//! page faults, and the syscalls that change mappings (madvise, munmap, mprotect).
//! Addresses are page numbers (vpn); a PTE table covers 512 of them (one PMD, 2 MiB).

pub mod drain;
mod fault;
pub mod filemap;
pub mod huge_memory;
pub mod lru;
pub mod migrate;
mod mmap_lock;
mod mmu_gather;
pub mod oom_kill;
pub mod page_alloc;
pub mod page_io;
mod pagetable;
pub mod ptl;
pub mod rmap;
pub mod slub;
mod syscall;
pub mod thp;
pub mod vmscan;

pub use fault::touch;
pub use mmu_gather::{
    tlb_batch_pages_flush, tlb_finish_mmu, tlb_flush_mmu, tlb_flush_pending_atomic, MmuGather,
};
pub use page_alloc::Frames;
pub use pagetable::{Pte, PteTable};
pub use syscall::{
    free_pgtables, mmap_read_unlock, mmap_read_unlock_atomic, mmap_write_downgrade,
    mmap_write_lock, mmap_write_unlock, protect_step, syscall, unlock_step, vma_lock_atomic,
    zap_step, Syscall,
};

use crate::config::{params, Kind};
use crate::engine::{CpuId, SpinLock, TaskId};
use crate::machine::Machine;
use crate::observe::Observe;
use drain::PcpDrain;
use migrate::MigrateFlush;
use oom_kill::OomSelect;
use rmap::{ReclaimFlush, TlbBatchFlush};
use thp::Thp;
use vmscan::{InactiveRatio, IsolatedThrottle};

pub const PAGE_SHIFT: u32 = 12;
pub const PTRS_PER_PTE: u64 = 512;
/// Where mmap starts placing mappings: 4 GiB, a PMD-aligned address in the user half.
pub const MMAP_BASE_VPN: u64 = 1 << 20;
/// The shared zero page that read faults on anonymous memory map (my_zero_pfn()).
pub const ZERO_PFN: u32 = 0;
pub const NONE: u32 = u32::MAX;
/// In an anonymous region's page table: the page was swapped out.
pub const SWAPPED: u32 = u32::MAX - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    Anon,
    /// A file mapping: which file, the page offset of `start`, and MAP_SHARED or MAP_PRIVATE.
    File {
        file: u32,
        pgoff: u64,
        shared: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub write: bool,
    pub backing: Backing,
    /// Its per-VMA lock (`vma->vm_lock`, 6.4; `vm_refcnt`, 6.15): an index into `Mm::vma_locks`.
    pub lock: u32,
}

impl Vma {
    /// Can `self` (below) and `next` (directly above) be one VMA (vma_merge)?
    fn mergeable(&self, next: &Vma) -> bool {
        self.end == next.start
            && self.write == next.write
            && match (self.backing, next.backing) {
                (Backing::Anon, Backing::Anon) => true,
                (
                    Backing::File {
                        file: a,
                        pgoff: pa,
                        shared: sa,
                    },
                    Backing::File {
                        file: b,
                        pgoff: pb,
                        shared: sb,
                    },
                ) => a == b && sa == sb && pa + (self.end - self.start) == pb,
                _ => false,
            }
    }
}

/// An address space (`struct mm_struct`) with the x86 context fields flushes need.
#[derive(Debug)]
pub struct Mm {
    /// Sorted, non-overlapping.
    pub vmas: Vec<Vma>,
    /// The PTE table of each PMD from MMAP_BASE_VPN up, or NONE.
    pub pmds: Vec<u32>,
    /// tlb_flush_pending: mmu_gathers open on this mm (inc_tlb_flush_pending); more than one
    /// means another thread's batched flush may still be outstanding (mm_tlb_flush_nested).
    pub tlb_flush_pending: u32,
    /// The cache line of mm->tlb_flush_pending and mm->tlb_flush_batched, side by side in
    /// mm_struct: gathers write it (kernel.tlb_flush_pending), page-table walks read it.
    pub flush_pending_line: SpinLock,
    /// mm->tlb_flush_batched: a PTE of this mm was cleared with its flush deferred to a batch
    /// since the last flush_tlb_batched_pending() (the kernel's pending and flushed counts).
    pub tlb_flush_batched: bool,
    /// mmap_lock: mmap, munmap and mprotect take it for writing, madvise for reading (unless
    /// kernel.madvise_vma_lock), and munmap downgrades it (kernel.munmap_downgrade). Faults take
    /// it for reading before per-VMA locks (kernel.fault_vma_lock), which a writer only delays
    /// (not modelled): only its count line's atomics are.
    pub mmap_lock: mmap_lock::MmapLock,
    /// mm_users: tasks using the mm that have not exited (mmget at creation, mmput at exit).
    pub users: u32,
    /// The cache line of each VMA's lock word (`Vma::lock`), and the slots freed VMAs left.
    pub vma_locks: Vec<SpinLock>,
    free_vma_locks: Vec<u32>,
    /// mm->page_table_lock as a PTE lock id (mm/ptl.rs), made at the first huge page; NONE.
    pub page_table_lock: u32,
}

impl Mm {
    /// A new vm_area_struct's lock (vm_area_alloc() or vm_area_dup()).
    fn new_vma_lock(&mut self) -> u32 {
        match self.free_vma_locks.pop() {
            Some(i) => {
                self.vma_locks[i as usize] = SpinLock::default();
                i
            }
            None => {
                self.vma_locks.push(SpinLock::default());
                (self.vma_locks.len() - 1) as u32
            }
        }
    }

    /// Remove the VMAs `range` (vm_area_free()).
    fn remove_vmas(&mut self, range: std::ops::Range<usize>) {
        let freed = self.vmas.drain(range).map(|v| v.lock);
        self.free_vma_locks.extend(freed);
    }
}

pub struct File {
    /// The page cache: the frame holding each page of the file, or NONE.
    pub pages: Vec<u32>,
    /// The one mapping reclaim must unmap pages from: (mm, first page of the VMA).
    pub mapper: Option<(usize, u64)>,
    /// An anonymous region rather than a file: reclaim stands in its anon_vma for the file's
    /// mapping, and its pages go to swap.
    pub anon: bool,
    /// The PTE lock of the mapping's first PTE table; the others follow (see mm/ptl.rs).
    pub ptl_base: u32,
    /// With `kernel.thp=always`, what each PMD of an anonymous region's mapping holds
    /// (mm/thp.rs: none, a PTE table, or a huge page); else empty.
    pub pmd: Vec<u8>,
}

/// The `mm` of a kernel thread: it has none and borrows the previous task's (lazy TLB).
pub const KTHREAD: usize = usize::MAX;

/// What mm needs from the scheduler above it; the root implements it for `Sim` (sim.rs).
pub trait Hooks {
    /// wake_up_process(): make a sleeping task runnable.
    fn wake(&mut self, t: TaskId);
    /// kthread_create_on_cpu(): a kernel thread named `comm` bound to a CPU, asleep until woken.
    fn spawn_kthread(&mut self, cpu: CpuId, comm: String) -> TaskId;
    /// A CPU spinning on a lock that was just handed to it looks at it again.
    fn kick_lock_spinner(&mut self, cpu: CpuId);
    /// signal_wake_up(): a fatal signal ends the task's interruptible sleep.
    fn signal_wake_up(&mut self, t: TaskId);
    /// TASK_UNINTERRUPTIBLE for task `t`'s next sleep: a fatal signal does not end it.
    fn set_uninterruptible(&mut self, t: TaskId);
    /// panic(): the run ends now.
    fn panic(&mut self);
}

/// The state mm works on, borrowed together from the machine around it.
pub struct Parts<'a> {
    pub m: &'a Machine,
    pub mem: &'a mut Memory,
    /// The arch's state: the CPUs' TLBs a user access goes through.
    pub arch: &'a mut crate::arch::ArchState,
    pub obs: &'a mut Observe,
}

/// What mm needs from the machine around it, beyond arch's and smp's: its state, the arch's and
/// the observer, and a few facts about a task (its spinlock count, whether it exited). The root
/// implements it for `Sim`; every mm function takes `&mut impl Host` or the plain parts it needs.
pub trait Host: Hooks + crate::arch::Host {
    /// The machine, mm's state and the observer, borrowed together.
    fn mm_parts(&mut self) -> Parts<'_>;
    /// mm's state and the machine, to read.
    fn mm_view(&self) -> (&Memory, &Machine);
    /// Task `t` has exited.
    fn exited(&self, t: TaskId) -> bool;
    /// Spinlocks task `t` holds (the lock part of its preempt_count: not preemptible while > 0).
    fn locks_held(&mut self, t: TaskId) -> &mut u32;
    /// Task `t`'s mmu_gather (tlb_gather_mmu() .. tlb_finish_mmu()).
    fn gather(&mut self, t: TaskId) -> &mut MmuGather {
        &mut self.mm_parts().mem.tasks[t].gather
    }
    /// mm's state.
    fn mem(&mut self) -> &mut Memory {
        self.mm_parts().mem
    }
    /// The observer: counters, the coherence checker, the trace.
    fn obs(&mut self) -> &mut Observe {
        self.mm_parts().obs
    }
    /// The machine.
    fn machine(&self) -> &Machine {
        self.mm_view().1
    }
}

params! {
    /// The kernel preset's choices for memory management (kernel.*), declared where they are used.
    #[derive(Debug, Clone)]
    pub struct MmConfig;
    pub const PARAMS = {
        pt_reclaim: bool = "kernel.pt_reclaim", Kind::Bool, "", "true", "CONFIG_PT_RECLAIM: MADV_DONTNEED over a whole PMD frees the empty PTE table (6.14)";
        reclaim_flush: ReclaimFlush = "kernel.reclaim_flush", Kind::Choice(ReclaimFlush::NAMES), "", "batch_full", "how reclaim flushes unmapped pages: immediate (flush_tlb_page per page, to 4.2), batch_full (one IPI per CPU per batch, full flush; 72b252aed506, 4.3), batch_pfn (the v1-v6 series as posted: a PFN list, each target INVLPGs pfn << PAGE_SHIFT, a physical address, so the user's translation stays and the checker catches it), batch_addr (the list that would have been right: each page's mm and user address, INVLPG'd where that mm is loaded; never posted), none (a debug policy that never flushes; the checker catches it)";
        tlbbatch_flush: TlbBatchFlush = "kernel.tlbbatch_flush", Kind::Choice(TlbBatchFlush::NAMES), "", "flush_tlb_func", "how batch_full sends its flush: percpu_batch_pages (mm/rmap.c's own handler on every CPU of the mask, each run counted in TLB, the sender's too, no lazy check; 4.3 to 4.5) or flush_tlb_func (the arch's full flush with no mm: TLB counted on remote CPUs only, lazy CPUs as kernel.lazy_tlb says; 858eaaa7, 4.6; arch_tlbbatch_flush, 4.13)";
        batch_pfn_size: usize = "kernel.batch_pfn_size", Kind::Int { min: 1, max: 4096 }, "pages", "32", "batch_pfn and batch_addr: pages per batch before a flush (BATCH_TLBFLUSH_SIZE, 32 = SWAP_CLUSTER_MAX; a page's worth is about 500)";
        defer_writable: bool = "kernel.defer_writable", Kind::Bool, "", "true", "batch dirty PTEs too and flush them before pageout (try_to_unmap_flush_dirty; seed 001 patch 3); false: flush dirty PTEs at once";
        young_flush: bool = "kernel.young_flush", Kind::Bool, "", "false", "reclaim's ptep_clear_flush_young() flushes the TLB when it clears a set accessed bit (x86 until b13b1d2d8692, 3.15)";
        flush_dirty_before_pageout: bool = "kernel.flush_dirty_before_pageout", Kind::Bool, "", "true", "try_to_unmap_flush_dirty() before pageout() of a page whose writable PTE was unmapped in the batch, as every kernel does; false is an unsafe what-if that the checker reports (lost-write at pageout)";
        flush_tlb_batched_pending: bool = "kernel.flush_tlb_batched_pending", Kind::Bool, "", "true", "zap_pte_range(), change_pte_range() and madvise_cold_or_pageout_pte_range() first flush the whole mm if reclaim or migration cleared a PTE of it with the flush deferred since the last such call (flush_tlb_batched_pending(): Mel Gorman, 3ea277194daa, 4.13; arm64 only waits for its TLBIs, dsb(ish), from 43b3dfdd0455); false: no such flush, as before";
        madvise_pageout_ignore_references: bool = "kernel.madvise_pageout_ignore_references", Kind::Bool, "", "true", "MADV_PAGEOUT leaves accessed bits alone and its reclaim ignores references (2864f3d0f583, Barry Song, 6.9): no mmu_gather flush of the walk, no rmap check of each page; false (5.4 to 6.8): the walk clears each young PTE into the mmu_gather and reclaim checks references as any reclaim does";
        reclaim_free_batch: usize = "kernel.reclaim_free_batch", Kind::Int { min: 0, max: 4096 }, "pages", "31", "shrink_folio_list() frees its reclaimed folios in folio batches of this many, each after a try_to_unmap_flush(), so a long pass flushes every batch (bc2ff4cbc329 \"mm: free folios in a batch in shrink_folio_list()\", Matthew Wilcox, 2024; PAGEVEC_SIZE 31); 0: one flush and one free at the pass's end, as before";
        flush_before_free: bool = "kernel.flush_before_free", Kind::Bool, "", "true", "try_to_unmap_flush() before the reclaimed pages are freed, as every kernel does; false is an unsafe what-if that the checker reports (use-after-free at free)";
        migrate_flush: MigrateFlush = "kernel.migrate_flush", Kind::Choice(MigrateFlush::NAMES), "", "batched", "how migrate_pages flushes the pages it unmaps: immediate (ptep_clear_flush per page, to 6.3), batched (unmap up to 512 pages, one try_to_unmap_flush, then copy; 7e12beb8ca2a, 6.4), batched_unsafe (a what-if that copies, restores and frees before the flush; the checker catches it)";
        table_batch_alloc_fails: bool = "kernel.table_batch_alloc_fails", Kind::Bool, "", "false", "what-if: tlb_remove_table() cannot allocate its mmu_table_batch page (GFP_NOWAIT), so each freed page-table page goes through tlb_remove_table_one() -> tlb_remove_table_sync_one(): an empty IPI to every online CPU, waiting (mm/mmu_gather.c)";
        madvise_vma_lock: bool = "kernel.madvise_vma_lock", Kind::Bool, "", "true", "madvise(MADV_DONTNEED) takes the VMA's read lock (lock_vma_under_rcu(), MADVISE_VMA_READ_LOCK: Barry Song, \"mm: use per_vma lock for MADV_DONTNEED\", 2025-06, 6.17) instead of mmap_lock for reading, so it never waits for mmap or munmap elsewhere in the process";
        fault_vma_lock: bool = "kernel.fault_vma_lock", Kind::Bool, "", "true", "a page fault takes the VMA's lock (lock_vma_under_rcu(): vma_start_read() and vma_end_read(), two atomics on its lock word; Suren Baghdasaryan's per-VMA locks, 6.4) instead of mmap_lock for reading (two atomics on the rwsem's count, which every thread of the process shares); the wait for a writer is not modelled either way";
        munmap_downgrade: bool = "kernel.munmap_downgrade", Kind::Bool, "", "true", "munmap() downgrades mmap_lock to a read lock once the VMAs are detached and zaps, frees page tables and flushes under it (mmap_write_downgrade(): Yang Shi, \"mm: mmap: zap pages with read mmap_sem in munmap\", 4.20); false: it holds the write lock to the end";
        tlb_flush_pending: bool = "kernel.tlb_flush_pending", Kind::Bool, "", "true", "tlb_gather_mmu() and tlb_finish_mmu() count the gathers open on the mm in mm->tlb_flush_pending (atomic_inc(), atomic_read() by mm_tlb_flush_nested(), atomic_dec(): a line every thread's gathers share), and tlb_finish_mmu() flushes the whole mm while another is open (99baac21e458 \"mm: fix MADV_[FREE|DONTNEED] TLB flush miss problem\", Minchan Kim, 4.13); false: neither, as before";
        zap_lru_add_drain: bool = "kernel.zap_lru_add_drain", Kind::Bool, "", "false", "free_pages_and_swap_cache() drains this CPU's LRU-add batch (lru_add_drain()) before it frees an mmu_gather's pages, as every kernel did until 1aa43598c03b \"mm: remove unnecessary calls to lru_add_drain\" (Rik van Riel, 6.14)";
        inactive_ratio: InactiveRatio = "kernel.inactive_ratio", Kind::Choice(InactiveRatio::NAMES), "", "lru_size", "when reclaim deactivates an active list (inactive_list_is_low()): zone_anon (2.6.28 to 4.9: anonymous pages while inactive x int_sqrt(10 x the zone's GiB) < active, file pages while inactive < active) or lru_size (59dc76b0d4df, 4.10: both types while inactive x int_sqrt(10 x the two lists' GiB) < active)";
        anon_lru_inactive: bool = "kernel.anon_lru_inactive", Kind::Bool, "", "true", "new anonymous pages go to the inactive anon list (lru_cache_add_inactive_or_unevictable()), so reclaim scans them twice as it does file pages, since b518154e59aa \"mm/vmscan: protect the workingset on anonymous LRU\" (Joonsoo Kim, 5.9); before, they started active";
        pagevec_size: usize = "kernel.pagevec_size", Kind::Int { min: 1, max: 64 }, "pages", "31", "PAGEVEC_SIZE: per-CPU LRU-add batch (14 in 4.x, 15 later, 31 today)";
        pcp_batch: usize = "kernel.pcp_batch", Kind::Int { min: 1, max: 1024 }, "pages", "63", "per-CPU page list refill/drain batch (zone_batchsize)";
        pcp_high: usize = "kernel.pcp_high", Kind::Int { min: 1, max: 65536 }, "pages", "378", "per-CPU page list high mark: above it, free a batch back to the buddy allocator";
        fault_around_pages: u64 = "kernel.fault_around_bytes", Kind::Size, "bytes", "64KiB", "do_fault_around(): map this much of the page cache around a read fault (3.15)" => |b: u64| (b >> 12).max(1);
        readahead_pages: u64 = "kernel.readahead_pages", Kind::Int { min: 1, max: 4096 }, "pages", "32", "mmap read-around / readahead window (ra_pages, 128 KiB)";
        pcp_drain: PcpDrain = "kernel.pcp_drain", Kind::Choice(PcpDrain::NAMES), "", "remote_no_ipi", "drain_all_pages: all_cpus (an IPI to every CPU, to 3.3), cpus_with_pages (IPIs only to CPUs holding pcp pages, 74046494ea68, 3.4), workqueue (per-CPU work items under pcpu_drain_mutex, 4.11), remote_no_ipi (the caller drains under pcp->lock, still under pcpu_drain_mutex, 6.0)";
        zone_reclaimable_progress: bool = "kernel.zone_reclaimable_progress", Kind::Bool, "", "false", "try_to_free_pages() that freed nothing still reports progress while a zone is reclaimable (pages_scanned < 6 x its LRU pages), so the allocator retries and drains instead of calling the OOM killer, and kswapd gives such a zone up (all_unreclaimable() / zone_reclaimable(), to 4.6; gone with the OOM-detection rework 0a0337e0d1d1, 4.7)";
        kswapd_reclaim_limit: bool = "kernel.kswapd_reclaim_limit", Kind::Bool, "", "true", "a balance_pgdat() pass of kswapd (lru_size >> priority pages) ends once it freed the high watermark's worth, and raises the priority only if it scanned less than that (kswapd_shrink_zone()'s nr_to_reclaim: Mel Gorman, \"mm: vmscan: limit the number of pages kswapd reclaims at each priority\", 3.11); before, nr_to_reclaim was ULONG_MAX: every pass scans its whole share and the priority rises after each";
        thp: Thp = "kernel.thp", Kind::Choice(Thp::NAMES), "", "never", "/sys/kernel/mm/transparent_hugepage/enabled for the private anonymous regions reclaim tracks: never, or always (a write fault at an empty, aligned 2 MiB inside the region maps a huge page, do_huge_pmd_anonymous_page(); reclaim splits it in add_to_swap(), its tails onto the LRU in order as before 3.10: mm/thp.rs)";
        isolated_iofs_eighth: bool = "kernel.isolated_iofs_eighth", Kind::Bool, "", "true", "too_many_isolated() compares a direct reclaimer that may do I/O and enter the filesystem (every one the scenarios have) against an eighth of the inactive list, so that GFP_NOIO/GFP_NOFS callers can isolate more (3cf23841b4b7, Fengguang Wu, 3.8); before, against the whole list";
        oom_select: OomSelect = "kernel.oom_select", Kind::Choice(OomSelect::NAMES), "", "pages_last", "the OOM killer's points and tie rule (mm/oom_kill.rs): permille_first (thousandths of memory, at least 1, the first of equals in fork order; 2.6.36 to 3.4), pages_first (pages, the first of equals; a7f638f999ff, 3.5, and d49ad9355420); both kill the chosen task's child with the most points instead, if any (to bbbe480297, 5.1); pages_last (pages, the last of equals, since a 2019 patch removed d49ad9355420's check, by 5.8; no child sacrificed)";
        isolated_throttle: IsolatedThrottle = "kernel.isolated_throttle", Kind::Choice(IsolatedThrottle::NAMES), "", "reclaim_throttle", "a direct reclaimer finding more pages isolated than left on the inactive list (too_many_isolated): congestion_wait (sleep HZ/10 and check again: Rik van Riel, 2.6.32, to 5.15) or reclaim_throttle (sleep once, up to HZ/50, woken when a reclaimer sees the node below the limit, then scan nothing: Mel Gorman, 5.16)";
    }
}

/// What mm keeps per task: the kernel's task_struct fields (tlb_ubc, TIF_MEMDIE), the mmu_gather
/// on the syscall's stack, and the reclaim and migrate_pages() calls in progress.
#[derive(Debug, Default)]
pub struct TaskMm {
    /// The task's mmu_gather (tlb_gather_mmu() .. tlb_finish_mmu()).
    pub gather: MmuGather,
    /// Page reclaim state, including the batched-flush tlb_ubc.
    pub reclaim: vmscan::Reclaim,
    /// The migrate_pages() call in progress.
    pub migrate: migrate::Migration,
    /// Pages the task's own code keeps using while it reads file pages (its text and stack):
    /// (first page, count). A full TLB flush makes them miss again.
    pub working_set: (u64, u32),
    /// Pages oom_badness() counts for this task (its footprint; 0: never an OOM victim).
    pub rss: u64,
    /// The task that forked it (real_parent), for oom_kill_process()'s child sacrifice.
    pub real_parent: Option<TaskId>,
}

pub struct Memory {
    pub cfg: MmConfig,
    pub mms: Vec<Mm>,
    pub tables: Vec<PteTable>,
    free_tables: Vec<u32>,
    pub frames: Frames,
    pub files: Vec<File>,
    /// Per frame: what `struct page` says, for page-cache pages.
    pub page: Vec<filemap::PageInfo>,
    /// Per node: the file LRU lists.
    pub lru: Vec<lru::NodeLru>,
    /// Per frame of a PG_ANON_PRIVATE page on the LRU: its anon list neighbours [prev, next]
    /// (toward the head, toward the tail; NONE at an end), as `struct page`'s lru links them.
    pub anon_lru: Vec<[u32; 2]>,
    /// Per CPU: the LRU-add pagevec.
    pub pagevec: Vec<Vec<u32>>,
    /// Per task (by task id): what mm keeps for it.
    pub tasks: Vec<TaskMm>,
    /// Per task (by task id), TIF_MEMDIE: oom_kill_process() chose it; it exits at its next user
    /// step. Apart from `tasks`: every step of every task asks, so it stays in the cache.
    pub oom_killed: Vec<bool>,
    /// Tasks the OOM killer chose that may not have exited yet (TIF_MEMDIE).
    pub oom_victims: Vec<usize>,
    /// The OOM killer's candidates in the order they were forked: the task list (copy_process()
    /// adds each task at the tail of init_task.tasks), which select_bad_process() walks.
    pub tasklist: Vec<usize>,
    /// Per node: its kswapd task, if the workload reclaims.
    pub kswapd: Vec<Option<usize>>,
    /// When kswapd was first woken (the start of the steady phase).
    pub reclaim_started: Option<crate::engine::Time>,
    /// drain_all_pages() in its workqueue era.
    pub drain: drain::DrainState,
    /// The PTE locks of the reclaim model's mappings, and their waiting CPUs (mm/ptl.rs).
    pub ptl: ptl::PteLocks,
    /// Tasks asleep in migration_entry_wait(), with the frame they wait for.
    pub migration_waiters: Vec<(u32, usize)>,
    /// The swap device's writes in flight (mm/page_io.rs).
    pub swap_io: page_io::SwapDevice,
}

impl Memory {
    /// `hz`: CONFIG_HZ, which times each CPU's vmstat folds.
    pub fn new(cfg: MmConfig, nodes: usize, bytes_per_node: u64, ncpus: usize, hz: u64) -> Memory {
        Memory {
            cfg,
            mms: Vec::new(),
            tables: Vec::new(),
            free_tables: Vec::new(),
            // Frame ZERO_PFN is the shared zero page.
            frames: Frames::new(nodes, bytes_per_node, ncpus, ZERO_PFN, hz),
            files: Vec::new(),
            page: Vec::new(),
            anon_lru: Vec::new(),
            lru: (0..nodes).map(|_| lru::NodeLru::default()).collect(),
            pagevec: vec![Vec::new(); ncpus],
            tasks: Vec::new(),
            oom_killed: Vec::new(),
            oom_victims: Vec::new(),
            tasklist: Vec::new(),
            kswapd: vec![None; nodes],
            reclaim_started: None,
            drain: drain::DrainState::new(ncpus),
            ptl: ptl::PteLocks::new(ncpus),
            migration_waiters: Vec::new(),
            swap_io: page_io::SwapDevice::default(),
        }
    }

    /// mm_alloc(): the mm's id (the arch's init_new_context() gives it its context).
    pub fn new_mm(&mut self) -> usize {
        self.mms.push(Mm {
            vmas: Vec::new(),
            pmds: Vec::new(),
            tlb_flush_pending: 0,
            flush_pending_line: SpinLock::default(),
            tlb_flush_batched: false,
            mmap_lock: mmap_lock::MmapLock::default(),
            users: 0,
            vma_locks: Vec::new(),
            free_vma_locks: Vec::new(),
            page_table_lock: NONE,
        });
        self.mms.len() - 1
    }

    /// A file of `pages` pages; with `cached_on`, all of them in the page cache on that node (the
    /// node of the CPU that wrote them).
    pub fn new_file(&mut self, pages: u64, cached_on: Option<usize>) -> u32 {
        let mut f = File {
            pages: vec![NONE; pages as usize],
            mapper: None,
            anon: false,
            ptl_base: 0,
            pmd: Vec::new(),
        };
        if let Some(node) = cached_on {
            for p in f.pages.iter_mut() {
                *p = self.frames.alloc_on(node);
            }
        }
        self.files.push(f);
        (self.files.len() - 1) as u32
    }

    /// A new file of `pages` pages, none cached, mapped MAP_SHARED and read-only by `mm`, as the
    /// one mapping reclaim unmaps its pages from. Returns the mapping's first page.
    pub fn map_new_file(&mut self, mm: usize, pages: u64) -> u64 {
        self.map_region(mm, pages, false)
    }

    /// A private anonymous region of `pages` pages for reclaim workloads: its pages are tracked
    /// like page-cache pages of an `anon` file (index = page offset), so rmap finds their PTE.
    pub fn map_new_anon(&mut self, mm: usize, pages: u64) -> u64 {
        self.map_region(mm, pages, true)
    }

    /// A new private anonymous page (do_anonymous_page, do_cow_fault): its `struct page` is
    /// tracked from now on (the table grows to cover it; frames come from the zones' low ends, so
    /// it stays small for workloads that never map files), PG_ANON_PRIVATE and nothing else.
    pub fn new_anon_page(&mut self, pfn: u32) {
        let i = pfn as usize;
        if i >= self.page.len() {
            let len = (i + 1)
                .next_power_of_two()
                .min(self.frames.total() as usize);
            self.page
                .resize(len.max(i + 1), filemap::PageInfo::default());
        }
        if i >= self.anon_lru.len() {
            self.anon_lru.resize(self.page.len(), [NONE; 2]);
        }
        let p = &mut self.page[i];
        (p.file, p.index, p.flags) = (NONE, 0, filemap::PG_ANON_PRIVATE);
    }

    fn map_region(&mut self, mm: usize, pages: u64, anon: bool) -> u64 {
        if self.page.len() < self.frames.total() as usize {
            // Page-cache workloads track `struct page` state for every frame.
            self.page
                .resize(self.frames.total() as usize, filemap::PageInfo::default());
        }
        let file = self.new_file(pages, None);
        self.files[file as usize].anon = anon;
        let backing = Backing::File {
            file,
            pgoff: 0,
            shared: !anon,
        };
        let start = self.mmap(mm, pages, anon, backing, false);
        let f = &mut self.files[file as usize];
        f.mapper = Some((mm, start));
        f.ptl_base = self.ptl.add_tables(start, pages);
        if anon {
            f.pmd = thp::new_pmds(self.cfg.thp, start, pages);
        }
        start
    }

    /// mmap(): place `pages` pages in the lowest gap that fits (so a munmapped range is reused,
    /// as the kernel's top-down search reuses it); lengths that are whole PMDs get PMD alignment,
    /// as anonymous mappings do since 6.7 (thp_get_unmapped_area). Adjacent compatible VMAs merge.
    pub fn mmap(
        &mut self,
        mm: usize,
        pages: u64,
        write: bool,
        backing: Backing,
        misalign: bool,
    ) -> u64 {
        let m = &mut self.mms[mm];
        let aligned = pages % PTRS_PER_PTE == 0 || misalign;
        let place = |at: u64| {
            if aligned {
                at.next_multiple_of(PTRS_PER_PTE) + misalign as u64
            } else {
                at
            }
        };
        let mut start = place(MMAP_BASE_VPN);
        for v in &m.vmas {
            if v.start >= start + pages {
                break;
            }
            if v.end > start {
                start = place(v.end);
            }
        }
        let vma = Vma {
            start,
            end: start + pages,
            write,
            backing,
            lock: m.new_vma_lock(),
        };
        let i = m.vmas.partition_point(|v| v.start < start);
        m.vmas.insert(i, vma);
        merge_vmas(m);
        start
    }

    pub fn alloc_table(&mut self) -> u32 {
        if let Some(t) = self.free_tables.pop() {
            return t;
        }
        self.tables.push(PteTable::default());
        (self.tables.len() - 1) as u32
    }

    pub fn free_table(&mut self, t: u32) {
        debug_assert_eq!(self.tables[t as usize].present, 0);
        self.free_tables.push(t);
    }

    /// The PTE table covering `vpn`, if any.
    pub fn table_of(&self, mm: usize, vpn: u64) -> Option<u32> {
        let i = (vpn / PTRS_PER_PTE).checked_sub(MMAP_BASE_VPN / PTRS_PER_PTE)? as usize;
        self.mms[mm].pmds.get(i).copied().filter(|&t| t != NONE)
    }

    pub fn pte(&self, mm: usize, vpn: u64) -> Pte {
        match self.table_of(mm, vpn) {
            Some(t) => self.tables[t as usize].pte[(vpn % PTRS_PER_PTE) as usize],
            None => Pte::NONE,
        }
    }

    /// __pte_alloc(): the PTE table for `vpn`, allocated if missing.
    pub fn table_alloc(&mut self, mm: usize, vpn: u64) -> u32 {
        let i = (vpn / PTRS_PER_PTE - MMAP_BASE_VPN / PTRS_PER_PTE) as usize;
        if self.mms[mm].pmds.len() <= i {
            self.mms[mm].pmds.resize(i + 1, NONE);
        }
        if self.mms[mm].pmds[i] == NONE {
            let t = self.alloc_table();
            self.mms[mm].pmds[i] = t;
        }
        self.mms[mm].pmds[i]
    }

    pub fn vma_at(&self, mm: usize, vpn: u64) -> Option<&Vma> {
        let v = &self.mms[mm].vmas;
        let i = v.partition_point(|x| x.end <= vpn);
        v.get(i).filter(|x| x.start <= vpn)
    }
}

/// Split VMAs so that `at` is a boundary (__split_vma).
fn split_at(m: &mut Mm, at: u64) {
    let i = m.vmas.partition_point(|v| v.end <= at);
    if let Some(v) = m.vmas.get(i).copied() {
        if v.start < at && at < v.end {
            let mut hi = v;
            hi.start = at;
            hi.lock = m.new_vma_lock();
            if let Backing::File {
                file,
                pgoff,
                shared,
            } = v.backing
            {
                hi.backing = Backing::File {
                    file,
                    pgoff: pgoff + (at - v.start),
                    shared,
                };
            }
            m.vmas[i].end = at;
            m.vmas.insert(i + 1, hi);
        }
    }
}

fn merge_vmas(m: &mut Mm) {
    let mut i = 0;
    while i + 1 < m.vmas.len() {
        if m.vmas[i].mergeable(&m.vmas[i + 1]) {
            // vma_merge(): the lower VMA grows over the upper one, which is freed.
            m.vmas[i].end = m.vmas[i + 1].end;
            m.remove_vmas(i + 1..i + 2);
        } else {
            i += 1;
        }
    }
}
