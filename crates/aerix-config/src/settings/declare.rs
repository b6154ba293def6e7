//! How a table of settings is declared: `section!` writes a struct whose every key is one line
//! (its doc comment, name, type, default and bound) and derives from it what a file may set,
//! the defaults and the checks, so a key is never written twice.

use std::collections::BTreeMap;
use std::path::PathBuf;

use toml::Value;

/// Why a file's value for a key was refused (the caller names the file, line and key).
#[derive(Debug)]
pub(crate) enum Bad {
    /// No such key in the table.
    Unknown,
    /// The value does not parse or is out of bounds; `entry` names a map's entry (a tool of
    /// `context.tool_caps`).
    Value { entry: Option<String>, message: String },
}

impl Bad {
    pub(crate) fn new(message: impl Into<String>) -> Bad {
        Bad::Value { entry: None, message: message.into() }
    }
}

/// What a project's file (`.aerix/settings.toml`, `settings.local.toml`) may do with a key; the
/// user's own files set every key. Declared with the key (`@inert name: ...`), and a key
/// declared without a class is [`Class::Gated`]: a key added later runs nothing from an
/// untrusted project until someone decides it is inert.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Class {
    /// Runs nothing, reaches nothing, weakens nothing: applies from an untrusted project.
    Inert,
    /// Applies from a project only once the user trusts it.
    Gated,
    /// A model reference: inert when it is a plain file or a hub reference, gated otherwise
    /// (`script:`, `replay:`, `openai:` and any other scheme).
    Model,
    /// A protection: a project may only set it to this, its stricter value, trusted or not.
    Narrows(Value),
    /// The user's alone: a project's value never applies, trusted or not.
    User,
}

/// A table of settings, as `section!` declares it.
pub(crate) trait Section {
    /// The keys a file may set, in declaration order.
    const KEYS: &'static [&'static str];
    /// What a project's file may do with `key` (unknown keys: gated).
    fn class(key: &str) -> Class;
    /// Sets `key` from a file's value: parsed, checked, layered over what is set.
    fn set(&mut self, key: &str, value: Value) -> Result<(), Bad>;
    /// The keys as `docs/configuration.md` names them (a map's: `tool_caps.<tool>`), for the
    /// test that holds the doc to them.
    #[cfg(test)]
    fn doc_keys() -> Vec<String>;
}

/// A setting's type: how a file's value becomes one, and how it goes over an earlier file's.
pub(crate) trait Layer: Sized {
    /// What follows the key's name in the documentation (a map's entry).
    #[cfg(test)]
    const ENTRY: &'static str = "";
    fn parse(value: Value) -> Result<Self, Bad>;
    /// A later file's value replaces the earlier one.
    fn layer(&mut self, new: Self) {
        *self = new;
    }
}

/// Serde's message, which names the type expected (`invalid type: string "x", expected u32`).
fn parse_as<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Bad> {
    value.try_into().map_err(|e: toml::de::Error| Bad::new(e.message()))
}

macro_rules! scalar_layers {
    ($($ty:ty),* $(,)?) => {$(
        impl Layer for $ty {
            fn parse(value: Value) -> Result<Self, Bad> {
                parse_as(value)
            }
        }
    )*};
}

scalar_layers!(
    u32,
    u64,
    f64,
    bool,
    String,
    PathBuf,
    Vec<String>,
    Option<u32>,
    Option<u64>,
    Option<bool>,
    Option<String>,
    Option<caldrix_proto::Render>,
    Option<crate::PermissionMode>,
    super::keys::EditFormat,
);

/// A map (`context.tool_caps`): entries merge one by one, a later file's winning per entry.
impl Layer for BTreeMap<String, u64> {
    #[cfg(test)]
    const ENTRY: &'static str = ".<tool>";

    fn parse(value: Value) -> Result<Self, Bad> {
        let Value::Table(table) = value else {
            return Err(Bad::new(format!("must be a table, not {}", value.type_str())));
        };
        let mut out = BTreeMap::new();
        for (entry, value) in table {
            let n = parse_as(value).map_err(|bad| match bad {
                Bad::Value { message, .. } => Bad::Value { entry: Some(entry.clone()), message },
                Bad::Unknown => Bad::Unknown,
            })?;
            out.insert(entry, n);
        }
        Ok(out)
    }

    fn layer(&mut self, new: Self) {
        self.extend(new);
    }
}

/// A count, for `at_least`.
pub(crate) trait Count {
    fn count(&self) -> Option<u64>;
}

