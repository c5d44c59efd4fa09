//! powerpc huge-PMD clears (seed 002): which PMD operations send serializing IPIs, and to whom,
//! in each `pmd_clear` variant. 64 MiB of guest RAM is 32 huge PMDs; the vCPU threads ran on
//! every CPU, so mm_cpumask is all 128 CPUs and the munmap thread's own CPU (127) gets none.

mod common;
use common::run_json;
use serde_json::Value;

const PMDS: u64 = 32;

fn unplug(machine: &str, kernel: &str, extra: &[(&str, &str)]) -> Value {
    let mut sets = vec![("guest_ram", "64MiB")];
    sets.extend_from_slice(extra);
    run_json("qemu-guest-ram-unplug", machine, kernel, &sets)
}

fn cal(j: &Value) -> Vec<u64> {
    let row = j["interrupts"]["CAL"].as_array().unwrap();
    row.iter().map(|v| v.as_u64().unwrap()).collect()
}

#[test]
fn serialize_ipi_interrupts_every_other_cpu_of_mm_cpumask_once_per_pmd() {
    let j = unplug("power9-128c", "linux-5.7", &[]);
    let cal = cal(&j);
    assert_eq!(cal.len(), 128);
    assert!(cal[..127].iter().all(|&n| n == PMDS), "{cal:?}");
    assert_eq!(
        cal[127], 0,
        "the munmap thread's CPU is not sent its own IPI"
    );
    assert_eq!(j["ops"]["call_function_interrupts"], 127 * PMDS);
    // Only the final PID flush of the gather is a tlbie.
    assert_eq!(j["ops"]["tlbie"], 1);
}

#[test]
fn ceded_vcpus_still_get_the_serialize_ipi() {
    // Every vCPU ceded: their CPUs idle with the mm loaded (lazily), still in mm_cpumask.
    let j = unplug("power9-128c", "linux-5.7", &[("busy_vcpus", "0")]);
    assert_eq!(j["ops"]["call_function_interrupts"], 127 * PMDS);
}

#[test]
fn merged_series_sends_no_ipi_and_one_tlbie_per_pmd() {
    let j = unplug("power9-128c", "linux-5.8", &[]);
    assert!(cal(&j).iter().all(|&n| n == 0));
    assert_eq!(j["ops"]["tlbie"], PMDS + 1);
}

#[test]
fn lockless_without_the_flush_sends_nothing_per_pmd() {
    let j = unplug(
        "power9-128c",
        "linux-5.8",
        &[("kernel.pmd_clear", "lockless")],
    );
    assert!(cal(&j).iter().all(|&n| n == 0));
    assert_eq!(j["ops"]["tlbie"], 1);
    let merged = unplug("power9-128c", "linux-5.8", &[]);
    let ms = |j: &Value| j["ops"]["munmap_ms"].as_f64().unwrap();
    assert!(ms(&j) < ms(&merged));
    assert!(ms(&merged) < ms(&unplug("power9-128c", "linux-5.7", &[])));
}

#[test]
fn x86_never_serializes_pmd_clears() {
    // x86's pmdp_huge_get_and_clear_full is the generic one: only tlb_finish_mmu's flush IPIs.
    let j = unplug("xeon-4n-48c-64g", "linux-5.7", &[]);
    assert!(j["ops"]["call_function_interrupts"].as_u64().unwrap() < 48);
    assert_eq!(j["ops"]["tlbie"], 0);
}

#[test]
fn irqs_off_walks_delay_the_serialize_ipi() {
    // Busy vCPUs whose fault handler walks with IRQs off for longer hold the sender longer.
    let ms = |walk: &str| {
        let sets = [
            ("busy_vcpus", "64"),
            ("walk_irqs_off", walk),
            ("guest_fault_interval", "10us"),
        ];
        unplug("power9-128c", "linux-5.7", &sets)["ops"]["munmap_ms"]
            .as_f64()
            .unwrap()
    };
    assert!(ms("20us") > ms("1us"), "{} vs {}", ms("20us"), ms("1us"));
}

#[test]
fn a_failed_table_batch_allocation_ipis_every_online_cpu_per_table() {
    // 496 GiB frees 496 PMD tables; 1 GiB frees one: tlb_remove_table_sync_one to all 127 others.
    let j = run_json(
        "qemu-guest-ram-unplug",
        "power9-128c",
        "linux-5.8",
        &[
            ("guest_ram", "3GiB"),
            ("kernel.table_batch_alloc_fails", "true"),
        ],
    );
    assert_eq!(j["ops"]["call_function_interrupts"], 3 * 127);
}

#[test]
fn the_same_run_gives_the_same_bytes() {
    let sets = [("busy_vcpus", "16"), ("guest_fault_interval", "10us")];
    let a = unplug("power9-128c", "linux-5.7", &sets).to_string();
    assert_eq!(a, unplug("power9-128c", "linux-5.7", &sets).to_string());
}
