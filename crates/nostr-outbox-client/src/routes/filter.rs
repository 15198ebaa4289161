//! Any filter, routed by what it names: a client's own subscription on the running relays
//! (replies to a note, a profile's notes, reactions to the reader).
//!
//! - `authors`: each author's write relays (NIP-65 `write`), as a feed would; a relay chosen
//!   only for authors is asked about those authors alone.
//! - `#p`: each tagged person's read relays, where what mentions them is sent.
//! - hints (raw URLs, e.g. from a `nevent`): asked as given, under the directory's policy.
//! - always, and for everything else (`ids`, `#e`, `#a`, kinds alone): the reader's read
//!   relays, else the reader's configured relays. A person with no known relay is reported
//!   unknown and still reached there.

use nostr::filter::{Filter, SingleLetterTag};
use nostr::key::PublicKey;

use super::{
    select, tagged_people, Candidates, Reason, Route, RouteContext, RouteKind, RoutePlan,
    RouteViolation,
};

/// People a filter's `authors` or `#p` may name and still be routed one by one; past this,
/// the rest are asked only of the reader's relays.
pub const MAX_ROUTED_PEOPLE: usize = 1_000;

/// A filter and where the reader reads (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq)]
pub struct FilterQuery {
    /// What is asked.
    pub filter: Filter,
    /// The reader, whose read relays are always asked (`None`: the configured relays).
    pub reader: Option<PublicKey>,
    /// The reader's configured relays (raw), asked when the reader's list names no read relay.
    pub reader_relays: Vec<String>,
    /// Relay hints (raw).
    pub hints: Vec<String>,
}

impl FilterQuery {
    /// `filter`, with the reader's relays as the fallback.
    pub fn new<S: AsRef<str>>(filter: Filter, reader_relays: impl IntoIterator<Item = S>) -> Self {
        Self {
            filter,
            reader: None,
            reader_relays: reader_relays
                .into_iter()
                .map(|s| s.as_ref().to_string())
                .collect(),
            hints: Vec::new(),
        }
    }

    fn authors(&self) -> Vec<PublicKey> {
        let mut authors: Vec<PublicKey> = self
            .filter
            .authors
            .iter()
            .flatten()
            .copied()
            .take(MAX_ROUTED_PEOPLE)
            .collect();
        authors.sort();
        authors
    }

    fn tagged(&self) -> Vec<PublicKey> {
        let p = SingleLetterTag::LOWERCASE_P;
        let tags: Vec<Vec<String>> = self
            .filter
            .generic_tags
            .get(&p)
            .into_iter()
            .flatten()
            .take(MAX_ROUTED_PEOPLE)
            .map(|hex| vec!["p".to_string(), hex.clone()])
            .collect();
        tagged_people(&tags)
    }

    /// The plan, with each relay chosen only for authors asked about those authors alone.
    fn narrowed(&self, mut plan: RoutePlan) -> RoutePlan {
        plan.narrow_to_authors(|_| true);
        plan
    }
}

