//! `recall`: connect to the relays most likely to return the follows' notes, old ones included.
//!
//! Clients that pick relays by popularity (greedy set cover) or by a per-author coin flip
//! (stochastic) find most of last week's notes but a fraction of last year's: popular hubs
//! prune old notes, many listed relays are dead, and writes silently fail on some relays. This
//! strategy plans with what the reader's own past runs showed (see
//! `nostr_outbox_core::stats::RoundReport`), and nothing else:
//!
//! - **liveness** per relay: did it answer the runs it was asked in; a relay that never
//!   answered is judged against how many listed relays are dead for good (`dead_share`), one
//!   that answered and returned notes against how often such relays answered
//!   (`empirical_priors`);
//! - **depth** per relay: how far back its history reaches, from the oldest note it returned
//!   about anyone. Relays that prune at the same age overlap: a second month-deep relay adds
//!   nothing to the first's month, however often both answer;
//! - **completeness** per relay and per (relay, author) pair: of the notes within its depth,
//!   what share it returned (writes that silently failed);
//! - **volume and ages** per author: how many notes it had, over which ages. An author seen
//!   only on relays that prune is taken to have posted before too, at the rate seen, so the
//!   relays that may hold that history are worth probing (directed exploration).
//!
//! A note of age `x` comes back unless every asked relay whose depth reaches `x` misses it, so
//! the value of a set of relays is, per author, the integral over the author's notes of
//! `1 − Π (1 − q(r, a))` over the relays reaching each age, with `q = live · kept`. The notes
//! that count are those the fetch asks for: a plan for a week's feed and one for a year's
//! history differ, since a hub that keeps a month serves the week alone but the year only with
//! deep relays beside it (`windowed`; when the fetch's window is not known, notes within
//! `window_days` count 1 and older ones `beyond_weight`). This week's notes of an active
//! author may count `recent_weight` more, for a client that plans one fetch for everything.
//! The value is maximised greedily under the connection budget with lazy gains. A disclosure
//! budget (on average `disclosure` relays per listed follow) then drops the (follow, relay)
//! pairs that add least, so prolific follows get more relays than silent ones; but only a
//! pair learned to add nothing may go (the relay was seen answering beside one that held every
//! note it returned, pairs judged against what the round's relays returned together, or it
//! was seen holding none): a follow whose relays were never asked side by side keeps them all
//! until they are, so a budget with room never trades a note for disclosure on a guess. Beliefs are posterior means; `explore = true` draws them instead
//! (Thompson sampling), which the optimism about unprobed depth makes unnecessary on the
//! bench's worlds. Each follow is asked of its best `per_author` chosen relays; follows no
//! chosen relay serves go to the residual.
//!
//! Relay hints in the route table (`nostr_outbox_core::hints`) are candidates beside the declared
//! write relays: a hinted pair starts at its source's prior (`HintSource::prior`) times what
//! the relay is believed to deliver, and is judged by its own evidence once asked. A follow
//! with no list, or whose declared relays are dead or keep no history, is then routed where it
//! was hinted; one whose declared relays serve it well rarely is, since a hint adds little to
//! them and costs disclosure. A hint at one of the reader's relays (notes seen arriving for the
//! residual) is never routed to: the residual asks those relays anyway, and a routed one would
//! spend a connection. A table without hints plans exactly as before.
//!
//! Each ingredient can be switched off in config, which is how the ablation is measured.

mod model;
mod select;

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::Selector;

pub use model::Model;
pub use select::Recall;

