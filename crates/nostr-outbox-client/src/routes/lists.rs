//! A person's own replaceable relay lists — kind:10002 (NIP-65), kind:10050 (NIP-17 DM inbox)
//! and kind:10007 (NIP-51 search relays) — edited, and where the new list is published.
//!
//! [`edit_list`] builds the new list's tags from the newest one found: one relay added (with a
//! NIP-65 marker for kind:10002) or removed, every other tag kept as it was. [`list_targets`]
//! says where the new list goes, so that whoever reads either the old or the new list finds it:
//! the person's write relays (of the new relay list and of the one it replaces), the indexers
//! that collect lists, and every relay the replaced list named.

use nostr::event::Kind;
use nostr_outbox_core::{DropReason, UrlPolicy};
use serde::Serialize;

/// Most relays a new list is published to. Write relays come first, then indexers, then the
/// relays of the replaced list; the rest are counted in [`ListTargets::left_out`].
pub const MAX_LIST_TARGETS: usize = 64;

/// Most tags an edited list may hold: a list already this long gets no relay added.
pub const MAX_LIST_TAGS: usize = 1_000;

/// The lists [`edit_list`] edits.
pub const EDITABLE_KINDS: [Kind; 3] = [Kind::RelayList, Kind::InboxRelays, Kind::SearchRelays];

/// The tag naming a relay in a list of `kind`: `r` in kind:10002, `relay` in the others.
pub fn relay_tag_name(kind: Kind) -> &'static str {
    if kind == Kind::RelayList {
        "r"
    } else {
        "relay"
    }
}

/// How a relay is used, for a kind:10002 entry (NIP-65 markers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Marker {
    /// No marker: read and write.
    Both,
    /// `read`: where the person reads mentions of them.
    Read,
    /// `write`: where the person publishes.
    Write,
}

/// One change to a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListEdit {
    /// Add the relay (for kind:10002 with this marker; an entry already there is replaced in
    /// place).
    Add {
        /// The relay, as given.
        url: String,
        /// The NIP-65 marker; only [`Marker::Both`] for lists other than kind:10002.
        marker: Marker,
    },
    /// Remove every entry naming the relay.
    Remove {
        /// The relay, as given.
        url: String,
    },
}

/// Why an edit cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListEditError {
    /// The kind is not one of [`EDITABLE_KINDS`].
    #[error("kind {0} is not a relay list this edits (10002, 10050, 10007)")]
    Kind(u16),
    /// The URL is refused by the policy.
    #[error("the relay is not usable: {0}")]
    Url(DropReason),
    /// A marker given for a list that has none.
    #[error("read and write markers belong to the relay list (kind:10002) only")]
    Marker,
    /// The relay to remove is not in the list.
    #[error("the relay is not in the list")]
    NotListed,
    /// The list already holds [`MAX_LIST_TAGS`] tags.
    #[error("the list already holds {MAX_LIST_TAGS} tags")]
    Full,
}

/// The new list: its tags, and whether anything changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditedList {
    /// The new list's tags: the old ones, in order, with the one change.
    pub tags: Vec<Vec<String>>,
    /// The canonical URL of the relay added or removed.
    pub url: String,
    /// False when the list already was what the edit asks (adding an entry that is there).
    pub changed: bool,
}

