//! Merging the relay lists and the penalty box at save, as the stats are merged: three-way
//! against what the saving store loaded (its base), so runs that save one after the other keep
//! each other's changes instead of the last one's alone.
//!
//! # Relay lists
//!
//! Per author: a list the run did not change since its base leaves what is stored; one nobody
//! else changed is the run's (a list the run dropped is dropped); changed by both, the newer
//! (`created_at`) wins, the run's on a tie. A store that never loaded lists adds the run's to
//! what is stored.
//!
//! # The penalty box
//!
//! The box is the runtime's document, `{"relays": {URL: entry, …}}`; entries are compared
//! whole, and an entry's `until` (its deadline) is the only field read. Per relay, as for
//! lists; changed by both, the later deadline wins (the run's on a tie), and an entry one side
//! dropped and the other changed is the changed one.
//!
//! Lifting a set-aside on purpose (`outbox stats --clear-set-asides`, `--forget`) is an event
//! kept in the document beside the runtime's fields: [`CLEARED_AT`] (every relay) and
//! [`LIFTED`] (per relay), in unix seconds, the later of each kept. A save whose base does not
//! know a lift that is stored now keeps none of its run's entries for the lifted relays: the
//! run loaded before the lift and cannot tell which of its set-asides came after it, so what
//! is stored (the lift and anything set aside since by runs that knew it) stays; a relay that
//! still fails is set aside again by its next strikes. A save that made a lift itself keeps its
//! own view of the lifted relays. At most [`MAX_LIFTS`] per-relay lifts are kept (the newest);
//! a clear supersedes every lift before it. What relays were learned to speak
//! ([`EXTENSIONS`]) is merged per relay and NIP, the later kept. A document of another shape is
//! kept as the run gave it, as before.

use std::collections::{BTreeMap, BTreeSet};

use nostr_outbox_core::RawRelayList;
use serde_json::{Map, Value};

/// The field of the penalty document holding when every set-aside was last lifted.
pub const CLEARED_AT: &str = "cleared_at";

/// The field of the penalty document holding, per relay, when its set-aside was last lifted.
pub const LIFTED: &str = "lifted";

/// The field of the penalty document holding what relays were learned to speak (the runtime's
/// `extensions::Learned`: per relay and NIP, an outcome and when). Merged per relay and NIP,
/// the later wins; the runtime bounds it when it reads it back.
pub const EXTENSIONS: &str = "extensions";

/// The most per-relay lifts a penalty document keeps (the newest).
pub const MAX_LIFTS: usize = 1_000;

/// How far past the present a kept relay list may be dated: as far ahead of its clock as the
/// runtime admits an event (`RuntimeConfig::future_tolerance`).
pub const LIST_FUTURE_TOLERANCE_SECS: u64 = 15 * 60;

/// Drops the lists dated more than [`LIST_FUTURE_TOLERANCE_SECS`] after `now`, and returns
/// their authors (hex). Kept lists are unsigned and the newest per author wins, so one dated
/// far ahead (a damaged or hostile file, a clock that ran ahead) would hide every later list
/// of its author for good; dropped, the author's list is fetched again.
pub fn drop_future_lists(lists: &mut Vec<RawRelayList>, now: u64) -> Vec<String> {
    let horizon = now.saturating_add(LIST_FUTURE_TOLERANCE_SECS);
    let mut dropped = Vec::new();
    lists.retain(|list| {
        let ahead = list.created_at > horizon;
        if ahead {
            dropped.push(format!("{} (dated in the future)", list.author.to_hex()));
        }
        !ahead
    });
    dropped
}

/// What a store last loaded or saved of the lists and the penalty box: its base for the next
/// save of each (`None`: never loaded).
#[derive(Debug, Default)]
pub(crate) struct KeptBase {
    pub(crate) lists: Option<Vec<RawRelayList>>,
    pub(crate) penalties: Option<Value>,
}

impl KeptBase {
    /// Takes a loaded penalty document as the base (nothing stored: an empty one).
    pub(crate) fn loaded_penalties(&mut self, loaded: Option<&Value>) {
        self.penalties = Some(
            loaded
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
        );
    }
}

