//! Run a scenario once with `scale` and print its times, ops, counters and profile:
//! `cargo run --release --example scenario -- SCENARIO KERNEL SCALE [MACHINE] [KEY=VALUE...]`
//! (e.g. `vm-scalability/lru-file-mmap-read linux-4.2 0.1 xeon-4n-48c-64g`); SCALE `-` sets none;
//! the environment's SEED (default 1) is the run's seed.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: scenario SCENARIO KERNEL SCALE [MACHINE]");
        std::process::exit(2);
    }
    let req = ipisim_core::RunRequest {
        scenario: a[1].clone(),
        machine: a.get(4).cloned(),
        kernel: Some(a[2].clone()),
        sets: std::iter::once(a[3].as_str())
            .filter(|v| *v != "-")
            .map(|v| ("scale".to_string(), v.to_string()))
            .chain(a.iter().skip(5).filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            }))
            .collect(),
        seed: match std::env::var("SEED") {
            Ok(v) => v.parse().unwrap_or_else(|_| {
                eprintln!("scenario: SEED={v}: not an unsigned integer");
                std::process::exit(2)
            }),
            Err(_) => 1,
        },
    };
    let t = std::time::Instant::now();
    let out = match ipisim_core::run(&req) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("scenario: {e}");
            std::process::exit(2);
        }
    };
    let j = &out.json;
    eprintln!(
        "host {:.2}s events {}",
        t.elapsed().as_secs_f64(),
        out.events
    );
    println!(
        "elapsed {:.3} user {:.3} system {:.1}",
        j["elapsed_s"].as_f64().unwrap(),
        j["user_s"].as_f64().unwrap(),
        j["system_s"].as_f64().unwrap()
    );
    println!("ops {}\ncheck {}", j["ops"], j["check"]);
    println!("interrupts {}\nvmstat {}", j["interrupts"], j["vmstat"]);
    for p in j["profile"].as_array().unwrap().iter().take(14) {
        println!(
            "  {:>6.2}% {}",
            p["percent"].as_f64().unwrap(),
            p["function"].as_str().unwrap()
        );
    }
}
