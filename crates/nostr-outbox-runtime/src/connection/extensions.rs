//! What a relay speaks beyond NIP-01, and how long to wait for it: one rule for every ask of
//! an extension (reconciliation, NIP-77; counts, NIP-45; search, NIP-50), whichever command or
//! feed makes it.
//!
//! Most relays speak NIP-01 and little else, and many never answer what they do not
//! understand: a `NEG-OPEN` or a `COUNT` sent to them waits out the whole answer timeout. So
//! before an extension is asked, what is known decides ([`decide`]):
//!
//! | what the relay did last time \ its NIP-11 `supported_nips` | names it | names others | silent |
//! |---|---|---|---|
//! | answered | ask, full wait | ask, full wait | ask, full wait |
//! | ignored or refused it | ask, short wait | skip | skip |
//! | never asked | ask, full wait | skip | ask, short wait |
//!
//! A short wait is [`SHORT_WAIT`] past the time the relay took to connect (a slow relay is
//! given its round trips), never more than the full one. What each ask showed is remembered
//! ([`Extensions::heard`]): an answer makes the relay believed from then on, silence or a
//! refusal of the extension makes it skipped until [`IGNORED_FOR`] has passed (then it is asked
//! again, briefly). [`Learned`] is plain data, kept in the store beside the penalty box, so
//! the next run knows too; every entry expires and the table is bounded.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long past its connect time a relay whose support is unknown has to answer an extension.
pub const SHORT_WAIT: Duration = Duration::from_secs(1);

/// How long a relay that ignored an extension is skipped for it (then asked again, briefly).
pub const IGNORED_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long an answer is remembered.
pub const ANSWERED_FOR: Duration = Duration::from_secs(60 * 24 * 3600);

/// Relays remembered at most; beyond, those heard from longest ago go.
pub const MAX_LEARNED_RELAYS: usize = 4096;

/// An extension of NIP-01 a relay may or may not speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Extension {
    /// Set reconciliation, NIP-77 (`NEG-OPEN`).
    Reconcile,
    /// Counts, NIP-45 (`COUNT`).
    Count,
    /// Full-text search, NIP-50 (a `search` filter).
    Search,
}

impl Extension {
    /// Its NIP number, as `supported_nips` names it.
    pub fn nip(self) -> u16 {
        match self {
            Extension::Reconcile => 77,
            Extension::Count => 45,
            Extension::Search => 50,
        }
    }
}

impl std::fmt::Display for Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NIP-{}", self.nip())
    }
}

/// What a relay did when it was last asked for an extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It answered in the extension's own terms (a `NEG-MSG`, a `COUNT`).
    Answered,
    /// It stayed silent, or refused the ask as not supported.
    Ignored,
}

/// One remembered outcome and when (unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// What the relay did.
    pub outcome: Outcome,
    /// When, in unix seconds.
    pub at: u64,
}

/// What relays did with extensions, by relay URL and NIP: plain data, kept between runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Learned {
    relays: BTreeMap<String, BTreeMap<u16, Seen>>,
}

impl Learned {
    /// What `relay` did when last asked for `extension`, if that is still remembered at `now`.
    pub fn get(&self, relay: &str, extension: Extension, now: u64) -> Option<Seen> {
        let seen = *self.relays.get(relay)?.get(&extension.nip())?;
        fresh(seen, now).then_some(seen)
    }

    /// Remembers `outcome` of asking `relay` for `extension` at `now`.
    pub fn record(&mut self, relay: &str, extension: Extension, outcome: Outcome, now: u64) {
        let seen = Seen { outcome, at: now };
        self.relays
            .entry(relay.to_string())
            .or_default()
            .insert(extension.nip(), seen);
        self.bound(now);
    }

    /// Takes what `other` knows where it is newer (what another run or a store kept).
    pub fn merge(&mut self, other: &Learned, now: u64) {
        for (relay, nips) in &other.relays {
            let mine = self.relays.entry(relay.clone()).or_default();
            for (nip, seen) in nips {
                if mine.get(nip).is_none_or(|m| m.at < seen.at) {
                    mine.insert(*nip, *seen);
                }
            }
        }
        self.bound(now);
    }

