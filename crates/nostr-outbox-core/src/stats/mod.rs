//! Learned delivery statistics: a Beta(α, β) prior and a latency estimate per relay, plus the
//! rules of keeping them (the store traits that persist them across runs are `nostr-outbox-client`'s
//! `StatsStore` and `StateStore`).
//!
//! # What a client can observe, and what it records
//!
//! Nothing here uses oracle knowledge (which relay *stores* which event). After a relay sends
//! EOSE for the REQ of one planning run, a client knows only:
//!
//! 1. the authors it asked that relay about (the relay's filter in the plan), and
//! 2. for each of those authors, how many distinct events the relay returned, and
//! 3. the same two facts for every *other* relay it asked in that run.
//!
//! A `RoundRecorder` (`nostr-outbox-client`) takes note of exactly these from relay frames and hands them over as a
//! [`RoundReport`]; [`DeliveryStats::record_round`] is the one way stats learn from delivery.
//! Per asked relay `r`, every author `a` of its filter for whom **some** relay asked in this run
//! (`r` itself or another relay whose filter also named `a`, routed or residual) returned at
//! least one event is one **delivery trial**. Let `best(a)` be the most events any answering
//! relay returned for `a`. If `r` answered, the trial is split by the share of the author's
//! notes `r` returned, `min(events(r, a), best(a)) / best(a)`: α grows by the share and β by its
//! complement. If `r` could not be reached, timed out before EOSE or refused the REQ (CLOSED,
//! auth-required), each such author is one full failure (at least one failure in all). An author
//! nobody returned anything for is not counted: the client cannot tell "the author was silent"
//! from "every relay failed", so it says nothing about any relay.
//!
//! This is the published benchmark's rule (a fractional success per assigned author): a relay
//! that keeps a year of notes earns more than one that returns last week's only, which counting
//! "returned anything" cannot tell apart; and a relay serving many follows is learned as fast
//! as it is used. Latency is not part of a round: a client measures it (REQ sent to EOSE, in
//! milliseconds) and adds it with [`DeliveryStats::record_latency`].
//!
//! # Decay
//!
//! Evidence fades toward the uniform prior, `x ← 1 + (x − 1) · d^elapsed`, for both α and β.
//! `elapsed` is hours since the last update in [`Decay::Hourly`] mode (the default, d = 0.95)
//! or sessions since the last update in [`Decay::PerSession`] mode (for simulations where every
//! session happens at the same clock time; the caller marks sessions with
//! [`DeliveryStats::begin_session`]). Decay is applied on read ([`DeliveryStats::get_at`]) and
//! before every write, so a relay that was not seen for a week never snaps back to the week-old
//! prior when it is updated again.
//!
//! # Corrupt values
//!
//! Stats come from files and from callers; either can hold NaN, ±∞, negative or absurdly large
//! numbers. Such a relay reads as the uniform prior (and is reset to it by
//! [`DeliveryStats::sanitize`] and [`DeliveryStats::set`]), with a `tracing` warning, so it
//! re-enters learning instead of poisoning selection.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use nostr::key::PublicKey;
use serde::{Deserialize, Serialize};

use crate::fastmap::FastMap;

mod expected;
mod merge;
mod pairs;
mod round;

pub use expected::{expected_recall, SILENT_SHARE};
pub use merge::{
    FORGET_AFTER_DAYS, FORGET_AFTER_SECS, MAX_STORED_AUTHORS, MAX_STORED_RELAYS, MAX_TOMBSTONES,
};
pub use pairs::Pairs;
pub use round::{AuthorRound, RelayRound, RoundReport};

/// The default hourly decay factor toward the uniform prior.
pub const DEFAULT_HOURLY_DECAY: f64 = 0.95;

/// Largest α or β kept; beyond it a value is treated as corrupt.
pub const MAX_PARAM: f64 = 1.0e6;

/// Largest latency estimate kept (about 2.8 hours); beyond it a value is treated as corrupt.
pub const MAX_LATENCY_MS: f64 = 1.0e7;

/// The deepest history a relay may be recorded to keep, seconds (a century: nothing older is a
/// real note's age).
pub const MAX_DEPTH_SECS: f64 = 100.0 * 365.25 * 86_400.0;

/// The shortest span a follow's posting rate is read over: a volume seen over less is spread
/// over this much. Learning a capped page's volume and planning with a follow's rate both
/// read rates this way.
pub const MIN_RATE_SPAN_SECS: f64 = 7.0 * 86_400.0;

