//! What a generated world is made of: the profiles, and [`WorldModel`], every knob of the
//! generator with the published fact it models.

use std::fmt;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// A named world size (by follow count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// ≈200 follows.
    Small,
    /// ≈450 follows.
    Medium,
    /// ≈1,800 follows.
    Large,
    /// ≈2,800 follows.
    Huge,
}

impl Profile {
    /// Every profile, smallest first.
    pub const ALL: [Profile; 4] = [
        Profile::Small,
        Profile::Medium,
        Profile::Large,
        Profile::Huge,
    ];

    /// The nominal follow count.
    pub fn follows(self) -> usize {
        match self {
            Profile::Small => 200,
            Profile::Medium => 450,
            Profile::Large => 1_800,
            Profile::Huge => 2_800,
        }
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Small => "small",
            Profile::Medium => "medium",
            Profile::Large => "large",
            Profile::Huge => "huge",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown profile {s:?} (small, medium, large, huge)"))
    }
}

/// An inclusive range a value is drawn uniformly from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Lowest value.
    pub lo: f64,
    /// Highest value.
    pub hi: f64,
}

impl Span {
    /// `[lo, hi]`.
    pub const fn new(lo: f64, hi: f64) -> Self {
        Self { lo, hi }
    }

    pub(super) fn draw(self, rng: &mut impl Rng) -> f64 {
        if self.hi <= self.lo {
            self.lo
        } else {
            rng.random_range(self.lo..=self.hi)
        }
    }
}