    /// Relays remembered.
    pub fn len(&self) -> usize {
        self.relays.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.relays.is_empty()
    }

    /// Drops what expired, then the relays heard from longest ago past the bound.
    fn bound(&mut self, now: u64) {
        for nips in self.relays.values_mut() {
            nips.retain(|_, seen| fresh(*seen, now));
        }
        self.relays.retain(|_, nips| !nips.is_empty());
        if self.relays.len() > MAX_LEARNED_RELAYS {
            let latest = |nips: &BTreeMap<u16, Seen>| nips.values().map(|s| s.at).max();
            let mut by_age: Vec<(Option<u64>, String)> = self
                .relays
                .iter()
                .map(|(url, nips)| (latest(nips), url.clone()))
                .collect();
            by_age.sort();
            let excess = self.relays.len() - MAX_LEARNED_RELAYS;
            for (_, url) in by_age.into_iter().take(excess) {
                self.relays.remove(&url);
            }
        }
    }
}

/// Whether `seen` is still remembered at `now` (an entry dated ahead of the clock is not).
fn fresh(seen: Seen, now: u64) -> bool {
    let keep = match seen.outcome {
        Outcome::Answered => ANSWERED_FOR,
        Outcome::Ignored => IGNORED_FOR,
    };
    seen.at <= now.saturating_add(60) && now.saturating_sub(seen.at) < keep.as_secs()
}

/// How long an extension's first answer may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The ask's whole answer timeout.
    Full,
    /// [`SHORT_WAIT`] past the relay's connect time.
    Short,
}

impl Wait {
    /// The wait, for an ask whose whole timeout is `full` on a relay that took `connected` to
    /// connect; never more than `full`.
    pub fn bound(self, full: Duration, connected: Duration) -> Duration {
        match self {
            Wait::Full => full,
            Wait::Short => SHORT_WAIT.saturating_add(connected).min(full),
        }
    }
}

/// Whether to ask a relay for an extension, and how long to wait for its first answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Ask, waiting this long for the first answer.
    Ask(Wait),
    /// Do not ask: why (for the reader; not escaped).
    Skip(String),
}

/// The rule of the [module docs](self): from what a relay did last time (`learned`) and what
/// its document names (`nips`: `None` or empty when it says nothing).
pub fn decide(extension: Extension, learned: Option<Seen>, nips: Option<&[u16]>) -> Verdict {
    let listed = nips
        .filter(|n| !n.is_empty())
        .map(|n| n.contains(&extension.nip()));
    match (learned.map(|s| s.outcome), listed) {
        (Some(Outcome::Answered), _) | (None, Some(true)) => Verdict::Ask(Wait::Full),
        (Some(Outcome::Ignored), Some(true)) | (None, None) => Verdict::Ask(Wait::Short),
        (Some(Outcome::Ignored), _) => {
            Verdict::Skip(format!("it did not answer {extension} when last asked"))
        }
        (None, Some(false)) => Verdict::Skip(format!("its document does not list {extension}")),
    }
}

/// The client's table of what relays speak (see the [module docs](self)), shared by every
/// command and feed of one client.
#[derive(Debug, Default)]
pub struct Extensions {
    /// Leaf lock: taken briefly, never across `.await`, never with another lock held.
    learned: Mutex<Learned>,
}

impl Extensions {
    /// What has been learned, to keep for the next run.
    pub fn learned(&self) -> Learned {
        self.lock().clone()
    }

    /// Takes what a store kept (newer knowledge wins).
    pub fn restore(&self, kept: &Learned) {
        let now = now();
        self.lock().merge(kept, now);
    }

    /// Remembers what `relay` did with `extension`.
    pub fn heard(&self, relay: &str, extension: Extension, outcome: Outcome) {
        let now = now();
        self.lock().record(relay, extension, outcome, now);
        tracing::debug!(%relay, %extension, ?outcome, "extension support learned");
    }

