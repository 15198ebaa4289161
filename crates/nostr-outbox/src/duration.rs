//! Durations given on the command line (`90s`, `7d`, `2h 30m`), and the longest any flag
//! accepts.

use std::time::Duration;

/// [`MAX`] in seconds: ten years of 365 days.
pub const MAX_SECS: u64 = 3650 * 86_400;

/// The longest duration any flag accepts (`--deadline`, `--eose-timeout`, `--since`, …): ten
/// years. Longer waits and windows mean nothing to a run, and near `u64::MAX` seconds a
/// duration overflows every clock it is added to. `outbox publish --timeout`, in seconds, is
/// bounded the same ([`MAX_SECS`]).
pub const MAX: Duration = Duration::from_secs(MAX_SECS);

/// A duration flag's value: humantime text, at most [`MAX`]; a longer one is refused, and
/// clap's error names the flag.
pub fn parse(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if duration > MAX {
        return Err(format!(
            "longer than {} days (ten years), the longest a duration may be",
            MAX_SECS / 86_400
        ));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_up_to_ten_years_are_accepted() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("3650days"), Ok(MAX));
        assert!(parse("3651days").unwrap_err().contains("3650 days"));
        assert!(parse("18446744073709551615s").is_err());
        assert!(parse("soon").is_err());
    }
}