/// The share of an author's notes, taken to be spread evenly over the ages `[young, old]`
/// (seconds before now), that are younger than `age`: what a relay whose history reaches back
/// `age` can hold of them. Learning and planning both read note ages this way.
#[inline]
pub fn share_younger(age: f64, young: f64, old: f64) -> f64 {
    if old > young {
        ((age - young) / (old - young)).clamp(0.0, 1.0)
    } else if age >= young {
        1.0
    } else {
        0.0
    }
}

/// How much deeper than a follow's oldest note seen a relay must reach for its history to count
/// as seen to its start ([`AuthorStats::censored`]), at least.
const CENSOR_MARGIN_SECS: f64 = 7.0 * 86_400.0;

/// Weight of the newest sample in the latency moving average.
const LATENCY_EWMA_WEIGHT: f64 = 0.3;

/// How learned evidence fades toward the uniform prior.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Decay {
    /// `x ← 1 + (x − 1) · factor^hours` by wall-clock hours since the last update.
    Hourly {
        /// Per-hour factor in `[0, 1]`; 1 never forgets, 0 forgets at once.
        factor: f64,
    },
    /// `x ← 1 + (x − 1) · factor^sessions` by sessions since the last update (see
    /// [`DeliveryStats::begin_session`]); the clock is ignored.
    PerSession {
        /// Per-session factor in `[0, 1]`.
        factor: f64,
    },
}

impl Default for Decay {
    fn default() -> Self {
        Decay::Hourly {
            factor: DEFAULT_HOURLY_DECAY,
        }
    }
}

impl Decay {
    /// The factor of either mode.
    pub fn factor(&self) -> f64 {
        match *self {
            Decay::Hourly { factor } | Decay::PerSession { factor } => factor,
        }
    }

    /// Whether the factor is a usable number in `[0, 1]`.
    pub fn is_sane(&self) -> bool {
        let f = self.factor();
        f.is_finite() && (0.0..=1.0).contains(&f)
    }
}

/// What is known about one relay's delivery.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayStats {
    /// Beta prior α (1 + weighted successes).
    pub alpha: f64,
    /// Beta prior β (1 + weighted failures).
    pub beta: f64,
    /// Exponentially weighted latency estimate, if the relay ever answered.
    pub latency_ms: Option<f64>,
    /// Unix seconds of the last update.
    pub updated_at: u64,
    /// The session number of the last update (see [`DeliveryStats::begin_session`]).
    pub session: u64,
    /// Times the relay was asked.
    pub asked: u64,
    /// Times it could not be reached or refused.
    pub failures: u64,
    /// Beta α of *liveness*: 1 + runs in which the relay answered (see [`RoundReport`]).
    pub live_alpha: f64,
    /// Beta β of liveness: 1 + runs in which it could not be reached or refused.
    pub live_beta: f64,
    /// Beta α of *completeness*: 1 + the event-weighted share it returned, per answered run, of
    /// what the best relay asked about the same authors returned. Pruning relays score low.
    pub kept_alpha: f64,
    /// Beta β of completeness.
    pub kept_beta: f64,
    /// How far back the relay's history reaches: the age, in seconds when it was returned, of
    /// the oldest note it ever returned (0: it never returned one). A relay that prunes after
    /// 30 days never returns an older note whoever is asked about, so this learns retention
    /// from any author, independent of which relays were asked together.
    pub depth_secs: f64,
}

impl Default for RelayStats {
    /// The uniform prior, Beta(1, 1): nothing known.
    fn default() -> Self {
        Self {
            alpha: 1.0,
            beta: 1.0,
            latency_ms: None,
            updated_at: 0,
            session: 0,
            asked: 0,
            failures: 0,
            live_alpha: 1.0,
            live_beta: 1.0,
            kept_alpha: 1.0,
            kept_beta: 1.0,
            depth_secs: 0.0,
        }
    }
}

impl RelayStats {
    /// The posterior mean α / (α + β).
    pub fn mean(&self) -> f64 {
        self.alpha / (self.alpha + self.beta)
    }

    /// Whether nothing has been learned: exactly the uniform prior Beta(1, 1).
    pub fn is_uniform(&self) -> bool {
        self.alpha == 1.0 && self.beta == 1.0
    }

    /// Posterior mean of liveness: how likely the relay answers a run.
    pub fn live_mean(&self) -> f64 {
        self.live_alpha / (self.live_alpha + self.live_beta)
    }