/// The tags of the list of `kind` after `edit`, from the `old` list's tags (empty when there
/// is none). URLs are compared canonically under `policy`; the added entry is written
/// canonical. Tags that are not relay entries are kept as they are.
pub fn edit_list(
    kind: Kind,
    old: &[Vec<String>],
    edit: &ListEdit,
    policy: &UrlPolicy,
) -> Result<EditedList, ListEditError> {
    if !EDITABLE_KINDS.contains(&kind) {
        return Err(ListEditError::Kind(kind.as_u16()));
    }
    let name = relay_tag_name(kind);
    let raw = match edit {
        ListEdit::Add { url, .. } | ListEdit::Remove { url } => url,
    };
    let url = policy.canonicalize(raw).map_err(ListEditError::Url)?;
    // Whether a tag is an entry for the relay, compared canonically (a policy refusing the
    // entry's URL compares it as written).
    let names_it = |tag: &Vec<String>| {
        tag.first().map(String::as_str) == Some(name)
            && tag.get(1).is_some_and(|u| {
                policy
                    .canonicalize(u)
                    .map_or(u.trim() == raw.trim(), |c| c == url)
            })
    };
    match edit {
        ListEdit::Add { marker, .. } => {
            if kind != Kind::RelayList && *marker != Marker::Both {
                return Err(ListEditError::Marker);
            }
            let mut entry = vec![name.to_string(), url.clone()];
            match marker {
                Marker::Both => {}
                Marker::Read => entry.push("read".into()),
                Marker::Write => entry.push("write".into()),
            }
            let mut tags: Vec<Vec<String>> = Vec::with_capacity(old.len() + 1);
            let mut placed = false;
            for tag in old {
                if names_it(tag) {
                    if !placed {
                        tags.push(entry.clone());
                        placed = true;
                    }
                } else {
                    tags.push(tag.clone());
                }
            }
            if !placed {
                if tags.len() >= MAX_LIST_TAGS {
                    return Err(ListEditError::Full);
                }
                tags.push(entry);
            }
            let changed = tags.as_slice() != old;
            Ok(EditedList { tags, url, changed })
        }
        ListEdit::Remove { .. } => {
            let tags: Vec<Vec<String>> = old.iter().filter(|t| !names_it(t)).cloned().collect();
            if tags.len() == old.len() {
                return Err(ListEditError::NotListed);
            }
            Ok(EditedList {
                tags,
                url,
                changed: true,
            })
        }
    }
}

/// The relays a list of `kind` names, canonical under `policy`, in order, each once (for
/// kind:10002 every marker).
pub fn listed_relays(kind: Kind, tags: &[Vec<String>], policy: &UrlPolicy) -> Vec<String> {
    relays_where(tags, relay_tag_name(kind), policy, |_| true)
}

/// The write relays of a kind:10002 list's tags (`write` or no marker), canonical.
pub fn write_relays(tags: &[Vec<String>], policy: &UrlPolicy) -> Vec<String> {
    relays_where(tags, "r", policy, |marker| {
        matches!(marker, None | Some("") | Some("write"))
    })
}

fn relays_where(
    tags: &[Vec<String>],
    name: &str,
    policy: &UrlPolicy,
    keep: impl Fn(Option<&str>) -> bool,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for tag in tags {
        if tag.first().map(String::as_str) != Some(name) || !keep(tag.get(2).map(String::as_str)) {
            continue;
        }
        if let Some(url) = tag.get(1).and_then(|u| policy.canonicalize(u).ok()) {
            if !out.contains(&url) {
                out.push(url);
            }
        }
    }
    out
}

/// Why a relay gets the new list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ListReason {
    /// A write relay of the person's relay list as it stands after the change (for kind:10002
    /// the new list, otherwise the newest kind:10002 found): where followers look.
    Write,
    /// A write relay only of the kind:10002 list being replaced: readers of the old list look
    /// there.
    OldWrite,
    /// An indexer: a relay that collects lists.
    Indexer,
    /// A relay the replaced list named: whoever used it finds the change there.
    OldList,
}

impl ListReason {
    /// A few words for the terminal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write relay",
            Self::OldWrite => "old write relay",
            Self::Indexer => "indexer",
            Self::OldList => "in the old list",
        }
    }
}

/// One relay the new list goes to, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListTarget {
    /// Canonical URL.
    pub url: String,
    /// Every reason it serves, in the order of [`ListReason`].
    pub reasons: Vec<ListReason>,
}

/// Where a new list goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ListTargets {
    /// The relays, write relays first, then indexers, then the old list's relays.
    pub targets: Vec<ListTarget>,
    /// Relays past [`MAX_LIST_TARGETS`], not sent to.
    pub left_out: usize,
}

