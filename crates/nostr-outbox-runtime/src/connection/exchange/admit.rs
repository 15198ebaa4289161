//! What is read of a relay's frames, on every path: frames bounded and parsed, events checked
//! before anything else sees them.

use nostr::event::Event;
use nostr::filter::{Filter, MatchEventOptions};
use nostr::message::RelayMessage;
use nostr::types::Timestamp;

use crate::config::RuntimeConfig;

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameDrop {
    /// Longer than [`RuntimeConfig::max_message_bytes`].
    TooLarge,
    /// Not a relay message (bad JSON, wrong shape, binary frame).
    Unparseable,
    /// An event whose id or signature does not verify.
    BadSignature,
    /// An event for a subscription we do not hold, or that does not match our filter.
    Unrequested,
    /// An event dated further in the future than [`RuntimeConfig::future_tolerance`].
    FutureDated,
}

/// A text frame read as a relay message, unless it is too large to read or not one.
pub(crate) fn parse<'a>(text: &'a str, cfg: &RuntimeConfig) -> Result<RelayMessage<'a>, FrameDrop> {
    if text.len() > cfg.max_message_bytes {
        return Err(FrameDrop::TooLarge);
    }
    RelayMessage::from_json(text).map_err(|e| {
        tracing::trace!(error = %e, "unparseable frame");
        FrameDrop::Unparseable
    })
}

/// An event a relay sent for one of our subscriptions, kept only when it is dated no later
/// than the config's tolerance, verifies (unless the config says not to check) and matches
/// one of `filters`: a relay cannot hand us what we did not ask for.
pub(crate) fn admit(
    event: Event,
    filters: &[Filter],
    cfg: &RuntimeConfig,
) -> Result<Event, FrameDrop> {
    let horizon = Timestamp::now()
        .as_secs()
        .saturating_add(cfg.future_tolerance.as_secs());
    if event.created_at.as_secs() > horizon {
        tracing::trace!(id = %event.id, created_at = event.created_at.as_secs(), "future-dated event");
        return Err(FrameDrop::FutureDated);
    }
    if cfg.verify_signatures && event.verify().is_err() {
        return Err(FrameDrop::BadSignature);
    }
    if !filters.iter().any(|f| matches(f, &event)) {
        tracing::trace!(id = %event.id, "event outside the subscription's filter");
        return Err(FrameDrop::Unrequested);
    }
    Ok(event)
}

/// Whether `event` is what `filter` asked. A NIP-50 `search` is the relay's to judge (relays
/// match words, stems or more, where a literal test would drop good answers), so only the
/// filter's other fields are checked.
fn matches(filter: &Filter, event: &Event) -> bool {
    let options = MatchEventOptions::new();
    if filter.search.is_none() {
        return filter.match_event(event, options);
    }
    let mut rest = filter.clone();
    rest.search = None;
    rest.match_event(event, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent, Kind};
    use nostr::key::Keys;

    #[test]
    fn a_search_answer_is_judged_by_the_rest_of_its_filter() {
        let keys = Keys::generate();
        let event = EventBuilder::new(Kind::TextNote, "running shoes for the marathon")
            .finalize(&keys)
            .unwrap();
        let cfg = RuntimeConfig::default();
        let search = Filter::new().kind(Kind::TextNote).search("run shoe");
        assert!(admit(event.clone(), std::slice::from_ref(&search), &cfg).is_ok());
        let other_kind = Filter::new().kind(Kind::Metadata).search("run shoe");
        assert_eq!(
            admit(event, &[other_kind], &cfg).unwrap_err(),
            FrameDrop::Unrequested
        );
    }
}
