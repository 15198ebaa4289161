//! The client the clock replays: the runtime's timeouts, retries, pages in flight, lookup grace,
//! re-plan debounce, deadline and socket budget ([`ClientTiming`]), and the schedule it carries
//! a plan out on ([`Policy`]).

use nostr_outbox_core::Probe;

/// The client knobs the clock replays, at the runtime's defaults (`RuntimeConfig::default()`
/// and the desktop socket budget; the live bench's tests check that they agree).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ClientTiming {
    /// Longest wait for one connect attempt, ms (default 10 000).
    pub connect_timeout_ms: f64,
    /// Longest wait for one page's EOSE, ms: no query the clock draws takes longer (default
    /// 15 000).
    pub eose_timeout_ms: f64,
    /// Connect attempts before a relay is set aside (the penalty's strikes; default 3). A relay
    /// that hangs takes only the first with [`Policy::aside_on_timeout`], as by default.
    pub attempts: u32,
    /// The first retry's backoff, ms (default 500); each later one doubles. Taken at its mean
    /// (the runtime's jitter draws from half to all of it).
    pub backoff_ms: f64,
    /// Pages in flight per socket (default 3).
    pub concurrent_pages: usize,
    /// Once the first reader relay answered the relay-list lookup, how long the others get, ms
    /// (default 2 000).
    pub lookup_grace_ms: f64,
    /// Quiet time after the lists arrived, or after a set-aside, before the re-plan, ms
    /// (default 500).
    pub debounce_ms: f64,
    /// A `--once` run ends this long after its start, ms (default 90 000).
    pub deadline_ms: f64,
    /// Sockets the feed may hold at once (`max_sockets - reserve`; default 28, the desktop
    /// budget's 32 less its 4 kept); `None`: no bound.
    pub lasting_sockets: Option<usize>,
    /// Sockets kept for short work (lookups, probes) beside the feed's (default 4, the desktop
    /// budget's). Carried to match the runtime's budget; the replay bounds probes by
    /// [`RunShape::probes_at_once`](super::RunShape::probes_at_once) instead.
    pub reserve_sockets: usize,
    /// The client is handed every relay list at its start (as the live bench hands them to the
    /// runtime), so even a first run dials its routed relays at once; `false` (the default): a
    /// first run waits for the lists lookup.
    pub lists_given: bool,
    /// How a plan is carried out: by default [`Policy::runtime`], the runtime's schedule;
    /// [`Policy::default`] turns every policy off, to measure what each buys.
    pub policy: Policy,
}

/// Ways of carrying out a plan faster, which the clock measures alone and together (the
/// `clock_policies` example). [`Policy::default`] has every one off; [`Policy::runtime`],
/// which [`ClientTiming::default`] takes, is what the runtime does: all three on.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Policy {
    /// A connect attempt that times out sets the relay aside at once: a black hole costs one
    /// connect timeout, not every attempt and the backoff between (on in [`Policy::runtime`]).
    pub aside_on_timeout: bool,
    /// A re-plan goes out once the relays it replaces are set aside (and the debounce passed),
    /// without waiting for the other relays of the plan before it (on in [`Policy::runtime`]).
    pub early_waves: bool,
    /// Probes give up connecting after this long, ms (`None`: the connect timeout; 2 000 in
    /// [`Policy::runtime`]).
    pub probe_timeout_ms: Option<f64>,
}

impl Policy {
    /// What the runtime does (`nostr_outbox_runtime::Schedule`'s defaults): a connect timeout sets
    /// the relay aside at once, re-plans go out early, probes give up connecting after 2 s.
    pub fn runtime() -> Self {
        Self {
            aside_on_timeout: true,
            early_waves: true,
            probe_timeout_ms: Some(2_000.0),
        }
    }
}

impl ClientTiming {
    /// How long `probe` tries to connect before it gives up, ms: the whole connect timeout for
    /// a [patient](nostr_outbox_core::Probe::patient) probe, else the policy's probe bound
    /// within it. A relay slower to accept fails its probe, as in the runtime.
    pub fn probe_give_up_ms(&self, probe: &Probe) -> f64 {
        let short = self.policy.probe_timeout_ms.filter(|_| !probe.patient);
        short
            .unwrap_or(self.connect_timeout_ms)
            .min(self.connect_timeout_ms)
    }
}

impl Default for ClientTiming {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 10_000.0,
            eose_timeout_ms: 15_000.0,
            attempts: 3,
            backoff_ms: 500.0,
            concurrent_pages: 3,
            lookup_grace_ms: 2_000.0,
            debounce_ms: 500.0,
            deadline_ms: 90_000.0,
            lasting_sockets: Some(28),
            reserve_sockets: 4,
            lists_given: false,
            policy: Policy::runtime(),
        }
    }
}
