//! A feed left open: what one pass decides changes where the window is asked, never whether a
//! relay's new notes are heard.
//!
//! - A relay that answered empty is left out of the window's plans for
//!   [`OpenFeed::empty_for`](crate::OpenFeed::empty_for), and keeps a *tail*: its follows'
//!   notes from the moment it was left out, live.
//! - A relay set aside for failing (down, timing out) keeps a tail too: its slot dials it again
//!   with backoff, and the tail asks it since its [`Mark`] when it returns, so its gap is
//!   filled. It stays out of the plans until that tail answers, then its follows come back to
//!   it at once. A blip costs no set-aside at all (the first strikes only redial); only
//!   repeated failure lengthens the backoff.
//! - Everything else set aside expires, and the re-plan at the deadline gives the relay its
//!   follows back.
//! - A relay asked again (a reconnect, a re-plan that gives it the same follows, a turn) is
//!   asked since its mark less [`OpenFeed::margin`](crate::OpenFeed::margin), not the whole
//!   window: its answer is then learned compare-only (it is a part of what the relay holds).
//! - Each feed filter comes with a watch for its authors' new relay lists, so a follow that
//!   moves is re-planned within the debounce, wherever it published the list.
//! - With fewer socket places than relays ([`Places::Turns`]) the places are taken in turns: a
//!   relay that has answered gives its place to one waiting, rests for
//!   [`OpenFeed::turn_every`](crate::OpenFeed::turn_every), and is then asked again since it
//!   gave the place up (less the margin).
//!
//! Every table here is bounded: marks ([`MAX_MARKS`]), relays down ([`MAX_DOWN`]); empty
//! answers and turns hold at most the relays of the plan and expire; the summary's tallies of
//! relays keep, past [`MAX_TALLIED`], only the relays in use ([`Coordinator::trim_tallies`]).

use super::*;
use crate::config::PenaltyPolicy;

/// The generation of a tail filter: plans number theirs from 1, so the recorder never takes a
/// tail's answer for a plan's (it learns nothing from it).
pub(super) const TAIL: u64 = 0;

/// Relays whose mark is kept; beyond, the oldest marks are forgotten (those relays are asked
/// the whole window again).
pub(super) const MAX_MARKS: usize = 1024;

/// Relays set aside for failing that keep a tail; beyond, a relay set aside is let go as in a
/// `--once` run (back when its set-aside expires).
pub(super) const MAX_DOWN: usize = 256;

/// Relays the summary's tallies (per-relay outcomes, set-asides, sign-ins, relays dialled) keep
/// in a continuing feed; past it, those of relays no longer in use are forgotten.
pub(super) const MAX_TALLIED: usize = 4096;

/// A relay left out of the window's plans (for answering empty, or for failing) whose
/// follows' new notes a continuing feed still hears there.
#[derive(Debug)]
pub(super) struct Aside {
    /// When it may be planned again; `None`: not in this run (`--once`), or, for a relay
    /// down, when its tail answers.
    pub until: Option<Instant>,
    /// The follows it was asked about: a continuing feed hears their new notes there.
    pub authors: Vec<PublicKey>,
    /// Unix seconds its tail asks from: its mark, else when it was left out, less the margin.
    pub since: u64,
}

/// Up to when everything a relay holds for some follows was delivered: its answer to a feed
/// filter naming them (at its EOSE), and the newest note it delivered live since.
#[derive(Debug)]
pub(super) struct Mark {
    /// Sorted.
    authors: Vec<PublicKey>,
    /// Unix seconds.
    at: u64,
}

/// Places taken in turns: the relays resting, each until it is asked again.
#[derive(Debug, Default)]
pub(super) struct Turns {
    pub resting: BTreeMap<String, Resting>,
}

#[derive(Debug)]
pub(super) struct Resting {
    /// Unix seconds it is asked again from: when it gave its place up, less the margin.
    since: u64,
    /// When it is asked again.
    due: Instant,
    /// It carried discovery's lists lookup: that is asked again too.
    lookup: bool,
}

impl Coordinator {
    /// The policy failures are struck with: a continuing feed's first set-aside is short, as a
    /// relay that restarts is back in seconds; a `--once` run's is the configured one.
    pub(super) fn strike_policy(&self) -> PenaltyPolicy {
        if self.cfg.once {
            self.cfg.penalty
        } else {
            self.cfg.open.strikes(&self.cfg.penalty)
        }
    }

