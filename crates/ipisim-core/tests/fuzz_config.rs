//! A fuzzer of where user input enters: machine and kernel TOML files and `--set` strings, valid,
//! near-valid and garbage. Every case must resolve and build (machine, kernel, workload) or give
//! one ConfigError line: never a panic, an abort, or a value outside its declared range.
//!
//! CI runs 10,000 cases; the full budget is
//! `PROPTEST_CASES=1000000 cargo test --release -p ipisim-core --test fuzz_config`.

use ipisim_core::config::{
    builtin_kernel, builtin_machine, Kind, Param, Value, MAX_DURATION, MAX_SIZE,
};
use ipisim_core::machine::{COSTS, MAX_CYCLES};
use ipisim_core::{check_limited, config, RunRequest};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::atomic::{AtomicU64, Ordering};

/// Scenarios whose build work is bounded by the host-memory limit below, so a case stays fast.
const SCENARIOS: &[&str] = &[
    "shootdown",
    "membarrier",
    "ipistorm",
    "drain",
    "swapout",
    "reclaim",
];
/// Not power9-128c: building its 128 CPUs takes 30 ms, a hundred times the others.
const MACHINES: &[&str] = &["host-2cpu", "xeon-2s-2013", "xeon-4n-48c-64g", "kvm-8cpu"];
/// Caps the page state a case may build (the same refusal users get past MemAvailable).
const MAX_MEMORY: u64 = 64 << 20;

fn number_text() -> impl Strategy<Value = String> {
    let units = prop::sample::select(vec![
        "", "B", "KiB", "MiB", "GiB", "TiB", "PiB", "k", "s", "ms", "us", "ns", "ps", "e9",
        "parsecs", " GiB", "%",
    ]);
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        (0u32..5000, units.clone()).prop_map(|(n, u)| format!("{n}{u}")),
        (any::<f64>(), units).prop_map(|(n, u)| format!("{n:e}{u}")),
        prop::sample::select(vec![
            "1e17",
            "1e19",
            "1e300",
            "-1",
            "1e-9",
            "0",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e-320",
            "",
            " ",
            "true",
            "99999999999999999999999",
            "0x10",
            "1_000",
            "2.5.1",
            "--",
            "=",
            "phys",
            "x86",
        ])
        .prop_map(str::to_string),
        "\\PC{0,16}",
    ]
}

fn toml_value() -> impl Strategy<Value = toml::Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        prop::sample::select(vec![
            0.0,
            -0.0,
            1e-9,
            1e17,
            1e19,
            1e300,
            f64::NAN,
            f64::INFINITY,
            2.5
        ])
        .prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        number_text().prop_map(toml::Value::String),
        plausible_text().prop_map(toml::Value::String),
        (0i64..64).prop_map(toml::Value::Integer),
    ];
    leaf.prop_recursive(4, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(toml::Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| toml::Value::Table(m.into_iter().collect())),
        ]
    })
}

/// Text that is valid for many keys (numbers, sizes, durations, booleans, choices).
fn plausible_text() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "0", "1", "2", "4", "8", "33", "0.5", "1.5", "2.5", "64MiB", "1GiB", "16GiB", "1ms",
        "10us", "true", "false", "phys", "hlt", "shuffled", "sleeping", "busy",
    ])
    .prop_map(str::to_string)
}

/// A value for a key, often of the right kind, often not.
fn mutation() -> impl Strategy<Value = toml::Value> {
    prop_oneof![
        3 => toml_value(),
        1 => (number_text(), "[a-z ]{0,8}").prop_map(|(c, s)| {
            let mut t = toml::Table::new();
            t.insert("cycles".into(), c.parse::<f64>().map(toml::Value::Float).unwrap_or(toml::Value::String(c)));
            t.insert("source".into(), toml::Value::String(s));
            toml::Value::Table(t)
        }),
    ]
}

/// A profile (machine or kernel): a built-in one with some keys replaced, added or removed,
/// or garbage text and deep nesting.
fn profile_text(kind: &'static str) -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = if kind == "machine" {
        MACHINES.to_vec()
    } else {
        config::kernel_names()
    };
    // Parsed once: a case clones the table instead of parsing the built-in text again.
    let docs: Vec<toml::Table> = names
        .iter()
        .map(|n| {
            let text = if kind == "machine" {
                builtin_machine(n)
            } else {
                builtin_kernel(n)
            };
            text.unwrap().parse().unwrap()
        })
        .collect();
    let edits = prop_oneof![
        2 => Just(Vec::new()),
        3 => prop::collection::vec((0usize..64, prop::sample::select(vec!["", "", "", "x"]), mutation()), 1..3),
    ];
    let mutated =
        (prop::sample::select(docs), edits, 0u8..8).prop_map(move |(mut doc, edits, drop)| {
            for (i, extra, v) in edits {
                let section = if kind == "machine" && i % 2 == 1 {
                    "cost"
                } else {
                    kind
                };
                let Some(toml::Value::Table(t)) = doc.get_mut(section) else {
                    continue;
                };
                let keys: Vec<String> = t.keys().cloned().collect();
                let key = format!("{}{extra}", keys[i % keys.len()]);
                t.insert(key, v);
            }
            if drop == 0 {
                if let Some(toml::Value::Table(t)) = doc.get_mut(kind) {
                    let first = t.keys().next().cloned();
                    if let Some(k) = first {
                        t.remove(&k);
                    }
                }
            }
            doc.to_string()
        });
    prop_oneof![
        8 => mutated,
        1 => "\\PC{0,64}",
        1 => (1usize..400, prop::sample::select(vec!["[", "{a=", "[a.", "a.", "[["]))
            .prop_map(move |(depth, open)| match open {
                "[" => format!("[{kind}]\nx = {}{}", "[".repeat(depth), "]".repeat(depth)),
                "{a=" => format!("[{kind}]\nx = {}1{}", "{a=".repeat(depth), "}".repeat(depth)),
                "[a." => format!("[{kind}{}]\nx = 1", ".a".repeat(depth)),
                "a." => format!("[{kind}]\n{}x = 1", "a.".repeat(depth)),
                _ => format!("{}{kind}]]", "[[".repeat(depth)),
            }),
    ]
}

