//! World families: the default model, and perturbations whose knobs are drawn anew for every
//! world, so a strategy is measured on networks it was not tuned on.
//!
//! A family names which knobs move and the range each is drawn from. The ranges stay within
//! what the published measurements allow (`docs/design.md`: 35–60% of listed relays alive, 70–88%
//! of live ones answering, 20–44% of follows without a list, hubs keeping weeks to months, mid
//! relays months to years) or, where nothing is published, within a factor of about two of the
//! default. Knobs are drawn from a stream of their own seeded by the world's seed, so the
//! family's world for a seed is as reproducible as the default one; the default family draws
//! nothing and leaves every world as it was.
//!
//! `decay`, `amnesia` and `churn` move the default's knobs. `skew`, `indexed`, `sparse`,
//! `dense` and `tail` reach shapes the default never draws (a few follows carrying most notes,
//! follows whose whole history is on one relay only they list, widely listed relays that keep
//! nothing, lists of one relay or of dozens, a long tail of dead relays around a few relays of
//! one follow each that hold most of the year), as worlds from other generators and real
//! readers show.
//! `hinted` is the default network with the relay hints a client knows: kind:3 hints (often
//! stale), pointers and relays notes were seen on. `patchy` is the default network where a
//! follow's notes are on some of its relays and not others: pairs that hold part of the notes
//! and pairs pruned early, so asking one of a follow's relays is seen to cost notes.

use std::fmt;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::model::{Span, WorldModel};

/// A named way of drawing a world model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// The default knobs, as calibrated.
    #[default]
    Default,
    /// A decaying network: fewer live relays, flakier answers, lossier writes.
    Decay,
    /// Short memories: hubs and mid relays prune harder, and more mid relays prune.
    Amnesia,
    /// Movement and concentration: more authors moved relays, hub popularity and the share of
    /// follows without a list vary widely.
    Churn,
    /// Skewed volume: the top ten follows carry 40–60% of a year's notes, and a few prolific
    /// follows keep everything on one relay only they list.
    Skew,
    /// Indexers: a few relays that answer and keep no notes are in 15–55% of the lists each,
    /// and more lists run to dozens of relays, most of them dead.
    Indexed,
    /// Short lists: most name one or two relays, few are long, and more follows keep their
    /// notes on one relay of their own.
    Sparse,
    /// Long lists: most name five to nine relays, and more run to dozens.
    Dense,
    /// The default network, with relay hints: kind:3 hints for 30–70% of follows (30–70% of
    /// them stale), pointers to 10–40% and relays 5–25% were seen on.
    Hinted,
    /// A long tail: three to six prolific follows each keep everything on one relay of their
    /// own (together about half of a year's notes), while most other listed relays are dead, so
    /// a few tail relays beat every hub and a probe seldom finds a live relay by chance.
    Tail,
    /// The default network where notes miss some of a follow's relays: 20–50% of (follow,
    /// relay) pairs hold only 60–95% of the follow's notes, and 5–20% keep only its last 7–90
    /// days.
    Patchy,
}

