//! Resolution: declared defaults, then the machine profile, the kernel preset, the scenario's
//! defaults and finally `--set` overrides. Every error names the file (or `--set`), key and reason.

use super::builtin::{builtin_kernel, builtin_machine, kernel_names, machine_names};
use super::{ConfigError, Param, Value, MAX_CYCLES};
use std::collections::BTreeMap;

/// What the user asked for. `machine` and `kernel` are built-in names or paths to TOML files.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub scenario: String,
    pub machine: Option<String>,
    pub kernel: Option<String>,
    pub sets: Vec<(String, String)>,
    pub seed: u64,
}

impl RunRequest {
    /// `scenario` on `machine` with `kernel` and `sets`, seed 1 (what tests and examples build).
    pub fn new(scenario: &str, machine: &str, kernel: &str, sets: &[(&str, &str)]) -> RunRequest {
        RunRequest {
            scenario: scenario.into(),
            machine: Some(machine.into()),
            kernel: Some(kernel.into()),
            sets: sets
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            seed: 1,
        }
    }
}

/// What resolution checks a request against, declared by the layers above config and gathered
/// by the root (`crate::resolve`): the scenario, every parameter and every machine cost.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The scenario's machine profile when none is given (else [`DEFAULT_MACHINE`]).
    pub machine: Option<&'static str>,
    /// Every parameter a run of the scenario accepts, in `describe` order.
    pub params: Vec<&'static Param>,
    /// The names of the machine's costs, in the order of [`Resolved::costs`].
    pub costs: &'static [&'static str],
}

/// One entry of a profile's `[cost]` table, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct CostEntry {
    pub cycles: f64,
    pub source: String,
}

pub const DEFAULT_MACHINE: &str = "host-2cpu";
pub const DEFAULT_KERNEL: &str = "linux-6.18";

/// A fully resolved configuration: every declared key has a value.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The scenario's name.
    pub scenario: &'static str,
    pub seed: u64,
    values: BTreeMap<&'static str, Value>,
    /// Cost entries, in the order of [`Schema::costs`].
    pub costs: Vec<CostEntry>,
    /// The names of [`costs`](Self::costs).
    cost_names: &'static [&'static str],
    /// Where the value being checked came from, for error messages.
    origin: BTreeMap<&'static str, String>,
    /// The host memory a run may use (`--max-memory`); None: what /proc/meminfo says is available.
    pub max_memory: Option<u64>,
}

impl Resolved {
    pub(super) fn get(&self, key: &str) -> &Value {
        self.values
            .get(key)
            .unwrap_or_else(|| panic!("undeclared parameter {key}"))
    }

    /// An error about `key`, naming where its value came from.
    pub fn error(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        let file = self.origin.get(key).cloned().unwrap_or_default();
        ConfigError::new(file, key, reason)
    }

    /// The whole resolved configuration as JSON, so a result can be reproduced from itself.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("scenario".into(), self.scenario.into());
        m.insert("seed".into(), self.seed.into());
        for (k, v) in &self.values {
            m.insert((*k).into(), v.to_json());
        }
        for (name, e) in self.cost_names.iter().zip(&self.costs) {
            m.insert(
                format!("machine.cost.{name}"),
                serde_json::json!({"cycles": e.cycles, "source": e.source}),
            );
        }
        serde_json::Value::Object(m)
    }

    /// Whether `key` was given by a file or `--set` rather than left at its declared default.
    pub fn is_set(&self, key: &str) -> bool {
        self.origin.contains_key(key)
    }

    /// `key=value` pairs that rebuild this configuration with `--set`.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.values.iter().map(|(k, v)| (*k, v))
    }
}

fn find<'a>(params: &[&'a Param], key: &str) -> Option<&'a Param> {
    params.iter().copied().find(|p| p.key == key)
}

/// Read a built-in profile by name, or a TOML file by path.
fn load(kind: &str, what: &str) -> Result<(String, toml::Table), ConfigError> {
    let builtin = if kind == "machine" {
        builtin_machine(what)
    } else {
        builtin_kernel(what)
    };
    let (label, text) = match builtin {
        Some(text) => (format!("{kind}s/{what}.toml"), text.to_string()),
        None if what.ends_with(".toml") || what.contains('/') => {
            let text = std::fs::read_to_string(what)
                .map_err(|e| ConfigError::new(what, "", format!("cannot read: {e}")))?;
            (what.to_string(), text)
        }
        None => {
            let names = if kind == "machine" {
                machine_names()
            } else {
                kernel_names()
            };
            let hint = if kind == "machine" {
                "--machine"
            } else {
                "--kernel"
            };
            return Err(ConfigError::new(
                hint,
                "",
                format!(
                    "unknown {kind} {what:?} (built-in: {}; or a path to a .toml file)",
                    names.join(", ")
                ),
            ));
        }
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let msg = e.message().trim().replace('\n', " ");
        let at = e
            .span()
            .map(|s| format!(" (line {})", text[..s.start].matches('\n').count() + 1))
            .unwrap_or_default();
        ConfigError::new(&label, "", format!("malformed TOML{at}: {msg}"))
    })?;
    Ok((label, table))
}