impl Route for FilterQuery {
    const KIND: RouteKind = RouteKind::Subscription;

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let mut candidates = Candidates::default();
        let budget = ctx.budget;
        for author in self.authors() {
            candidates.push(
                Reason::AuthorWrite(author),
                ctx.directory.write_relays(&author).iter().cloned(),
                budget.per_author,
            );
        }
        candidates.push_read_relays(ctx.directory, self.tagged(), budget.per_person);
        candidates.push_hints(ctx.directory.policy(), &self.hints, budget.hints);
        let read = self
            .reader
            .map(|r| ctx.directory.read_relays(&r).to_vec())
            .unwrap_or_default();
        if read.is_empty() {
            let policy = ctx.directory.policy();
            let configured = self
                .reader_relays
                .iter()
                .filter_map(|raw| policy.canonicalize(raw).ok());
            candidates.push(Reason::ReaderRelay, configured, budget.max_relays);
        } else {
            candidates.push(Reason::ReaderRead, read, budget.max_relays);
        }
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        vec![self.filter.clone()]
    }

    fn plan(&self, ctx: &RouteContext<'_>) -> RoutePlan {
        self.narrowed(select(
            Self::KIND,
            &self.candidates(ctx),
            self.filters(),
            ctx,
        ))
    }

    fn plan_checked(&self, ctx: &RouteContext<'_>) -> (RoutePlan, Vec<RouteViolation>) {
        let candidates = self.candidates(ctx);
        let plan = self.narrowed(select(Self::KIND, &candidates, self.filters(), ctx));
        let violations = super::check_route(&plan, &candidates, &ctx.budget);
        (plan, violations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::RelayDirectory;
    use crate::routes::RouteBudget;
    use nostr::key::Keys;
    use nostr_outbox_core::{DeliveryStats, RawRelayList, UrlPolicy};

    /// Routing over `directory` with `stats` at time zero, within the default budget.
    fn at_zero<'a>(directory: &'a RelayDirectory, stats: &'a DeliveryStats) -> RouteContext<'a> {
        RouteContext {
            directory,
            stats,
            now: 0,
            budget: RouteBudget::default(),
        }
    }

    fn list(author: PublicKey, entries: &[(&str, &str)]) -> RawRelayList {
        RawRelayList {
            author,
            created_at: 1,
            tags: entries
                .iter()
                .map(|(url, marker)| {
                    let mut tag = vec!["r".to_string(), url.to_string()];
                    if !marker.is_empty() {
                        tag.push(marker.to_string());
                    }
                    tag
                })
                .collect(),
        }
    }

    #[test]
    fn authors_go_to_their_write_relays_and_the_rest_to_the_reader() {
        let (alice, bob, carol) = (
            Keys::generate().public_key(),
            Keys::generate().public_key(),
            Keys::generate().public_key(),
        );
        let directory = RelayDirectory::from_relay_lists(
            UrlPolicy::default(),
            [
                list(alice, &[("wss://a.example", "write")]),
                list(
                    bob,
                    &[("wss://b.example", "write"), ("wss://b-in.example", "read")],
                ),
                list(carol, &[("wss://c-in.example", "read")]),
            ],
        );
        let stats = DeliveryStats::new();
        let ctx = at_zero(&directory, &stats);
        let q = FilterQuery::new(
            Filter::new().authors([alice, bob]).pubkey(carol),
            ["wss://reader.example"],
        );
        let (plan, violations) = q.plan_checked(&ctx);
        assert!(violations.is_empty(), "{violations:?}");
        let urls: Vec<&str> = plan.urls().collect();
        assert_eq!(
            urls,
            [
                "wss://a.example",
                "wss://b.example",
                "wss://c-in.example",
                "wss://reader.example"
            ]
        );
        // A relay chosen for one author is asked about that author alone.
        let a = plan.target("wss://a.example").unwrap();
        assert_eq!(a.filters[0].authors.as_ref().unwrap().len(), 1);
        assert!(a.filters[0].authors.as_ref().unwrap().contains(&alice));
        // The reader's relay gets the whole filter.
        let r = plan.target("wss://reader.example").unwrap();
        assert_eq!(r.filters[0], q.filter);
        assert_eq!(plan.kind, RouteKind::Subscription);
    }

    #[test]
    fn a_filter_naming_nobody_goes_to_the_reader_and_unknown_people_are_reported() {
        let stranger = Keys::generate().public_key();
        let directory = RelayDirectory::from_relay_lists(UrlPolicy::default(), []);
        let stats = DeliveryStats::new();
        let ctx = at_zero(&directory, &stats);
        let q = FilterQuery::new(
            Filter::new()
                .author(stranger)
                .kind(nostr::event::Kind::Reaction),
            ["wss://reader.example", "not a url"],
        );
        let (plan, violations) = q.plan_checked(&ctx);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(plan.urls().collect::<Vec<_>>(), ["wss://reader.example"]);
        assert_eq!(plan.unknown, [stranger]);
    }
}
