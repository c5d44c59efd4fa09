//! The dispatch of steps, at the root: each `Step` (the explicit continuations a task executes,
//! split at the points where a kernel path can block) goes to the layer whose code runs it, so
//! that sched, which runs tasks, names none of them.

use crate::arch;
use crate::engine::{CpuId, TaskId};
use crate::mm;
use crate::sim::Sim;
use crate::smp;
use crate::step::{Outcome, SpinOn, Step};

/// Run `step` of task `t` on `cpu` (sched's task loop asks, the root answers).
pub fn exec(s: &mut Sim, cpu: CpuId, t: TaskId, step: Step) -> Outcome {
    match step {
        Step::User if s.sched.tasks[t].mm == crate::sched::KTHREAD => mm::vmscan::kthread(s, t),
        Step::User => crate::sim::next_op(s, cpu, t),
        Step::Work { func, ps, irqs_off } => {
            s.obs.stats.charge(Some(t), func, ps);
            Outcome::Busy { ps, irqs_off }
        }
        Step::Charged { ps, .. } => Outcome::Busy {
            ps,
            irqs_off: false,
        },
        Step::Syscall(sc) => mm::syscall(s, cpu, t, sc),
        Step::Touch { vpn, n, write } => mm::touch(s, cpu, t, vpn, n, write),
        Step::Guest { ps } => {
            s.obs.stats.charge_guest(t, ps);
            Outcome::Busy {
                ps,
                irqs_off: false,
            }
        }
        Step::ZapHugePmds { next, end } => mm::huge_memory::zap_huge_pmds(s, t, next, end),
        Step::SerializeAgainstPteLookup => {
            crate::arch::powerpc::serialize_against_pte_lookup(s, cpu, t)
        }
        Step::TlbRemoveTables { n } => mm::huge_memory::tlb_remove_tables(s, t, n),
        Step::TlbRemoveTableSyncOne => mm::huge_memory::tlb_remove_table_sync_one(s, cpu, t),
        Step::Zap {
            from,
            end,
            reclaim_pt,
        } => mm::zap_step(s, cpu, t, from, end, reclaim_pt),
        Step::Protect { from, end } => mm::protect_step(s, cpu, t, from, end),
        Step::FreePgtables {
            start,
            end,
            floor,
            ceiling,
        } => mm::free_pgtables(s, t, start, end, floor, ceiling),
        Step::TlbFlushMmu => mm::tlb_flush_mmu(s, t),
        Step::TlbFinishMmu => mm::tlb_finish_mmu(s, cpu, t),
        Step::TlbFlushPending { inc } => mm::tlb_flush_pending_atomic(s, cpu, t, inc),
        Step::TlbBatchPagesFlush => mm::tlb_batch_pages_flush(s, cpu, t),
        Step::FlushTlbMmRange(r) => arch::flush_tlb_mm_range(s, cpu, t, r),
        Step::FlushTlbOthers => arch::flush_tlb_others(s, cpu, t),
        Step::ConsiderGlobalAsid { mm } => arch::consider_global_asid(s, cpu, t, mm as usize),
        Step::FinishAsidTransition => arch::finish_asid_transition(s, cpu, t),
        Step::Tlbsync => arch::tlbsync(s, cpu, t),
        Step::LocalCall(f) => smp::run_local(s, cpu, t, f),
        Step::CsdLockWait => Outcome::Spin(SpinOn::CsdLockWait),
        Step::SmpCallFunctionMany => smp::deferred_call(s, cpu, t),
        Step::SendCfdIpis => smp::send_cfd_ipis(s, cpu, t),
        Step::QueueCsds => smp::queue_csds(s, cpu, t),
        Step::FileRead { vpn, n, write } => mm::filemap::file_read(s, cpu, t, vpn, n, write),
        Step::MigrationEntryWait { pfn } => mm::migrate::migration_entry_wait(s, t, pfn),
        Step::MigratePages { mm, from, to } => {
            mm::migrate::migrate_pages(s, cpu, t, mm as usize, from as usize, to as usize)
        }
        Step::MigrateUnmap => mm::migrate::unmap_batch(s, cpu, t),
        Step::MigrateMove => mm::migrate::move_batch(s, cpu, t),
        Step::FileWriteFault { vpn } => mm::filemap::file_write_fault(s, cpu, t, vpn),
        Step::FileFault { vpn } => mm::filemap::file_fault(s, cpu, t, vpn),
        Step::Readahead { file, index, n } => mm::filemap::readahead(s, cpu, t, file, index, n),
        Step::DirectReclaim { want } => mm::vmscan::direct_reclaim(s, cpu, t, want),
        Step::ShrinkNode {
            node,
            nr,
            nr_active,
        } => mm::vmscan::shrink_node(s, cpu, t, node as usize, nr as usize, nr_active as usize),
        Step::ShrinkPageList => mm::vmscan::shrink_page_list(s, cpu, t),
        Step::MadvisePageout { vpn, n } => mm::vmscan::madvise_pageout(s, cpu, t, vpn, n),
        Step::ShrinkFinish => mm::vmscan::shrink_finish(s, cpu, t),
        Step::ShrinkFreeBatch => mm::vmscan::shrink_free_batch(s, cpu, t),
        Step::SplitHugePageRefcount { head } => mm::thp::split_refcount(s, cpu, t, head),
        Step::SplitHugePageMap { head } => mm::thp::split_map(s, t, head),
        Step::Pageout { pfn } => mm::vmscan::pageout(s, cpu, t, pfn),
        Step::TryToUnmapFlush => mm::rmap::try_to_unmap_flush(s, cpu, t),
        Step::TlbUbcClear => mm::rmap::tlb_ubc_clear(s, t),
        Step::MmapWriteUnlock => mm::unlock_step(mm::mmap_write_unlock(s, cpu, t)),
        Step::MmapReadUnlock => mm::unlock_step(mm::mmap_read_unlock(s, cpu, t)),
        Step::MmapWriteDowngrade => mm::unlock_step(mm::mmap_write_downgrade(s, cpu, t)),
        Step::VmaEndRead { lock } => {
            let now = s.q.now();
            mm::unlock_step(mm::vma_lock_atomic(s, cpu, t, lock, now))
        }
        Step::FaultMmapReadUnlock => mm::unlock_step(mm::mmap_read_unlock_atomic(s, cpu, t)),
        Step::PtlLock { id } => mm::ptl::lock_step(s, cpu, t, id),
        Step::PtlUnlock { id } => mm::ptl::unlock(s, t, id),
        Step::DrainAllPages => mm::drain::drain_all_pages(s, cpu, t),
        Step::OutOfMemory => mm::oom_kill::out_of_memory(s, t),
        Step::DrainWork => mm::drain::drain_work(s, cpu, t),
        Step::DrainUnlock => mm::drain::drain_unlock(s),
        Step::Membarrier => crate::sched::membarrier::sys_membarrier(s, t),
        Step::MembarrierIpis => crate::sched::membarrier::membarrier_private_expedited(s, t),
        Step::MembarrierIpiMb => crate::sched::membarrier::membarrier_ipi_mb(s, cpu, t),
    }
}
