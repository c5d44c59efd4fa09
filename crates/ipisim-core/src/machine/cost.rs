//! The cost table: one entry per physical operation, in cycles, each with the source it came from.
//! Profiles must give every entry (value and source); nothing has a silent default.

use crate::engine::Time;

macro_rules! cost_table {
    ($($variant:ident = $name:literal : $doc:literal,)*) => {
        /// A physical operation with a cost. Index [`Costs`] with it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Cost { $($variant,)* }

        /// Declaration order = the order of [`Costs`]: (operation, name in `[cost]`, what it is).
        pub const COSTS: &[(Cost, &str, &str)] = &[$((Cost::$variant, $name, $doc),)*];

        /// The names of [`COSTS`], in its order: what resolution checks a profile's `[cost]` against.
        pub const COST_NAMES: &[&str] = &[$($name,)*];
    };
}

cost_table! {
    Syscall = "syscall": "syscall entry plus exit, user to kernel and back, with the machine's mitigations",
    ContextSwitch = "context_switch": "scheduler switch between two tasks, not counting switch_mm's TLB work",
    ThreadCreate = "thread_create": "creating a thread or process (clone) until it runs on its CPU",
    IrqEntryExit = "irq_entry_exit": "taking an interrupt and returning from it: entry, APIC EOI, exit",
    IpiSend = "ipi_send": "sending one IPI: one ICR write (x2APIC WRMSR; a VM exit in a guest)",
    IpiWireNode = "ipi_wire_node": "from the ICR write to the target entering its handler, same node",
    IpiWireRemote = "ipi_wire_remote": "the same, target on another node",
    IdleWakeup = "idle_wakeup": "extra delay before a halted (HLT) idle CPU runs an interrupt",
    LineSmt = "line_smt": "one cache-line transfer between SMT siblings",
    LineLlc = "line_llc": "one cache-line transfer between cores that share a last-level cache (machine.llc_cores)",
    LineNode = "line_node": "one cache-line transfer between cores of one node",
    LineRemote = "line_remote": "one cache-line transfer between nodes",
    Invlpg = "invlpg": "one INVLPG, a single-page TLB flush",
    Cr3Flush = "cr3_flush": "a full TLB flush by CR3 write (direct cost, refills not included)",
    TlbMiss = "tlb_miss": "a TLB miss whose page walk hits in the caches",
    FlushTlbFunc = "flush_tlb_func": "flush_tlb_func's own work on one CPU besides INVLPGs or the CR3 write",
    CsdQueue = "csd_queue": "queueing one csd for one target: csd_lock and llist_add, on the sender",
    PteZap = "pte_zap": "zapping one present PTE and freeing its anonymous page (zap_pte_range)",
    PteProtect = "pte_protect": "changing one PTE's protection (change_pte_range)",
    VmaOp = "vma_op": "VMA lookup, split or merge and mmap_lock, once per madvise/munmap/mprotect call",
    MunmapVma = "munmap_vma": "munmap's VMA teardown besides vma_op: detach and free the VMA, the maple tree store, unmap_region's setup",
    PmdZap = "pmd_zap": "zap_huge_pmd() besides any flush or IPI: clear one huge PMD, drop its rmap and counters, free the 2 MiB page and its deposited page table",
    TlbiIs = "tlbi_is": "issuing one broadcast TLBI ... IS with the dsb(ishst) before it, not waiting for its completion (arm64; x86 and powerpc have none)",
    DsbIsh = "dsb_ish": "a dsb(ish) with no TLBI outstanding on this CPU: the barrier alone (arm64)",
    DsbIshCpu = "dsb_ish_cpu": "a dsb(ish) that waits for this CPU's outstanding TLBIs: the wait per CPU of the inner-shareable domain (every online CPU) (arm64)",
    DsbIshTlbi = "dsb_ish_tlbi": "the same wait, per TLBI outstanding on this CPU (arm64)",
    SfenceVma = "sfence_vma": "one local sfence.vma of one page in one ASID (RISC-V; others have none)",
    SfenceVmaAll = "sfence_vma_all": "one local sfence.vma of a whole ASID or of every translation (RISC-V)",
    TlbRefillAll = "tlb_refill_all": "a hart's refill of the translations it uses next after its whole TLB was emptied, paid once after a flush that emptied it (RISC-V; others: unused)",
    SbiEcall = "sbi_ecall": "one SBI RFENCE call (__sbi_rfence_v02_call): the ecall into M-mode firmware and back, with the firmware's request setup (RISC-V)",
    SbiIpiSend = "sbi_ipi_send": "the firmware's IPI to one remote hart of an RFENCE request: queue the request, write the hart's MSIP (RISC-V)",
    SbiRfenceWait = "sbi_rfence_wait": "the caller's wait in the firmware after its IPIs until every remote hart has trapped to M-mode, run its sfence.vma and acknowledged (RISC-V)",
    Tlbie = "tlbie": "one broadcast TLB invalidation of a range or PID with its eieio; tlbsync; ptesync (powerpc radix; x86 has none)",
    Invlpgb = "invlpgb": "issuing one INVLPGB on the sending CPU (AMD broadcast invalidation of an ASID's range or all of it), not waiting for it; x86 without INVLPGB: unused",
    Tlbsync = "tlbsync": "from an INVLPGB's issue until every CPU has dropped the translations it names: the longest a TLBSYNC right after it waits (AMD); x86 without INVLPGB: unused",
    GuestExit = "guest_exit": "an interrupt or fault taken while a vCPU runs in guest mode: exit to the host and enter the guest again (KVM)",
    PgtableFree = "pgtable_free": "freeing one page-table page",
    FaultAnon = "fault_anon": "an anonymous page fault, not counting clearing the page",
    FaultCow = "fault_cow": "a write fault on a private file mapping that copies the page-cache page into a new anonymous page (do_cow_fault, wp_page_copy), not counting the copy",
    FaultFile = "fault_file": "a page fault that maps one page already in the page cache",
    FaultAroundPage = "fault_around_page": "each further page-cache page fault-around maps in the same fault (filemap_map_pages)",
    PageClear = "page_clear": "clearing one 4 KiB page",
    PageCopy = "page_copy": "copying one 4 KiB page",
    PageCopyCold = "page_copy_cold": "copying a 4 KiB page none of whose lines the copying CPU has cached (copy_page() of a page picked from a working set far beyond the LLC: migration's folio_copy)",
    ReclaimEmpty = "reclaim_empty": "a direct reclaim call that frees nothing: its 13 priority passes (DEF_PRIORITY 12 down to 0) over the zones and the shrinkers, none giving a page",
    UserTouch = "user_touch": "a user store to one page plus loop overhead, TLB hit",
    DramAccess = "dram_access": "a user load or store that misses every cache (a random access to a large region)",
    UserReadPage = "user_read_page": "user code reading a whole 4 KiB page 8 bytes at a time (usemem --readonly)",
    LruPage = "lru_page": "moving one page on or off an LRU list, under lru_lock",
    BuddyPage = "buddy_page": "moving one page between a pcp list and the buddy free lists, under zone->lock",
    PagecacheInsert = "pagecache_insert": "add_to_page_cache: one page into a file's radix tree, with accounting",
    PagecacheDelete = "pagecache_delete": "__remove_mapping: one clean page out of the radix tree",
    RmapWalk = "rmap_walk": "one rmap walk of a file page with one mapping (i_mmap lock, interval tree, PTE lookup)",
    Membarrier = "membarrier": "sys_membarrier's own work before membarrier_private_expedited's mm_users check, besides the syscall",
    MembarrierMask = "membarrier_mask": "membarrier_private_expedited: cpumask alloc, cpus_read_lock, the rq->curr scan, two smp_mb(), no IPI",
}

pub use crate::config::{CostEntry, MAX_CYCLES};
/// The longest one operation can take, in picoseconds (10 s): MAX_CYCLES at the slowest clock.
const MAX_COST_PS: f64 = 1e13;

/// The costs in picoseconds at the machine's clock rate; what the hot path reads.
#[derive(Debug, Clone)]
pub struct Costs([Time; COSTS.len()]);

impl Costs {
    /// `entries` in [`COSTS`] order; Err(i) when cost i would not fit in [0, 10 s].
    pub fn new(entries: &[CostEntry], ghz: f64) -> Result<Costs, usize> {
        assert_eq!(entries.len(), COSTS.len());
        let mut ps = [0; COSTS.len()];
        for (i, (slot, e)) in ps.iter_mut().zip(entries).enumerate() {
            let t = (e.cycles * 1000.0 / ghz).round();
            // Refused, not saturated: `as` would clamp silently, and sums of it would wrap.
            if !(0.0..=MAX_COST_PS).contains(&t) {
                return Err(i);
            }
            *slot = t as Time;
        }
        Ok(Costs(ps))
    }
}

impl std::ops::Index<Cost> for Costs {
    type Output = Time;
    fn index(&self, c: Cost) -> &Time {
        &self.0[c as usize]
    }
}
