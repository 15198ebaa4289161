//! A feed left open: what one pass decides changes where the window is asked, never whether a
//! relay's new notes are heard.
//!
//! - A relay that answered empty is left out of the window's plans for
//!   [`OpenFeed::empty_for`](crate::OpenFeed::empty_for), and keeps a *tail*: its follows'
//!   notes from the moment it was left out, live.
//! - Everything set aside expires, and the re-plan at the deadline gives the relay its follows
//!   back; a failure's first set-aside is short ([`OpenFeed::first_set_aside`](crate::OpenFeed)).
//! - Each feed filter comes with a watch for its authors' new relay lists, so a follow that
//!   moves is re-planned within the debounce, wherever it published the list.
//! - With fewer socket places than relays ([`Places::Turns`]) the places are taken in turns: a
//!   relay that has answered gives its place to one waiting, rests for
//!   [`OpenFeed::turn_every`](crate::OpenFeed::turn_every), and is then asked again since it
//!   gave the place up (less [`OpenFeed::margin`](crate::OpenFeed::margin)).

use nostr::types::Timestamp;

use super::*;
use crate::config::PenaltyPolicy;

/// The generation of a tail filter: plans number theirs from 1, so the recorder never takes a
/// tail's answer for a plan's (it learns nothing from it).
pub(super) const TAIL: u64 = 0;

/// A relay left out of the window's plans for answering empty.
#[derive(Debug)]
pub(super) struct Empty {
    /// When it may be planned again; `None`: not in this run (`--once`).
    pub until: Option<Instant>,
    /// The follows it was asked about: a continuing feed hears their new notes there.
    pub authors: Vec<PublicKey>,
    /// Unix seconds its tail asks from: when it was left out, less the margin.
    pub since: u64,
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
    pub(super) fn empty_entry(&self, authors: Vec<PublicKey>) -> Empty {
        let until = (!self.cfg.once).then(|| crate::deadline::after(self.cfg.open.empty_for));
        Empty {
            until,
            authors,
            since: self.now().saturating_sub(self.cfg.open.margin.as_secs()),
        }
    }

    /// Forgets empty answers whose time is over: the relay may be planned again.
    pub(super) fn expire_empty(&mut self) {
        let at = Instant::now();
        self.empty.retain(|_, e| e.until.is_none_or(|u| u > at));
    }

    /// The empty answer `url` is left out for, when a continuing feed still hears it there.
    pub(super) fn tails_for(&self, url: &str) -> Option<&Empty> {
        if self.cfg.once || self.penalties.is_penalised(url, self.now()) {
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
        let Some(empty) = self.tails_for(url) else {
            return;
        };
        let since = empty.since.max(self.cfg.since.map_or(0, |s| s.as_secs()));
        let filter = Filter::new()
            .authors(empty.authors.iter().copied())
            .kinds(self.cfg.kinds.iter().copied())
            .since(Timestamp::from(since));
        let watch = self.watch_filter(&empty.authors);
        debug!(relay = %url, authors = empty.authors.len(), since, "left out of the window; hearing its new notes");
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
        let wanted: Vec<String> = (self.empty.keys())
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
        let resting = Resting {
            since: self.now().saturating_sub(self.cfg.open.margin.as_secs()),
            due: crate::deadline::after(self.cfg.open.turn_every),
            lookup: live.lists.is_some() && !live.watch,
        };
        debug!(relay = %url, "gives its place up until its next turn");
        if let Some(turns) = self.turns.as_mut() {
            turns.resting.insert(url.to_string(), resting);
        }
    }

    /// `url`'s turn: its plan filter (or tail) and lists asked again since it rested.
    fn reopen(&mut self, url: &str, resting: &Resting) {
        let since = |from: u64| Timestamp::from(from.max(resting.since));
        let window = self.cfg.since.map_or(0, |s| s.as_secs());
        let feed = if let Some(slot) = self.slots.get(url) {
            let filter = slot.filter(&self.cfg.kinds, Some(since(window)));
            Some((filter, slot.generation, slot.authors.clone()))
        } else {
            self.tails_for(url).map(|e| {
                let filter = Filter::new()
                    .authors(e.authors.iter().copied())
                    .kinds(self.cfg.kinds.iter().copied())
                    .since(since(e.since.max(window)));
                (filter, TAIL, e.authors.clone())
            })
        };
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
        }
        if let Some(watch) = watch {
            live.watch_lists(watch);
        }
    }
}
