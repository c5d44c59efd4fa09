//! Helpers the golden tests share.

use serde_json::Value;

/// A function's percent of CPU time in a result's profile (0 if it has none).
pub fn profile_percent(j: &Value, function: &str) -> f64 {
    j["profile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["function"] == function)
        .map_or(0.0, |p| p["percent"].as_f64().unwrap())
}
