//! Exact IPI and flush counts per syscall for thread layouts on the 48-CPU profile. Each
//! expectation is derived from the kernel rules stated beside it, not from a previous run.

use ipisim_core::{run, RunRequest};
use serde_json::Value;

struct Counts {
    calls: u64,
    tlb: u64,
    tlb_per_cpu: Vec<u64>,
    remote_flush: u64,
    local_one: u64,
    local_all: u64,
    wrong_cpu: u64,
    trace: serde_json::Map<String, Value>,
}

impl Counts {
    fn tp(&self, name: &str) -> u64 {
        self.trace.get(name).map_or(0, |v| v.as_u64().unwrap())
    }
}

fn shootdown(kernel: &str, op: &str, batch: u64, remote: &str, threads: usize) -> Counts {
    let req = RunRequest {
        scenario: "shootdown".into(),
        machine: Some("xeon-4n-48c-64g".into()),
        kernel: Some(kernel.into()),
        sets: vec![
            ("op".into(), op.into()),
            ("batch".into(), batch.to_string()),
            ("remote".into(), remote.into()),
            ("remote_threads".into(), threads.to_string()),
            ("pages".into(), "512".into()),
        ],
        seed: 1,
    };
    let j = run(&req).unwrap().json;
    let n = |v: &Value| v.as_u64().unwrap();
    let tlb_per_cpu: Vec<u64> = j["interrupts"]["TLB"]
        .as_array()
        .unwrap()
        .iter()
        .map(n)
        .collect();
    Counts {
        calls: n(&j["ops"]["syscalls"]),
        tlb: n(&j["ops"]["tlb_shootdowns"]),
        tlb_per_cpu,
        remote_flush: n(&j["vmstat"]["nr_tlb_remote_flush"]),
        local_one: n(&j["vmstat"]["nr_tlb_local_flush_one"]),
        local_all: n(&j["vmstat"]["nr_tlb_local_flush_all"]),
        wrong_cpu: n(&j["tracepoints"]["tlb:tlb_flush reason=remote wrong CPU (5)"]),
        trace: j["tracepoints"].as_object().unwrap().clone(),
    }
}

const BATCHES: [u64; 4] = [1, 33, 34, 512];
const THREADS: [usize; 4] = [1, 2, 12, 47];

fn calls(batch: u64) -> u64 {
    512u64.div_ceil(batch)
}

/// Tracepoints on 6.18 with busy threads, per call: one `remote ipi send` from
/// native_flush_tlb_multi(), one `remote shootdown` per target, and the IPI itself traced by
/// send_call_function_single_ipi() (one target) or send_call_function_ipi_mask() (several).
#[test]
fn busy_tracepoints_per_call() {
    for k in THREADS {
        let c = shootdown("linux-6.18", "madvise", 1, "busy", k);
        let ctx = format!("threads={k}");
        let (single, mask) = if k == 1 { (c.calls, 0) } else { (0, c.calls) };
        assert_eq!(c.tp("ipi:ipi_send_cpu"), single, "{ctx}");
        assert_eq!(c.tp("ipi:ipi_send_cpumask"), mask, "{ctx}");
        assert_eq!(
            c.tp("tlb:tlb_flush reason=remote ipi send (4)"),
            c.calls,
            "{ctx}"
        );
        assert_eq!(
            c.tp("tlb:tlb_flush reason=remote shootdown (1)"),
            c.calls * k as u64,
            "{ctx}"
        );
        assert_eq!(c.tp("csd:csd_queue_cpu"), c.calls * k as u64, "{ctx}");
    }
}

/// Busy threads run the mm: every call that changed a PTE IPIs each of them once, whatever the op.
#[test]
fn busy_threads_get_one_ipi_per_call_each() {
    for kernel in ["linux-6.18", "linux-4.3"] {
        for op in ["madvise", "munmap", "mprotect"] {
            for batch in BATCHES {
                for k in THREADS {
                    let c = shootdown(kernel, op, batch, "busy", k);
                    let ctx = format!("{kernel} {op} batch={batch} threads={k}");
                    assert_eq!(c.calls, calls(batch), "{ctx}");
                    assert_eq!(c.tlb, c.calls * k as u64, "{ctx}");
                    assert_eq!(
                        c.remote_flush, c.calls,
                        "{ctx}: one flush_tlb_multi per call"
                    );
                    // Each remote CPU got exactly one per call; CPU 0 (the initiator) none.
                    assert_eq!(c.tlb_per_cpu[0], 0, "{ctx}");
                    for cpu in 1..=k {
                        assert_eq!(c.tlb_per_cpu[cpu], c.calls, "{ctx} cpu {cpu}");
                    }
                    assert!(c.tlb_per_cpu[k + 1..].iter().all(|&x| x == 0), "{ctx}");
                }
            }
        }
    }
}

