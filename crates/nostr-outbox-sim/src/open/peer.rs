//! The peers' clients with the feed left open, as their code does: the selected relays stay
//! subscribed; a relay that drops or never answered stays out of the pool until the next
//! selection, which a changed relay list starts; a new subscription asks from the time it
//! opens, so a dropped relay's gap is never filled.

use std::collections::{BTreeMap, HashSet};

use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::Router;

use super::{Feed, Segment, Session};
use crate::asks::Ask;

/// Runs the peers' open feed on `s`, starting from what its fetch asked.
pub(super) fn run(s: &Session<'_>, router: &mut Router, recorder: &mut RoundRecorder) -> Feed {
    let mut feed = Feed::default();
    let mut draws = 0u64;
    // Per relay of the selection: its authors and its open segment.
    let mut open: BTreeMap<String, (Vec<u32>, Option<usize>)> = BTreeMap::new();
    let follows = &s.sim.world.follows;
    let mut generation = 0u64;
    let mut subscribe = |feed: &mut Feed,
                         recorder: &mut RoundRecorder,
                         ask: &Ask,
                         t: f64,
                         connect: bool|
     -> Option<usize> {
        let (url, authors) = (ask.url.as_str(), &ask.authors);
        let r = ask.relay?;
        draws += 1;
        feed.dials += u64::from(connect);
        let c = if connect { s.connect(r, draws) } else { 0.0 };
        if !(s.open.is_up(r, t) && s.open.stays_up(r, t, t + c)) {
            recorder.failed(url, "no connection");
            return None;
        }
        let start = t + c;
        feed.reqs += 1;
        generation += 1;
        recorder.asked(
            url,
            authors
                .iter()
                .filter_map(|&a| follows.get(a as usize).copied()),
            generation,
        );
        recorder.eose(url, generation, false);
        feed.segments.push(Segment {
            relay: r,
            authors: authors.to_vec(),
            since: start,
            start,
            backfill_at: start,
            end: s.open.next_down(r, start),
            answered: true,
            poll: false,
        });
        Some(feed.segments.len() - 1)
    };
    for ask in &s.followed_only(s.asks, 0.0).entries {
        let seg = subscribe(&mut feed, recorder, ask, 0.0, false);
        open.insert(ask.url.clone(), (ask.authors.clone(), seg));
    }
    for t in s.list_changes() {
        feed.plans += 1;
        let Some(plan) = s.plan(router, s.moves_seen(t), &HashSet::new(), t) else {
            continue;
        };
        let live = |feed: &Feed, seg: Option<usize>| seg.is_some_and(|i| feed.segments[i].end > t);
        let wanted: HashSet<&str> = plan.entries.iter().map(|a| a.url.as_str()).collect();
        for (url, (_, seg)) in open.iter_mut() {
            if !wanted.contains(url.as_str()) {
                if let Some(i) = seg.take() {
                    feed.segments[i].end = feed.segments[i].end.min(t);
                }
                recorder.closed(url);
            }
        }
        open.retain(|url, _| wanted.contains(url.as_str()));
        for ask in &plan.entries {
            let kept = open
                .get(&ask.url)
                .is_some_and(|(authors, seg)| *authors == ask.authors && live(&feed, *seg));
            if kept {
                continue;
            }
            if let Some((_, Some(i))) = open.get(&ask.url) {
                let seg = &mut feed.segments[*i];
                seg.end = seg.end.min(t);
            }
            // Selecting again dials every relay of the selection, those that dropped too.
            let seg = subscribe(&mut feed, recorder, ask, t, true);
            open.insert(ask.url.clone(), (ask.authors.clone(), seg));
        }
    }
    for (_, seg) in open.values() {
        if let Some(i) = seg {
            let seg = &mut feed.segments[*i];
            seg.end = seg.end.min(s.open.secs);
        }
    }
    feed
}
