//! Instants a configured duration away. Every timeout, grace and deadline in [`RuntimeConfig`]
//! (and [`PublishConfig`]) may be anything up to `Duration::MAX`, and `Instant + Duration`
//! panics when the sum overflows the clock: every instant the runtime computes from a
//! configured duration is made here, and one beyond [`FAR_FUTURE`] is that far instead.
//!
//! [`RuntimeConfig`]: crate::RuntimeConfig
//! [`PublishConfig`]: crate::PublishConfig

use std::time::Duration;

use tokio::time::Instant;

/// The furthest ahead a deadline is set: about 30 years, tokio's own "never" (its sleeps and
/// timeouts wait this long for a longer duration; longer sums overflow the clock on some
/// platforms). For a run, a wait this long is a wait forever.
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);

/// `from + after`, or `from +` [`FAR_FUTURE`] when `after` is longer. Never panics: on a clock
/// that cannot even reach `FAR_FUTURE` past `from` (none that tokio runs on), `from` itself.
pub(crate) fn offset(from: Instant, after: Duration) -> Instant {
    from.checked_add(after.min(FAR_FUTURE)).unwrap_or(from)
}

/// [`offset`] from now.
pub(crate) fn after(after: Duration) -> Instant {
    offset(Instant::now(), after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_duration_gives_an_instant_and_the_longest_saturate() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        assert_eq!(offset(now, second), now + second);
        assert_eq!(offset(now, Duration::ZERO), now);
        assert_eq!(offset(now, FAR_FUTURE), now + FAR_FUTURE);
        for huge in [
            Duration::MAX,
            Duration::from_secs(u64::MAX),
            FAR_FUTURE + second,
        ] {
            assert_eq!(offset(now, huge), now + FAR_FUTURE, "{huge:?}");
        }
        assert!(after(Duration::MAX) > now);
    }
}