/// Resolve `req` against `schema`: declared defaults, the machine profile, the kernel preset,
/// then `--set` overrides.
pub fn resolve(req: &RunRequest, schema: Schema) -> Result<Resolved, ConfigError> {
    let Schema {
        scenario,
        machine,
        params,
        costs,
    } = schema;
    let mut r = Resolved {
        scenario,
        seed: req.seed,
        values: params.iter().map(|p| (p.key, p.default_value())).collect(),
        costs: Vec::new(),
        cost_names: costs,
        origin: BTreeMap::new(),
        max_memory: None,
    };

    // The machine profile: [machine] keys and a [cost] table giving every cost with its source.
    let (mfile, mtable) = load(
        "machine",
        req.machine
            .as_deref()
            .or(machine)
            .unwrap_or(DEFAULT_MACHINE),
    )?;
    apply_section(
        &mut r,
        &params,
        &mfile,
        &mtable,
        "machine",
        &["machine", "cost"],
    )?;
    r.costs = parse_costs(&mfile, &mtable, costs)?;

    let (kfile, ktable) = load("kernel", req.kernel.as_deref().unwrap_or(DEFAULT_KERNEL))?;
    apply_section(&mut r, &params, &kfile, &ktable, "kernel", &["kernel"])?;

    for (key, text) in &req.sets {
        if let Some(name) = key.strip_prefix("machine.cost.") {
            let idx = costs.iter().position(|n| *n == name).ok_or_else(|| {
                ConfigError::new("--set", key, "unknown cost (see `ipisim describe machine`)")
            })?;
            let cycles: f64 = text
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| (0.0..=MAX_CYCLES).contains(v))
                .ok_or_else(|| {
                    ConfigError::new(
                        "--set",
                        key,
                        format!("expected a number of cycles in [0, 1e9], got {text:?}"),
                    )
                })?;
            r.costs[idx] = CostEntry {
                cycles,
                source: "--set on the command line".into(),
            };
            continue;
        }
        let p = find(&params, key).ok_or_else(|| {
            ConfigError::new(
                "--set",
                key,
                format!(
                    "unknown key for scenario {} (see `ipisim describe {}`)",
                    scenario, scenario
                ),
            )
        })?;
        let v = p
            .parse_text(text)
            .map_err(|e| ConfigError::new("--set", key, e))?;
        r.values.insert(p.key, v);
        r.origin.insert(p.key, "--set".into());
    }
    Ok(r)
}

fn apply_section(
    r: &mut Resolved,
    params: &[&'static Param],
    file: &str,
    table: &toml::Table,
    prefix: &str,
    allowed: &[&str],
) -> Result<(), ConfigError> {
    for (section, body) in table {
        if !allowed.contains(&section.as_str()) {
            return Err(ConfigError::new(
                file,
                section,
                format!("unknown section (expected [{}])", allowed.join("], [")),
            ));
        }
        if section == "cost" {
            continue;
        }
        let body = body
            .as_table()
            .ok_or_else(|| ConfigError::new(file, section, "expected a table"))?;
        for (k, v) in body {
            let key = format!("{prefix}.{k}");
            let p =
                find(params, &key).ok_or_else(|| ConfigError::new(file, &key, "unknown key"))?;
            let val = p
                .parse_toml(v)
                .map_err(|e| ConfigError::new(file, &key, e))?;
            r.values.insert(p.key, val);
            r.origin.insert(p.key, file.to_string());
        }
    }
    Ok(())
}

fn parse_costs(
    file: &str,
    table: &toml::Table,
    names: &[&str],
) -> Result<Vec<CostEntry>, ConfigError> {
    let empty = toml::Table::new();
    let cost = match table.get("cost") {
        Some(toml::Value::Table(t)) => t,
        Some(_) => return Err(ConfigError::new(file, "cost", "expected a table")),
        None => &empty,
    };
    for k in cost.keys() {
        if !names.contains(&k.as_str()) {
            return Err(ConfigError::new(
                file,
                format!("cost.{k}"),
                "unknown cost (see `ipisim describe machine`)",
            ));
        }
    }
    names
        .iter()
        .map(|name| {
            let key = format!("cost.{name}");
            let e = cost.get(*name).ok_or_else(|| {
                ConfigError::new(
                    file,
                    &key,
                    "missing (every cost needs { cycles = N, source = \"...\" })",
                )
            })?;
            let t = e.as_table().ok_or_else(|| {
                ConfigError::new(file, &key, "expected { cycles = N, source = \"...\" }")
            })?;
            let cycles = match t.get("cycles") {
                Some(toml::Value::Integer(i)) if (0.0..=MAX_CYCLES).contains(&(*i as f64)) => {
                    *i as f64
                }
                Some(toml::Value::Float(x)) if (0.0..=MAX_CYCLES).contains(x) => *x,
                Some(v) => {
                    return Err(ConfigError::new(
                        file,
                        &key,
                        format!("cycles must be a number in [0, 1e9], got {v}"),
                    ))
                }
                None => return Err(ConfigError::new(file, &key, "missing cycles")),
            };
            let source = match t.get("source") {
                Some(toml::Value::String(s)) if !s.trim().is_empty() => s.clone(),
                _ => {
                    return Err(ConfigError::new(
                        file,
                        &key,
                        "missing source (where the figure comes from)",
                    ))
                }
            };
            if let Some(extra) = t.keys().find(|k| *k != "cycles" && *k != "source") {
                return Err(ConfigError::new(
                    file,
                    &key,
                    format!("unknown field {extra:?}"),
                ));
            }
            Ok(CostEntry { cycles, source })
        })
        .collect()
}
