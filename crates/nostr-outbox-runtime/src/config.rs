//! Runtime knobs: timeouts, backoff, the penalty policy and frame limits.

use std::time::Duration;

use nostr::event::Kind;
use nostr::types::Timestamp;
use rand::Rng;

use crate::connection::limits::LimitsConfig;

/// How a feed behaves on the wire. The defaults suit the public network; tests shorten every
/// timeout so that faults resolve in well under a second.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Longest wait for TCP + TLS + WebSocket handshake.
    pub connect_timeout: Duration,
    /// Longest wait from a REQ to its EOSE before the attempt counts as failed.
    pub eose_timeout: Duration,
    /// Delays between reconnect attempts.
    pub backoff: Backoff,
    /// When a relay is set aside.
    pub penalty: PenaltyPolicy,
    /// Text frames longer than this are dropped (with a trace event) without being parsed.
    pub max_message_bytes: usize,
    /// Frames above this kill the connection inside the WebSocket layer (memory guard).
    pub hard_frame_limit: usize,
    /// Unparseable or oversized frames tolerated per connection before it counts as a failure.
    pub max_bad_frames: u32,
    /// Events dated further than this past the local clock are dropped as
    /// [`FrameDrop::FutureDated`](crate::FrameDrop::FutureDated) and count as bad frames: they
    /// would sit at the top of every feed and poison the learning of what a relay returned.
    pub future_tolerance: Duration,
    /// Valid events a relay may send per connection outside what was asked (outside the
    /// subscription's filter, or to a subscription closed a while ago) beyond the events asked for (the sum of the page limits sent on the connection). One more and the
    /// connection ends as [`Failure::Flooded`](crate::Failure::Flooded), a strike that a later
    /// EOSE does not clear. Answers to a subscription within
    /// [`eose_timeout`](Self::eose_timeout) of its CLOSE (a replaced filter) are not counted.
    pub max_unrequested: u64,
    /// Verify event ids and signatures (turning this off trusts relays blindly).
    pub verify_signatures: bool,
    /// Event kinds of the feed.
    pub kinds: Vec<Kind>,
    /// Only events at or after this time.
    pub since: Option<Timestamp>,
    /// Stop once every slot sent EOSE or was set aside, instead of following new notes.
    pub once: bool,
    /// With `once`: the run ends this long after it started, with what it has (the round
    /// learned, stats saved, [`FeedSummary::pending`](crate::FeedSummary::pending) naming the
    /// relays still awaited); `None`: no bound but the timeouts. It bounds what relays that
    /// accept a socket and never answer a page can cost (a relay that accepts no socket costs
    /// one connect timeout: [`Schedule::aside_on_connect_timeout`]); 200 silent relays once
    /// kept a run going for minutes after every good note had arrived in 48 ms. The default
    /// never cuts a healthy run: 200 follows on ten local relays take 0.14 to 0.19 s, and a
    /// wave of dead relays costs one connect timeout (10 s) before its follows move.
    pub deadline: Option<Duration>,
    /// With `once`: after the first relay answered a lookup (the follows' relay lists, or
    /// [`fetch_events`](crate::fetch_events)), the others get this long to finish, then the
    /// lookup ends with what came; a relay that never answers then costs this, not its
    /// timeouts.
    pub lookup_grace: Duration,
    /// Fetch the follows' kind:10002 lists from the reader's relays (and the
    /// [`indexers`](Self::indexers)) and re-plan as they arrive.
    pub discover_lists: bool,
    /// With lists kept from the last run for at least half the follows, discover lists by
    /// set reconciliation (NIP-77) where a relay supports it: only changed lists move.
    pub sync_lists: bool,
    /// Relays that collect relay lists (e.g. `wss://purplepag.es`), asked for the follows'
    /// kind:10002 lists beside the reader's relays: canonical or raw URLs.
    pub indexers: Vec<String>,
    /// Quiet time after the last new relay list before re-planning (lists arrive in bursts).
    pub replan_debounce: Duration,
    /// How often learned stats are written to the store (they are also written at shutdown);
    /// at least a second.
    pub stats_flush_interval: Duration,
    /// Base seed for planning and jitter. Each run plans with
    /// [`session_seed`](nostr_outbox_core::session_seed)`(seed, runs so far)` from the persisted
    /// stats, so exploration continues across runs; the same base, stats and input give the
    /// same plan.
    pub seed: u64,
    /// The present the feed plans, learns and sets relays aside at, in unix seconds, fixed for
    /// the whole run; `None`: the system clock. For replaying a recorded world against its own
    /// present (the live bench), where a clock that moves while relays answer would make what
    /// is learned depend on how long the run took.
    pub clock: Option<u64>,
    /// Carry the residual when no reader relay is usable (none given, all set aside, all
    /// refusing): canonical or raw relay URLs, tried in order.
    pub fallback_relays: Vec<String>,
    /// Relays the reader has paid for (canonical URLs): a relay that says it requires payment
    /// (its NIP-11 document, or a NIP-66 monitor's `R payment`) is left out of plans unless it
    /// is here. Relays that require sign-in are left out when the [`Client`](crate::Client) has no
    /// signer.
    pub paid_relays: Vec<String>,
    /// When neither reader nor fallback relays are usable, this many of the best-known live
    /// relays from the follows' lists carry the residual.
    pub routed_carriers: usize,
    /// With `once`: stop this long after the first relay finished, without waiting for
    /// stragglers (they are left out of learning, not counted as failures). A continuing feed
    /// keeps every subscription open regardless.
    pub eose_race: Option<Duration>,
    /// Event ids remembered for de-duplication.
    pub dedup_capacity: usize,
    /// Capacity of the output channel (the consumer must drain it).
    pub channel_capacity: usize,
    /// Longest wait for slot tasks to finish after being told to close.
    pub shutdown_grace: Duration,
    /// Paging, author chunks, subscription limits and NIP-11 documents.
    pub limits: LimitsConfig,
    /// How a `once` run carries its plan out: what a relay that does not connect costs, and
    /// when a re-plan goes out.
    pub schedule: Schedule,
    /// How a continuing feed keeps what it decides after one answer from costing it notes
    /// later: set-asides that expire, turns for a small socket budget.
    pub open: OpenFeed,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            eose_timeout: Duration::from_secs(15),
            backoff: Backoff::default(),
            penalty: PenaltyPolicy::default(),
            max_message_bytes: 256 * 1024,
            hard_frame_limit: 4 * 1024 * 1024,
            max_bad_frames: 3,
            future_tolerance: Duration::from_secs(15 * 60),
            max_unrequested: 1_000,
            verify_signatures: true,
            kinds: vec![Kind::TextNote],
            since: None,
            once: false,
            deadline: Some(Duration::from_secs(90)),
            lookup_grace: Duration::from_secs(2),
            discover_lists: true,
            sync_lists: true,
            indexers: Vec::new(),
            replan_debounce: Duration::from_millis(500),
            stats_flush_interval: Duration::from_secs(60),
            seed: 0,
            clock: None,
            fallback_relays: Vec::new(),
            paid_relays: Vec::new(),
            routed_carriers: 2,
            eose_race: None,
            dedup_capacity: 200_000,
            channel_capacity: 1024,
            shutdown_grace: Duration::from_secs(2),
            limits: LimitsConfig::default(),
            schedule: Schedule::default(),
            open: OpenFeed::default(),
        }
    }
}