/// `[strategy] type = "recall"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", default, deny_unknown_fields)]
pub struct RecallConfig {
    /// Most routed relays per follow (the per-author cap).
    pub per_author: usize,
    /// Average routed relays per listed follow, over the whole plan: how widely the follow list
    /// is disclosed: each relay asked about a follow learns that the reader follows them.
    /// Prolific follows may get up to `per_author` relays, silent ones fewer; the (follow,
    /// relay) pairs worth least are dropped until the average holds, but only pairs learned to
    /// add nothing to the follow's other relays (so a first run, which has compared nothing,
    /// asks every relay it routes a follow to, and the average may be exceeded until a run has
    /// compared them). What each setting costs is measured in `docs/results.md`.
    pub disclosure: f64,
    /// Thompson draws from the learned priors; `false` plans with posterior means (exploring
    /// only where the optimism about unprobed depth points).
    pub explore: bool,
    /// Weigh relays by learned liveness.
    pub liveness: bool,
    /// Weigh relays by learned completeness (history kept, writes accepted).
    pub completeness: bool,
    /// Use per-(relay, author) evidence where there is some.
    pub pairs: bool,
    /// Weigh follows by their learned note volume.
    pub volume: bool,
    /// Start relays never asked from what asked relays of similar popularity did, instead of
    /// the uniform prior.
    pub pooled_priors: bool,
    /// Judge a relay that answered and returned notes from what such relays did (how often
    /// they answered, how complete they were), not from the uniform prior: one answer from a
    /// relay on a network where answering relays keep answering is strong evidence, and a
    /// uniform prior would make a second relay for the same follows look worth a connection.
    pub empirical_priors: bool,
    /// Extra pseudo-successes in the completeness prior of relays never asked: optimism that
    /// keeps untried relays in the running (0 = uniform prior).
    pub optimism: f64,
    /// The weight of a follow seen to have no notes in the window, as a share of the average
    /// follow's (they must stay covered, but cost little to leave to the residual).
    pub silent_weight: f64,
    /// Weigh relays by how far back their history was seen to reach: a relay that prunes
    /// after a month adds nothing to another's month, however often both answer.
    pub depth: bool,
    /// Plan for the notes the fetch asks for, when the input says how far back that is
    /// (`PlanInput::window_secs`); notes older are never fetched and count nothing. Off, or
    /// not said: plan for `window_days`.
    pub windowed: bool,
    /// The age, in days, of the notes the plan is for when the fetch's window is not known (a
    /// feed's window); older notes count `beyond_weight` each. 0: every note counts the same.
    pub window_days: f64,
    /// What a note older than `window_days` is worth, as a share of a younger one.
    pub beyond_weight: f64,
    /// What this week's notes of an author who posted this week are worth on top, as a share
    /// of all the author's notes within the window: how much a plan favours asking each
    /// active follow of a second relay that answers when the first does not.
    pub recent_weight: f64,
    /// The share of listed relays taken to be dead for good, for judging relays that failed
    /// every run they were asked in (0: judge them like any other, by a Beta posterior).
    pub dead_share: f64,
}

impl Default for RecallConfig {
    fn default() -> Self {
        Self {
            per_author: 3,
            disclosure: 1.6,
            explore: false,
            liveness: true,
            completeness: true,
            pairs: true,
            volume: true,
            pooled_priors: false,
            empirical_priors: true,
            optimism: 0.0,
            silent_weight: 0.05,
            depth: true,
            windowed: true,
            window_days: 365.0,
            beyond_weight: 0.25,
            recent_weight: 0.0,
            dead_share: 0.4,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "recall",
    summary: "learned coverage: how far back each relay keeps notes, liveness, completeness and volume from past runs; probes where history is missing",
    impl StrategyConfig for RecallConfig {
        fn validate(&self) -> Vec<ConfigIssue> {
            let mut issues: Vec<ConfigIssue> =
                ConfigIssue::unless_within("per_author", self.per_author, 16)
                    .into_iter()
                    .collect();
            // Each bounded number: its key, value, range, and whether the top is included.
            let bounded = [
                ("disclosure", self.disclosure, 0.5, 16.0, true),
                ("optimism", self.optimism, 0.0, 100.0, true),
                ("silent_weight", self.silent_weight, 0.0, 1.0, true),
                ("window_days", self.window_days, 0.0, 36_500.0, true),
                ("beyond_weight", self.beyond_weight, 0.0, 1.0, true),
                ("recent_weight", self.recent_weight, 0.0, 10.0, true),
                ("dead_share", self.dead_share, 0.0, 1.0, false),
            ];
            for (key, value, lo, hi, top) in bounded {
                let inside = value.is_finite() && value >= lo && (value < hi || (top && value == hi));
                if !inside {
                    let close = if top { ']' } else { ')' };
                    issues.push(ConfigIssue::new(
                        key,
                        format!("must be in [{lo}, {hi}{close}, got {value}"),
                    ));
                }
            }
            issues
        }

        fn build(&self) -> Box<dyn Selector> {
            Box::new(Recall::new(self.clone()))
        }
    }
}