impl ListTargets {
    /// The URLs, in order.
    pub fn urls(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.url.clone()).collect()
    }
}

/// A change of one of a person's lists, as [`list_targets`] reads it.
#[derive(Clone, Copy, Debug)]
pub struct ListChange<'a> {
    /// The list's kind (10002, 10050 or 10007).
    pub kind: Kind,
    /// The tags of the list replaced, if one was found.
    pub old: Option<&'a [Vec<String>]>,
    /// The tags of the new list.
    pub new: &'a [Vec<String>],
    /// For a list other than kind:10002: the tags of the person's newest kind:10002, whose
    /// write relays get the new list.
    pub relay_list: Option<&'a [Vec<String>]>,
    /// Relays that collect lists (canonical or not; read under the policy).
    pub indexers: &'a [String],
}

/// Where the new list goes: the person's write relays (of the new and the replaced kind:10002
/// list, or of its current one for the other kinds), the indexers, and every relay the
/// replaced list named, so a reader of either list finds the new one. URLs go through
/// `policy` (refused ones are skipped); at most [`MAX_LIST_TARGETS`].
pub fn list_targets(change: &ListChange<'_>, policy: &UrlPolicy) -> ListTargets {
    let mut out = ListTargets::default();
    let mut add = |url: String, reason: ListReason| {
        if let Some(t) = out.targets.iter_mut().find(|t| t.url == url) {
            if !t.reasons.contains(&reason) {
                t.reasons.push(reason);
                t.reasons.sort();
            }
        } else if out.targets.len() < MAX_LIST_TARGETS {
            out.targets.push(ListTarget {
                url,
                reasons: vec![reason],
            });
        } else {
            out.left_out += 1;
        }
    };
    let empty: &[Vec<String>] = &[];
    if change.kind == Kind::RelayList {
        for url in write_relays(change.new, policy) {
            add(url, ListReason::Write);
        }
        for url in write_relays(change.old.unwrap_or(empty), policy) {
            add(url, ListReason::OldWrite);
        }
    } else {
        for url in write_relays(change.relay_list.unwrap_or(empty), policy) {
            add(url, ListReason::Write);
        }
    }
    for raw in change.indexers {
        if let Ok(url) = policy.canonicalize(raw) {
            add(url, ListReason::Indexer);
        }
    }
    for url in listed_relays(change.kind, change.old.unwrap_or(empty), policy) {
        add(url, ListReason::OldList);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(raw: &[&[&str]]) -> Vec<Vec<String>> {
        raw.iter()
            .map(|t| t.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    fn add(url: &str, marker: Marker) -> ListEdit {
        ListEdit::Add {
            url: url.into(),
            marker,
        }
    }

    #[test]
    fn an_added_relay_keeps_every_other_tag_and_replaces_its_own_entry() {
        let policy = UrlPolicy::default();
        let old = tags(&[
            &["r", "wss://a.example"],
            &["alt", "relay list"],
            &["r", "wss://b.example/", "read"],
        ]);
        let new = edit_list(
            Kind::RelayList,
            &old,
            &add("wss://c.example", Marker::Write),
            &policy,
        )
        .unwrap();
        assert!(new.changed);
        assert_eq!(new.tags[..3], old[..]);
        assert_eq!(new.tags[3], ["r", "wss://c.example", "write"]);
        // The same relay written another way is replaced in place, not listed twice.
        let new = edit_list(
            Kind::RelayList,
            &old,
            &add("WSS://B.example", Marker::Both),
            &policy,
        )
        .unwrap();
        assert_eq!(new.tags.len(), 3);
        assert_eq!(new.tags[2], ["r", "wss://b.example"]);
        // Asking for what is there changes nothing.
        let same = edit_list(
            Kind::RelayList,
            &old,
            &add("wss://a.example", Marker::Both),
            &policy,
        )
        .unwrap();
        assert!(!same.changed);
    }

    #[test]
    fn removing_drops_the_entry_and_a_missing_one_is_an_error() {
        let policy = UrlPolicy::default();
        let old = tags(&[
            &["relay", "wss://dm.example"],
            &["relay", "wss://x.example"],
        ]);
        let remove = ListEdit::Remove {
            url: "wss://dm.example/".into(),
        };
        let new = edit_list(Kind::InboxRelays, &old, &remove, &policy).unwrap();
        assert_eq!(new.tags, tags(&[&["relay", "wss://x.example"]]));
        assert_eq!(
            edit_list(Kind::InboxRelays, &new.tags, &remove, &policy),
            Err(ListEditError::NotListed)
        );
        assert_eq!(
            edit_list(
                Kind::InboxRelays,
                &old,
                &add("wss://y.example", Marker::Read),
                &policy
            ),
            Err(ListEditError::Marker)
        );
        assert_eq!(
            edit_list(Kind::TextNote, &old, &remove, &policy),
            Err(ListEditError::Kind(1))
        );
        assert!(matches!(
            edit_list(
                Kind::InboxRelays,
                &old,
                &add("http://x", Marker::Both),
                &policy
            ),
            Err(ListEditError::Url(_))
        ));
        let full: Vec<Vec<String>> = (0..MAX_LIST_TAGS)
            .map(|i| vec!["relay".into(), format!("wss://r{i}.example")])
            .collect();
        assert_eq!(
            edit_list(
                Kind::InboxRelays,
                &full,
                &add("wss://more.example", Marker::Both),
                &policy
            ),
            Err(ListEditError::Full)
        );
    }

    #[test]
    fn the_new_list_goes_to_new_and_old_write_relays_indexers_and_the_old_lists_relays() {
        let policy = UrlPolicy::default();
        let old = tags(&[
            &["r", "wss://w.example", "write"],
            &["r", "wss://r.example", "read"],
            &["r", "wss://gone.example", "write"],
        ]);
        let new = tags(&[
            &["r", "wss://w.example", "write"],
            &["r", "wss://r.example", "read"],
            &["r", "wss://added.example", "write"],
        ]);
        let indexers = ["wss://index.example".to_string(), "not a url".into()];
        let targets = list_targets(
            &ListChange {
                kind: Kind::RelayList,
                old: Some(&old),
                new: &new,
                relay_list: None,
                indexers: &indexers,
            },
            &policy,
        );
        let got: Vec<(&str, &[ListReason])> = targets
            .targets
            .iter()
            .map(|t| (t.url.as_str(), t.reasons.as_slice()))
            .collect();
        use ListReason::*;
        assert_eq!(
            got,
            [
                ("wss://w.example", &[Write, OldWrite, OldList][..]),
                ("wss://added.example", &[Write][..]),
                ("wss://gone.example", &[OldWrite, OldList][..]),
                ("wss://index.example", &[Indexer][..]),
                ("wss://r.example", &[OldList][..]),
            ]
        );

        // A DM list: the current relay list's write relays, the indexers, the old DM relays.
        let relay_list = tags(&[&["r", "wss://w.example"]]);
        let old_dm = tags(&[&["relay", "wss://dm.example"]]);
        let targets = list_targets(
            &ListChange {
                kind: Kind::InboxRelays,
                old: Some(&old_dm),
                new: &tags(&[&["relay", "wss://dm2.example"]]),
                relay_list: Some(&relay_list),
                indexers: &[],
            },
            &policy,
        );
        assert_eq!(targets.urls(), ["wss://w.example", "wss://dm.example"]);

        // Bounded.
        let huge: Vec<Vec<String>> = (0..MAX_LIST_TARGETS + 5)
            .map(|i| vec!["relay".into(), format!("wss://r{i}.example")])
            .collect();
        let targets = list_targets(
            &ListChange {
                kind: Kind::SearchRelays,
                old: Some(&huge),
                new: &[],
                relay_list: None,
                indexers: &[],
            },
            &policy,
        );
        assert_eq!(targets.targets.len(), MAX_LIST_TARGETS);
        assert_eq!(targets.left_out, 5);
    }
}
