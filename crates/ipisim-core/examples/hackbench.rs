//! `ipisim compare hackbench` without the Python CLI: run each variant and print the rows seed 004
//! looks at. `cargo run --release --example hackbench -- [MACHINE] [key=value ...] -- LABEL=PRESET[,key=value...] ...`
//! e.g. `-- kvm-8cpu groups=400 -- before=linux-3.3 after=linux-3.4`.
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let split = a.iter().position(|x| x == "--").unwrap_or(a.len());
    let (head, variants) = (&a[..split], &a[(split + 1).min(a.len())..]);
    let machine = head.first().cloned().unwrap_or("kvm-8cpu".into());
    let sets: Vec<(String, String)> = head
        .iter()
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect();
    let mut rows: Vec<(String, serde_json::Value, f64)> = Vec::new();
    for v in variants {
        let (label, spec) = v.split_once('=').expect("LABEL=PRESET");
        let mut parts = spec.split(',');
        let kernel = parts.next().unwrap().to_string();
        let mut sets = sets.clone();
        for kv in parts {
            let (k, v) = kv.split_once('=').expect("key=value");
            sets.push((k.to_string(), v.to_string()));
        }
        let req = ipisim_core::RunRequest {
            scenario: "hackbench".into(),
            machine: Some(machine.clone()),
            kernel: Some(kernel),
            sets,
            seed: 1,
        };
        let t = std::time::Instant::now();
        let out = ipisim_core::run(&req).unwrap_or_else(|e| panic!("{e}"));
        let host = t.elapsed().as_secs_f64();
        eprintln!("{label}: host {host:.1}s, {} events", out.events);
        rows.push((label.to_string(), out.json, host));
    }
    let keys = [
        "hackbench_s",
        "startup_s",
        "messages",
        "messages_expected",
        "oom_kills",
        "oom_kills_fork",
        "peak_used_pages",
        "pcp_global_drain",
        "pcp_global_ipi_saved",
        "ipi_saved_ratio",
        "pcp_global_drain_fork",
        "pcp_global_ipi_saved_fork",
        "cal_interrupts",
        "direct_reclaim_count",
        "direct_reclaim_mean_us",
        "direct_reclaim_p50_us",
        "direct_reclaim_p90_us",
        "direct_reclaim_p99_us",
        "direct_reclaim_max_us",
        "drained_reclaim_count",
        "drained_reclaim_mean_us",
        "drained_reclaim_p50_us",
        "drained_reclaim_p90_us",
        "drained_reclaim_p99_us",
        "drained_reclaim_max_us",
    ];
    print!("{:<24}", "");
    for (l, _, _) in &rows {
        print!("{l:>16}");
    }
    println!();
    for k in keys {
        print!("{k:<24}");
        for (_, j, _) in &rows {
            let v = &j["ops"][k];
            match v.as_u64() {
                Some(n) => print!("{n:>16}"),
                None => print!("{:>16.4}", v.as_f64().unwrap_or(f64::NAN)),
            }
        }
        println!();
    }
    for (k, path) in [
        ("elapsed_s", "/elapsed_s"),
        ("system_s", "/system_s"),
        ("allocstall", "/vmstat/allocstall"),
        ("pgsteal_direct", "/vmstat/pgsteal_direct"),
    ] {
        print!("{k:<24}");
        for (_, j, _) in &rows {
            let v = j.pointer(path).unwrap();
            match v.as_u64() {
                Some(n) => print!("{n:>16}"),
                None => print!("{:>16.4}", v.as_f64().unwrap()),
            }
        }
        println!();
    }
    for (l, j, _) in &rows {
        println!("{l} CAL {}", j["interrupts"]["CAL"]);
    }
    for (l, j, _) in &rows {
        println!(
            "{l} drains by CPUs with pages {}",
            j["drain_cpus_with_pages"]
        );
    }
    for (l, j, host) in &rows {
        println!(
            "{l} histogram (host {host:.1}s): {}",
            j["latency"]["direct_reclaim"]["histogram"]
        );
    }
}
