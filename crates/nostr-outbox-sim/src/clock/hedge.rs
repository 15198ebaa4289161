//! Hedging a slow page, as a policy the clock measures ([`super::Policy::hedge`]): when one
//! page of a relay's feed is still unanswered well past that relay's learned latency, its
//! follows are asked again, and a note comes from whichever answer is first.
//!
//! A page's time is mostly its relay's, but now and then one takes five to fifteen times the
//! relay's usual time, holding back the notes it carries, often some of the newest. The slow
//! page is not cancelled: the relay the plan chose may hold notes the hedge lacks.
//!
//! [`after_ms`] says when a page is slow; [`targets`] where its follows go on an open socket
//! ([`Hedge::OpenSockets`]). [`Hedge::SameRelay`] sends the page again to the slow relay
//! itself: with the clock's query times drawn independently per request it is an upper bound
//! on what any hedge could buy, not a policy a real relay would reward (a relay slow to answer
//! one request is seldom quick with the same request again).

use std::collections::BTreeMap;

use nostr_outbox_core::{AuthorId, DeliveryStats, RouteTable};

/// Where a slow page is asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hedge {
    /// Each of its follows of the fastest open relay it writes to that was not asked about it
    /// (see the `hedge` module); no new socket.
    OpenSockets,
    /// The slow relay itself, on its open socket (an upper bound, see the module docs).
    SameRelay,
}

/// A page is slow once it took this many times the relay's learned latency.
pub const LATENCY_FACTOR: f64 = 2.0;

/// A page is never slow sooner than this, ms: a fast relay's ordinary spread is not a hedge.
pub const FLOOR_MS: f64 = 500.0;

/// When nothing is learned of a relay's latency: a page is slow after this long, ms (about
/// twice the public network's median query time).
pub const UNKNOWN_MS: f64 = 2_000.0;

/// How long a page to `url` may take before it is hedged, ms: [`LATENCY_FACTOR`] times the
/// latency learned for it (its first answer's, weighted over runs), at least [`FLOOR_MS`];
/// [`UNKNOWN_MS`] when nothing is learned.
pub fn after_ms(stats: &DeliveryStats, url: &str) -> f64 {
    match stats.get(url).latency_ms {
        Some(ms) if ms.is_finite() && ms >= 0.0 => (ms * LATENCY_FACTOR).max(FLOOR_MS),
        _ => UNKNOWN_MS,
    }
}

/// Where a slow page's follows are asked again on open sockets: for each of `authors`, the
/// relay with the lowest learned latency (unknown last, ties by URL) among those it may be
/// routed to (its declared or hinted relays; the reader's relays for a follow without a list)
/// that is not `slow`, whose socket is `open` and that was not `asked` about it already.
/// Follows with no such relay are left out. By URL, authors in the order given.
pub fn targets(
    table: &RouteTable,
    stats: &DeliveryStats,
    slow: &str,
    authors: &[AuthorId],
    open: impl Fn(&str) -> bool,
    asked: impl Fn(&str, AuthorId) -> bool,
) -> BTreeMap<String, Vec<AuthorId>> {
    let mut out: BTreeMap<String, Vec<AuthorId>> = BTreeMap::new();
    for &author in authors {
        let candidates = match table.candidates(author) {
            [] => table.reader_relays(),
            listed => listed,
        };
        let best = (candidates.iter())
            .map(|&r| table.url(r))
            .filter(|&url| url != slow && open(url) && !asked(url, author))
            .min_by(|a, b| {
                let latency = |url: &str| stats.get(url).latency_ms.unwrap_or(f64::INFINITY);
                latency(a).total_cmp(&latency(b)).then_with(|| a.cmp(b))
            });
        if let Some(url) = best {
            out.entry(url.to_string()).or_default().push(author);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_outbox_core::testkit::{relay_list, table_with_lists, test_key};

    /// Follow 0 writes to a slow, a fast and a middling relay; follow 1 has no list.
    fn table() -> RouteTable {
        table_with_lists(
            2,
            [relay_list(
                0,
                &[
                    "wss://slow.example",
                    "wss://fast.example",
                    "wss://mid.example",
                ],
            )],
        )
    }

    #[test]
    fn a_page_is_slow_after_twice_the_learned_latency_and_never_sooner_than_the_floor() {
        let mut stats = DeliveryStats::default();
        assert_eq!(after_ms(&stats, "wss://new.example"), UNKNOWN_MS);
        stats.record_latency("wss://known.example", 900.0, 1);
        assert_eq!(after_ms(&stats, "wss://known.example"), 1_800.0);
        stats.record_latency("wss://quick.example", 50.0, 1);
        assert_eq!(after_ms(&stats, "wss://quick.example"), FLOOR_MS);
    }

    #[test]
    fn follows_go_to_their_fastest_open_relay_not_yet_asked_and_the_listless_to_the_readers() {
        let table = table();
        let mut stats = DeliveryStats::default();
        stats.record_latency("wss://fast.example", 100.0, 1);
        stats.record_latency("wss://mid.example", 400.0, 1);
        let id = |n| table.author_id(&test_key(n)).expect("a follow");
        let (a, b) = (id(0), id(1));
        let slow = "wss://slow.example";
        let all_open = |_: &str| true;
        let got = targets(&table, &stats, slow, &[a, b], all_open, |_, _| false);
        let want: BTreeMap<String, Vec<AuthorId>> = [
            ("wss://fast.example".to_string(), vec![a]),
            ("wss://home.example".to_string(), vec![b]),
        ]
        .into();
        assert_eq!(got, want);
        // The fast relay's socket is not open: the next one is asked.
        let got = targets(
            &table,
            &stats,
            slow,
            &[a],
            |url| url != "wss://fast.example",
            |_, _| false,
        );
        assert_eq!(got.keys().collect::<Vec<_>>(), ["wss://mid.example"]);
        // Every other relay was asked about it already: nowhere to go.
        let got = targets(&table, &stats, slow, &[a], all_open, |url, _| url != slow);
        assert!(got.is_empty());
    }
}