impl RuntimeConfig {
    /// The knobs a socket dials and closes with.
    pub(crate) fn dial(&self) -> crate::connection::sockets::Dial {
        crate::connection::sockets::Dial {
            connect_timeout: self.connect_timeout,
            shutdown_grace: self.shutdown_grace,
            hard_frame_limit: self.hard_frame_limit,
            sign_in_timeout: self.eose_timeout,
        }
    }

    /// Every timeout scaled down for tests on 127.0.0.1 (connect 500 ms, EOSE 700 ms, backoff
    /// from 20 ms, debounce 50 ms, lookup grace 200 ms), and no NIP-11 requests (test relays
    /// serve no HTTP).
    pub fn fast_for_tests() -> Self {
        Self {
            connect_timeout: Duration::from_millis(500),
            eose_timeout: Duration::from_millis(700),
            backoff: Backoff {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(200),
                factor: 2.0,
            },
            replan_debounce: Duration::from_millis(50),
            lookup_grace: Duration::from_millis(200),
            shutdown_grace: Duration::from_millis(500),
            limits: LimitsConfig::fast_for_tests(),
            open: OpenFeed {
                first_set_aside: Duration::from_secs(1),
                empty_for: Duration::from_secs(5),
                turn_every: Duration::from_millis(500),
                margin: Duration::from_secs(2),
            },
            ..Self::default()
        }
    }
}

