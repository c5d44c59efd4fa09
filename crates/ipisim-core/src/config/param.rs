//! Parameter declarations and value parsing (sizes like `16GiB`, durations like `10ms`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// An integer in [min, max].
    Int {
        min: i64,
        max: i64,
    },
    /// A byte size: `4096`, `64KiB`, `16GiB` (K, M, G, T are binary, as the kernel writes them),
    /// at most [`MAX_SIZE`].
    Size,
    /// A duration: `1s`, `10ms`, `500us`, `20ns`; a bare number is seconds; at most [`MAX_DURATION`].
    Duration,
    /// A real number in [min, max].
    Float {
        min: f64,
        max: f64,
    },
    Bool,
    /// One of a closed set of names (a policy variant).
    Choice(&'static [&'static str]),
    Str,
}

/// One declared parameter.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub key: &'static str,
    pub kind: Kind,
    pub unit: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    /// Bytes for sizes, picoseconds for durations.
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => write!(f, "{v}"),
        }
    }
}

impl Value {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Int(v) => (*v).into(),
            Value::UInt(v) => (*v).into(),
            Value::Float(v) => (*v).into(),
            Value::Bool(v) => (*v).into(),
            Value::Str(v) => v.clone().into(),
        }
    }
}

/// The largest size any parameter takes: 1 PiB, beyond any machine modelled, and far from u64's end.
pub const MAX_SIZE: u64 = 1 << 50;
/// The longest duration, in picoseconds: 10^4 s (2.8 hours simulated), far below 2^64 ps (213
/// days), and the per-10-ms interrupt bins of a run that long stay under 8 MB.
pub const MAX_DURATION: u64 = 10_000 * 1_000_000_000_000;

/// The largest cost of one operation, in cycles: 10^9 (0.4 s at 2.5 GHz), far above any kernel
/// path, so that every time computed from costs stays far below 2^64 ps.
pub const MAX_CYCLES: f64 = 1e9;

/// A byte count as a size a user would write: `64MiB`, `1.5GiB`, `4096B`.
pub fn format_size(bytes: u64) -> String {
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in units {
        if bytes >= 1 << shift {
            let v = bytes as f64 / (1u64 << shift) as f64;
            let v = (v * 100.0).round() / 100.0;
            return format!("{v}{unit}");
        }
    }
    format!("{bytes}B")
}

/// Parse a size such as `16GiB`, `64KiB`, `4k` or `4096` into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("negative size {t:?}"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "unknown size unit in {t:?} (use B, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let n: f64 = num.parse().map_err(|_| format!("not a size: {t:?}"))?;
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes > MAX_SIZE as f64 {
        return Err(format!("size {t:?} is out of range [0, 1PiB]"));
    }
    Ok(bytes.round() as u64)
}

fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("negative duration {t:?}"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let ps_per: f64 = match suffix.trim() {
        "" | "s" => 1e12,
        "ms" => 1e9,
        "us" => 1e6,
        "ns" => 1e3,
        "ps" => 1.0,
        _ => return Err(format!("unknown time unit in {t:?} (use s, ms, us or ns)")),
    };
    let n: f64 = num.parse().map_err(|_| format!("not a duration: {t:?}"))?;
    let ps = n * ps_per;
    if !ps.is_finite() || ps > MAX_DURATION as f64 {
        return Err(format!("duration {t:?} is out of range [0, 1e4 s]"));
    }
    Ok(ps.round() as u64)
}