    /// What leaving a relay out for an empty answer records now.
    pub(super) fn empty_entry(&self, url: &str, authors: Vec<PublicKey>) -> Aside {
        let until = (!self.cfg.once).then(|| crate::deadline::after(self.cfg.open.empty_for));
        let now = self.now().saturating_sub(self.cfg.open.margin.as_secs());
        Aside {
            until,
            since: self.resume_from(url, &authors).unwrap_or(now).min(now),
            authors,
        }
    }

    /// The follows `url`'s feed filter names now: its tail's, else its plan slot's.
    pub(super) fn feed_authors(&self, url: &str) -> Option<Vec<PublicKey>> {
        if self.live.get(url).is_some_and(|l| l.tail) {
            return self.tails_for(url).map(|e| e.authors.clone());
        }
        self.slots.get(url).map(|s| s.authors.clone())
    }

    /// Unix seconds from which `url` is asked about `authors` again (a continuing feed), when
    /// everything it holds for them up to its mark was delivered: the mark less the margin,
    /// when that is inside the window. `None`: the whole window.
    pub(super) fn resume_from(&self, url: &str, authors: &[PublicKey]) -> Option<u64> {
        if self.cfg.once {
            return None;
        }
        let mark = self.marks.get(url)?;
        let covered = authors
            .iter()
            .all(|a| mark.authors.binary_search(a).is_ok());
        let since = mark.at.saturating_sub(self.cfg.open.margin.as_secs());
        let window = self.cfg.since.map_or(0, |s| s.as_secs());
        (covered && since > window).then_some(since)
    }

    /// `url` answered its feed filter: everything it holds for the filter's follows up to now
    /// was delivered, and its live notes follow.
    pub(super) fn mark_answered(&mut self, url: &str) {
        // A `--once` run marks too, for a continuing feed after it (its summary's marks), and
        // never resumes from them: it asks the whole window.
        let Some(mut authors) = self.feed_authors(url) else {
            return;
        };
        authors.sort_unstable();
        let at = self.now();
        self.marks.insert(url.to_string(), Mark { authors, at });
        if self.marks.len() > MAX_MARKS {
            // The oldest mark is the least worth keeping: the relay is asked the window again.
            let oldest = (self.marks.iter())
                .filter(|(u, _)| !self.live.contains_key(*u))
                .min_by_key(|(_, m)| m.at)
                .or_else(|| self.marks.iter().min_by_key(|(_, m)| m.at))
                .map(|(u, _)| u.clone());
            if let Some(oldest) = oldest {
                self.marks.remove(&oldest);
            }
        }
    }

    /// Takes the marks an earlier run kept (the newest [`MAX_MARKS`]), each at most now, its
    /// relay canonical by the router's policy.
    pub(super) fn seed_marks(&mut self, mut marks: Vec<crate::RelayMark>) {
        marks.sort_by_key(|m| std::cmp::Reverse(m.at));
        let now = self.now();
        let policy = self.router.policy();
        for mark in marks {
            if self.marks.len() >= MAX_MARKS {
                break;
            }
            let Ok(url) = policy.canonicalize(&mark.relay) else {
                continue;
            };
            let mut authors = mark.authors;
            authors.sort_unstable();
            authors.dedup();
            if authors.is_empty() || self.marks.contains_key(&url) {
                continue;
            }
            let at = mark.at.min(now);
            self.marks.insert(url, Mark { authors, at });
        }
    }

    /// The marks to keep for the next run, the newest first.
    pub(super) fn relay_marks(&self) -> Vec<crate::RelayMark> {
        let mut marks: Vec<_> = (self.marks.iter())
            .map(|(relay, m)| crate::RelayMark {
                relay: relay.clone(),
                at: m.at,
                authors: m.authors.clone(),
            })
            .collect();
        marks.sort_by_key(|m| std::cmp::Reverse(m.at));
        marks
    }

    /// `url` delivered a note dated `created_at` on its feed after answering: its mark moves
    /// up to it (never past the present).
    pub(super) fn mark_note(&mut self, url: &str, created_at: u64) {
        let answered = self
            .live
            .get(url)
            .is_some_and(|l| l.connected && l.feed_pending.is_none());
        if !answered {
            return;
        }
        let now = self.now();
        if let Some(mark) = self.marks.get_mut(url) {
            mark.at = mark.at.max(created_at.min(now));
        }
    }

