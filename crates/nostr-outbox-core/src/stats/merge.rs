//! Keeping stored stats whole when several runs save to one store, and bounded.
//!
//! A run loads the stored stats (its *base*), learns, and saves. Another run may have saved in
//! between; replacing what is stored would lose that run's learning (the last writer wins).
//! [`DeliveryStats::merge_learning`] instead folds into what is stored *now* what the run
//! learned since its base: counts and evidence add, the session counter advances from the
//! stored value. Where nobody else wrote, the result is exactly the run's stats.
//!
//! [`DeliveryStats::prune_at`] bounds what a store keeps: relays not updated on any of the
//! last [`FORGET_AFTER_DAYS`] days something was learned, and beyond [`MAX_STORED_RELAYS`]
//! (and authors beyond [`MAX_STORED_AUTHORS`]) the least recently updated, are forgotten.

//!
//! A relay forgotten on purpose ([`DeliveryStats::forget_at`]) leaves a tombstone: a merge
//! that finds one its run's base did not have keeps, for that relay (its stats and every
//! follow's pair with it), only learning stamped after the forget: what others saved after it,
//! and what the run learned since its base if the run last updated it after the forget. At most
//! [`MAX_TOMBSTONES`] are kept, forgotten after [`FORGET_AFTER_DAYS`] days of use like stale
//! relays.

use nostr::key::PublicKey;

use super::{AuthorStats, DeliveryStats, PairStats, Pairs, RelayStats, MAX_PARAM};

/// The most tombstones of forgotten relays kept ([`DeliveryStats::forget_at`]); beyond it the
/// oldest are dropped (a run that loaded before such an old forget may then bring the relay's
/// old learning back).
pub const MAX_TOMBSTONES: usize = 1_000;

/// The most relays a store keeps (a reader's follows name a few thousand); beyond it the least
/// recently updated are forgotten. A bound on the size of a stats file and on what a load
/// allocates.
pub const MAX_STORED_RELAYS: usize = 20_000;

/// The most followed authors a store keeps per-author stats for; beyond it the least recently
/// updated are forgotten (and learned again if followed).
pub const MAX_STORED_AUTHORS: usize = 50_000;

/// A relay or author not updated on any of the last this many days on which the stats learned
/// something (half a year of use) is forgotten: it is no longer listed or no longer answers.
/// Days without a run do not count, so a pause of any length forgets nothing; stamps in the
/// future are clamped to the present first ([`DeliveryStats::clamp_future`]), so a clock that
/// ran ahead forgets nothing either.
pub const FORGET_AFTER_DAYS: usize = 183;

/// [`FORGET_AFTER_DAYS`] in seconds: half a year of use.
pub const FORGET_AFTER_SECS: u64 = FORGET_AFTER_DAYS as u64 * 86_400;