/// Every knob of the generator in one place. Defaults reproduce the published network facts;
/// each field says which fact it models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorldModel {
    /// Followed authors.
    pub follows: usize,
    /// Sessions described (length of every `up` array).
    pub sessions: u32,
    /// Share of follows that publish no relay list (measured 20–44%); drawn per world.
    pub no_list_share: Span,
    /// Hubs: a few relays found in a third to half of all lists.
    pub hubs: usize,
    /// Chance that a list includes the most popular hub; hub `i` is included independently
    /// with this times `hub_decay^i` (a few hubs in a third to half of all lists).
    pub top_hub_share: f64,
    /// Popularity decay from one hub to the next.
    pub hub_decay: f64,
    /// Mid-popularity relays, as a base count plus one per this many follows.
    pub mid_relays_base: usize,
    /// See [`WorldModel::mid_relays_base`].
    pub follows_per_mid_relay: usize,
    /// Zipf exponent of mid-relay popularity.
    pub mid_zipf: f64,
    /// Share of the write slots not taken by hubs that go to mid relays; the rest go to the
    /// tail (relays found in one list each).
    pub mid_slot_share: f64,
    /// Weights of list lengths `write_count_min`, `write_count_min + 1`, … write relays (by
    /// default 2 to 8).
    pub write_count_weights: Vec<f64>,
    /// The shortest ordinary list, in write relays: 2 by default; 1 lets lists name a single
    /// relay, as many clients' defaults and hand-made lists do.
    pub write_count_min: usize,
    /// Share of lists that are far longer ([`WorldModel::long_list_min`] to
    /// [`WorldModel::long_list_max`] entries).
    pub long_list_share: f64,
    /// Fewest entries of a far longer list (12): lists that grew by adding relays over years.
    pub long_list_min: usize,
    /// Most entries of a far longer list (40; the `indexed` and `dense` families draw up to 60).
    pub long_list_max: usize,
    /// Share of lists that also carry read-only entries.
    pub read_entry_share: f64,
    /// Per-entry chance of a messy but valid spelling (upper case, trailing slash, `:443`).
    pub messy_url_share: f64,
    /// Per-list chance of an unusable entry (`http://`, garbage, localhost, private IP).
    pub garbage_entry_share: f64,
    /// Hubs that are dead but linger in lists (formerly popular relays).
    pub dead_hubs: usize,
    /// Hubs that are paid, auth-gated or refuse reads.
    pub paid_hubs: usize,
    /// Chance that a mid relay is alive.
    pub mid_alive: f64,
    /// Chance that a tail relay of an ordinary list is alive (people's own small relays).
    pub tail_alive: f64,
    /// Chance that a tail relay of a far longer list is alive: such lists collect relays
    /// that died long ago, which is most of why only ~35–60% of distinct listed relays live.
    pub long_list_tail_alive: f64,
    /// Chance that a live non-hub relay is paid, auth-gated or refuses reads (~4% overall).
    pub paid_share: f64,
    /// Relays that answer but keep no notes, named in many lists all the same: indexers and
    /// aggregators (relays that serve profiles and relay lists, or that only relay and store
    /// nothing) that clients add to their users' write lists. Each is in a share of the
    /// follows' lists drawn from [`WorldModel::empty_relay_list_share`]. 0: none, and nothing
    /// drawn.
    pub empty_relays: usize,
    /// Share of the follows' lists that name one such relay, drawn per relay.
    pub empty_relay_list_share: Span,
    /// Per-session answer probability of such relays (well run: they answer nearly always).
    pub empty_relay_reliability: Span,
    /// Per-session answer probability of live hubs.
    pub hub_reliability: Span,
    /// Per-session answer probability of other live relays (70–88% of live relays answer in
    /// a run).
    pub relay_reliability: Span,
    /// Posting rate in notes per day: log-normal median.
    pub rate_median_per_day: f64,
    /// Posting rate: log-normal sigma (heavy tail).
    pub rate_sigma: f64,
    /// Highest posting rate, notes per day (keeps event counts sane).
    pub rate_cap_per_day: f64,
    /// A heavier volume tail: the [`WorldModel::top_follows`] follows with the most notes in the
    /// last year post at a rate multiplied (at most eightfold) so that they carry at least this
    /// share of the year's notes. Real follow lists hold a few accounts (bots, news feeds, power users)
    /// posting far more than the rest. 0: no change, and nothing drawn.
    pub top_follows_year_share: f64,
    /// See [`WorldModel::top_follows_year_share`].
    pub top_follows: usize,
    /// Share of follows who post a lot and keep it all on one relay of their own: a list that
    /// names exactly that relay, alive and reliable, listed by no one else, keeping every note
    /// and never pruning; no broadcasts to hubs, so no other relay has their notes (people who
    /// run their own relay, and feeds published to one). 0: none, and nothing drawn.
    pub hoarder_share: f64,
    /// Posting rate of those follows, notes per day: the top of the rate distribution.
    pub hoarder_rate_per_day: Span,
    /// Per-session answer probability of their relays.
    pub hoarder_reliability: Span,
    /// History simulated, in days (events older than 3 years fall outside every window).
    pub history_days: u64,
    /// Share of authors who stopped posting at some point (silent since).
    pub quit_share: f64,
    /// Hub retention in days (hubs prune old notes: weeks to months).
    pub hub_retention_days: Span,
    /// Share of mid relays that prune; the rest keep everything.
    pub mid_prune_share: f64,
    /// Mid relay retention in days when they prune (6–24 months): the most popular mid relay
    /// keeps about `lo` days, the least popular about `hi` (busier relays prune harder).
    pub mid_retention_days: Span,
    /// Noise on the popularity-to-retention mapping, as a share of the mid-relay count.
    pub mid_retention_noise: f64,
    /// Per relay, the chance that an (author, relay) pair silently fails every write (rate
    /// limits, web-of-trust filters, spam rules); drawn once per relay, so some relays are far
    /// lossier than others.
    pub write_failure_share: Span,
    /// Chance that one write to one relay is lost.
    pub event_drop_share: f64,
    /// Per (author, relay) pair, the chance that the relay silently holds only part of the
    /// author's notes (writes that timed out, rate limits that let some through): the
    /// author's notes are then on some of its relays, not all. 0: none, and nothing drawn.
    pub patchy_pair_share: f64,
    /// Of such a pair, the share of the author's notes the relay holds, drawn per pair.
    pub patchy_pair_keep: Span,
    /// Per (author, relay) pair, the chance that the relay pruned the author's older notes
    /// early (per-author quotas), keeping only the newest [`WorldModel::pruned_pair_days`].
    /// 0: none, and nothing drawn.
    pub pruned_pair_share: f64,
    /// How many days of the author's notes such a pair keeps, drawn per pair.
    pub pruned_pair_days: Span,
    /// Share of authors who moved relays: notes before the move sit on relays missing from
    /// their current list.
    pub moved_share: f64,
    /// Of a mover's current write relays, the share that were also in the old set.
    pub moved_keep_share: f64,
    /// Chance that a note is also broadcast to one hub not in the author's list (clients that
    /// publish to their default relays too).
    pub broadcast_share: f64,
    /// The reader's own relays: the top hubs that are alive, this many.
    pub reader_relays: usize,
    /// Per-REQ caps (events per filter, the world's `max_limit`) and the share of relays with
    /// each; a `None` cap is no cap. strfry, which most public relays run, returns at most 500
    /// events per filter by default (`maxFilterLimit`); other implementations and operators
    /// publish caps from 100 to 5,000 (NIP-11 `limitation.max_limit`), and a few cap nothing.
    /// The shares are an estimate, not a measurement. Drawn per existing relay from its own
    /// random stream, so the rest of a world does not depend on them.
    pub relay_caps: Vec<CapShare>,
    /// NIP-66 monitor data (the world's `monitor`): chance that a live relay is in it. Monitors
    /// find relays through the lists they crawl and miss some (new, renamed, firewalled).
    /// Estimated, as the knobs below: no coverage figure is published. 0 with
    /// [`WorldModel::monitor_dead_listed`] 0: no monitor data.
    pub monitor_coverage: f64,
    /// How long before `now` a live relay was last reported online, hours: monitors check about
    /// hourly (NIP-66 `frequency` 3,600 s) and clients read reports that are one to a few
    /// checks old, so reports lag the session by one or more sessions of an hour.
    pub monitor_lag_hours: Span,
    /// Chance that a dead relay is still in the data: monitors keep every relay they once saw,
    /// and most of the 40–65% of listed relays that are dead were alive once.
    pub monitor_dead_listed: f64,
    /// Of the dead relays in the data, the share still reported as recently seen (a report
    /// within [`WorldModel::monitor_lag_hours`]): relays that died since the last checks, or
    /// that accept a connection and serve nothing.
    pub monitor_dead_recent: f64,
    /// When the other dead relays in the data were last seen online, days before `now`.
    pub monitor_dead_age_days: Span,
    /// The inbox (the world's `mentions`): events tagging the reader per day, over the whole
    /// history. An assumption (no figure is published): a reader with a few hundred follows gets
    /// a reply or mention every couple of days. 0: no mentions and no reader list.
    pub mention_rate_per_day: f64,
    /// Share of mentions written by follows; the rest by people the reader does not follow.
    pub mention_follow_share: f64,
    /// People the reader does not follow who mention the reader or are tagged in notes. Their
    /// relay lists join the world's `relay_lists`.
    pub strangers: usize,
    /// Chance that such a person publishes no kind:10002 list (as
    /// [`WorldModel::no_list_share`] for follows, at its middle).
    pub stranger_no_list_share: f64,
    /// Chance that the client writing a mention also delivered it to the reader's read relays
    /// (NIP-65 delivery to tagged people) besides the author's write relays. An assumption, not
    /// a measurement: outbox-aware clients (Gossip, Coracle, Amethyst among them) deliver to
    /// tagged people's read relays, many others write only to the author's relays; 0.5 stands
    /// for that split.
    pub inbox_delivery_share: f64,
    /// Read-only relays in the reader's own list besides its configured relays (which the list
    /// names unmarked: read and write).
    pub reader_read_only: usize,
    /// Share of follows' notes that tag people (`events[i].p`): one to three, follows or not,
    /// never the reader.
    pub tagged_note_share: f64,
    /// Relay hints (the world's `hints`): share of follows whose `p` tag in the reader's
    /// kind:3 list names a relay. Many clients write one, many leave it empty; no share is
    /// published. 0 (with the other `*_hint_share` knobs 0): no hints, and nothing drawn.
    pub contact_hint_share: f64,
    /// Of those kind:3 hints, the share naming a relay the follow does not write to now: one
    /// it wrote to before moving, or (for follows who never moved) a popular hub the reader's
    /// client used. The relay was recorded when the reader followed, often long ago.
    pub contact_hint_stale_share: f64,
    /// Share of follows the reader came across a pointer to (an `nevent` or `e` tag with a
    /// relay hint): a relay that serves one of their notes.
    pub pointer_hint_share: f64,
    /// Share of follows whose notes the reader's client saw arrive before the sessions (reposts,
    /// other feeds): the relay that serves most of their notes.
    pub seen_on_hint_share: f64,
    /// How fast relays connect and answer, and which hang when down (the world's clock;
    /// `timing.rs`). Drawn from a stream of its own.
    #[serde(default)]
    pub timing: super::timing::TimingModel,
}