    /// `url`'s feed filter (its plan slot's, else its tail's) from `since` (unix seconds, never
    /// before the window), with its generation and follows.
    fn feed_filter(&self, url: &str, since: u64) -> Option<(Filter, u64, Vec<PublicKey>)> {
        let window = self.cfg.since.map_or(0, |s| s.as_secs());
        let tail = self.live.get(url).is_some_and(|l| l.tail);
        match self.slots.get(url) {
            Some(slot) if !tail => {
                let filter = slot.filter(&self.cfg.kinds, Some(Timestamp::from(since.max(window))));
                Some((filter, slot.generation, slot.authors.clone()))
            }
            _ => self.tails_for(url).map(|e| {
                let from = since.max(e.since).max(window);
                let filter = Filter::new()
                    .authors(e.authors.iter().copied())
                    .kinds(self.cfg.kinds.iter().copied())
                    .since(Timestamp::from(from));
                (filter, TAIL, e.authors.clone())
            }),
        }
    }

    /// `url`'s connection was lost after it answered: its slot asks again, on the next
    /// connection, only since its mark (less the margin), so the gap is filled without the
    /// whole window.
    pub(super) fn resume_after_loss(&mut self, url: &str) {
        if self.cfg.once || self.down.contains_key(url) {
            return;
        }
        let Some(authors) = self.feed_authors(url) else {
            return;
        };
        let Some(since) = self.resume_from(url, &authors) else {
            return;
        };
        let Some((filter, generation, _)) = self.feed_filter(url, since) else {
            return;
        };
        let Some(live) = self.live.get_mut(url) else {
            return;
        };
        if live.feed_gen != Some(generation) || live.closing {
            return;
        }
        debug!(relay = %url, since, "connection lost; asked again since its mark");
        live.send_feed(filter, generation);
        live.resume = Some(generation);
    }

    /// `url` is set aside for failing (a continuing feed): instead of closing it, its slot
    /// keeps dialling it with backoff and asks, as a tail, its follows' notes since its mark.
    /// It stays out of the plans until that tail answers. Returns whether it was kept so.
    pub(super) fn keep_down(&mut self, url: &str) -> bool {
        let misbehaved = self.penalties.get(url).is_some_and(|e| e.misbehaved);
        if self.cfg.once || misbehaved || !self.live.contains_key(url) {
            return false;
        }
        if !self.down.contains_key(url) && self.down.len() >= MAX_DOWN {
            return false;
        }
        let Some(authors) = self.feed_authors(url).filter(|a| !a.is_empty()) else {
            return false;
        };
        let window = self.cfg.since.map_or(0, |s| s.as_secs());
        let since = self.resume_from(url, &authors).unwrap_or(window);
        self.empty.remove(url);
        self.down.insert(
            url.to_string(),
            Aside {
                until: None,
                authors,
                since,
            },
        );
        if let Some(live) = self.live.get_mut(url) {
            live.closing = false;
            // Sent again below as a tail.
            live.tail = false;
        }
        self.send_tail(url);
        true
    }

    /// A tail's answer on `url`: if it was down, it is back. Its set-aside ends and a re-plan
    /// gives it its follows again.
    pub(super) fn tail_answered(&mut self, url: &str) {
        self.mark_answered(url);
        if self.down.remove(url).is_some() {
            info!(relay = %url, "back: its gap was asked since its mark; its follows return to it");
            self.penalties.forget(url);
            self.schedule_replan(self.cfg.replan_debounce);
        }
    }

    /// Forgets empty answers whose time is over: the relay may be planned again.
    pub(super) fn expire_empty(&mut self) {
        let at = Instant::now();
        self.empty.retain(|_, e| e.until.is_none_or(|u| u > at));
    }

    /// Why `url` is left out of the window's plans (down, or an empty answer), when a
    /// continuing feed still hears it there.
    pub(super) fn tails_for(&self, url: &str) -> Option<&Aside> {
        if self.cfg.once {
            return None;
        }
        if let Some(down) = self.down.get(url) {
            return Some(down);
        }
        if self.penalties.is_penalised(url, self.now()) {
            return None;
        }
        let at = Instant::now();
        self.empty
            .get(url)
            .filter(|e| !e.authors.is_empty() && e.until.is_some_and(|u| u > at))
    }

    /// A filter for new relay lists of `authors`.
    pub(super) fn watch_filter(&self, authors: &[PublicKey]) -> Filter {
        let since = self.now().saturating_sub(self.cfg.open.margin.as_secs());
        Filter::new()
            .authors(authors.iter().copied())
            .kind(Kind::RelayList)
            .since(Timestamp::from(since))
    }

