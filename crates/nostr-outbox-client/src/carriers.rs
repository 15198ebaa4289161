//! The table a client plans with while some relays are set aside, and who then carries the
//! residual.
//!
//! Relays that keep failing are set aside and left out of the next plan, so their follows move
//! to other relays or to the residual. The residual needs someone to ask: the reader's usable
//! relays; else configured fallback relays; else the best-known live relays of the follows'
//! lists (learned liveness first, then how many lists name them). The runtime re-plans with
//! this after every set-aside and the simulator models the same re-plans, so both share it.

use std::collections::{HashMap, HashSet};

use nostr::key::PublicKey;
use serde::Serialize;

use nostr_outbox_core::hints::Hint;
use nostr_outbox_core::route_table::{RawRelayList, RouteTable, RouteTableBuilder};
use nostr_outbox_core::stats::DeliveryStats;
use nostr_outbox_core::url_policy::UrlPolicy;

/// Who carries the residual (the follows no routed relay covers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carriers {
    /// The reader's own relays.
    Reader,
    /// The configured fallback relays: no reader relay was usable.
    Fallback,
    /// The best-known live relays of the follows' lists: neither reader nor fallback relays
    /// were usable.
    Routed,
    /// No relay at all: the residual follows are asked of nobody.
    Nobody,
}

/// What a client knows of its network, for building the table it plans with.
#[derive(Clone, Copy, Debug)]
pub struct Network<'a> {
    /// How relay URLs are read.
    pub policy: &'a UrlPolicy,
    /// The reader's follows.
    pub follows: &'a [PublicKey],
    /// The reader's own relays (canonical URLs).
    pub readers: &'a [String],
    /// Relays for the residual when no reader relay is usable (canonical URLs).
    pub fallback: &'a [String],
    /// The follows' relay lists.
    pub lists: &'a [&'a RawRelayList],
    /// How many list relays carry the residual when neither reader nor fallback relays can.
    pub routed_carriers: usize,
}