impl DeliveryStats {
    /// Folds what `run` learned since `base` (what it loaded) into `self` (what is stored now).
    ///
    /// Per relay, author and pair: unchanged by the run, the stored value stays; unchanged since
    /// the base by others, the run's value is taken; changed by both, the run's differences
    /// are added to the stored value (α, β and pair evidence within their bounds, counters
    /// saturating), the newest latency and the deepest depth kept. An entry the run dropped
    /// (pruned) that nobody else changed is dropped. With nothing stored, the result is the run's
    /// stats. The session counter advances by the
    /// sessions the run began; the decay setting is the run's.
    pub fn merge_learning(&mut self, base: &DeliveryStats, run: &DeliveryStats) {
        if self.session == 0
            && self.relays.is_empty()
            && self.authors.is_empty()
            && self.forgotten.is_empty()
        {
            // Nothing stored (never saved, or set aside as unreadable): the run's stats whole.
            *self = run.clone();
            return;
        }
        // Forgets the run's base did not see, with what is stored of those relays before the
        // merge: they are merged apart below.
        let unseen = self.unseen_forgets(base, run);
        let before: Vec<Sides> = unseen
            .iter()
            .map(|u| Sides {
                relay: self.relays.get(&u.url).map(|r| (*r, r.updated_at)),
                pairs: self
                    .authors
                    .iter()
                    .filter_map(|(k, a)| a.relays.get(&u.url).map(|p| (*k, (*p, a.updated_at))))
                    .collect(),
            })
            .collect();
        // Tombstones merge like entries: a later forget wins.
        let mut forgotten: Vec<String> = run
            .forgotten
            .keys()
            .chain(base.forgotten.keys())
            .cloned()
            .collect();
        forgotten.sort_unstable();
        forgotten.dedup();
        for url in forgotten {
            let merged = merge_entry(
                self.forgotten.get(&url),
                base.forgotten.get(&url),
                run.forgotten.get(&url),
                |t, _, r| (*t).max(*r),
            );
            match merged {
                Some(at) => self.forgotten.insert(url, at),
                None => self.forgotten.remove(&url),
            };
        }
        self.cap_tombstones();
        let stored_session = self.session;
        self.session = if stored_session == base.session {
            run.session
        } else {
            stored_session.saturating_add(run.session.saturating_sub(base.session))
        };
        self.decay = run.decay;
        for day in run.days() {
            self.note_day(day * 86_400);
        }
        let mut urls: Vec<String> = run
            .relays
            .keys()
            .chain(base.relays.keys())
            .cloned()
            .collect();
        urls.sort_unstable();
        urls.dedup();
        for url in urls {
            let merged = merge_entry(
                self.relays.get(&url),
                base.relays.get(&url),
                run.relays.get(&url),
                |t, b, r| combine_relay(t, b.unwrap_or(&RelayStats::default()), r),
            );
            match merged {
                Some(m) => self.relays.insert(url, m),
                None => self.relays.remove(&url),
            };
        }
        let mut authors: Vec<_> = run
            .authors
            .keys()
            .chain(base.authors.keys())
            .copied()
            .collect();
        authors.sort_unstable();
        authors.dedup();
        for author in authors {
            let merged = merge_entry(
                self.authors.get(&author),
                base.authors.get(&author),
                run.authors.get(&author),
                combine_author,
            );
            match merged {
                Some(mut m) => {
                    m.relays.intern(&mut self.pair_urls.0);
                    self.authors.insert(author, m)
                }
                None => self.authors.remove(&author),
            };
        }
        for (u, stored) in unseen.iter().zip(before) {
            self.merge_forgotten(u, stored, base, run);
        }
    }

    /// The relays with a tombstone (stored now or the run's) later than the base's.
    fn unseen_forgets(&self, base: &DeliveryStats, run: &DeliveryStats) -> Vec<Unseen> {
        let mut urls: Vec<&String> = self.forgotten.keys().chain(run.forgotten.keys()).collect();
        urls.sort_unstable();
        urls.dedup();
        urls.into_iter()
            .filter_map(|url| {
                let stored = self.forgotten.get(url).copied().unwrap_or(0);
                let ran = run.forgotten.get(url).copied().unwrap_or(0);
                let at = stored.max(ran);
                (at > base.forgotten.get(url).copied().unwrap_or(0)).then(|| Unseen {
                    url: url.clone(),
                    at,
                    stored_saw: stored >= at,
                    run_saw: ran >= at,
                })
            })
            .collect()
    }

