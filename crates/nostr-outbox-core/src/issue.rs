//! What is wrong with a config: each problem names its key. A leaf, so the config parser, the
//! registry and every strategy's own checks can report problems without depending on each other.

use std::fmt;

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

    /// An issue about the setting `key` unless its `value` lies between 1 and `max`.
    pub fn unless_within(key: &str, value: usize, max: usize) -> Option<Self> {
        (!(1..=max).contains(&value))
            .then(|| Self::new(key, format!("must be between 1 and {max}, got {value}")))
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