impl Count for u32 {
    fn count(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
}

impl Count for u64 {
    fn count(&self) -> Option<u64> {
        Some(*self)
    }
}

impl Count for Option<u32> {
    fn count(&self) -> Option<u64> {
        self.map(u64::from)
    }
}

/// The bound `at least min`.
pub(crate) fn at_least<T: Count>(min: u64) -> impl Fn(&T) -> Result<(), Bad> {
    move |value| match value.count() {
        Some(n) if n < min => Err(Bad::new(format!("must be at least {min}"))),
        _ => Ok(()),
    }
}

/// A key's [`Class`] as `section!` reads it: none is `Gated`.
macro_rules! class {
    () => {
        $crate::settings::declare::Class::Gated
    };
    (inert) => {
        $crate::settings::declare::Class::Inert
    };
    (model) => {
        $crate::settings::declare::Class::Model
    };
    (user) => {
        $crate::settings::declare::Class::User
    };
    (narrows($value:expr)) => {
        $crate::settings::declare::Class::Narrows(toml::Value::from($value))
    };
}

/// Declares a table of settings: the struct, each key with its doc comment, its class for a
/// project's files (`@inert`, `@model`, `@user`, `@narrows(value)`; none: gated), type, default
/// and optional bound (`@inert name: Type = default, bound;`), then (after `and`) the fields
/// that are not keys of this table. `(env)` after the name lets the defaults read the `Env`.
macro_rules! section {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(($env:ident))? {
            $(
                $(#[doc = $doc:literal])*
                $(@$class:ident $(($arg:expr))?)?
                $key:ident : $ty:ty = $default:expr $(, $bound:expr)? ;
            )*
        }
        $(and {
            $(
                $(#[doc = $xdoc:literal])*
                $field:ident : $fty:ty = $fdefault:expr ;
            )*
        })?
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[doc = $doc])* pub $key: $ty, )*
            $($( $(#[doc = $xdoc])* pub $field: $fty, )*)?
        }

        impl $name {
            /// Every key at its default.
            #[allow(unused_variables, reason = "not every table's defaults read the Env")]
            pub(crate) fn declared($($env: &crate::Env)?) -> $name {
                $name {
                    $( $key: $default, )*
                    $($( $field: $fdefault, )*)?
                }
            }
        }

        impl $crate::settings::declare::Section for $name {
            const KEYS: &'static [&'static str] = &[$(stringify!($key)),*];

            fn class(key: &str) -> $crate::settings::declare::Class {
                match key {
                    $( stringify!($key) => $crate::settings::declare::class!($($class $(($arg))?)?), )*
                    _ => $crate::settings::declare::Class::Gated,
                }
            }

            fn set(
                &mut self,
                key: &str,
                value: toml::Value,
            ) -> Result<(), $crate::settings::declare::Bad> {
                use $crate::settings::declare::Layer;
                match key {
                    $(
                        stringify!($key) => {
                            let new = <$ty as Layer>::parse(value)?;
                            $( ($bound)(&new)?; )?
                            self.$key.layer(new);
                            Ok(())
                        }
                    )*
                    _ => Err($crate::settings::declare::Bad::Unknown),
                }
            }

            #[cfg(test)]
            fn doc_keys() -> Vec<String> {
                use $crate::settings::declare::Layer;
                vec![$(format!("{}{}", stringify!($key), <$ty as Layer>::ENTRY)),*]
            }
        }
    };
}

pub(crate) use {class, section};

/// Whether a model reference names a plain file or a hub reference (and so runs nothing of a
/// project's): no scheme before a `:`, or the hub's own prefixes. Any other scheme, known
/// (`script:`, `replay:`, `openai:`) or not, is not.
pub(crate) fn inert_model(model: &str) -> bool {
    let model = model.trim();
    let hub = ["hf:", "hf.co/", "huggingface.co/", "https://huggingface.co/"];
    if hub.iter().any(|prefix| model.starts_with(prefix)) {
        return true;
    }
    // `owner/repo:QUANT` and a path with a `:` after a `/` have no scheme.
    match model.split_once(':') {
        None => true,
        Some((before, _)) => before.contains('/'),
    }
}

/// `unknown field `x`, expected one of `a`, `b``: serde's words, which a file's reader met
/// before the keys were declared here.
pub(crate) fn unknown(key: &str, expected: &[&str]) -> String {
    let names: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
    match names.as_slice() {
        [] => format!("unknown field `{key}`, there are no fields"),
        [one] => format!("unknown field `{key}`, expected {one}"),
        [a, b] => format!("unknown field `{key}`, expected {a} or {b}"),
        _ => format!("unknown field `{key}`, expected one of {}", names.join(", ")),
    }
}