    /// Posterior mean of completeness: the share of the asked authors' notes it returns.
    pub fn completeness_mean(&self) -> f64 {
        self.kept_alpha / (self.kept_alpha + self.kept_beta)
    }

    /// The former name of [`completeness_mean`](Self::completeness_mean), still used by some
    /// callers; "kept" otherwise means stored between runs.
    pub fn kept_mean(&self) -> f64 {
        self.completeness_mean()
    }

    /// Whether the values are usable (finite, α and β in `[1, MAX_PARAM]`, latency finite and
    /// in `[0, MAX_LATENCY_MS]`).
    pub fn is_sane(&self) -> bool {
        let param_ok = |x: f64| x.is_finite() && (1.0..=MAX_PARAM).contains(&x);
        param_ok(self.alpha)
            && param_ok(self.beta)
            && param_ok(self.live_alpha)
            && param_ok(self.live_beta)
            && param_ok(self.kept_alpha)
            && param_ok(self.kept_beta)
            && self.depth_secs.is_finite()
            && (0.0..=MAX_DEPTH_SECS).contains(&self.depth_secs)
            && self
                .latency_ms
                .is_none_or(|l| l.is_finite() && (0.0..=MAX_LATENCY_MS).contains(&l))
    }

    /// The uniform prior that replaces these stats when they are corrupt; when and how often the
    /// relay was asked are kept (they are integers and cannot be absurd in the same way).
    fn reset(&self) -> Self {
        Self {
            updated_at: self.updated_at,
            session: self.session,
            asked: self.asked,
            failures: self.failures,
            ..Self::default()
        }
    }

    /// These stats decayed from `updated_at` to `now` with hourly factor `decay`.
    pub fn decayed(&self, now: u64, decay: f64) -> Self {
        let hours = now.saturating_sub(self.updated_at) as f64 / 3600.0;
        let mut out = self.shrunk(decay, hours);
        out.updated_at = out.updated_at.max(now);
        out
    }

    /// These stats decayed to `now` and session `session` under `decay`.
    pub fn decayed_by(&self, decay: Decay, now: u64, session: u64) -> Self {
        let mut out = match decay {
            Decay::Hourly { factor } => {
                self.shrunk(factor, now.saturating_sub(self.updated_at) as f64 / 3600.0)
            }
            Decay::PerSession { factor } => {
                self.shrunk(factor, session.saturating_sub(self.session) as f64)
            }
        };
        out.updated_at = out.updated_at.max(now);
        out.session = out.session.max(session);
        out
    }

    /// α and β pulled toward 1 by `factor^elapsed`.
    fn shrunk(&self, factor: f64, elapsed: f64) -> Self {
        if elapsed <= 0.0 || factor >= 1.0 || !factor.is_finite() {
            return *self;
        }
        let f = factor.clamp(0.0, 1.0).powf(elapsed);
        let pull = |x: f64| 1.0 + (x - 1.0) * f;
        Self {
            alpha: pull(self.alpha),
            beta: pull(self.beta),
            live_alpha: pull(self.live_alpha),
            live_beta: pull(self.live_beta),
            kept_alpha: pull(self.kept_alpha),
            kept_beta: pull(self.kept_beta),
            ..*self
        }
    }
}

/// Per-relay delivery statistics keyed by canonical relay URL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeliveryStats {
    relays: HashMap<String, RelayStats>,
    /// How evidence fades toward the uniform prior.
    pub decay: Decay,
    /// The current session number (see [`DeliveryStats::begin_session`]).
    session: u64,
    /// What was learned per followed author, see [`AuthorStats`].
    authors: FastMap<PublicKey, AuthorStats>,
    /// Every relay URL the authors' pairs name, once: their pairs share these.
    #[serde(skip)]
    pair_urls: PairUrls,
    /// The days (unix seconds / 86,400) on which something was learned, the newest
    /// [`FORGET_AFTER_DAYS`] of them: forgetting counts days of use, not the clock
    /// ([`DeliveryStats::prune_at`]).
    days: BTreeSet<u64>,
    /// Relays forgotten on purpose ([`DeliveryStats::forget_at`]), with the time of the forget:
    /// a merge keeps, for such a relay, only learning stamped after it
    /// ([`DeliveryStats::merge_learning`]). At most [`MAX_TOMBSTONES`], dropped like stale
    /// relays by [`DeliveryStats::prune_at`].
    forgotten: BTreeMap<String, u64>,
}