/// The initiator's own flush: page by page up to the 33-page ceiling, a full flush above it,
/// decided per call (the last call may be short). munmap's last call also frees the PTE table,
/// which widens its range to the whole 2 MiB PMD, so it is a full flush.
#[test]
fn local_flush_follows_the_33_page_ceiling() {
    for batch in BATCHES {
        let sizes: Vec<u64> = (0..calls(batch))
            .map(|i| batch.min(512 - i * batch))
            .collect();
        let one: u64 = sizes.iter().filter(|&&n| n <= 33).sum();
        let all = sizes.iter().filter(|&&n| n > 33).count() as u64;
        let c = shootdown("linux-6.18", "mprotect", batch, "busy", 1);
        assert_eq!(
            (c.local_one, c.local_all),
            (one, all),
            "mprotect batch={batch}"
        );
        let last = *sizes.last().unwrap();
        let m = shootdown("linux-6.18", "munmap", batch, "busy", 1);
        let (one, all) = if last <= 33 {
            (one - last, all + 1)
        } else {
            (one, all)
        };
        assert_eq!(
            (m.local_one, m.local_all),
            (one, all),
            "munmap batch={batch}"
        );
    }
}

/// 6.18: idle (lazy) CPUs stay in mm_cpumask but get no IPI, unless page tables are freed.
/// munmap frees the region's PTE table on its last call; MADV_DONTNEED frees it (PT_RECLAIM) only
/// when one call covers the whole 2 MiB table. Such a flush IPIs every lazy CPU once, and each
/// switches to init_mm; the next one would find it on the wrong mm and clear its bit.
#[test]
fn sleeping_threads_on_6_18_see_only_page_table_frees() {
    for batch in BATCHES {
        for k in THREADS {
            let ctx = format!("batch={batch} threads={k}");
            assert_eq!(
                shootdown("linux-6.18", "mprotect", batch, "sleeping", k).tlb,
                0,
                "mprotect {ctx}"
            );
            let frees_table = if batch == 512 { k as u64 } else { 0 };
            assert_eq!(
                shootdown("linux-6.18", "madvise", batch, "sleeping", k).tlb,
                frees_table,
                "madvise {ctx}"
            );
            let m = shootdown("linux-6.18", "munmap", batch, "sleeping", k);
            assert_eq!(m.tlb, k as u64, "munmap {ctx}");
            assert_eq!(m.wrong_cpu, 0, "munmap {ctx}");
        }
    }
}

/// 4.3: lazy CPUs get the first flush IPI and leave_mm() clears their bit, so each sleeping
/// thread's CPU receives exactly one IPI over the whole run, whatever the op.
#[test]
fn sleeping_threads_on_4_3_leave_the_mm_after_one_ipi() {
    for op in ["madvise", "munmap", "mprotect"] {
        for batch in BATCHES {
            for k in THREADS {
                let c = shootdown("linux-4.3", op, batch, "sleeping", k);
                assert_eq!(c.tlb, k as u64, "{op} batch={batch} threads={k}");
                assert!(
                    c.tlb_per_cpu[1..=k].iter().all(|&x| x == 1),
                    "{op} batch={batch} threads={k}"
                );
            }
        }
    }
}

/// No other thread, no other CPU in mm_cpumask: never an IPI.
#[test]
fn no_remote_threads_no_ipis() {
    for kernel in ["linux-6.18", "linux-4.3"] {
        for op in ["madvise", "munmap", "mprotect"] {
            for batch in BATCHES {
                let c = shootdown(kernel, op, batch, "none", 0);
                assert_eq!(
                    (c.tlb, c.remote_flush),
                    (0, 0),
                    "{kernel} {op} batch={batch}"
                );
            }
        }
    }
}

/// The same inputs give the same bytes.
#[test]
fn results_are_byte_identical() {
    let req = |seed| RunRequest {
        scenario: "will-it-scale/tlb_flush2".into(),
        machine: Some("xeon-4n-48c-64g".into()),
        kernel: None,
        sets: vec![
            ("tasks".into(), "48".into()),
            ("duration".into(), "2ms".into()),
        ],
        seed,
    };
    let a = run(&req(7)).unwrap().json.to_string();
    let b = run(&req(7)).unwrap().json.to_string();
    assert_eq!(a, b);
}