    /// What was learned of `relay` and `extension`, while it holds.
    pub(crate) fn known(&self, relay: &str, extension: Extension) -> Option<Seen> {
        let now = now();
        self.lock().get(relay, extension, now)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Learned> {
        self.learned.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(outcome: Outcome) -> Option<Seen> {
        Some(Seen { outcome, at: 1 })
    }

    #[test]
    fn the_rule_follows_its_table() {
        use Outcome::*;
        let names: Option<&[u16]> = Some(&[1, 11, 77]);
        let others: Option<&[u16]> = Some(&[1, 11]);
        let silent: Option<&[u16]> = None;
        let full = Verdict::Ask(Wait::Full);
        let short = Verdict::Ask(Wait::Short);
        let r = Extension::Reconcile;
        let d = |learned, nips| decide(r, learned, nips);
        assert_eq!(d(seen(Answered), names), full);
        assert_eq!(d(seen(Answered), others), full);
        assert_eq!(d(seen(Answered), silent), full);
        assert_eq!(d(seen(Ignored), names), short);
        assert!(matches!(d(seen(Ignored), others), Verdict::Skip(_)));
        assert!(matches!(d(seen(Ignored), silent), Verdict::Skip(_)));
        assert_eq!(d(None, names), full);
        assert!(matches!(d(None, others), Verdict::Skip(w) if w.contains("NIP-77")));
        assert_eq!(d(None, silent), short);
        // An empty list says nothing.
        assert_eq!(d(None, Some(&[])), short);
        // A short wait gives a slow relay its connect time, never more than the full one.
        let secs = Duration::from_secs;
        assert_eq!(Wait::Short.bound(secs(10), secs(2)), secs(3));
        assert_eq!(Wait::Short.bound(secs(2), secs(5)), secs(2));
        assert_eq!(Wait::Full.bound(secs(10), secs(2)), secs(10));
    }

    #[test]
    fn what_was_learned_expires_and_the_newer_wins() {
        let mut learned = Learned::default();
        let r = Extension::Reconcile;
        learned.record("wss://a", r, Outcome::Ignored, 1_000);
        assert!(learned.get("wss://a", r, 1_000).is_some());
        assert!(learned.get("wss://a", Extension::Count, 1_000).is_none());
        assert!(learned
            .get("wss://a", r, 1_000 + IGNORED_FOR.as_secs())
            .is_none());
        // Dated far ahead of the clock: not believed.
        assert!(learned.get("wss://a", r, 0).is_none());
        // Merges one entry for `wss://a`, learned at `at`; what is then known of it at 2 000.
        let merged = |learned: &mut Learned, outcome: Outcome, at: u64| {
            let mut other = Learned::default();
            other.record("wss://a", r, outcome, at);
            learned.merge(&other, 2_000);
            learned.get("wss://a", r, 2_000).map(|s| s.outcome)
        };
        assert_eq!(
            merged(&mut learned, Outcome::Answered, 2_000),
            Some(Outcome::Answered)
        );
        // An older entry does not replace a newer one.
        assert_eq!(
            merged(&mut learned, Outcome::Ignored, 1_500),
            Some(Outcome::Answered)
        );
    }

    #[test]
    fn the_table_is_bounded_keeping_the_latest() {
        let mut learned = Learned::default();
        for i in 0..(MAX_LEARNED_RELAYS as u64 + 10) {
            learned.record(
                &format!("wss://r{i}"),
                Extension::Count,
                Outcome::Ignored,
                10_000 + i,
            );
        }
        assert_eq!(learned.len(), MAX_LEARNED_RELAYS);
        let now = 10_000 + MAX_LEARNED_RELAYS as u64 + 10;
        assert!(learned.get("wss://r0", Extension::Count, now).is_none());
        let last = format!("wss://r{}", MAX_LEARNED_RELAYS + 9);
        assert!(learned.get(&last, Extension::Count, now).is_some());
    }
}
