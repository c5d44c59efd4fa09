//! Intel RAR, a what-if (Rik van Riel's RFC v4, 2025, unmerged): the same global ASIDs as 6.15's
//! INVLPGB, and a flush of a process that has one goes to the CPUs of its mm_cpumask as a RAR,
//! which their microcode handles with no interrupt; reclaim's batch flush is one RAR of every
//! PCID to the batch's CPUs. On the Milan with `machine.rar` in place of `machine.invlpgb`.

mod common;

use common::{broadcast as b, remote_flushes, request, run_json, tlb, tlb_flush2_threads};
use ipisim_core::run;
use serde_json::Value;

const MILAN: &str = "amd-milan-72c";

/// The CPU and the kernel of the what-if.
const RAR: [(&str, &str); 3] = [
    ("machine.rar", "true"),
    ("machine.invlpgb", "false"),
    ("kernel.broadcast_tlb_flush", "rar"),
];

/// tlb_flush2 threads on the Milan with linux-6.15, the kernel of the what-if.
fn wis(tasks: usize, loops: u64, extra: &[(&str, &str)]) -> Value {
    tlb_flush2_threads("linux-6.15", tasks, loops, extra)
}

/// Until the process has its global ASID the RAR kernel is the INVLPGB kernel (the same IPIs);
/// after it, every flush of the INVLPGB kernel is one RAR call here, with no interrupt. At 4
/// threads every RAR reaches the other 3 CPUs (the ASID needs all 4 running); at 8, the RARs
/// before the last threads first ran reach fewer (as simulated: 55,682 signals, not 7 x 7990;
/// 55,680 and 7993 before each gather took mm->tlb_flush_pending's line, 2026-11-30).
#[test]
fn from_four_threads_flushes_are_rars() {
    for (n, signals) in [(4, 3 * 3978), (8, 55_682)] {
        let rar = wis(n, 1000, &RAR);
        let invlpgb = wis(n, 1000, &[]);
        assert_eq!(rar["ops"]["iterations"], 1000 * n as u64);
        assert_eq!(b(&rar, "global_asids_allocated"), 1, "{n} threads");
        assert_eq!(
            b(&rar, "broadcast_flushes"),
            b(&invlpgb, "broadcast_flushes")
        );
        assert_eq!(b(&rar, "rar_calls"), b(&rar, "broadcast_flushes"));
        assert_eq!(b(&rar, "rar_signals"), signals, "{n} threads");
        assert_eq!(
            remote_flushes(&rar),
            remote_flushes(&invlpgb),
            "{n} threads"
        );
        assert_eq!(tlb(&rar), tlb(&invlpgb), "{n} threads");
        // No INVLPGB, no TLBSYNC: the reset at the first allocation is a flush of every TLB.
        assert_eq!((b(&rar, "invlpgb"), b(&rar, "tlbsync")), (0, 0));
        assert_eq!(rar["check"]["violations"], 0);
    }
}

/// Reclaim's batch flush (arch_tlbbatch_flush): one rar_full_flush() of the batch's CPUs, no IPI;
/// as simulated, its 224 batches (two a 32-page pass: a folio batch of 31 and the end,
/// bc2ff4cbc329) signal the same CPUs that 6.14's IPIs interrupt.
#[test]
fn reclaim_batches_flush_everything_by_rar() {
    let sets = [("processes", "7"), ("memory", "file")];
    let with = |extra: &[(&str, &str)]| {
        let mut all = sets.to_vec();
        all.extend_from_slice(extra);
        run_json("reclaim", MILAN, "linux-6.15", &all)
    };
    let j = with(&RAR);
    assert_eq!((remote_flushes(&j), tlb(&j)), (0, 0));
    assert_eq!((b(&j, "batch_flushes"), b(&j, "rar_calls")), (224, 224));
    assert_eq!(b(&j, "rar_signals"), 332);
    assert_eq!(j["check"]["violations"], 0);
    let old = run_json("reclaim", MILAN, "linux-6.14", &sets);
    assert_eq!(tlb(&old), 332);
}

/// The checker stays clean with RAR: tlb_flush2 threads over 20 seeds, and reclaim's four shapes
/// (file and anon, busy and sleeping readers, kswapd) over 25 each, with timing jitter and
/// shuffled placement.
#[test]
fn the_checker_is_clean_with_rar_over_seeds() {
    let perturb = [("sched.jitter", "0.05"), ("sched.placement", "shuffled")];
    for seed in 1..=20u64 {
        let mut sets = vec![("mode", "thread"), ("tasks", "8"), ("loops", "300")];
        sets.extend_from_slice(&RAR);
        sets.extend_from_slice(&perturb);
        let mut req = request("will-it-scale/tlb_flush2", MILAN, "linux-6.15", &sets);
        req.seed = seed;
        let j = run(&req).unwrap().json;
        assert_eq!(j["check"]["violations"], 0, "seed {seed}: {}", j["check"]);
    }
    let runs = common::reclaim_checker_clean_over_seeds(&[MILAN], &["linux-6.15"], &RAR);
    assert_eq!(runs, 100);
}

/// Without the CPU feature the RAR kernel flushes by IPI, exactly as 6.14.
#[test]
fn without_the_cpu_feature_rar_is_ipis() {
    let sets = [
        ("machine.invlpgb", "false"),
        ("kernel.broadcast_tlb_flush", "rar"),
    ];
    let j = wis(8, 300, &sets);
    let old = tlb_flush2_threads("linux-6.14", 8, 300, &[]);
    assert_eq!(j["elapsed_s"], old["elapsed_s"]);
    assert_eq!(tlb(&j), tlb(&old));
}