    /// One forgotten relay's stats and pairs after a merge: only learning stamped after the
    /// forget (see the module docs).
    fn merge_forgotten(
        &mut self,
        u: &Unseen,
        stored: Sides,
        base: &DeliveryStats,
        run: &DeliveryStats,
    ) {
        let relay = after_forget(
            stored.relay.as_ref().map(|(r, at)| (r, *at)),
            base.relays.get(&u.url),
            run.relays.get(&u.url).map(|r| (r, r.updated_at)),
            u,
            relay_delta,
        );
        match relay {
            Some(r) => self.relays.insert(u.url.clone(), r),
            None => self.relays.remove(&u.url),
        };
        let mut authors: Vec<PublicKey> = stored
            .pairs
            .iter()
            .map(|(k, _)| *k)
            .chain(
                base.authors
                    .iter()
                    .filter(|(_, a)| a.relays.get(&u.url).is_some())
                    .map(|(k, _)| *k),
            )
            .chain(
                run.authors
                    .iter()
                    .filter(|(_, a)| a.relays.get(&u.url).is_some())
                    .map(|(k, _)| *k),
            )
            .collect();
        authors.sort_unstable();
        authors.dedup();
        let shared = self.pair_urls.get(&u.url);
        for key in authors {
            let t = stored
                .pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, (p, at))| (p, *at));
            let b = base.authors.get(&key).and_then(|a| a.relays.get(&u.url));
            let r = run
                .authors
                .get(&key)
                .and_then(|a| a.relays.get(&u.url).map(|p| (p, a.updated_at)));
            let merged = after_forget(t, b, r, u, pair_delta);
            let Some(author) = self.authors.get_mut(&key) else {
                continue;
            };
            match merged {
                Some(p) => {
                    author.relays.insert(std::sync::Arc::clone(&shared), p);
                }
                None => {
                    author.relays.remove(&u.url);
                }
            }
        }
    }

    /// [`prune_at`](Self::prune_at) without a present to protect.
    pub fn prune(&mut self) -> usize {
        self.prune_at(u64::MAX)
    }

    /// Forgets relays and authors not updated on any of the last [`FORGET_AFTER_DAYS`] days
    /// on which something was learned (none while fewer days were recorded), then the least
    /// recently updated beyond [`MAX_STORED_RELAYS`] and [`MAX_STORED_AUTHORS`] (ties: the
    /// most asked relay stays, then by URL or key). Nothing updated on the day of `now` (what
    /// the current run learned) is forgotten for its age. Returns how many entries were
    /// forgotten. Stores call it on load and before saving, after
    /// [`clamp_future`](Self::clamp_future).
    pub fn prune_at(&mut self, now: u64) -> usize {
        let before = self.relays.len() + self.authors.len();
        let today = now / 86_400;
        // The oldest of the last FORGET_AFTER_DAYS days of use, once there are that many.
        let horizon = if self.days.len() >= FORGET_AFTER_DAYS {
            self.days.iter().rev().nth(FORGET_AFTER_DAYS - 1).copied()
        } else {
            None
        };
        let stale = |at: u64| horizon.is_some_and(|h| at / 86_400 < h && at / 86_400 < today);
        self.relays.retain(|_, r| !stale(r.updated_at));
        if self.relays.len() > MAX_STORED_RELAYS {
            let mut order: Vec<(&String, &RelayStats)> = self.relays.iter().collect();
            order.sort_by(|(ua, a), (ub, b)| {
                (b.updated_at, b.asked)
                    .cmp(&(a.updated_at, a.asked))
                    .then_with(|| ua.cmp(ub))
            });
            let forget: Vec<String> = order[MAX_STORED_RELAYS..]
                .iter()
                .map(|(url, _)| (*url).clone())
                .collect();
            for url in forget {
                self.relays.remove(&url);
            }
        }
        self.authors.retain(|_, a| !stale(a.updated_at));
        self.forgotten.retain(|_, at| !stale(*at));
        self.cap_tombstones();
        if self.authors.len() > MAX_STORED_AUTHORS {
            let mut order: Vec<_> = self
                .authors
                .iter()
                .map(|(k, a)| (a.updated_at, *k))
                .collect();
            order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            for (_, key) in order.split_off(MAX_STORED_AUTHORS) {
                self.authors.remove(&key);
            }
        }
        let forgotten = before - (self.relays.len() + self.authors.len());
        if forgotten > 0 {
            tracing::info!(
                forgotten,
                "stats of long-unseen relays and authors forgotten"
            );
        }
        forgotten
    }
}

/// A forget the run's base did not see.
struct Unseen {
    url: String,
    /// The time of the forget.
    at: u64,
    /// What is stored already honours it (its entries are learning after the forget).
    stored_saw: bool,
    /// The run made it (its entries are learning after the forget).
    run_saw: bool,
}

/// What was stored of one forgotten relay before a merge, with the stamps of its updates.
struct Sides {
    relay: Option<(RelayStats, u64)>,
    pairs: Vec<(PublicKey, (PairStats, u64))>,
}

/// One entry of a relay forgotten since the run's base: what is stored (`t`) and what the run
/// holds (`r`), each with the time it was last updated, and the base's (`b`). A side that
/// honours the forget counts whole; a side that does not counts only its learning since the
/// base (`x − b`), and only when it was updated after the forget; the rest was learned before
/// the forget and is dropped. `delta(onto, b, x)` adds `x − b` onto `onto`.
fn after_forget<T: Clone + PartialEq + Default>(
    t: Option<(&T, u64)>,
    b: Option<&T>,
    r: Option<(&T, u64)>,
    u: &Unseen,
    delta: fn(&T, &T, &T) -> T,
) -> Option<T> {
    let zero = T::default();
    let b_or = b.unwrap_or(&zero);
    let stored = match t {
        Some((t, _)) if u.stored_saw => Some(t.clone()),
        Some((t, at)) if at > u.at && b != Some(t) => Some(delta(&zero, b_or, t)),
        _ => None,
    };
    let (ran, whole) = match r {
        Some((r, _)) if u.run_saw => (Some(r), true),
        Some((r, at)) if at > u.at && b != Some(r) => (Some(r), false),
        _ => (None, false),
    };
    match (stored, ran) {
        (s, None) => s,
        (None, Some(r)) if whole => Some(r.clone()),
        (Some(s), Some(r)) if whole => Some(delta(&s, &zero, r)),
        (s, Some(r)) => Some(delta(s.as_ref().unwrap_or(&zero), b_or, r)),
    }
}