    /// Asks `url` for its empty answer's follows' notes since it was left out, from now on
    /// (and again on every reconnect, from the same moment).
    pub(super) fn send_tail(&mut self, url: &str) {
        let Some(aside) = self.tails_for(url) else {
            return;
        };
        let since = aside.since.max(self.cfg.since.map_or(0, |s| s.as_secs()));
        let filter = Filter::new()
            .authors(aside.authors.iter().copied())
            .kinds(self.cfg.kinds.iter().copied())
            .since(Timestamp::from(since));
        let watch = self.watch_filter(&aside.authors);
        debug!(relay = %url, authors = aside.authors.len(), since, "left out of the window; hearing its new notes");
        let live = self.ensure_live(url);
        live.tail = true;
        live.send_feed(filter, TAIL);
        live.watch_lists(watch);
    }

    /// After a plan: every relay left out for an empty answer has its tail (again, after a
    /// set-aside or a turn's rest), and tails whose time is over end.
    pub(super) fn keep_tails(&mut self) {
        let stale: Vec<String> = (self.live.iter())
            .filter(|(url, l)| l.tail && self.tails_for(url).is_none())
            .map(|(url, _)| url.clone())
            .collect();
        for url in &stale {
            self.close_feed(url);
        }
        let resting = |url: &str| {
            self.turns
                .as_ref()
                .is_some_and(|t| t.resting.contains_key(url))
        };
        let wanted: Vec<String> = (self.empty.keys().chain(self.down.keys()))
            .filter(|url| self.tails_for(url).is_some() && self.slots.get(url).is_none())
            .filter(|url| !self.live.get(*url).is_some_and(|l| l.tail) && !resting(url))
            .cloned()
            .collect();
        for url in &wanted {
            self.send_tail(url);
        }
    }