/// The shared pair URLs. Not part of what the stats say, so equal whatever it holds.
#[derive(Clone, Default)]
struct PairUrls(HashSet<Arc<str>>);

impl PairUrls {
    /// The shared copy of `url`, added when there is none.
    fn get(&mut self, url: &str) -> Arc<str> {
        match self.0.get(url) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared: Arc<str> = Arc::from(url);
                self.0.insert(Arc::clone(&shared));
                shared
            }
        }
    }
}

impl PartialEq for PairUrls {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for PairUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} pair URLs", self.0.len())
    }
}

impl DeliveryStats {
    /// No history: every relay has the uniform prior.
    pub fn new() -> Self {
        Self::default()
    }

    /// No history, with the given decay.
    pub fn with_decay(decay: Decay) -> Self {
        Self {
            decay,
            ..Self::default()
        }
    }

    /// Marks the start of a new session and returns its number. In [`Decay::PerSession`] mode
    /// every relay's evidence fades by one factor per session it was not updated in; in hourly
    /// mode the counter is only bookkeeping.
    pub fn begin_session(&mut self) -> u64 {
        self.session = self.session.saturating_add(1);
        self.session
    }

    /// Records that something was learned on the day of `now` (see
    /// [`prune_at`](Self::prune_at)); only the newest [`FORGET_AFTER_DAYS`] days are kept.
    pub fn note_day(&mut self, now: u64) {
        self.days.insert(now / 86_400);
        while self.days.len() > FORGET_AFTER_DAYS {
            self.days.pop_first();
        }
    }

