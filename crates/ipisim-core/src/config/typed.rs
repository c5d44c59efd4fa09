//! Declare-once macros for named enums and parameter groups, so no name or key is written twice.

use super::{ConfigError, Resolved, Value};

/// A value of a declared parameter converted to a field's type; Err names what it was instead.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> Result<Self, String>;
}

impl FromValue for bool {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Bool(b) => Ok(*b),
            v => Err(format!("is not a bool: {v:?}")),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Str(s) => Ok(s.clone()),
            v => Err(format!("is not a string: {v:?}")),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Float(x) => Ok(*x),
            v => Err(format!("is not a number: {v:?}")),
        }
    }
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            v => Err(format!("is not an integer: {v:?}")),
        }
    }
}

// Unsigned fields take a range-checked integer, size or duration; `as`, as the old reads did.
macro_rules! unsigned_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<Self, String> {
                match v {
                    Value::Int(i) => Ok(*i as $t),
                    Value::UInt(u) => Ok(*u as $t),
                    v => Err(format!("is not an integer, size or duration: {v:?}")),
                }
            }
        }
    )*};
}
unsigned_from_value!(u64, usize, u32);

impl Resolved {
    /// The value of declared `key` as `T`; only the generated readers call it.
    pub fn typed<T: FromValue>(&self, key: &str) -> Result<T, ConfigError> {
        T::from_value(self.get(key)).map_err(|e| self.error(key, e))
    }
}

/// Variants declared once with their names; `from_name` is None for an unknown name: no default.
macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($(#[$vm])* $variant,)* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            pub const NAMES: &'static [&'static str] = &[$($text,)*];
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }
            pub fn from_name(name: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.name() == name)
            }
        }
        impl $crate::config::FromValue for $name {
            fn from_value(v: &$crate::config::Value) -> Result<Self, String> {
                match v {
                    $crate::config::Value::Str(s) => $name::from_name(s).ok_or_else(|| {
                        format!("unknown value {s:?} (one of: {})", $name::NAMES.join(", "))
                    }),
                    v => Err(format!("is not a name: {v:?}")),
                }
            }
        }
    };
}
pub(crate) use named_enum;

/// One line per parameter (field: type = key, kind, unit, default, doc [=> conversion]) gives
/// the `Param` table in `describe` order and the typed struct whose `from_resolved` reads it once.
macro_rules! params {
    (
        $(#[$m:meta])* $vis:vis struct $name:ident;
        $pvis:vis const $params:ident = {
            $($(#[$fm:meta])* $field:ident : $ty:ty = $key:literal, $kind:expr, $unit:literal,
              $default:literal, $doc:literal $(=> $conv:expr)?;)*
        }
    ) => {
        $pvis const $params: &[$crate::config::Param] = &[
            $($crate::config::Param {
                key: $key, kind: $kind, unit: $unit, default: $default, doc: $doc,
            },)*
        ];

        $(#[$m])*
        $vis struct $name { $($(#[$fm])* pub $field: $ty,)* }

        impl $name {
            pub fn from_resolved(
                r: &$crate::config::Resolved,
            ) -> Result<$name, $crate::config::ConfigError> {
                Ok($name { $($field: {
                    let v = r.typed($key)?;
                    $(let v = ($conv)(v);)?
                    v
                },)* })
            }
        }
    };
}
pub(crate) use params;

#[cfg(test)]
mod tests {
    use super::FromValue;
    use crate::config::Value;
    use crate::mm::rmap::ReclaimFlush;

    #[test]
    fn named_enum_round_trips_and_refuses_unknown_names() {
        for (v, n) in ReclaimFlush::ALL.iter().zip(ReclaimFlush::NAMES) {
            assert_eq!(v.name(), *n);
            assert_eq!(ReclaimFlush::from_name(n), Some(*v));
        }
        assert_eq!(ReclaimFlush::from_name("batch-full"), None);
        let e = ReclaimFlush::from_value(&Value::Str("x".into())).unwrap_err();
        assert!(
            e.contains("one of: immediate, batch_full, batch_pfn, batch_addr, none"),
            "{e}"
        );
    }
}
