//! Parsing NIP-66 events: kind:30166 relay discovery into a [`MonitorReport`], kind:10166
//! monitor announcements into a [`MonitorAnnouncement`].
//!
//! Events come from the network: tags this crate does not use are skipped, a malformed value
//! of a tag it reads is ignored (the field stays unknown), and only a bounded number of tags is
//! looked at, so a huge event costs little.

use nostr::event::{Event, Kind};
use nostr::key::PublicKey;

use super::MonitorReport;

/// Tags of one event looked at; a discovery event carries a few dozen.
pub const MAX_MONITOR_TAGS: usize = 512;

/// Longest `d` value kept (relay URLs are at most 256 bytes under the default policy).
pub const MAX_REPORT_URL_LEN: usize = 512;

/// Longest `n` (network) value kept.
const MAX_NETWORK_LEN: usize = 16;

/// Why an event is not a usable NIP-66 event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotAMonitorEvent {
    /// The event is not of the expected kind.
    #[error("not a kind:{expected} event")]
    WrongKind {
        /// The kind that was expected.
        expected: u16,
    },
    /// The event's id or signature does not verify.
    #[error("the event's id or signature does not verify")]
    Unverified,
    /// A kind:30166 without a usable `d` tag (missing, empty or too long).
    #[error("a relay discovery event without a usable `d` tag")]
    NoRelay,
}