    /// The days something was learned on (unix seconds / 86,400), oldest first: at most
    /// [`FORGET_AFTER_DAYS`].
    pub fn days(&self) -> impl Iterator<Item = u64> + '_ {
        self.days.iter().copied()
    }

    /// Brings every stamp later than `now` back to `now`: a relay or author updated in the
    /// future, or a day of use ahead of today, is a clock that ran ahead or a damaged store,
    /// and would otherwise decide what is forgotten. Returns how many were clamped. Stores call
    /// it on load and on what is stored before a save.
    pub fn clamp_future(&mut self, now: u64) -> usize {
        let mut clamped = 0;
        for s in self.relays.values_mut() {
            if s.updated_at > now {
                s.updated_at = now;
                clamped += 1;
            }
        }
        for a in self.authors.values_mut() {
            if a.updated_at > now {
                a.updated_at = now;
                clamped += 1;
            }
        }
        for at in self.forgotten.values_mut() {
            if *at > now {
                *at = now;
                clamped += 1;
            }
        }
        let today = now / 86_400;
        let ahead = self.days.split_off(&(today.saturating_add(1)));
        clamped += ahead.len();
        if clamped > 0 {
            tracing::warn!(clamped, "stats stamped in the future brought back to now");
        }
        clamped
    }

    /// The current session number (0 before the first [`begin_session`](Self::begin_session)).
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Sets the session counter (for stores restoring a saved state).
    pub fn set_session(&mut self, session: u64) {
        self.session = session;
    }

    /// The decay actually applied: the configured one, or the default if it is corrupt.
    fn effective_decay(&self) -> Decay {
        if self.decay.is_sane() {
            self.decay
        } else {
            Decay::default()
        }
    }

    /// The stats for a relay decayed to `now` (and the current session), or the uniform prior
    /// when nothing (or nothing sane) is known.
    pub fn get_at(&self, url: &str, now: u64) -> RelayStats {
        match self.relays.get(url) {
            Some(s) if s.is_sane() => s.decayed_by(self.effective_decay(), now, self.session),
            Some(s) => {
                tracing::warn!(url, stats = ?s, "corrupt relay stats read as the uniform prior");
                s.reset()
            }
            None => RelayStats::default(),
        }
    }

    /// The stored stats for a relay, undecayed, or the uniform prior.
    pub fn get(&self, url: &str) -> RelayStats {
        self.relays.get(url).copied().unwrap_or_default()
    }

    /// Replaces the stats of one relay; corrupt values are replaced by the uniform prior.
    pub fn set(&mut self, url: impl Into<String>, stats: RelayStats) {
        let url = url.into();
        let stats = if stats.is_sane() {
            stats
        } else {
            tracing::warn!(url, stats = ?stats, "corrupt relay stats replaced by the uniform prior");
            stats.reset()
        };
        self.relays.insert(url, stats);
    }

    /// Resets every corrupt relay (and a corrupt decay setting) to the uniform prior, with a
    /// warning for each, and has every author's pairs share one URL string per relay; returns
    /// how many values were replaced. Stores call this after loading.
    pub fn sanitize(&mut self) -> usize {
        let mut fixed = 0;
        if !self.decay.is_sane() {
            tracing::warn!(decay = ?self.decay, "corrupt decay setting replaced by the default");
            self.decay = Decay::default();
            fixed += 1;
        }
        for (url, s) in self.relays.iter_mut() {
            if !s.is_sane() {
                tracing::warn!(url, stats = ?s, "corrupt relay stats reset to the uniform prior");
                *s = s.reset();
                fixed += 1;
            }
        }
        let before = self.authors.len();
        self.authors.retain(|author, a| {
            let sane = a.is_sane();
            if !sane {
                tracing::warn!(author = %author, "corrupt author stats dropped");
            }
            sane
        });
        // However they were read, the pairs share one URL string per relay from here on.
        for a in self.authors.values_mut() {
            a.relays.intern(&mut self.pair_urls.0);
        }
        fixed + (before - self.authors.len())
    }

    /// The decayed stats of `url`, stamped with the present, ready to be updated.
    fn entry_at(&self, url: &str, now: u64) -> RelayStats {
        let mut s = self.get_at(url, now);
        s.updated_at = now;
        s.session = self.session;
        s
    }

    /// [`entry_at`](Self::entry_at) for a trial: a relay never asked before drops any
    /// prior it was seeded with (a NIP-66 monitor's, see `nostr_outbox_client::monitor`), so the reader's own first
    /// round replaces the stand-in instead of being weighed against it.
    fn first_trial_at(&self, url: &str, now: u64) -> RelayStats {
        let s = self.entry_at(url, now);
        if s.asked > 0 {
            return s;
        }
        RelayStats {
            alpha: 1.0,
            beta: 1.0,
            live_alpha: 1.0,
            live_beta: 1.0,
            kept_alpha: 1.0,
            kept_beta: 1.0,
            ..s
        }
    }

    /// One answered relay's delivery trials: `hits` (the summed shares) out of `trials` authors
    /// (see the module docs); part of [`record_round`](Self::record_round).
    fn record_delivery(&mut self, url: &str, hits: f64, trials: u32, now: u64) {
        let mut s = self.first_trial_at(url, now);
        s.asked = s.asked.saturating_add(1);
        if trials > 0 && hits.is_finite() {
            let hits = hits.clamp(0.0, f64::from(trials));
            s.alpha = (s.alpha + hits).min(MAX_PARAM);
            s.beta = (s.beta + (f64::from(trials) - hits)).min(MAX_PARAM);
        }
        self.relays.insert(url.to_string(), s);
    }

    /// One failed relay: `trials` full delivery failures (at least one); part of
    /// [`record_round`](Self::record_round).
    fn record_failure(&mut self, url: &str, trials: u32, now: u64) {
        let mut s = self.first_trial_at(url, now);
        s.asked = s.asked.saturating_add(1);
        s.failures = s.failures.saturating_add(1);
        s.beta = (s.beta + f64::from(trials.max(1))).min(MAX_PARAM);
        self.relays.insert(url.to_string(), s);
    }

    /// A relay answered something other than a fetch — an `OK` to a published event — so it is
    /// up: one liveness success, nothing about what it delivers. Not part of a round.
    pub fn record_alive(&mut self, url: &str, now: u64) {
        self.note_day(now);
        let mut s = self.entry_at(url, now);
        s.live_alpha = (s.live_alpha + 1.0).min(MAX_PARAM);
        self.relays.insert(url.to_string(), s);
    }

    /// Folds a measured latency (REQ sent to EOSE) into the relay's moving average. Not part of
    /// a round: a client adds it when the EOSE arrives. NaN, infinite, negative or absurdly
    /// large samples are ignored with a trace event.
    pub fn record_latency(&mut self, url: &str, latency_ms: f64, now: u64) {
        if !latency_ms.is_finite() || !(0.0..=MAX_LATENCY_MS).contains(&latency_ms) {
            tracing::debug!(url, latency_ms, "ignoring absurd latency sample");
            return;
        }
        self.note_day(now);
        let mut s = self.entry_at(url, now);
        s.latency_ms = Some(match s.latency_ms {
            Some(old) => old + LATENCY_EWMA_WEIGHT * (latency_ms - old),
            None => latency_ms,
        });
        self.relays.insert(url.to_string(), s);
    }

    /// Forgets what was learned about one relay (its per-author pair evidence stays); returns
    /// whether anything was known. Leaves no tombstone: a merge may bring the relay back (see
    /// [`forget_at`](Self::forget_at)).
    pub fn forget(&mut self, url: &str) -> bool {
        self.relays.remove(url).is_some()
    }

    /// Forgets one relay on purpose at `now`: its stats and its evidence for every author (the
    /// per-follow pairs), and leaves a tombstone, so a run that loaded before and saves after
    /// keeps for that relay only what it learned after the forget
    /// ([`merge_learning`](Self::merge_learning)). Returns whether anything was known.
    pub fn forget_at(&mut self, url: &str, now: u64) -> bool {
        let mut known = self.relays.remove(url).is_some();
        for a in self.authors.values_mut() {
            known |= a.relays.remove(url).is_some();
        }
        self.note_forgotten(url, now);
        known
    }

    /// Records that `url` was forgotten at `at` (keeping the later time if it already was);
    /// beyond [`MAX_TOMBSTONES`] the oldest tombstones are dropped. For stores restoring what
    /// they kept, and for merges.
    pub fn note_forgotten(&mut self, url: &str, at: u64) {
        match self.forgotten.get_mut(url) {
            Some(old) => *old = (*old).max(at),
            None => {
                self.forgotten.insert(url.to_string(), at);
            }
        }
        self.cap_tombstones();
    }

    /// Drops the oldest tombstones beyond [`MAX_TOMBSTONES`] (ties: by URL).
    fn cap_tombstones(&mut self) {
        if self.forgotten.len() <= MAX_TOMBSTONES {
            return;
        }
        let mut order: Vec<(u64, String)> = self
            .forgotten
            .iter()
            .map(|(url, at)| (*at, url.clone()))
            .collect();
        order.sort_unstable();
        let excess = order.len() - MAX_TOMBSTONES;
        for (_, url) in order.into_iter().take(excess) {
            self.forgotten.remove(&url);
        }
    }

    /// The relays forgotten on purpose, by URL, with the time of the forget.
    pub fn forgotten(&self) -> impl Iterator<Item = (&str, u64)> {
        self.forgotten.iter().map(|(url, at)| (url.as_str(), *at))
    }

    /// When `url` was forgotten on purpose, if it was.
    pub fn forgotten_at(&self, url: &str) -> Option<u64> {
        self.forgotten.get(url).copied()
    }

    /// Number of relays with recorded stats.
    pub fn len(&self) -> usize {
        self.relays.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.relays.is_empty()
    }

    /// Every relay with recorded stats (stored values, undecayed).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RelayStats)> {
        self.relays.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// What was learned about one author, if anything.
    #[inline]
    pub fn author(&self, author: &PublicKey) -> Option<&AuthorStats> {
        self.authors.get(author)
    }

    /// Replaces what is known about one author; corrupt values are dropped with a warning.
    pub fn set_author(&mut self, author: PublicKey, mut stats: AuthorStats) {
        if stats.is_sane() {
            stats.relays.intern(&mut self.pair_urls.0);
            self.authors.insert(author, stats);
        } else {
            tracing::warn!(author = %author, "corrupt author stats dropped");
            self.authors.remove(&author);
        }
    }

    /// Every author with recorded stats.
    pub fn authors(&self) -> impl Iterator<Item = (&PublicKey, &AuthorStats)> {
        self.authors.iter()
    }
}