impl Network<'_> {
    /// Who carries the residual with `set_aside` left out (see the module docs).
    pub fn carriers(
        &self,
        set_aside: &HashSet<&str>,
        stats: &DeliveryStats,
        now: u64,
    ) -> (Vec<String>, Carriers) {
        let usable = |urls: &[String]| -> Vec<String> {
            urls.iter()
                .filter(|u| !set_aside.contains(u.as_str()))
                .cloned()
                .collect()
        };
        let readers = usable(self.readers);
        if !readers.is_empty() {
            return (readers, Carriers::Reader);
        }
        let fallback = usable(self.fallback);
        if !fallback.is_empty() {
            return (fallback, Carriers::Fallback);
        }
        let mut named: HashMap<String, u32> = HashMap::new();
        for list in self.lists {
            for url in self.list_urls(list) {
                if !set_aside.contains(url.as_str()) {
                    *named.entry(url).or_default() += 1;
                }
            }
        }
        let liveness = |url: &str| {
            let s = stats.get_at(url, now);
            if s.asked > 0 {
                s.live_mean()
            } else {
                0.0
            }
        };
        let mut ranked: Vec<(f64, u32, String)> = named
            .into_iter()
            .map(|(url, n)| (liveness(&url), n, url))
            .collect();
        ranked.sort_by(|(la, na, a), (lb, nb, b)| lb.total_cmp(la).then(nb.cmp(na)).then(a.cmp(b)));
        let routed: Vec<String> = ranked
            .into_iter()
            .take(self.routed_carriers.max(1))
            .map(|(_, _, url)| url)
            .collect();
        let carriers = if routed.is_empty() {
            Carriers::Nobody
        } else {
            Carriers::Routed
        };
        (routed, carriers)
    }

    /// The route table with `set_aside` relays left out of every list, and the residual's
    /// carriers as its reader relays.
    pub fn table(
        &self,
        set_aside: &HashSet<&str>,
        stats: &DeliveryStats,
        now: u64,
    ) -> (RouteTable, Carriers) {
        self.table_with_hints(set_aside, stats, now, &[])
    }

    /// [`table`](Self::table), with `hints` ([`nostr_outbox_core::hints`]) offered to it too, those
    /// naming a set-aside relay left out.
    pub fn table_with_hints(
        &self,
        set_aside: &HashSet<&str>,
        stats: &DeliveryStats,
        now: u64,
        hints: &[Hint],
    ) -> (RouteTable, Carriers) {
        let (readers, carriers) = self.carriers(set_aside, stats, now);
        let mut builder = RouteTableBuilder::new(self.policy.clone())
            .follows(self.follows.iter().copied())
            .reader_relays(&readers);
        for list in self.lists {
            if set_aside.is_empty() {
                builder.add_list((*list).clone());
                continue;
            }
            let tags = list
                .tags
                .iter()
                .filter(|tag| {
                    let is_r = tag.first().map(String::as_str) == Some("r");
                    let url = tag
                        .get(1)
                        .and_then(|raw| self.policy.canonicalize(raw).ok());
                    !(is_r && url.is_some_and(|u| set_aside.contains(u.as_str())))
                })
                .cloned()
                .collect();
            builder.add_list(RawRelayList {
                author: list.author,
                created_at: list.created_at,
                tags,
            });
        }
        for h in hints {
            let aside = (self.policy.canonicalize(&h.relay).ok())
                .is_some_and(|url| set_aside.contains(url.as_str()));
            if !aside {
                builder.hint(h.author, &h.relay, h.source);
            }
        }
        (builder.build(), carriers)
    }

    fn list_urls<'l>(&'l self, list: &'l RawRelayList) -> impl Iterator<Item = String> + 'l {
        list.tags
            .iter()
            .filter(|tag| tag.first().map(String::as_str) == Some("r"))
            .filter_map(|tag| tag.get(1))
            .filter_map(|raw| self.policy.canonicalize(raw).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::key::{Keys, SecretKey};

    fn key(n: u8) -> PublicKey {
        Keys::new(SecretKey::from_slice(&[n; 32]).expect("key")).public_key()
    }

    fn list(author: u8, urls: &[&str]) -> RawRelayList {
        RawRelayList {
            author: key(author),
            created_at: 1,
            tags: urls
                .iter()
                .map(|u| vec!["r".to_string(), u.to_string()])
                .collect(),
        }
    }

    #[test]
    fn the_residual_moves_from_readers_to_fallback_to_list_relays_to_nobody() {
        let policy = UrlPolicy::default();
        let follows = [key(1), key(2), key(3)];
        let readers = ["wss://home.example".to_string()];
        let fallback = ["wss://spare.example".to_string()];
        let (a, b) = (
            list(1, &["wss://a.example", "wss://b.example"]),
            list(2, &["wss://b.example"]),
        );
        let lists = [&a, &b];
        let net = Network {
            policy: &policy,
            follows: &follows,
            readers: &readers,
            fallback: &fallback,
            lists: &lists,
            routed_carriers: 1,
        };
        let stats = DeliveryStats::new();
        let mut aside: HashSet<&str> = HashSet::new();
        assert_eq!(net.carriers(&aside, &stats, 0).1, Carriers::Reader);
        aside.insert("wss://home.example");
        assert_eq!(net.carriers(&aside, &stats, 0).1, Carriers::Fallback);
        aside.insert("wss://spare.example");
        // b is named by two lists, a by one.
        assert_eq!(
            net.carriers(&aside, &stats, 0),
            (vec!["wss://b.example".to_string()], Carriers::Routed)
        );
        aside.insert("wss://b.example");
        let (table, carriers) = net.table(&aside, &stats, 0);
        assert_eq!(carriers, Carriers::Routed);
        assert!(table.relay_id("wss://b.example").is_none(), "set aside");
        assert_eq!(table.reader_relays().len(), 1);
        aside.insert("wss://a.example");
        assert_eq!(net.carriers(&aside, &stats, 0).1, Carriers::Nobody);
    }

    #[test]
    fn hints_join_the_table_unless_their_relay_is_set_aside() {
        use nostr_outbox_core::hints::HintSource;
        let policy = UrlPolicy::default();
        let follows = [key(1), key(2)];
        let readers = ["wss://home.example".to_string()];
        let a = list(1, &["wss://a.example"]);
        let lists = [&a];
        let net = Network {
            policy: &policy,
            follows: &follows,
            readers: &readers,
            fallback: &[],
            lists: &lists,
            routed_carriers: 1,
        };
        let hint = |relay: &str| Hint {
            author: key(2),
            relay: relay.to_string(),
            source: HintSource::ContactList,
        };
        let hints = [hint("wss://h.example/"), hint("wss://gone.example")];
        let aside: HashSet<&str> = ["wss://gone.example"].into_iter().collect();
        let (table, _) = net.table_with_hints(&aside, &DeliveryStats::new(), 0, &hints);
        let two = table.author_id(&key(2)).unwrap();
        let hinted: Vec<&str> = table
            .hint_relays(two)
            .iter()
            .map(|&r| table.url(r))
            .collect();
        assert_eq!(hinted, ["wss://h.example"]);
        let (plain, _) = net.table(&aside, &DeliveryStats::new(), 0);
        assert_eq!(plain.hint_count(), 0);
    }
}