/// Marks in a penalty document that `url`'s set-aside was lifted at `at` (the document should
/// no longer hold an entry for it).
pub fn mark_lifted(doc: &mut Value, url: &str, at: u64) {
    let Some(top) = doc.as_object_mut() else {
        return;
    };
    let lifted = top
        .entry(LIFTED)
        .or_insert_with(|| Value::Object(Map::new()));
    if !lifted.is_object() {
        *lifted = Value::Object(Map::new());
    }
    if let Some(map) = lifted.as_object_mut() {
        let old = map.get(url).and_then(Value::as_u64).unwrap_or(0);
        map.insert(url.to_string(), Value::from(old.max(at)));
    }
}

/// Marks in a penalty document that every set-aside was lifted at `at` (the document should
/// hold none).
pub fn mark_cleared(doc: &mut Value, at: u64) {
    if let Some(top) = doc.as_object_mut() {
        let old = top.get(CLEARED_AT).and_then(Value::as_u64).unwrap_or(0);
        top.insert(CLEARED_AT.into(), Value::from(old.max(at)));
    }
}

/// A document's entries, if it has the box's shape.
fn entries(doc: &Value) -> Option<&Map<String, Value>> {
    doc.get("relays").and_then(Value::as_object)
}

fn cleared_at(doc: &Value) -> u64 {
    doc.get(CLEARED_AT).and_then(Value::as_u64).unwrap_or(0)
}

/// When `url`'s set-aside was last lifted in `doc` (0: never).
fn lift(doc: &Value, url: &str) -> u64 {
    let own = doc
        .get(LIFTED)
        .and_then(|l| l.get(url))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    own.max(cleared_at(doc))
}

/// The per-relay lifts of both documents, the later of each, without those a clear
/// superseded, at most [`MAX_LIFTS`] (the newest).
fn merged_lifts(a: &Value, b: &Value, cleared: u64) -> Map<String, Value> {
    let mut all: BTreeMap<&str, u64> = BTreeMap::new();
    for doc in [a, b] {
        if let Some(map) = doc.get(LIFTED).and_then(Value::as_object) {
            for (url, at) in map {
                if let Some(at) = at.as_u64().filter(|at| *at > cleared) {
                    let kept = all.entry(url.as_str()).or_insert(at);
                    *kept = (*kept).max(at);
                }
            }
        }
    }
    let mut order: Vec<(u64, &str)> = all.into_iter().map(|(url, at)| (at, url)).collect();
    order.sort_unstable_by(|x, y| y.cmp(x));
    order.truncate(MAX_LIFTS);
    order
        .into_iter()
        .map(|(at, url)| (url.to_string(), Value::from(at)))
        .collect()
}

/// Sets (or removes, when none) the lift fields of `doc` to those of `from`.
pub(crate) fn with_lifts_of(doc: &Value, from: &Value) -> Value {
    let mut out = doc.clone();
    if let Some(top) = out.as_object_mut() {
        top.remove(CLEARED_AT);
        top.remove(LIFTED);
        if let Some(at) = from.get(CLEARED_AT).filter(|v| v.as_u64().is_some()) {
            top.insert(CLEARED_AT.into(), at.clone());
        }
        if let Some(l) = from.get(LIFTED).filter(|v| v.is_object()) {
            top.insert(LIFTED.into(), l.clone());
        }
    }
    out
}