/// What was learned about one followed author from what relays returned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorStats {
    /// Notes seen per run in the REQ window: the most any asked relay returned, remembered with
    /// a slow fade so a run in which only a pruning relay answered does not erase it.
    pub volume: f64,
    /// Unix seconds of the last update.
    pub updated_at: u64,
    /// `created_at` of the oldest note of the author any relay returned (0: none seen).
    pub first: u64,
    /// `created_at` of the newest note of the author any relay returned (0: none seen).
    pub last: u64,
    /// How far back the relays that returned some of the author's notes reach (the deepest
    /// one's [`RelayStats::depth_secs`]): notes older than `first` would have been seen up to
    /// this age. When it is no deeper than `first`, the author's history may go back further.
    pub probed_secs: f64,
    /// Per relay (canonical URL) asked about this author: the share it returned of the notes
    /// its history reaches back to (see [`RelayStats::depth_secs`]), as (hits, misses). Catches
    /// writes that silently fail on one relay for one author.
    pub relays: Pairs,
}

/// Evidence about one (relay, author) pair: fractional hits and misses over answered runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PairStats {
    /// Share of the author's notes the relay returned, summed over runs.
    pub hits: f64,
    /// One minus that share, summed over runs.
    pub misses: f64,
}

impl PairStats {
    /// Posterior mean under a Beta(1, 1) prior.
    #[inline]
    pub fn mean(&self) -> f64 {
        (1.0 + self.hits) / (2.0 + self.hits + self.misses)
    }
}

