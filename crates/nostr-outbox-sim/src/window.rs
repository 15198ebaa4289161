//! The time windows recall is reported for (7 days, 1 year, 3 years).

use std::fmt;

use serde::{Deserialize, Serialize};

const DAY: u64 = 86_400;

/// A time window reports are computed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Window {
    /// 7 days (604,800 s).
    #[serde(rename = "7d")]
    D7,
    /// 1 year (31,536,000 s).
    #[serde(rename = "1yr")]
    Y1,
    /// 3 years (94,608,000 s).
    #[serde(rename = "3yr")]
    Y3,
}

impl Window {
    /// Every window, shortest first.
    pub const ALL: [Window; 3] = [Window::D7, Window::Y1, Window::Y3];

    /// The window's length in seconds.
    pub fn secs(self) -> u64 {
        match self {
            Window::D7 => 7 * DAY,
            Window::Y1 => 365 * DAY,
            Window::Y3 => 3 * 365 * DAY,
        }
    }

    /// The short label (`7d`, `1yr`, `3yr`).
    pub fn label(self) -> &'static str {
        match self {
            Window::D7 => "7d",
            Window::Y1 => "1yr",
            Window::Y3 => "3yr",
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl std::str::FromStr for Window {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Window::ALL
            .into_iter()
            .find(|w| w.label() == s)
            .ok_or_else(|| format!("unknown window {s:?} (7d, 1yr, 3yr)"))
    }
}