    /// Wakes the feed when its next set-aside ends, so the relay's follows come back to it.
    /// Under a fixed clock ([`RuntimeConfig::clock`]) nothing ends.
    pub(super) fn schedule_expiry(&mut self) {
        if self.cfg.clock.is_some() {
            return;
        }
        let now = self.now();
        let penalty = (self.penalties.entries())
            .filter_map(|(_, e)| e.until)
            .filter(|&u| u > now)
            .min()
            .map(|u| crate::deadline::after(Duration::from_secs(u - now)));
        let at = Instant::now();
        let empty = (self.empty.values())
            .filter_map(|e| e.until)
            .filter(|&u| u > at)
            .min();
        self.expiry_at = match (penalty, empty) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Places taken in turns: relays due are asked again (they wait for a place), and as many
    /// relays that have answered as there are links waiting give theirs up, the longest quiet
    /// first.
    pub(super) fn take_turns(&mut self) {
        let Some(turns) = self.turns.as_mut() else {
            return;
        };
        let at = Instant::now();
        let due: Vec<String> = (turns.resting.iter())
            .filter(|(_, r)| r.due <= at)
            .map(|(url, _)| url.clone())
            .collect();
        let due: Vec<(String, Resting)> = (due.into_iter())
            .filter_map(|url| turns.resting.remove(&url).map(|r| (url, r)))
            .collect();
        for (url, resting) in due {
            self.reopen(&url, &resting);
        }
        let waiting = *self.client.sockets().contention().borrow();
        let unconnected = self.live.values().filter(|l| !l.connected).count();
        let give_up = waiting.min(unconnected);
        if give_up == 0 {
            return;
        }
        let mut quiet: Vec<(Instant, String)> = (self.live.iter())
            .filter(|(_, l)| l.connected && l.feed_pending.is_none())
            .filter(|(_, l)| l.lists != Some(Progress::Pending))
            .filter_map(|(url, l)| l.quiet_since.map(|q| (q, url.clone())))
            .collect();
        quiet.sort();
        // A place is held a turn at most while links wait: a relay whose answer is still
        // pending (slow, or asked again after a drop) gives it up too, the longest held
        // first, and is asked its whole filter again at its next turn. Without this, places
        // held by relays that never go quiet would leave every other relay unheard.
        if quiet.len() < give_up {
            let cutoff = at.checked_sub(self.cfg.open.turn_every);
            let mut held: Vec<(Instant, String)> = (self.live.iter())
                .filter(|(_, l)| l.connected && l.quiet_since.is_none())
                .filter_map(|(url, l)| l.held_since.map(|h| (h, url.clone())))
                .filter(|(h, _)| cutoff.is_some_and(|c| *h <= c))
                .collect();
            held.sort();
            quiet.extend(held);
        }
        for (_, url) in quiet.into_iter().take(give_up) {
            self.rest(&url);
        }
    }

    /// `url` gives its place up until its next turn; what it holds then is asked since now.
    fn rest(&mut self, url: &str) {
        let Some(live) = self.live.remove(url) else {
            return;
        };
        live.send(SlotCommand::Shutdown);
        // An answer still pending is asked again in full (since its window or mark).
        let since = match live.feed_pending {
            Some(_) => 0,
            None => self.now().saturating_sub(self.cfg.open.margin.as_secs()),
        };
        let resting = Resting {
            since,
            due: crate::deadline::after(self.cfg.open.turn_every),
            // The reader's relays carry discovery's lookup: every follow's new list (a follow
            // that moves publishes it there), asked again at each turn.
            lookup: (live.lists.is_some() && !live.watch)
                || self.reader_relays.iter().any(|r| r == url),
        };
        debug!(relay = %url, "gives its place up until its next turn");
        if let Some(turns) = self.turns.as_mut() {
            turns.resting.insert(url.to_string(), resting);
        }
    }

    /// `url`'s turn: its plan filter (or tail) and lists asked again since it rested.
    fn reopen(&mut self, url: &str, resting: &Resting) {
        let since = |from: u64| Timestamp::from(from.max(resting.since));
        let feed = self.feed_filter(url, resting.since);
        let lookup = (resting.lookup && self.cfg.discover_lists)
            .then(|| self.lists_filter().since(since(0)));
        let watch = feed.as_ref().map(|(_, _, authors)| {
            let filter = Filter::new()
                .authors(authors.iter().copied())
                .kind(Kind::RelayList);
            filter.since(since(0))
        });
        if feed.is_none() && lookup.is_none() {
            return;
        }
        debug!(relay = %url, since = resting.since, "its turn: asked again since it rested");
        let tail = self.slots.get(url).is_none();
        let live = self.ensure_live(url);
        if let Some(lookup) = lookup {
            live.lists = Some(Progress::Pending);
            live.send(SlotCommand::Req {
                sub: SubKind::Lists,
                filter: Box::new(lookup),
                generation: 1,
            });
        }
        if let Some((filter, generation, _)) = feed {
            live.tail = tail;
            live.send_feed(filter, generation);
            // Its answer is a part of the window: learned compare-only, never taken as empty.
            live.resume = Some(generation);
        }
        if let Some(watch) = watch {
            live.watch_lists(watch);
        }
    }
}

impl Tally {
    /// Past [`MAX_TALLIED`] relays in a table, keeps only those `in_use` says are.
    pub(super) fn trim(&mut self, in_use: &HashSet<String>) {
        if self.relays.len() > MAX_TALLIED {
            self.relays.retain(|url, _| in_use.contains(url));
        }
        if self.penalised.len() > MAX_TALLIED {
            self.penalised.retain(|url| in_use.contains(url));
        }
        if self.auth.len() > MAX_TALLIED {
            self.auth.retain(|url, _| in_use.contains(url));
        }
    }
}

impl Coordinator {
    /// A continuing feed's tallies stay bounded over days: past [`MAX_TALLIED`], what is kept
    /// of relays no longer in use (no slot) goes, and so does their being dialled (they may be
    /// probed again).
    pub(super) fn trim_tallies(&mut self) {
        let in_use: HashSet<String> = self.live.keys().cloned().collect();
        self.tally.trim(&in_use);
        if self.dialled.len() > MAX_TALLIED {
            self.dialled.retain(|url| in_use.contains(url));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_past_their_bound_keep_the_relays_in_use() {
        let mut tally = Tally::default();
        let url = |i: usize| format!("wss://r{i}.example");
        for i in 0..MAX_TALLIED {
            tally.relays.insert(url(i), RelayOutcome::default());
            tally.penalised.insert(url(i));
        }
        let in_use: HashSet<String> = [url(1), url(2)].into_iter().collect();
        tally.trim(&in_use);
        assert_eq!(
            tally.relays.len(),
            MAX_TALLIED,
            "at the bound, nothing goes"
        );
        tally
            .relays
            .insert(url(MAX_TALLIED), RelayOutcome::default());
        tally.penalised.insert(url(MAX_TALLIED));
        tally.auth.insert(url(7), AuthOutcome::NoKeys);
        tally.trim(&in_use);
        assert_eq!(tally.relays.keys().cloned().collect::<HashSet<_>>(), in_use);
        assert_eq!(
            tally.penalised.iter().cloned().collect::<HashSet<_>>(),
            in_use
        );
        assert_eq!(tally.auth.len(), 1, "under its bound: kept");
    }
}