fn set_pair(scenario: &'static str) -> impl Strategy<Value = (String, String)> {
    let decl = ipisim_core::workload::find(scenario).unwrap();
    let mut keys: Vec<String> = ipisim_core::machine::PARAMS
        .iter()
        .chain(ipisim_core::kernel::params())
        .chain(ipisim_core::sched::PARAMS)
        .chain(decl.params)
        .map(|p| p.key.to_string())
        .collect();
    keys.extend(COSTS.iter().map(|(_, n, _)| format!("machine.cost.{n}")));
    keys.extend(
        [
            "machine.nosuch",
            "machine.cost.nosuch",
            "",
            "scale.x",
            "check.enabled",
        ]
        .map(String::from),
    );
    (
        prop::sample::select(keys),
        prop_oneof![plausible_text(), number_text()],
    )
}

#[derive(Debug, Clone)]
struct Case {
    scenario: &'static str,
    /// A built-in name or the text of a profile.
    machine: Result<&'static str, String>,
    kernel: Option<String>,
    sets: Vec<(String, String)>,
    seed: u64,
}

/// One strategy per scenario, each built once (building one parses the built-in profiles).
fn case() -> impl Strategy<Value = Case> {
    let machine = prop_oneof![
        prop::sample::select(MACHINES.to_vec()).prop_map(Ok),
        profile_text("machine").prop_map(Err),
    ]
    .boxed();
    let kernel = prop::option::weighted(0.3, profile_text("kernel")).boxed();
    let per_scenario: Vec<_> = SCENARIOS
        .iter()
        .map(|&scenario| {
            let sets = prop::collection::vec(set_pair(scenario), 0..4);
            (machine.clone(), kernel.clone(), sets, any::<u64>())
                .prop_map(move |(machine, kernel, sets, seed)| Case {
                    scenario,
                    machine,
                    kernel,
                    sets,
                    seed,
                })
                .boxed()
        })
        .collect();
    proptest::strategy::Union::new(per_scenario)
}

/// The declaration of `key` for `scenario`.
fn param(scenario: &str, key: &str) -> Option<&'static Param> {
    let decl = ipisim_core::workload::find(scenario)?;
    ipisim_core::all_params(decl)
        .into_iter()
        .find(|p| p.key == key)
}

/// Every resolved value is inside its declared range: nothing out of range got through.
fn assert_in_range(scenario: &str, r: &config::Resolved) {
    for (key, v) in r.values() {
        let p = param(scenario, key).unwrap();
        match (p.kind, v) {
            (Kind::Int { min, max }, Value::Int(i)) => {
                assert!((min..=max).contains(i), "{key}={i}")
            }
            (Kind::Float { min, max }, Value::Float(x)) => {
                assert!(*x >= min && *x <= max, "{key}={x}")
            }
            (Kind::Size, Value::UInt(b)) => assert!(*b <= MAX_SIZE, "{key}={b}"),
            (Kind::Duration, Value::UInt(ps)) => assert!(*ps <= MAX_DURATION, "{key}={ps}"),
            (Kind::Bool, Value::Bool(_)) | (Kind::Choice(_) | Kind::Str, Value::Str(_)) => {}
            (k, v) => panic!("{key}: {v:?} for a {k:?}"),
        }
    }
    for e in &r.costs {
        assert!((0.0..=MAX_CYCLES).contains(&e.cycles), "cost {}", e.cycles);
    }
}

static FILE: AtomicU64 = AtomicU64::new(0);

fn write(dir: &std::path::Path, text: &str) -> String {
    let n = FILE.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("p{}.toml", n % 4));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn configs_resolve_or_give_one_line_errors_never_panic() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let dir = std::env::temp_dir().join(format!("ipisim-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ok, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    let t0 = std::time::Instant::now();
    TestRunner::new(config)
        .run(&case(), |c| {
            let req = RunRequest {
                scenario: c.scenario.into(),
                machine: Some(match &c.machine {
                    Ok(name) => name.to_string(),
                    Err(text) => write(&dir, text),
                }),
                kernel: c.kernel.as_deref().map(|t| write(&dir, t)),
                sets: c.sets.clone(),
                seed: c.seed,
            };
            match check_limited(&req, Some(MAX_MEMORY)) {
                Ok(()) => {
                    assert_in_range(c.scenario, &ipisim_core::resolve(&req).unwrap());
                    ok.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    let text = e.to_string();
                    prop_assert!(
                        !text.contains('\n') && !text.is_empty(),
                        "not one line: {text:?}"
                    );
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (ok, refused) = (ok.into_inner(), refused.into_inner());
    eprintln!(
        "fuzz_config: {} cases ({ok} built, {refused} refused) in {:.1} s",
        ok + refused,
        t0.elapsed().as_secs_f64()
    );
}