/// The penalty document to store: `run` (the saving run's) merged into `stored` (what is
/// stored now, `None` if nothing or nothing readable) against `base` (what the run loaded;
/// `None` if it never did). See the module docs.
pub fn merge_penalties(stored: Option<&Value>, base: Option<&Value>, run: &Value) -> Value {
    let Some(ran) = entries(run) else {
        return run.clone();
    };
    let empty = Value::Object(Map::new());
    let stored = stored.filter(|s| entries(s).is_some()).unwrap_or(&empty);
    let base_known = base.is_some();
    let base = base.unwrap_or(&empty);
    let none = Map::new();
    let (kept, had) = (
        entries(stored).unwrap_or(&none),
        entries(base).unwrap_or(&none),
    );
    let urls: BTreeSet<&String> = kept.keys().chain(had.keys()).chain(ran.keys()).collect();
    let mut merged = Map::new();
    for url in urls {
        let (t, b, r) = (kept.get(url), had.get(url), ran.get(url));
        let (ls, lr) = (lift(stored, url), lift(run, url));
        // A store that never loaded cannot have missed a lift.
        let lb = if base_known {
            lift(base, url)
        } else {
            ls.max(lr)
        };
        let entry = if ls > lb || lr > lb {
            // Lifted since the run loaded: the side that lifted last decides.
            if lr >= ls {
                r
            } else {
                t
            }
        } else if r == b {
            t
        } else if t == b {
            r
        } else {
            match (t, r) {
                (Some(t), Some(r)) => {
                    let until = |v: &Value| v.get("until").and_then(Value::as_u64);
                    if until(t) > until(r) {
                        Some(t)
                    } else {
                        Some(r)
                    }
                }
                (t, r) => r.or(t),
            }
        };
        if let Some(e) = entry {
            merged.insert(url.clone(), e.clone());
        }
    }
    let cleared = cleared_at(stored).max(cleared_at(run));
    let lifted = merged_lifts(stored, run, cleared);
    let mut out = run.clone();
    if let Some(top) = out.as_object_mut() {
        top.insert("relays".into(), Value::Object(merged));
        top.remove(CLEARED_AT);
        top.remove(LIFTED);
        if cleared > 0 {
            top.insert(CLEARED_AT.into(), Value::from(cleared));
        }
        if !lifted.is_empty() {
            top.insert(LIFTED.into(), Value::Object(lifted));
        }
        if let Some(both) = merged_extensions(stored, run) {
            top.insert(EXTENSIONS.into(), both);
        }
    }
    out
}

/// What the stored document and the run learned of the extensions relays speak, together:
/// per relay and NIP the later (`at`) of the two. `None` when neither has any.
fn merged_extensions(stored: &Value, run: &Value) -> Option<Value> {
    let relays = |doc: &Value| {
        doc.get(EXTENSIONS)
            .and_then(|e| e.get("relays"))
            .and_then(Value::as_object)
            .cloned()
    };
    let (mut merged, theirs) = match (relays(run), relays(stored)) {
        (None, None) => return None,
        (Some(mine), theirs) => (mine, theirs.unwrap_or_default()),
        (None, Some(theirs)) => (Map::new(), theirs),
    };
    let at = |v: &Value| v.get("at").and_then(Value::as_u64).unwrap_or(0);
    for (url, nips) in theirs {
        let Some(nips) = nips.as_object() else {
            continue;
        };
        let mine = merged
            .entry(url)
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(mine) = mine.as_object_mut() else {
            continue;
        };
        for (nip, seen) in nips {
            if mine.get(nip).is_none_or(|m| at(m) < at(seen)) {
                mine.insert(nip.clone(), seen.clone());
            }
        }
    }
    Some(serde_json::json!({ "relays": merged }))
}

/// The key of an author's list.
type Author = [u8; 32];

/// By author, the newest list of each.
fn by_author(lists: &[RawRelayList]) -> BTreeMap<Author, &RawRelayList> {
    let mut out: BTreeMap<Author, &RawRelayList> = BTreeMap::new();
    for l in lists {
        let kept = out.entry(l.author.to_bytes()).or_insert(l);
        if l.created_at > kept.created_at {
            *kept = l;
        }
    }
    out
}

