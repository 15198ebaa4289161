//! Router configuration from TOML: a connection budget, a URL policy and a strategy by name.
//!
//! ```toml
//! max_connections = 20
//! [strategy]
//! type = "greedy"
//! coverage_target = 2
//! ```
//!
//! Parsing collects every problem it can find, each naming its key, before failing.

use std::fmt;

use serde::de::DeserializeOwned;

use crate::registry;
use crate::selector::StrategyConfig;
use crate::url_policy::UrlPolicy;

/// The budget used when a config does not set `max_connections` (browsers cap sockets near 30;
/// the published measurements use 20).
pub const DEFAULT_MAX_CONNECTIONS: usize = 20;

/// One problem with a config, naming the key it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, e.g. `strategy.coverage_target`.
    pub key: String,
    /// What is wrong, lower-case.
    pub message: String,
}

impl ConfigIssue {
    /// An issue about `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The same issue with `prefix.` prepended to its key.
    pub fn under(mut self, prefix: &str) -> Self {
        self.key = if self.key.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{}", self.key)
        };
        self
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "`{}`: {}", self.key, self.message)
        }
    }
}

/// Every problem found in a config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in the order found.
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config ({} problem", self.issues.len())?;
        if self.issues.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str(")")?;
        for issue in &self.issues {
            write!(f, "\n  - {issue}")?;
        }
        Ok(())
    }
}

/// A parsed router config.
#[derive(Debug)]
pub struct RouterConfig {
    /// Routed relays allowed per plan (the reader's own relays are not counted).
    pub max_connections: usize,
    /// Which relay-list entries are accepted.
    pub url_policy: UrlPolicy,
    /// The strategy, as picked by `[strategy] type = "..."`.
    pub strategy: Box<dyn StrategyConfig>,
}

impl RouterConfig {
    /// Parses a TOML config, collecting every problem before failing.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError {
            issues: vec![ConfigIssue::new(
                "",
                format!("not valid toml: {}", e.message()),
            )],
        })?;
        let mut issues = Vec::new();
        for key in table.keys() {
            if !matches!(key.as_str(), "max_connections" | "url_policy" | "strategy") {
                issues.push(ConfigIssue::new(
                    key.as_str(),
                    "unknown key (expected max_connections, url_policy, strategy)",
                ));
            }
        }
        let max_connections = match table.get("max_connections") {
            None => Some(DEFAULT_MAX_CONNECTIONS),
            Some(toml::Value::Integer(n)) if *n >= 0 => Some(*n as usize),
            Some(other) => {
                issues.push(ConfigIssue::new(
                    "max_connections",
                    format!("expected a non-negative integer, found {}", describe(other)),
                ));
                None
            }
        };
        let url_policy = match table.get("url_policy") {
            None => Some(UrlPolicy::default()),
            Some(value) => deserialize_at::<UrlPolicy>(value, "url_policy", &mut issues),
        };
        let strategy = match table.get("strategy") {
            None => {
                issues.push(ConfigIssue::new(
                    "strategy",
                    format!("missing; pick one of: {}", strategy_names()),
                ));
                None
            }
            Some(value) => parse_strategy(value, "strategy", &mut issues),
        };
        match (max_connections, url_policy, strategy) {
            (Some(max_connections), Some(url_policy), Some(strategy)) if issues.is_empty() => {
                Ok(Self {
                    max_connections,
                    url_policy,
                    strategy,
                })
            }
            _ => Err(ConfigError { issues }),
        }
    }
}

/// Parses a strategy table found at `key` (also used by strategies that wrap another, such as
/// a `[strategy.inner]` table): checks the `type` against the registry, deserialises, and runs
/// the strategy's own validation. Problems are appended to `issues`.
pub fn parse_strategy(
    value: &toml::Value,
    key: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<Box<dyn StrategyConfig>> {
    let Some(table) = value.as_table() else {
        issues.push(ConfigIssue::new(
            key,
            format!("expected a table, found {}", describe(value)),
        ));
        return None;
    };
    match table.get("type") {
        None => {
            issues.push(ConfigIssue::new(
                format!("{key}.type"),
                format!("missing; pick one of: {}", strategy_names()),
            ));
            return None;
        }
        Some(toml::Value::String(name)) if registry::strategy(name).is_none() => {
            issues.push(ConfigIssue::new(
                format!("{key}.type"),
                format!("unknown strategy `{name}`; known: {}", strategy_names()),
            ));
            return None;
        }
        Some(toml::Value::String(_)) => {}
        Some(other) => {
            issues.push(ConfigIssue::new(
                format!("{key}.type"),
                format!("expected a strategy name, found {}", describe(other)),
            ));
            return None;
        }
    }
    let config = deserialize_at::<Box<dyn StrategyConfig>>(value, key, issues)?;
    let own: Vec<ConfigIssue> = config
        .validate()
        .into_iter()
        .map(|i| i.under(key))
        .collect();
    if own.is_empty() {
        Some(config)
    } else {
        issues.extend(own);
        None
    }
}

/// Deserialises `value` as `T`, recording a failure as an issue at `key` (with the inner path
/// when serde can tell it).
pub fn deserialize_at<T: DeserializeOwned>(
    value: &toml::Value,
    key: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value.clone()) {
        Ok(v) => Some(v),
        Err(err) => {
            let path = err.path().to_string();
            let full = if path == "." || path.is_empty() {
                key.to_string()
            } else {
                format!("{key}.{path}")
            };
            issues.push(ConfigIssue::new(full, err.into_inner().to_string()));
            None
        }
    }
}

fn strategy_names() -> String {
    let names: Vec<_> = registry::strategies().iter().map(|d| d.name).collect();
    if names.is_empty() {
        "(none registered: link a strategy crate)".to_string()
    } else {
        names.join(", ")
    }
}

fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer {i}"),
        toml::Value::Float(x) => format!("float {x}"),
        toml::Value::Boolean(b) => format!("boolean {b}"),
        toml::Value::Datetime(d) => format!("datetime {d}"),
        toml::Value::Array(_) => "an array".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}