impl AuthorStats {
    /// Whether the author's history may go back further than its oldest note seen at `now`:
    /// no relay that returned its notes reaches more than a week (or a tenth of that note's
    /// age) deeper, so only relays that prune were asked. Planning and probing read a history
    /// this way.
    pub fn censored(&self, now: u64) -> bool {
        let seen_old = now.saturating_sub(self.first) as f64;
        self.probed_secs <= seen_old + CENSOR_MARGIN_SECS.max(0.1 * seen_old)
    }

    /// Whether every number is finite, non-negative and not absurd.
    pub fn is_sane(&self) -> bool {
        let ok = |x: f64| x.is_finite() && (0.0..=MAX_PARAM).contains(&x);
        ok(self.volume)
            && self.first <= self.last
            && self.probed_secs.is_finite()
            && (0.0..=MAX_DEPTH_SECS).contains(&self.probed_secs)
            && self.relays.values().all(|p| ok(p.hits) && ok(p.misses))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ok_to_a_publish_raises_liveness_only() {
        let mut s = DeliveryStats::new();
        let before = s.get_at("wss://w.example", 5);
        s.record_alive("wss://w.example", 5);
        let after = s.get_at("wss://w.example", 5);
        assert!(
            after.live_mean() > before.live_mean(),
            "{before:?} {after:?}"
        );
        assert_eq!(after.mean(), before.mean());
        assert_eq!(s.session, 0, "not a session");
    }

    #[test]
    fn forget_drops_one_relay_only() {
        let mut s = DeliveryStats::new();
        s.record_delivery("wss://a.example", 1.0, 1, 5);
        s.record_delivery("wss://b.example", 1.0, 1, 5);
        assert!(s.forget("wss://a.example"));
        assert!(!s.forget("wss://a.example"));
        assert_eq!(s.len(), 1);
        assert_eq!(s.iter().next().map(|(u, _)| u), Some("wss://b.example"));
    }

    #[test]
    fn delivery_moves_the_mean_and_decay_pulls_it_back() {
        let mut s = DeliveryStats::new();
        for t in 0..5 {
            s.record_delivery("wss://good.example", 10.0, 10, t);
            s.record_delivery("wss://bad.example", 0.0, 10, t);
        }
        let good = s.get_at("wss://good.example", 5);
        let bad = s.get_at("wss://bad.example", 5);
        assert!(good.mean() > 0.8 && bad.mean() < 0.2, "{good:?} {bad:?}");
        let later = s.get_at("wss://good.example", 5 + 48 * 3600);
        assert!((later.mean() - 0.5).abs() < good.mean() - 0.5);
        assert!(later.alpha > 1.0);
        // Decay on write: an update after two days starts from the decayed prior.
        s.record_delivery("wss://good.example", 0.0, 0, 5 + 48 * 3600);
        let stored = s.get("wss://good.example");
        assert!(
            (stored.alpha - later.alpha).abs() < 1e-9,
            "{stored:?} {later:?}"
        );
    }

    #[test]
    fn hourly_decay_follows_the_formula() {
        let mut s = DeliveryStats::new();
        s.set(
            "wss://a.example",
            RelayStats {
                alpha: 11.0,
                beta: 3.0,
                ..RelayStats::default()
            },
        );
        let r = s.get_at("wss://a.example", 10 * 3600);
        let f = DEFAULT_HOURLY_DECAY.powi(10);
        assert!((r.alpha - (1.0 + 10.0 * f)).abs() < 1e-9);
        assert!((r.beta - (1.0 + 2.0 * f)).abs() < 1e-9);
    }

    #[test]
    fn per_session_decay_ignores_the_clock() {
        let mut s = DeliveryStats::with_decay(Decay::PerSession { factor: 0.5 });
        s.begin_session();
        for _ in 0..4 {
            s.record_delivery("wss://a.example", 1.0, 1, 100);
        }
        let now = s.get_at("wss://a.example", 100);
        // Three of the four updates were decayed 0 sessions: α = 5 exactly.
        assert!((now.alpha - 5.0).abs() < 1e-9, "{now:?}");
        // A day later, same session: no decay at all.
        assert_eq!(s.get_at("wss://a.example", 100 + 86_400).alpha, now.alpha);
        s.begin_session();
        s.begin_session();
        let later = s.get_at("wss://a.example", 100);
        assert!((later.alpha - (1.0 + 4.0 * 0.25)).abs() < 1e-9, "{later:?}");
    }

    /// Stores `stats` for `wss://x.example` as they are, corrupt or not (unlike
    /// [`DeliveryStats::set`]).
    fn put_x(s: &mut DeliveryStats, stats: RelayStats) {
        s.relays.insert("wss://x.example".into(), stats);
    }

    #[test]
    fn corrupt_values_read_as_uniform() {
        let mut s = DeliveryStats::new();
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -3.0, 0.5, 1e300] {
            put_x(
                &mut s,
                RelayStats {
                    alpha: bad,
                    asked: 7,
                    ..RelayStats::default()
                },
            );
            let read = s.get_at("wss://x.example", 0);
            assert!(read.is_uniform() && read.asked == 7, "{bad}: {read:?}");
        }
        s.set(
            "wss://y.example",
            RelayStats {
                beta: -3.0,
                ..RelayStats::default()
            },
        );
        assert!(s.get("wss://y.example").is_sane());
        s.set(
            "wss://z.example",
            RelayStats {
                latency_ms: Some(f64::NAN),
                ..RelayStats::default()
            },
        );
        assert_eq!(s.get("wss://z.example").latency_ms, None);
    }