/// `onto + (r − b)` for a relay, taking from `r` only what changed since `b`.
fn relay_delta(onto: &RelayStats, b: &RelayStats, r: &RelayStats) -> RelayStats {
    RelayStats {
        depth_secs: if r.depth_secs != b.depth_secs {
            onto.depth_secs.max(r.depth_secs)
        } else {
            onto.depth_secs
        },
        ..combine_relay(onto, b, r)
    }
}

/// `onto + (r − b)` for a pair.
fn pair_delta(onto: &PairStats, b: &PairStats, r: &PairStats) -> PairStats {
    PairStats {
        hits: add(onto.hits, b.hits, r.hits, 0.0),
        misses: add(onto.misses, b.misses, r.misses, 0.0),
    }
}

/// One entry of a three-way merge: `stored` now, the run's `base` and the `run`'s own.
fn merge_entry<T: Clone + PartialEq>(
    stored: Option<&T>,
    base: Option<&T>,
    run: Option<&T>,
    combine: impl Fn(&T, Option<&T>, &T) -> T,
) -> Option<T> {
    match (stored, base, run) {
        // Nobody else changed it since the run loaded it: the run's view (or its removal).
        (Some(t), Some(b), r) if t == b => r.cloned(),
        (None, _, r) => r.cloned(),
        // The run did not change it: what is stored stays.
        (Some(t), Some(b), Some(r)) if r == b => Some(t.clone()),
        (Some(t), _, None) => Some(t.clone()),
        (Some(t), b, Some(r)) => Some(combine(t, b, r)),
    }
}

/// `stored + (run − base)`, within `[lo, MAX_PARAM]`.
fn add(stored: f64, base: f64, run: f64, lo: f64) -> f64 {
    let v = stored + (run - base);
    if v.is_finite() {
        v.clamp(lo, MAX_PARAM)
    } else {
        stored
    }
}

fn count(stored: u64, base: u64, run: u64) -> u64 {
    stored.saturating_add(run.saturating_sub(base))
}

fn combine_relay(t: &RelayStats, b: &RelayStats, r: &RelayStats) -> RelayStats {
    RelayStats {
        alpha: add(t.alpha, b.alpha, r.alpha, 1.0),
        beta: add(t.beta, b.beta, r.beta, 1.0),
        latency_ms: if r.latency_ms != b.latency_ms {
            r.latency_ms
        } else {
            t.latency_ms
        },
        updated_at: t.updated_at.max(r.updated_at),
        session: t.session.max(r.session),
        asked: count(t.asked, b.asked, r.asked),
        failures: count(t.failures, b.failures, r.failures),
        live_alpha: add(t.live_alpha, b.live_alpha, r.live_alpha, 1.0),
        live_beta: add(t.live_beta, b.live_beta, r.live_beta, 1.0),
        kept_alpha: add(t.kept_alpha, b.kept_alpha, r.kept_alpha, 1.0),
        kept_beta: add(t.kept_beta, b.kept_beta, r.kept_beta, 1.0),
        depth_secs: t.depth_secs.max(r.depth_secs),
    }
}

