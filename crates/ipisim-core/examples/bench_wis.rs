//! Profile target: 48 threads of will-it-scale/tlb_flush2 on the 48-CPU profile.
fn main() {
    let dur = std::env::args().nth(1).unwrap_or_else(|| "20ms".into());
    let req = ipisim_core::RunRequest {
        scenario: "will-it-scale/tlb_flush2".into(),
        machine: Some("xeon-4n-48c-64g".into()),
        kernel: None,
        sets: vec![("tasks".into(), "48".into()), ("duration".into(), dur)],
        seed: 1,
    };
    let t = std::time::Instant::now();
    let out = ipisim_core::run(&req).unwrap();
    let dt = t.elapsed().as_secs_f64();
    let tlb: u64 = out.json["interrupts"]["TLB"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    eprintln!(
        "{dt:.3}s events={} ({:.1}M/s) tlb={} ({:.2}M/s) ipis={}",
        out.events,
        out.events as f64 / dt / 1e6,
        tlb,
        tlb as f64 / dt / 1e6,
        out.json["ipis_sent"]
    );
}
