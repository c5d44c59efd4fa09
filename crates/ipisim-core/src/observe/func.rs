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
    }
}