fn combine_author(t: &AuthorStats, b: Option<&AuthorStats>, r: &AuthorStats) -> AuthorStats {
    let empty = AuthorStats::default();
    let b = b.unwrap_or(&empty);
    let seen = |x: u64, y: u64| match (x, y) {
        (0, v) | (v, 0) => v,
        (x, y) => x.min(y),
    };
    let mut relays = Pairs::new();
    let mut urls: Vec<&str> = t
        .relays
        .iter()
        .chain(r.relays.iter())
        .map(|(u, _)| u)
        .collect();
    urls.sort_unstable();
    urls.dedup();
    for url in urls {
        let merged = merge_entry(t.relays.get(url), b.relays.get(url), r.relays.get(url), {
            |t: &PairStats, b: Option<&PairStats>, r: &PairStats| {
                let b = b.copied().unwrap_or_default();
                PairStats {
                    hits: add(t.hits, b.hits, r.hits, 0.0),
                    misses: add(t.misses, b.misses, r.misses, 0.0),
                }
            }
        });
        if let Some(p) = merged {
            relays.insert(url.to_string(), p);
        }
    }
    AuthorStats {
        volume: if r.volume != b.volume {
            r.volume
        } else {
            t.volume
        },
        updated_at: t.updated_at.max(r.updated_at),
        first: seen(t.first, r.first),
        last: t.last.max(r.last),
        probed_secs: t.probed_secs.max(r.probed_secs),
        relays,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    /// One entry dated 400 days ahead (or at `u64::MAX`) forgets nothing once clamped, and
    /// neither does a 200-day pause: what the run learned and what it did not touch stay.
    #[test]
    fn a_future_stamp_or_a_long_pause_forgets_nothing() {
        let now = 20_000 * DAY;
        for future in [now + 400 * DAY, u64::MAX] {
            let mut stored = DeliveryStats::new();
            stored.set("wss://old.example", learned(1, 2.0, now - 10 * DAY));
            stored.set("wss://ahead.example", learned(1, 2.0, future));
            stored.note_day(now - 10 * DAY);
            stored.note_day(future);
            stored.clamp_future(now);
            let base = stored.clone();
            let mut run = base.clone();
            run.record_alive("wss://run.example", now);
            stored.merge_learning(&base, &run);
            stored.prune_at(now);
            let urls: Vec<&str> = {
                let mut v: Vec<&str> = stored.iter().map(|(u, _)| u).collect();
                v.sort_unstable();
                v
            };
            assert_eq!(
                urls,
                [
                    "wss://ahead.example",
                    "wss://old.example",
                    "wss://run.example"
                ]
            );
            assert!(stored.days().all(|d| d <= now / DAY));
        }
        // Half a year of daily use, then a 200-day pause: the next run forgets nothing.
        let mut s = DeliveryStats::new();
        s.set("wss://daily.example", learned(1, 2.0, now));
        s.set("wss://once.example", learned(1, 2.0, now - 10 * DAY));
        for day in 0..150 {
            s.note_day(now - day * DAY);
        }
        let later = now + 200 * DAY;
        s.record_alive("wss://daily.example", later);
        assert_eq!(s.prune_at(later), 0);
        assert_eq!(s.len(), 2);
    }

    fn learned(asked: u64, alpha: f64, at: u64) -> RelayStats {
        RelayStats {
            alpha,
            asked,
            updated_at: at,
            ..RelayStats::default()
        }
    }

    #[test]
    fn runs_from_one_base_add_up_and_a_lone_run_is_taken_whole() {
        let mut base = DeliveryStats::new();
        base.set_session(3);
        base.set("wss://a.example", learned(2, 3.0, 10));
        let mut stored = base.clone();
        for _ in 0..4 {
            let mut run = base.clone();
            run.begin_session();
            run.set("wss://a.example", learned(3, 4.5, 20));
            run.set("wss://new.example", learned(1, 2.0, 20));
            stored.merge_learning(&base, &run);
        }
        assert_eq!(stored.session(), 7);
        let a = stored.get("wss://a.example");
        assert_eq!((a.asked, a.alpha), (6, 9.0));
        assert_eq!(stored.get("wss://new.example").asked, 4);

        // Nobody else wrote: exactly the run's stats.
        let mut run = stored.clone();
        run.begin_session();
        run.set("wss://a.example", learned(9, 0.1 + 2.0, 30));
        let mut again = stored.clone();
        again.merge_learning(&stored, &run);
        assert_eq!(again, run);
    }

    fn with_pair(mut s: DeliveryStats, url: &str, hits: f64, at: u64) -> DeliveryStats {
        let key = PublicKey::from_byte_array([7; 32]);
        let mut a = s.author(&key).cloned().unwrap_or_default();
        a.updated_at = at;
        let old = a.relays.get(url).map_or(0.0, |p| p.hits);
        a.relays.insert(
            url.to_string(),
            PairStats {
                hits: old + hits,
                misses: 0.0,
            },
        );
        s.set_author(key, a);
        s
    }

    fn pair_hits(s: &DeliveryStats, url: &str) -> Option<f64> {
        let key = PublicKey::from_byte_array([7; 32]);
        s.author(&key)
            .and_then(|a| a.relays.get(url))
            .map(|p| p.hits)
    }

    /// A run that loaded before a forget keeps, for that relay, only what it learned after the
    /// forget, whichever saved first; its learning about other relays is kept whole.
    #[test]
    fn a_forget_sticks_against_a_run_that_loaded_before_it() {
        let u = "wss://gone.example";
        let mut base = DeliveryStats::new();
        base.set(u, learned(4, 5.0, 10));
        base.set("wss://other.example", learned(1, 2.0, 10));
        let base = with_pair(base, u, 3.0, 10);
        let forgotten_at = 100;
        let mut cli = base.clone();
        assert!(cli.forget_at(u, forgotten_at));
        assert_eq!(pair_hits(&cli, u), None, "the follows' pairs go too");
        for learned_at in [50, 200] {
            let mut run = base.clone();
            run.set(u, learned(5, 6.0, learned_at));
            run.set("wss://other.example", learned(2, 3.0, learned_at));
            let run = with_pair(run, u, 1.0, learned_at);
            // The forget saved first, then the run; and the other way round.
            let mut cli_first = base.clone();
            cli_first.merge_learning(&base, &cli);
            cli_first.merge_learning(&base, &run);
            let mut run_first = base.clone();
            run_first.merge_learning(&base, &run);
            run_first.merge_learning(&base, &cli);
            for (order, s) in [("forget first", &cli_first), ("run first", &run_first)] {
                assert_eq!(s.forgotten_at(u), Some(forgotten_at), "{order}");
                assert_eq!(s.get("wss://other.example").asked, 2, "{order}");
                if learned_at < forgotten_at {
                    assert!(s.iter().all(|(url, _)| url != u), "{order}: {s:?}");
                    assert_eq!(pair_hits(s, u), None, "{order}");
                } else {
                    // Only the run's learning since its base: one ask, α + 1, one hit.
                    let r = s.get(u);
                    assert_eq!((r.asked, r.alpha), (1, 2.0), "{order}: {r:?}");
                    assert_eq!(pair_hits(s, u), Some(1.0), "{order}");
                }
            }
        }
        // A run that loaded after the forget merges as usual.
        let mut stored = base.clone();
        stored.merge_learning(&base, &cli);
        let after = stored.clone();
        let mut run = after.clone();
        run.set(u, learned(1, 2.0, 300));
        stored.merge_learning(&after, &run);
        assert_eq!(stored.get(u).asked, 1);
    }

    #[test]
    fn tombstones_are_bounded_and_forgotten_with_use() {
        let mut s = DeliveryStats::new();
        for i in 0..MAX_TOMBSTONES as u64 + 5 {
            s.forget_at(&format!("wss://r{i}.example"), 1_000 + i);
        }
        assert_eq!(s.forgotten().count(), MAX_TOMBSTONES);
        assert_eq!(
            s.forgotten_at("wss://r4.example"),
            None,
            "the oldest go first"
        );
        assert!(s.forgotten_at("wss://r5.example").is_some());
        // A tombstone in the future is brought back to now.
        s.forget_at("wss://ahead.example", u64::MAX);
        s.clamp_future(5_000);
        assert_eq!(s.forgotten_at("wss://ahead.example"), Some(5_000));
        // Half a year of use later, every one is gone.
        for day in 1..=FORGET_AFTER_DAYS as u64 + 1 {
            s.note_day(5_000 + day * 86_400);
        }
        s.prune();
        assert_eq!(s.forgotten().count(), 0);
    }

    #[test]
    fn prune_forgets_the_long_unseen_and_caps_the_rest() {
        let mut s = DeliveryStats::new();
        s.set("wss://old.example", learned(1, 2.0, 1_000));
        let later = 1_000 + FORGET_AFTER_SECS + 86_400;
        s.set("wss://new.example", learned(1, 2.0, later));
        // Half a year of the clock alone forgets nothing: days of use count.
        assert_eq!(s.prune(), 0);
        for day in 1..=FORGET_AFTER_DAYS as u64 {
            s.note_day(1_000 + day * 86_400);
        }
        assert_eq!(s.prune(), 1);
        assert_eq!(s.len(), 1);
        for i in 0..MAX_STORED_RELAYS + 5 {
            s.set(format!("wss://r{i}.example"), learned(1, 2.0, 5_000_000));
        }
        s.prune();
        assert_eq!(s.len(), MAX_STORED_RELAYS);
    }
}
