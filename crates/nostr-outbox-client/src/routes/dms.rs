//! Direct messages (NIP-17): the gift wraps (kind:1059) addressed to the reader, asked of the
//! relays where the reader takes them.
//!
//! A sender publishes each wrap to the recipient's kind:10050 DM inbox relays, so those are
//! where the reader's messages are. A reader without that list is asked on its read relays
//! (kind:10002), where a client that found no DM list may have sent them, else on its
//! configured relays; [`DmQuery::source`] says which, so a caller can name the fallback.

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;

use super::{Candidates, Reason, Route, RouteContext, RouteKind};
use crate::directory::RelayDirectory;

/// How far back a wrap's `created_at` may be set (NIP-59: up to two days before it was sent,
/// so its time tells nothing). Wraps are asked from this much before the query's `since`.
pub const WRAP_BACKDATE_SECS: u64 = 2 * 24 * 60 * 60;

/// Most relays a DM read asks by default: NIP-17 asks for short DM lists (a few relays), and a
/// longer one costs sockets without finding more.
pub const MAX_DM_RELAYS: usize = 10;

/// Where the relays of a DM read come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmSource {
    /// The reader's kind:10050 DM inbox list.
    DmList,
    /// No DM list: the read relays of the reader's kind:10002 list.
    ReadRelays,
    /// Neither list names a relay: the reader's configured relays.
    ReaderRelays,
}

/// The gift wraps tagging `reader` (`#p`), since a time, at most `limit` per relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmQuery {
    /// The reader, to whom the wraps are addressed.
    pub reader: PublicKey,
    /// The reader's configured relays (raw), asked when neither of its lists names a relay.
    pub reader_relays: Vec<String>,
    /// Only messages sent at or after this time (unix seconds); the wraps are asked from
    /// [`WRAP_BACKDATE_SECS`] earlier.
    pub since: Option<u64>,
    /// At most this many wraps per relay (the newest).
    pub limit: Option<usize>,
}

impl DmQuery {
    /// Every wrap to `reader`, on its DM inbox relays.
    pub fn new(reader: PublicKey) -> Self {
        Self {
            reader,
            reader_relays: Vec::new(),
            since: None,
            limit: None,
        }
    }

    /// Which relays the route asks, from what the directory knows of the reader.
    pub fn source(&self, directory: &RelayDirectory) -> DmSource {
        if !directory.dm_relays(&self.reader).is_empty() {
            DmSource::DmList
        } else if !directory.read_relays(&self.reader).is_empty() {
            DmSource::ReadRelays
        } else {
            DmSource::ReaderRelays
        }
    }
}

impl Route for DmQuery {
    const KIND: RouteKind = RouteKind::Dms;

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let mut candidates = Candidates::default();
        let cap = ctx.budget.max_relays;
        let directory = ctx.directory;
        match self.source(directory) {
            DmSource::DmList => candidates.push(
                Reason::DmInbox(self.reader),
                directory.dm_relays(&self.reader).iter().cloned(),
                cap,
            ),
            DmSource::ReadRelays => candidates.push(
                Reason::ReaderRead,
                directory.read_relays(&self.reader).iter().cloned(),
                cap,
            ),
            // `source` names a list only when it holds a relay: only here may none be found.
            DmSource::ReaderRelays => {
                candidates.push_reader_relays(directory, self.reader, &self.reader_relays, cap)
            }
        }
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        let mut filter = Filter::new().kind(Kind::GiftWrap).pubkey(self.reader);
        if let Some(since) = self.since {
            filter = filter.since(Timestamp::from_secs(
                since.saturating_sub(WRAP_BACKDATE_SECS),
            ));
        }
        if let Some(limit) = self.limit {
            filter = filter.limit(limit);
        }
        vec![filter]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::RouteBudget;
    use nostr::key::Keys;
    use nostr_outbox_core::{DeliveryStats, RawRelayList, UrlPolicy};

    fn list(author: PublicKey, tags: &[&[&str]]) -> RawRelayList {
        RawRelayList {
            author,
            created_at: 1,
            tags: tags
                .iter()
                .map(|t| t.iter().map(|s| s.to_string()).collect())
                .collect(),
        }
    }

    fn plan_for(directory: &RelayDirectory, query: &DmQuery) -> super::super::RoutePlan {
        let stats = DeliveryStats::new();
        let ctx = RouteContext {
            directory,
            stats: &stats,
            now: 0,
            budget: RouteBudget::default(),
        };
        let (plan, violations) = query.plan_checked(&ctx);
        assert!(violations.is_empty(), "{violations:?}");
        plan
    }

    #[test]
    fn the_dm_list_wins_then_read_relays_then_the_configured_relays() {
        let reader = Keys::generate().public_key();
        let mut query = DmQuery::new(reader);
        query.reader_relays = vec!["wss://home.example".into()];
        query.since = Some(1_000_000);
        query.limit = Some(50);

        let mut b = crate::RelayDirectoryBuilder::new(UrlPolicy::default());
        b.add_relay_list(list(reader, &[&["r", "wss://read.example", "read"]]));
        b.add_dm_list(list(reader, &[&["relay", "wss://dm.example"]]));
        let both = b.build();
        assert_eq!(query.source(&both), DmSource::DmList);
        let plan = plan_for(&both, &query);
        assert_eq!(plan.urls().collect::<Vec<_>>(), ["wss://dm.example"]);
        assert_eq!(plan.targets[0].reasons, [Reason::DmInbox(reader)]);
        let filter = &plan.targets[0].filters[0];
        assert_eq!(filter.kinds.as_ref().unwrap().len(), 1);
        assert!(filter.kinds.as_ref().unwrap().contains(&Kind::GiftWrap));
        assert_eq!(
            filter.since,
            Some(Timestamp::from_secs(1_000_000 - WRAP_BACKDATE_SECS))
        );
        assert_eq!(filter.limit, Some(50));

        let mut b = crate::RelayDirectoryBuilder::new(UrlPolicy::default());
        b.add_relay_list(list(reader, &[&["r", "wss://read.example", "read"]]));
        let read_only = b.build();
        assert_eq!(query.source(&read_only), DmSource::ReadRelays);
        let plan = plan_for(&read_only, &query);
        assert_eq!(plan.urls().collect::<Vec<_>>(), ["wss://read.example"]);

        let nothing = RelayDirectory::from_relay_lists(UrlPolicy::default(), []);
        assert_eq!(query.source(&nothing), DmSource::ReaderRelays);
        let plan = plan_for(&nothing, &query);
        assert_eq!(plan.urls().collect::<Vec<_>>(), ["wss://home.example"]);
        assert!(plan.unknown.is_empty());

        query.reader_relays = vec!["not a url".into()];
        let plan = plan_for(&nothing, &query);
        assert!(plan.targets.is_empty());
        assert_eq!(plan.unknown, [reader]);
    }
}