/// One per-REQ cap and the share of relays that have it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapShare {
    /// Events per filter; `None` is no cap.
    pub max_limit: Option<u32>,
    /// Relative share of relays (weights need not sum to 1).
    pub share: f64,
}

impl CapShare {
    const fn new(max_limit: Option<u32>, share: f64) -> Self {
        Self { max_limit, share }
    }
}

/// The default cap mix: most relays at strfry's 500, some lower or higher, a few uncapped.
pub const DEFAULT_RELAY_CAPS: [CapShare; 7] = [
    CapShare::new(Some(500), 0.62),
    CapShare::new(Some(100), 0.04),
    CapShare::new(Some(250), 0.06),
    CapShare::new(Some(1_000), 0.10),
    CapShare::new(Some(2_000), 0.06),
    CapShare::new(Some(5_000), 0.06),
    CapShare::new(None, 0.06),
];

impl Default for WorldModel {
    fn default() -> Self {
        Self {
            follows: Profile::Medium.follows(),
            sessions: 5,
            no_list_share: Span::new(0.20, 0.44),
            hubs: 16,
            top_hub_share: 0.45,
            hub_decay: 0.82,
            mid_relays_base: 20,
            follows_per_mid_relay: 12,
            mid_zipf: 1.0,
            mid_slot_share: 0.35,
            write_count_weights: vec![0.14, 0.18, 0.2, 0.17, 0.13, 0.1, 0.08],
            write_count_min: 2,
            long_list_share: 0.06,
            long_list_min: 12,
            long_list_max: 40,
            read_entry_share: 0.3,
            messy_url_share: 0.12,
            garbage_entry_share: 0.06,
            dead_hubs: 3,
            paid_hubs: 1,
            mid_alive: 0.75,
            tail_alive: 0.7,
            long_list_tail_alive: 0.1,
            paid_share: 0.04,
            empty_relays: 0,
            empty_relay_list_share: Span::new(0.15, 0.4),
            empty_relay_reliability: Span::new(0.97, 1.0),
            hub_reliability: Span::new(0.9, 0.99),
            relay_reliability: Span::new(0.55, 0.97),
            rate_median_per_day: 0.06,
            rate_sigma: 1.5,
            rate_cap_per_day: 8.0,
            top_follows_year_share: 0.0,
            top_follows: 10,
            hoarder_share: 0.0,
            hoarder_rate_per_day: Span::new(2.0, 8.0),
            hoarder_reliability: Span::new(0.95, 0.99),
            history_days: 3 * 365 + 60,
            quit_share: 0.35,
            hub_retention_days: Span::new(10.0, 45.0),
            mid_prune_share: 1.0,
            mid_retention_days: Span::new(180.0, 730.0),
            mid_retention_noise: 0.3,
            write_failure_share: Span::new(0.0, 0.3),
            event_drop_share: 0.02,
            patchy_pair_share: 0.0,
            patchy_pair_keep: Span::new(0.6, 0.95),
            pruned_pair_share: 0.0,
            pruned_pair_days: Span::new(7.0, 90.0),
            moved_share: 0.3,
            moved_keep_share: 0.4,
            broadcast_share: 0.25,
            reader_relays: 3,
            relay_caps: DEFAULT_RELAY_CAPS.to_vec(),
            monitor_coverage: 0.85,
            monitor_lag_hours: Span::new(1.0, 4.0),
            monitor_dead_listed: 0.7,
            monitor_dead_recent: 0.15,
            monitor_dead_age_days: Span::new(3.0, 365.0),
            mention_rate_per_day: 0.5,
            mention_follow_share: 0.6,
            strangers: 150,
            stranger_no_list_share: 0.3,
            inbox_delivery_share: 0.5,
            reader_read_only: 2,
            tagged_note_share: 0.2,
            contact_hint_share: 0.0,
            contact_hint_stale_share: 0.5,
            pointer_hint_share: 0.0,
            seen_on_hint_share: 0.0,
            timing: Default::default(),
        }
    }
}

impl WorldModel {
    /// The default model for a profile.
    pub fn for_profile(profile: Profile) -> Self {
        Self {
            follows: profile.follows(),
            ..Self::default()
        }
    }
}