/// A continuing feed's knobs. A one-pass rule (a relay answered nothing in the window, failed
/// three times) is right for the pass and wrong for the hours a feed stays open: here it
/// changes where the window is asked, never whether a relay's new notes are heard, and
/// everything it sets aside comes back. `--once` runs ignore these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFeed {
    /// The first set-aside of a relay that failed (lost, refused connections): a relay that
    /// restarts is back within seconds. Each one in a row grows by
    /// [`PenaltyPolicy::growth`] up to [`PenaltyPolicy::duration`], as in a `--once` run; a
    /// success ends the escalation. Refusals keep their full length.
    pub first_set_aside: Duration,
    /// How long a relay that answered with none of its follows' notes is left out of the
    /// window's plans. Meanwhile it keeps a subscription for its follows' new notes.
    pub empty_for: Duration,
    /// With fewer socket places than relays ([`Places::Turns`](crate::Places::Turns)): a relay
    /// that gave its place up is asked again, since its last answer, this long after. A note
    /// waits at most about twice this while relays answer promptly.
    pub turn_every: Duration,
    /// A relay asked again since its last answer is asked from this long before it, so notes
    /// dated a little in the past (clock skew, slow publishing) are not missed.
    pub margin: Duration,
}

impl Default for OpenFeed {
    fn default() -> Self {
        Self {
            first_set_aside: Duration::from_secs(5),
            empty_for: Duration::from_secs(10 * 60),
            turn_every: Duration::from_secs(30),
            margin: Duration::from_secs(60),
        }
    }
}

impl OpenFeed {
    /// The penalty policy a continuing feed strikes failures with: `policy`, its first
    /// set-aside no longer than [`first_set_aside`](Self::first_set_aside).
    pub(crate) fn strikes(&self, policy: &PenaltyPolicy) -> PenaltyPolicy {
        PenaltyPolicy {
            initial: policy.initial.min(self.first_set_aside),
            ..*policy
        }
    }
}

/// How a `once` run carries its plan out. The simulator's clock measured each choice before
/// it was made (`nostr_outbox_sim::clock::Policy`, whose defaults are these): together they end a
/// first run about a third sooner and fill its first screen sooner, with the same plan and the
/// same notes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// A connect attempt that times out sets the relay aside for the rest of the run at once:
    /// a relay that accepts no socket costs one connect timeout, not three and the backoff
    /// between. (The penalty box still counts it as one strike, as before.)
    pub aside_on_connect_timeout: bool,
    /// A re-plan goes out once the relays it replaces are set aside and the re-plan debounce
    /// passed, without waiting for every relay of the plan before it.
    pub early_waves: bool,
    /// A probe gives up connecting after this long (a probe is a guess: a relay slow to accept
    /// a socket is not worth waiting a connect timeout for).
    pub probe_connect_timeout: Duration,
    /// A `--once` run asks elsewhere for the follows of a relay whose socket is still not open
    /// this long after its dial (for a relay that answered before, three times its learned
    /// answer time if that is longer), while the dial goes on and what it answers in time is
    /// still used. Relays connect within about 1.6 s at the 95th percentile of published
    /// measurements; a relay that never answers then costs this, not the connect timeout.
    /// At or above the connect timeout it does nothing.
    pub slow_dial: Duration,
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            aside_on_connect_timeout: true,
            early_waves: true,
            probe_connect_timeout: Duration::from_secs(2),
            slow_dial: Duration::from_secs(4),
        }
    }
}

/// Exponential backoff with "equal jitter": attempt `n` waits a uniform time in
/// `[d/2, d]` with `d = min(max, initial · factor^n)`. Jitter keeps many clients (or many slots
/// of one client) from reconnecting to a recovering relay in lock step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub initial: Duration,
    /// Longest delay.
    pub max: Duration,
    /// Growth per attempt.
    pub factor: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(120),
            factor: 2.0,
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (0-based), jittered with `rng`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let factor = if self.factor.is_finite() && self.factor >= 1.0 {
            self.factor
        } else {
            1.0
        };
        let base = self.initial.as_secs_f64() * factor.powi(attempt.min(64) as i32);
        let capped = base.min(self.max.as_secs_f64()).max(0.0);
        let jittered = capped / 2.0 + rng.random_range(0.0..=capped / 2.0);
        // Near `Duration::MAX` the float rounds past what a duration holds.
        Duration::try_from_secs_f64(jittered).map_or(self.max, |d| d.min(self.max))
    }
}

/// Redials kept quick after a relay drops: about two minutes of them, so a relay back from an
/// outage is heard again (and its gap asked for) within seconds, not after a long doubling.
pub const QUICK_REDIALS: u32 = 40;

/// The longest wait between quick redials.
pub const QUICK_REDIAL: Duration = Duration::from_secs(4);

