//! Run lru-file-mmap-read once: `cargo run --release --example lru -- KERNEL SCALE [MACHINE]`.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let req = ipisim_core::RunRequest {
        scenario: "vm-scalability/lru-file-mmap-read".into(),
        machine: Some(a.get(3).cloned().unwrap_or("xeon-4n-48c-64g".into())),
        kernel: Some(a[1].clone()),
        sets: vec![("scale".into(), a[2].clone())],
        seed: 1,
    };
    let t = std::time::Instant::now();
    let out = ipisim_core::run(&req).unwrap();
    let j = &out.json;
    eprintln!(
        "host {:.2}s events {}",
        t.elapsed().as_secs_f64(),
        out.events
    );
    println!(
        "elapsed {:.2} user {:.4} system {:.1} ops {} safety {}",
        j["elapsed_s"].as_f64().unwrap(),
        j["user_s"].as_f64().unwrap(),
        j["system_s"].as_f64().unwrap(),
        j["ops"],
        j["safety"]
    );
    let row = |name: &str| -> u64 {
        let cpus = j["interrupts"][name].as_array().unwrap();
        cpus.iter().map(|v| v.as_u64().unwrap()).sum()
    };
    let (tlb, cal) = (row("TLB"), row("CAL"));
    println!("TLB {tlb} CAL {cal} vmstat {}", j["vmstat"]);
    for p in j["profile"].as_array().unwrap().iter().take(14) {
        println!(
            "  {:>6.2}% {}",
            p["percent"].as_f64().unwrap(),
            p["function"].as_str().unwrap()
        );
    }
}