    #[test]
    fn sanitize_shares_pair_urls_however_the_stats_were_read() {
        let mut s = DeliveryStats::new();
        for i in 0..2u8 {
            let mut a = AuthorStats::default();
            a.relays.insert(
                String::from("wss://x.example"),
                PairStats {
                    hits: 1.0,
                    misses: 0.0,
                },
            );
            // Straight into the map, as a deserialized file would be.
            s.authors.insert(PublicKey::from_byte_array([i + 1; 32]), a);
        }
        let url = |s: &DeliveryStats, i: u8| {
            let a = &s.authors[&PublicKey::from_byte_array([i + 1; 32])];
            Arc::clone(&a.relays.shared()[0].0)
        };
        assert!(!Arc::ptr_eq(&url(&s, 0), &url(&s, 1)));
        assert_eq!(s.sanitize(), 0);
        assert!(Arc::ptr_eq(&url(&s, 0), &url(&s, 1)));
    }

    #[test]
    fn sanitize_resets_relays_and_decay_and_counts_them() {
        let mut s = DeliveryStats::with_decay(Decay::Hourly { factor: f64::NAN });
        let corrupt = RelayStats {
            beta: f64::INFINITY,
            ..RelayStats::default()
        };
        put_x(&mut s, corrupt);
        s.record_delivery("wss://ok.example", 1.0, 2, 0);
        assert_eq!(s.sanitize(), 2);
        assert_eq!(s.decay, Decay::default());
        assert!(s.get("wss://x.example").is_uniform());
        assert!(!s.get("wss://ok.example").is_uniform());
        assert_eq!(s.sanitize(), 0);
    }

    #[test]
    fn recording_on_corrupt_stats_relearns_from_uniform() {
        let mut s = DeliveryStats::new();
        let corrupt = RelayStats {
            alpha: f64::NAN,
            ..RelayStats::default()
        };
        put_x(&mut s, corrupt);
        s.record_delivery("wss://x.example", 1.0, 1, 10);
        let r = s.get("wss://x.example");
        assert!(r.is_sane());
        assert!((r.alpha - 2.0).abs() < 1e-9 && (r.beta - 1.0).abs() < 1e-9);
    }

    #[test]
    fn absurd_latency_samples_are_ignored() {
        let mut s = DeliveryStats::new();
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e12] {
            s.record_latency("wss://a.example", bad, 0);
        }
        assert!(s.is_empty());
        s.record_latency("wss://a.example", 100.0, 0);
        s.record_latency("wss://a.example", 200.0, 0);
        let l = s.get("wss://a.example").latency_ms.unwrap();
        assert!((l - 130.0).abs() < 1e-9);
    }
}
