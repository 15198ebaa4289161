//! One author's per-relay evidence, laid out for planning.

use std::collections::{HashMap, HashSet};
use std::ops::Index;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::PairStats;

/// Per relay (canonical URL) asked about one author: its [`PairStats`].
///
/// A planner reads every follow's pairs on every plan, so they sit in one sorted `Vec` rather
/// than a hash map, and the URLs are shared `Arc<str>`s (one per relay across all authors when
/// they come through [`DeliveryStats`](super::DeliveryStats)): reading a pair touches no
/// per-pair allocation, and a planner can recognise a relay by its URL's address. Serialized
/// as a map from URL to pair, as before.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairs(Vec<(Arc<str>, PairStats)>);

impl Pairs {
    /// No evidence.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of relays with evidence.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no evidence.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn find(&self, url: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(u, _)| u.as_ref().cmp(url))
    }

    /// The evidence about `url`, if any.
    pub fn get(&self, url: &str) -> Option<&PairStats> {
        self.find(url).ok().map(|i| &self.0[i].1)
    }

    /// Sets the evidence about `url`, returning what it replaces.
    pub fn insert(&mut self, url: impl Into<Arc<str>>, pair: PairStats) -> Option<PairStats> {
        let url = url.into();
        match self.find(&url) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, pair)),
            Err(i) => {
                self.0.insert(i, (url, pair));
                None
            }
        }
    }

    /// Drops the evidence about `url`, returning it.
    pub fn remove(&mut self, url: &str) -> Option<PairStats> {
        self.find(url).ok().map(|i| self.0.remove(i).1)
    }

    /// The evidence about `url`, added empty when there is none.
    pub fn entry(&mut self, url: &Arc<str>) -> &mut PairStats {
        let i = match self.find(url) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (Arc::clone(url), PairStats::default()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Every relay's evidence, by URL.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &PairStats)> {
        self.0.iter().map(|(u, p)| (u.as_ref(), p))
    }

    /// Every relay's evidence with its shared URL: equal addresses are equal URLs.
    pub fn shared(&self) -> &[(Arc<str>, PairStats)] {
        &self.0
    }

    /// Every relay's evidence.
    pub fn values(&self) -> impl Iterator<Item = &PairStats> {
        self.0.iter().map(|(_, p)| p)
    }

    /// Replaces each URL by the one `urls` holds, adding the ones it lacks.
    pub(super) fn intern(&mut self, urls: &mut HashSet<Arc<str>>) {
        for (url, _) in &mut self.0 {
            match urls.get(url.as_ref()) {
                Some(shared) => *url = Arc::clone(shared),
                None => {
                    urls.insert(Arc::clone(url));
                }
            }
        }
    }
}

impl<K: Into<Arc<str>>> FromIterator<(K, PairStats)> for Pairs {
    /// Later entries for the same URL replace earlier ones, as a map's inserts would. Sorted
    /// once, so a file naming many relays for one author loads in `n log n`, not `n²`.
    fn from_iter<I: IntoIterator<Item = (K, PairStats)>>(iter: I) -> Self {
        let mut all: Vec<(Arc<str>, PairStats)> =
            iter.into_iter().map(|(url, p)| (url.into(), p)).collect();
        // Stable: equal URLs keep their order, and the last of each run is kept.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let mut pairs: Vec<(Arc<str>, PairStats)> = Vec::with_capacity(all.len());
        for (url, pair) in all {
            match pairs.last_mut() {
                Some(last) if last.0 == url => last.1 = pair,
                _ => pairs.push((url, pair)),
            }
        }
        Self(pairs)
    }
}

impl<'a> IntoIterator for &'a Pairs {
    type Item = (&'a str, &'a PairStats);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, PairStats)>,
        fn(&'a (Arc<str>, PairStats)) -> (&'a str, &'a PairStats),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(u, p)| (u.as_ref(), p))
    }
}

impl Index<&str> for Pairs {
    type Output = PairStats;

    fn index(&self, url: &str) -> &PairStats {
        self.get(url).expect("no evidence about this relay")
    }
}

impl Serialize for Pairs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(HashMap::<String, PairStats>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(hits: f64) -> PairStats {
        PairStats { hits, misses: 0.0 }
    }

    #[test]
    fn behaves_as_a_map_and_serializes_as_one() {
        let pairs: Pairs = [
            ("wss://b.example".to_string(), pair(1.0)),
            ("wss://a.example".to_string(), pair(2.0)),
            ("wss://b.example".to_string(), pair(3.0)),
        ]
        .into_iter()
        .collect();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs["wss://b.example"].hits, 3.0);
        assert_eq!(pairs.get("wss://c.example"), None);
        let json = serde_json::to_value(&pairs).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "wss://a.example": {"hits": 2.0, "misses": 0.0},
                "wss://b.example": {"hits": 3.0, "misses": 0.0},
            })
        );
        assert_eq!(serde_json::from_value::<Pairs>(json).unwrap(), pairs);
    }

    #[test]
    fn many_relays_load_in_order_with_the_last_entry_winning() {
        let n = 200_000;
        let pairs: Pairs = (0..n)
            .rev()
            .map(|i| (format!("wss://r{i:06}.example"), pair(i as f64)))
            .chain([("wss://r000007.example".to_string(), pair(-1.0))])
            .collect();
        assert_eq!(pairs.len(), n);
        assert!(pairs.shared().windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(pairs["wss://r000007.example"].hits, -1.0);
        assert_eq!(pairs["wss://r000008.example"].hits, 8.0);
    }

    #[test]
    fn interned_urls_share_one_allocation() {
        let mut urls = HashSet::new();
        let mut a: Pairs = [("wss://a.example".to_string(), pair(1.0))]
            .into_iter()
            .collect();
        let mut b = a.clone();
        b.insert("wss://a.example".to_string(), pair(2.0));
        b.insert(String::from("wss://a.example"), pair(2.0));
        let mut c: Pairs = [("wss://a.example".to_string(), pair(1.0))]
            .into_iter()
            .collect();
        a.intern(&mut urls);
        c.intern(&mut urls);
        assert!(Arc::ptr_eq(&a.shared()[0].0, &c.shared()[0].0));
        b.intern(&mut urls);
        assert!(Arc::ptr_eq(&a.shared()[0].0, &b.shared()[0].0));
    }
}