/// The relay lists to store: `run`'s merged into `stored` against `base` (`None`: the run never
/// loaded lists). See the module docs.
pub fn merge_lists(
    stored: &[RawRelayList],
    base: Option<&[RawRelayList]>,
    run: &[RawRelayList],
) -> Vec<RawRelayList> {
    let (kept, had, ran) = (
        by_author(stored),
        by_author(base.unwrap_or(&[])),
        by_author(run),
    );
    let authors: BTreeSet<_> = kept.keys().chain(had.keys()).chain(ran.keys()).collect();
    let mut out = Vec::with_capacity(authors.len());
    for author in authors {
        let (t, b, r) = (kept.get(author), had.get(author), ran.get(author));
        let list = if r == b {
            t
        } else if t == b {
            r
        } else {
            match (t, r) {
                (Some(t), Some(r)) if t.created_at > r.created_at => Some(t),
                (t, r) => r.or(t),
            }
        };
        if let Some(l) = list {
            out.push((*l).clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(until: u64) -> Value {
        json!({"strikes": 0, "until": until, "last_reason": "x", "times": 1})
    }

    #[test]
    fn concurrent_set_asides_are_all_kept() {
        let base = json!({"relays": {}});
        let a = json!({"relays": {"wss://a.example": entry(10)}});
        let b = json!({"relays": {"wss://b.example": entry(20)}});
        let stored = merge_penalties(Some(&base), Some(&base), &a);
        let stored = merge_penalties(Some(&stored), Some(&base), &b);
        assert_eq!(
            stored,
            json!({"relays": {"wss://a.example": entry(10), "wss://b.example": entry(20)}})
        );
    }

    #[test]
    fn what_relays_speak_is_merged_the_later_kept() {
        let seen = |outcome: &str, at: u64| json!({"outcome": outcome, "at": at});
        let base = json!({"relays": {}});
        let stored = json!({"relays": {}, "extensions": {"relays": {
            "wss://a.example": {"77": seen("ignored", 10), "45": seen("answered", 30)},
            "wss://b.example": {"77": seen("answered", 5)},
        }}});
        let run = json!({"relays": {}, "extensions": {"relays": {
            "wss://a.example": {"77": seen("answered", 20), "45": seen("ignored", 25)},
        }}});
        let merged = merge_penalties(Some(&stored), Some(&base), &run);
        assert_eq!(
            merged[EXTENSIONS],
            json!({"relays": {
                "wss://a.example": {"77": seen("answered", 20), "45": seen("answered", 30)},
                "wss://b.example": {"77": seen("answered", 5)},
            }})
        );
        // Neither side knows any: the document gains nothing.
        let plain = merge_penalties(Some(&base), Some(&base), &base);
        assert_eq!(plain, json!({"relays": {}}));
    }

    #[test]
    fn a_clear_sticks_against_a_run_that_loaded_before_it() {
        let base = json!({"relays": {"wss://a.example": entry(10)}});
        let mut cleared = json!({"relays": {}});
        mark_cleared(&mut cleared, 50);
        let stored = merge_penalties(Some(&base), Some(&base), &cleared);
        assert_eq!(stored, json!({"relays": {}, "cleared_at": 50}));
        let run = json!({"relays": {"wss://a.example": entry(30), "wss://b.example": entry(40)}});
        let after = merge_penalties(Some(&stored), Some(&base), &run);
        assert_eq!(after, json!({"relays": {}, "cleared_at": 50}));
        // A run that loaded after the clear keeps its set-asides.
        let next = merge_penalties(Some(&after), Some(&after), &run);
        assert_eq!(entries(&next).map(Map::len), Some(2));
    }

    #[test]
    fn lifts_are_bounded() {
        let mut doc = json!({"relays": {}});
        for i in 0..MAX_LIFTS as u64 + 3 {
            mark_lifted(&mut doc, &format!("wss://r{i}.example"), 100 + i);
        }
        let out = merge_penalties(None, None, &doc);
        let lifted = out[LIFTED].as_object().unwrap();
        assert_eq!(lifted.len(), MAX_LIFTS);
        assert!(!lifted.contains_key("wss://r2.example"));
        assert!(lifted.contains_key("wss://r3.example"));
        mark_cleared(&mut doc, 100 + MAX_LIFTS as u64);
        let out = merge_penalties(None, None, &doc);
        assert_eq!(out[LIFTED].as_object().map(Map::len), Some(2));
    }
}