impl Backoff {
    /// The wait before redial number `attempt` (0-based) of a relay that dropped: the
    /// [`delay`](Self::delay), at most [`QUICK_REDIAL`] for the first [`QUICK_REDIALS`]
    /// attempts, then growing as usual. A relay that stays down costs a refused dial every few
    /// seconds for two minutes, then one at the backoff's pace.
    pub fn redial(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let delay = self.delay(attempt, rng);
        if attempt < QUICK_REDIALS {
            delay.min(QUICK_REDIAL)
        } else {
            delay
        }
    }
}

/// When a relay is set aside, and for how long.
///
/// The first set-aside is short ([`initial`](Self::initial)): a relay that blinked for a second
/// must not vanish from the plans for hours. Each set-aside that follows without a success in
/// between lasts [`growth`](Self::growth) times longer, up to [`duration`](Self::duration). A
/// definitive refusal (`auth-required:`, `restricted:`, `blocked:`) does not heal by waiting
/// and is set aside for the full `duration` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PenaltyPolicy {
    /// Consecutive failures (connect errors, timeouts, drops, refusals) that set a relay aside.
    pub strikes: u32,
    /// The first set-aside's length.
    pub initial: Duration,
    /// Each later set-aside without a success in between lasts this many times longer.
    pub growth: u32,
    /// The longest set-aside, and the length of one for a definitive refusal.
    pub duration: Duration,
}

impl Default for PenaltyPolicy {
    fn default() -> Self {
        Self {
            strikes: 3,
            initial: Duration::from_secs(60),
            growth: 4,
            duration: Duration::from_secs(6 * 3600),
        }
    }
}

impl PenaltyPolicy {
    /// The length of set-aside number `times` (0-based) in a row.
    pub fn length(&self, times: u32) -> Duration {
        let max = self.duration;
        let factor = u64::from(self.growth.max(1)).saturating_pow(times.min(64));
        let secs = self.initial.as_secs().max(1).saturating_mul(factor);
        Duration::from_secs(secs).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            factor: 2.0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for attempt in 0..10u32 {
            let d = b.delay(attempt, &mut rng);
            let full = (0.1 * 2f64.powi(attempt as i32)).min(1.0);
            assert!(d.as_secs_f64() >= full / 2.0 - 1e-9, "{attempt}: {d:?}");
            assert!(d.as_secs_f64() <= full + 1e-9, "{attempt}: {d:?}");
        }
        let draws: Vec<_> = (0..8).map(|_| b.delay(5, &mut rng)).collect();
        assert!(
            draws.windows(2).any(|w| w[0] != w[1]),
            "no jitter: {draws:?}"
        );
    }

    #[test]
    fn redials_stay_quick_for_two_minutes_then_back_off() {
        let b = Backoff::default();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let quick: Duration = (0..QUICK_REDIALS).map(|a| b.redial(a, &mut rng)).sum();
        assert!(
            (0..QUICK_REDIALS).all(|a| b.redial(a, &mut rng) <= QUICK_REDIAL),
            "a quick redial waited longer than {QUICK_REDIAL:?}"
        );
        assert!(quick <= Duration::from_secs(170), "{quick:?}");
        assert!(quick >= Duration::from_secs(60), "{quick:?}");
        let later = b.redial(QUICK_REDIALS + 5, &mut rng);
        assert!(later >= b.max / 2, "{later:?}");
    }

    #[test]
    fn backoff_at_the_largest_durations_never_panics() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (initial, max) in [
            (Duration::MAX, Duration::MAX),
            (Duration::from_millis(500), Duration::MAX),
            (Duration::MAX, Duration::from_secs(1)),
        ] {
            let b = Backoff {
                initial,
                max,
                factor: 2.0,
            };
            for attempt in [0, 1, 63, 64, u32::MAX] {
                assert!(b.delay(attempt, &mut rng) <= max, "{b:?} {attempt}");
            }
        }
    }

    #[test]
    fn set_asides_start_short_and_grow_to_the_cap() {
        let p = PenaltyPolicy::default();
        let mins: Vec<u64> = (0..6).map(|n| p.length(n).as_secs() / 60).collect();
        assert_eq!(mins, [1, 4, 16, 64, 256, 360]);
        assert_eq!(p.length(u32::MAX), p.duration);
        let zero = PenaltyPolicy {
            initial: Duration::ZERO,
            growth: 0,
            ..p
        };
        assert_eq!(zero.length(3), Duration::from_secs(1));
    }
}