impl MonitorReport {
    /// The report of an event whose id and signature were already verified; only the kind and
    /// the tags are checked.
    pub fn from_verified(event: &Event) -> Result<Self, NotAMonitorEvent> {
        if event.kind != Kind::RelayDiscovery {
            return Err(NotAMonitorEvent::WrongKind { expected: 30166 });
        }
        let mut report = MonitorReport::seen(String::new(), event.created_at.as_secs());
        report.monitor = Some(event.pubkey);
        let mut url = None;
        for tag in event.tags.iter().take(MAX_MONITOR_TAGS) {
            let t = tag.as_slice();
            let (Some(name), Some(value)) = (t.first(), t.get(1)) else {
                continue;
            };
            match name.as_str() {
                "d" if url.is_none() => url = Some(value.trim()),
                "rtt-open" => report.rtt_open_ms = report.rtt_open_ms.or(millis(value)),
                "rtt-read" => report.rtt_read_ms = report.rtt_read_ms.or(millis(value)),
                "n" if value.len() <= MAX_NETWORK_LEN && report.network.is_none() => {
                    report.network = Some(value.to_ascii_lowercase());
                }
                "R" => {
                    let (negated, what) = match value.strip_prefix('!') {
                        Some(rest) => (true, rest),
                        None => (false, value.as_str()),
                    };
                    match what {
                        "auth" => report.requires_auth = Some(!negated),
                        "payment" => report.requires_payment = Some(!negated),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        match url {
            Some(u) if !u.is_empty() && u.len() <= MAX_REPORT_URL_LEN => {
                report.url = u.to_string();
                Ok(report)
            }
            _ => Err(NotAMonitorEvent::NoRelay),
        }
    }
}

/// Whether `event` is of `kind` and its signature holds.
fn signed_of_kind(event: &Event, kind: Kind) -> Result<(), NotAMonitorEvent> {
    if event.kind != kind {
        return Err(NotAMonitorEvent::WrongKind {
            expected: kind.as_u16(),
        });
    }
    event.verify().map_err(|_| NotAMonitorEvent::Unverified)
}

impl TryFrom<&Event> for MonitorReport {
    type Error = NotAMonitorEvent;

    /// A signed kind:30166 event's report: kind and signature checked. For an event already
    /// verified, [`MonitorReport::from_verified`] skips the signature.
    fn try_from(event: &Event) -> Result<Self, Self::Error> {
        signed_of_kind(event, Kind::RelayDiscovery)?;
        Self::from_verified(event)
    }
}

/// A monitor's kind:10166 announcement: who it is and how often it publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorAnnouncement {
    /// The monitor's key (the author of its kind:30166 reports).
    pub monitor: PublicKey,
    /// Seconds between its checks (`frequency`), if it says.
    pub frequency_secs: Option<u64>,
    /// Its connect timeout (`timeout` tag for the `open` check, or without a check), ms.
    pub open_timeout_ms: Option<u32>,
}

impl TryFrom<&Event> for MonitorAnnouncement {
    type Error = NotAMonitorEvent;

    /// A signed kind:10166 event's announcement: kind and signature checked, unknown tags
    /// skipped.
    fn try_from(event: &Event) -> Result<Self, Self::Error> {
        signed_of_kind(event, Kind::RelayMonitor)?;
        let mut out = MonitorAnnouncement {
            monitor: event.pubkey,
            frequency_secs: None,
            open_timeout_ms: None,
        };
        for tag in event.tags.iter().take(MAX_MONITOR_TAGS) {
            let t = tag.as_slice();
            match (t.first().map(String::as_str), t.get(1), t.get(2)) {
                (Some("frequency"), Some(v), _) if out.frequency_secs.is_none() => {
                    out.frequency_secs = v.trim().parse().ok();
                }
                // NIP-66 writes `["timeout", "<check>", "<ms>"]`; a bare `["timeout", "<ms>"]`
                // applies to every check.
                (Some("timeout"), Some(check), Some(ms)) if check == "open" => {
                    out.open_timeout_ms = millis(ms).or(out.open_timeout_ms);
                }
                (Some("timeout"), Some(ms), None) if out.open_timeout_ms.is_none() => {
                    out.open_timeout_ms = millis(ms);
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// A round-trip time in whole milliseconds; anything else is unknown.
fn millis(value: &str) -> Option<u32> {
    value.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent, Tag};
    use nostr::key::Keys;

    fn event(kind: u16, tags: Vec<Vec<&str>>, created_at: u64) -> Event {
        let tags = tags
            .into_iter()
            .map(|t| Tag::parse(t).expect("a tag has a name"));
        EventBuilder::new(Kind::from(kind), "")
            .tags(tags)
            .custom_created_at(nostr::types::Timestamp::from_secs(created_at))
            .finalize(&Keys::generate())
            .expect("signs")
    }

    #[test]
    fn a_discovery_event_becomes_a_report_and_unknown_tags_are_skipped() {
        let e = event(
            30166,
            vec![
                vec!["d", "wss://relay.example/"],
                vec!["n", "clearnet"],
                vec!["rtt-open", "234"],
                vec!["rtt-read", "not a number"],
                vec!["R", "!payment"],
                vec!["R", "auth"],
                vec!["T", "PublicOutbox"],
                vec!["N", "66"],
                vec!["g", "u33dc0"],
                vec!["x"],
            ],
            1_700_000_000,
        );
        let r = MonitorReport::try_from(&e).unwrap();
        assert_eq!(r.url, "wss://relay.example/");
        assert_eq!(r.last_seen, 1_700_000_000);
        assert_eq!(r.rtt_open_ms, Some(234));
        assert_eq!(r.rtt_read_ms, None);
        assert_eq!(r.network.as_deref(), Some("clearnet"));
        assert_eq!(r.requires_payment, Some(false));
        assert_eq!(r.requires_auth, Some(true));
        assert_eq!(r.monitor, Some(e.pubkey));
    }

    #[test]
    fn wrong_kinds_forgeries_and_missing_relays_are_refused() {
        let note = event(1, vec![vec!["d", "wss://a.example"]], 1);
        assert_eq!(
            MonitorReport::try_from(&note),
            Err(NotAMonitorEvent::WrongKind { expected: 30166 })
        );
        let mut forged = event(30166, vec![vec!["d", "wss://a.example"]], 1);
        forged.created_at = nostr::types::Timestamp::from_secs(2);
        assert_eq!(
            MonitorReport::try_from(&forged),
            Err(NotAMonitorEvent::Unverified)
        );
        for tags in [vec![], vec![vec!["d", "  "]]] {
            let e = event(30166, tags, 1);
            assert_eq!(MonitorReport::try_from(&e), Err(NotAMonitorEvent::NoRelay));
        }
        let long = format!("wss://{}.example", "a".repeat(MAX_REPORT_URL_LEN));
        let e = event(30166, vec![vec!["d", &long]], 1);
        assert_eq!(MonitorReport::try_from(&e), Err(NotAMonitorEvent::NoRelay));
    }

    #[test]
    fn only_the_first_tags_are_read() {
        let mut tags = vec![vec!["t", "filler"]; MAX_MONITOR_TAGS];
        tags.push(vec!["d", "wss://late.example"]);
        let e = event(30166, tags, 1);
        assert_eq!(MonitorReport::try_from(&e), Err(NotAMonitorEvent::NoRelay));
    }

    #[test]
    fn an_announcement_gives_the_frequency_and_the_open_timeout() {
        let e = event(
            10166,
            vec![
                vec!["frequency", "3600"],
                vec!["timeout", "read", "3000"],
                vec!["timeout", "open", "5000"],
                vec!["c", "open"],
            ],
            1,
        );
        let a = MonitorAnnouncement::try_from(&e).unwrap();
        assert_eq!(a.frequency_secs, Some(3600));
        assert_eq!(a.open_timeout_ms, Some(5000));
        assert_eq!(a.monitor, e.pubkey);
        let report = event(30166, vec![vec!["d", "wss://a.example"]], 1);
        assert_eq!(
            MonitorAnnouncement::try_from(&report),
            Err(NotAMonitorEvent::WrongKind { expected: 10166 })
        );
    }
}
