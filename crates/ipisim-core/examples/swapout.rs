//! Run the swapout scenario once: `cargo run --release --example swapout -- KERNEL SCALE [MACHINE]`.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let req = ipisim_core::RunRequest {
        scenario: "swapout".into(),
        machine: Some(a.get(3).cloned().unwrap_or("xeon-2s-2013".into())),
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
        "elapsed {:.3} ops {} safety {}",
        j["elapsed_s"].as_f64().unwrap(),
        j["ops"],
        j["safety"]
    );
    println!("CAL {} vmstat {}", j["interrupts"]["CAL"], j["vmstat"]);
    for p in j["profile"].as_array().unwrap().iter().take(14) {
        println!(
            "  {:>6.2}% {}",
            p["percent"].as_f64().unwrap(),
            p["function"].as_str().unwrap()
        );
    }
}