impl Param {
    /// Parse a value given as text (`--set key=value`).
    pub fn parse_text(&self, text: &str) -> Result<Value, String> {
        let t = text.trim();
        match self.kind {
            Kind::Int { min, max } => {
                let v: i64 = t
                    .parse()
                    .map_err(|_| format!("expected an integer, got {t:?}"))?;
                check_range(v, min, max)
            }
            Kind::Size => parse_size(t).map(Value::UInt),
            Kind::Duration => parse_duration(t).map(Value::UInt),
            Kind::Float { min, max } => {
                let v: f64 = t
                    .parse()
                    .map_err(|_| format!("expected a number, got {t:?}"))?;
                // The message repeats the value as written (1e-9, not 0.000000001).
                check_float(v, min, max).map_err(|_| format!("{t} is out of range [{min}, {max}]"))
            }
            Kind::Bool => match t {
                "true" | "1" | "yes" | "on" => Ok(Value::Bool(true)),
                "false" | "0" | "no" | "off" => Ok(Value::Bool(false)),
                _ => Err(format!("expected true or false, got {t:?}")),
            },
            Kind::Choice(names) => {
                if names.contains(&t) {
                    Ok(Value::Str(t.to_string()))
                } else {
                    Err(format!(
                        "unknown value {t:?} (one of: {})",
                        names.join(", ")
                    ))
                }
            }
            Kind::Str => Ok(Value::Str(t.to_string())),
        }
    }

    /// Parse a value given in a TOML file.
    pub fn parse_toml(&self, v: &toml::Value) -> Result<Value, String> {
        match (self.kind, v) {
            (Kind::Int { min, max }, toml::Value::Integer(i)) => check_range(*i, min, max),
            (Kind::Size, toml::Value::Integer(i)) | (Kind::Duration, toml::Value::Integer(i)) => {
                self.parse_text(&i.to_string())
            }
            (Kind::Duration, toml::Value::Float(x)) => self.parse_text(&x.to_string()),
            (Kind::Float { min, max }, toml::Value::Float(x)) => check_float(*x, min, max),
            (Kind::Float { min, max }, toml::Value::Integer(i)) => check_float(*i as f64, min, max),
            (Kind::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
            (_, toml::Value::String(s)) if !matches!(self.kind, Kind::Int { .. } | Kind::Bool) => {
                self.parse_text(s)
            }
            _ => Err(format!(
                "expected {}, got {}",
                self.kind_name(),
                toml_type(v)
            )),
        }
    }

    pub fn kind_name(&self) -> String {
        match self.kind {
            Kind::Int { .. } => "an integer".into(),
            Kind::Size => "a size such as \"16GiB\"".into(),
            Kind::Duration => "a duration such as \"10ms\"".into(),
            Kind::Float { .. } => "a number".into(),
            Kind::Bool => "true or false".into(),
            Kind::Choice(names) => format!("one of {}", names.join(", ")),
            Kind::Str => "a string".into(),
        }
    }

    pub fn default_value(&self) -> Value {
        self.parse_text(self.default)
            .unwrap_or_else(|e| panic!("bad built-in default for {}: {e}", self.key))
    }
}

fn check_range(v: i64, min: i64, max: i64) -> Result<Value, String> {
    if v < min || v > max {
        Err(format!("{v} is out of range [{min}, {max}]"))
    } else {
        Ok(Value::Int(v))
    }
}

fn check_float(v: f64, min: f64, max: f64) -> Result<Value, String> {
    // NaN fails both comparisons, so it is refused here too.
    if v >= min && v <= max {
        Ok(Value::Float(v))
    } else {
        Err(format!("{v} is out of range [{min}, {max}]"))
    }
}

fn toml_type(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16GiB"), Ok(16 << 30));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("-4GiB").unwrap_err().contains("negative"));
        assert!(parse_size("4 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
    }

    #[test]
    fn durations_and_choices() {
        let d = Param {
            key: "d",
            kind: Kind::Duration,
            unit: "s",
            default: "1s",
            doc: "",
        };
        assert_eq!(d.parse_text("10ms"), Ok(Value::UInt(10_000_000_000)));
        assert_eq!(d.parse_text("2"), Ok(Value::UInt(2_000_000_000_000)));
        let c = Param {
            key: "c",
            kind: Kind::Choice(&["a", "b"]),
            unit: "",
            default: "a",
            doc: "",
        };
        assert!(c.parse_text("z").unwrap_err().contains("one of: a, b"));
        let i = Param {
            key: "i",
            kind: Kind::Int { min: 1, max: 8 },
            unit: "",
            default: "1",
            doc: "",
        };
        assert!(i.parse_text("9").unwrap_err().contains("out of range"));
        assert!(i
            .parse_toml(&toml::Value::String("x".into()))
            .unwrap_err()
            .contains("an integer"));
    }
}