impl Family {
    /// Every family, the default first.
    pub const ALL: [Family; 11] = [
        Family::Default,
        Family::Decay,
        Family::Amnesia,
        Family::Churn,
        Family::Skew,
        Family::Indexed,
        Family::Sparse,
        Family::Dense,
        Family::Hinted,
        Family::Tail,
        Family::Patchy,
    ];

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Default => "default",
            Family::Decay => "decay",
            Family::Amnesia => "amnesia",
            Family::Churn => "churn",
            Family::Skew => "skew",
            Family::Indexed => "indexed",
            Family::Sparse => "sparse",
            Family::Dense => "dense",
            Family::Hinted => "hinted",
            Family::Tail => "tail",
            Family::Patchy => "patchy",
        }
    }

    /// `model` with this family's knobs drawn for `seed` (the default family returns it as is).
    pub fn model(self, model: &WorldModel, seed: u64) -> WorldModel {
        let mut m = model.clone();
        if self == Family::Default {
            return m;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6661_6d69_6c79 ^ (self as u64) << 48);
        let mut draw = |lo: f64, hi: f64| Span::new(lo, hi).draw(&mut rng);
        match self {
            Family::Default => {}
            Family::Decay => {
                m.mid_alive = draw(0.45, 0.75);
                m.tail_alive = draw(0.35, 0.7);
                m.long_list_tail_alive = draw(0.03, 0.15);
                m.dead_hubs = draw(3.0, 6.0).round() as usize;
                m.relay_reliability = Span::new(draw(0.35, 0.6), draw(0.85, 0.97));
                m.hub_reliability = Span::new(draw(0.8, 0.92), draw(0.93, 0.99));
                m.write_failure_share = Span::new(0.0, draw(0.2, 0.5));
                m.event_drop_share = draw(0.01, 0.06);
            }
            Family::Amnesia => {
                let hub_lo = draw(5.0, 14.0);
                m.hub_retention_days = Span::new(hub_lo, hub_lo + draw(10.0, 30.0));
                let mid_lo = draw(60.0, 180.0);
                m.mid_retention_days = Span::new(mid_lo, mid_lo + draw(180.0, 540.0));
                m.mid_prune_share = draw(0.7, 1.0);
                m.mid_retention_noise = draw(0.1, 0.5);
            }
            Family::Churn => {
                m.moved_share = draw(0.2, 0.6);
                m.moved_keep_share = draw(0.15, 0.6);
                let no_list = draw(0.2, 0.44);
                m.no_list_share = Span::new(no_list, no_list);
                m.top_hub_share = draw(0.3, 0.6);
                m.hub_decay = draw(0.72, 0.9);
                m.mid_slot_share = draw(0.2, 0.5);
                m.broadcast_share = draw(0.05, 0.45);
                m.quit_share = draw(0.2, 0.5);
            }
            Family::Skew => {
                m.top_follows = 10;
                m.top_follows_year_share = draw(0.4, 0.6);
                m.hoarder_share = draw(0.005, 0.015);
                m.hoarder_rate_per_day = Span::new(draw(1.5, 3.0), draw(4.0, 8.0));
            }
            Family::Indexed => {
                m.empty_relays = draw(2.0, 6.0).round() as usize;
                let lo = draw(0.15, 0.3);
                m.empty_relay_list_share = Span::new(lo, lo + draw(0.05, 0.25));
                m.long_list_share = draw(0.08, 0.2);
                m.long_list_max = draw(40.0, 60.0).round() as usize;
            }
            Family::Sparse => {
                // Lengths 1, 2, …, 6.
                m.write_count_min = 1;
                m.write_count_weights =
                    vec![draw(0.3, 0.45), draw(0.2, 0.3), 0.15, 0.08, 0.04, 0.02];
                m.long_list_share = draw(0.01, 0.05);
                m.hoarder_share = draw(0.01, 0.02);
                m.hoarder_rate_per_day = Span::new(1.2, draw(3.0, 6.0));
            }
            Family::Dense => {
                // Lengths 2, 3, …, 12, centred on 5.5–8.
                let centre = draw(5.5, 8.0);
                m.write_count_min = 2;
                m.write_count_weights = (2..=12)
                    .map(|n| (-((n as f64 - centre) / 2.5).powi(2) / 2.0).exp())
                    .collect();
                m.long_list_share = draw(0.12, 0.25);
                m.long_list_max = draw(45.0, 60.0).round() as usize;
            }
            Family::Hinted => {
                m.contact_hint_share = draw(0.3, 0.7);
                m.contact_hint_stale_share = draw(0.3, 0.7);
                m.pointer_hint_share = draw(0.1, 0.4);
                m.seen_on_hint_share = draw(0.05, 0.25);
            }
            Family::Tail => {
                // A fixed few, posting in proportion to the follow list, so that together
                // they carry about half of a year's notes at every profile.
                let hoarders = draw(3.0, 6.0).round();
                m.hoarder_share = hoarders / m.follows.max(1) as f64;
                let scale = (m.follows as f64 / 200.0).max(1.0);
                m.hoarder_rate_per_day =
                    Span::new(draw(4.0, 8.0) * scale, draw(10.0, 18.0) * scale);
                m.mid_alive = draw(0.3, 0.5);
                m.tail_alive = draw(0.25, 0.45);
                m.long_list_tail_alive = draw(0.02, 0.08);
                m.dead_hubs = draw(3.0, 5.0).round() as usize;
            }
            Family::Patchy => {
                m.patchy_pair_share = draw(0.2, 0.5);
                m.patchy_pair_keep = Span::new(draw(0.6, 0.7), draw(0.85, 0.95));
                m.pruned_pair_share = draw(0.05, 0.2);
                m.pruned_pair_days = Span::new(draw(7.0, 14.0), draw(30.0, 90.0));
            }
        }
        m
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown family {s:?} (default, decay, amnesia, churn, skew, indexed, \
                     sparse, dense, hinted, tail, patchy)"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate, generate_in, Profile};

    #[test]
    fn the_default_family_changes_nothing() {
        let model = WorldModel::for_profile(Profile::Small);
        assert_eq!(Family::Default.model(&model, 7), model);
        let a = generate(Profile::Small, 7);
        let b = generate_in(Family::Default, Profile::Small, 7);
        assert_eq!(a.events().len(), b.events().len());
        assert_eq!(a.relays().len(), b.relays().len());
    }

    #[test]
    fn families_draw_their_knobs_per_seed_reproducibly() {
        let model = WorldModel::for_profile(Profile::Small);
        for family in Family::ALL.into_iter().skip(1) {
            let one = family.model(&model, 1);
            assert_eq!(one, family.model(&model, 1), "{family}");
            assert_ne!(one, model, "{family} moved no knob");
            assert_ne!(
                one,
                family.model(&model, 2),
                "{family} draws the same for every seed"
            );
        }
        let decay = Family::Decay.model(&model, 3);
        assert!(
            (0.45..=0.75).contains(&decay.mid_alive),
            "{}",
            decay.mid_alive
        );
        let amnesia = Family::Amnesia.model(&model, 3);
        assert!(amnesia.hub_retention_days.hi <= 44.0);
        assert!(amnesia.hub_retention_days.lo < amnesia.hub_retention_days.hi);
        let skew = Family::Skew.model(&model, 3);
        assert!((0.4..=0.6).contains(&skew.top_follows_year_share));
        assert!((0.005..=0.015).contains(&skew.hoarder_share));
        let indexed = Family::Indexed.model(&model, 3);
        assert!((2..=6).contains(&indexed.empty_relays));
        assert!(indexed.empty_relay_list_share.lo >= 0.15);
        assert!((40..=60).contains(&indexed.long_list_max));
        let sparse = Family::Sparse.model(&model, 3);
        assert_eq!(sparse.write_count_min, 1);
        let dense = Family::Dense.model(&model, 3);
        assert_eq!(dense.write_count_weights.len(), 11);
        let hinted = Family::Hinted.model(&model, 3);
        assert!((0.3..=0.7).contains(&hinted.contact_hint_share));
        assert!((0.05..=0.25).contains(&hinted.seen_on_hint_share));
        let tail = Family::Tail.model(&model, 3);
        let hoarders = (tail.hoarder_share * tail.follows as f64).round();
        assert!((3.0..=6.0).contains(&hoarders), "{hoarders}");
        assert!(tail.mid_alive <= 0.5 && tail.tail_alive <= 0.45);
        let patchy = Family::Patchy.model(&model, 3);
        assert!((0.2..=0.5).contains(&patchy.patchy_pair_share));
        assert!((0.05..=0.2).contains(&patchy.pruned_pair_share));
    }

    #[test]
    fn names_round_trip() {
        for family in Family::ALL {
            assert_eq!(family.name().parse::<Family>(), Ok(family));
        }
        assert!("nope".parse::<Family>().is_err());
    }
}
