//! The functions simulated CPU time is charged to, named as `perf report` would show them.

use super::named_enum;

named_enum! {
    Func {
        User = "[user]",
        Syscall = "entry_SYSCALL_64",
        Schedule = "__schedule",
        SwitchMm = "switch_mm_irqs_off",
        HandleMmFault = "handle_mm_fault",
        ClearPage = "clear_page_erms",
        CopyPage = "copy_page",
        VmaOps = "__split_vma",
        ZapPteRange = "zap_pte_range",
        ChangePteRange = "change_pte_range",
        FreePgtables = "free_pgtables",
        FlushTlbMmRange = "flush_tlb_mm_range",
        SmpCallFunctionManyCond = "smp_call_function_many_cond",
        SendIpi = "default_send_IPI_mask_sequence_phys",
        CsdLockWait = "csd_lock_wait",
        CallFunctionInterrupt = "call_function_interrupt",
        FlushSmpCallFunctionQueue = "__flush_smp_call_function_queue",
        FlushTlbFunc = "flush_tlb_func",
        NativeFlushTlbLocal = "native_flush_tlb_local",
        NativeFlushTlbOneUser = "native_flush_tlb_one_user",
        FilemapFault = "filemap_map_pages",
        DoAnonymousPage = "do_anonymous_page",
        AddToSwap = "add_to_swap",
        Readahead = "__do_page_cache_readahead",
        PageAlloc = "get_page_from_freelist",
        FreePage = "free_hot_cold_page",
        LruAdd = "__pagevec_lru_add_fn",
        IsolateLruPages = "isolate_lru_pages",
        PutbackLruPages = "putback_inactive_pages",
        PageReferenced = "page_referenced",
        TryToUnmap = "try_to_unmap_one",
        RemoveMapping = "__remove_mapping",
        Pageout = "pageout",
        SpinLock = "native_queued_spin_lock_slowpath",
        FlushTlbBatchPages = "percpu_flush_tlb_batch_pages",
        DrainPages = "drain_pages",
    }
}
