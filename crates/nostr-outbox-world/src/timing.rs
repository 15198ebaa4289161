//! The world's clock: how fast each relay connects and answers, and how it fails.
//!
//! A world file may give each relay a `timing` object (`relays[url].timing`, optional; see
//! `docs/formats.md`). Every duration a simulated client meets is drawn from it by
//! [`RelayTiming::connect_ms`] and [`RelayTiming::query_ms`]: deterministic functions of the
//! relay's URL, the session and a counter, so a world file replays the same timeline in every
//! process and no random state is kept. Timing never changes *what* a relay returns: recall is
//! the same with or without it; only when each note arrives depends on it.

use serde::{Deserialize, Serialize};

/// How fast one relay answers, and how it fails when it is down.
///
/// Connects and queries are log-normal around their medians: one factor per session
/// ([`jitter`](Self::jitter), a relay that is slow today is slow for the whole run) times one
/// per request ([`spread`](Self::spread)); a share [`tail`](Self::tail) of queries is many times
/// slower (a busy relay). A relay that is down either refuses at once or, with
/// [`hangs`](Self::hangs), accepts the socket and never answers: each connect attempt costs the
/// client its whole connect timeout.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RelayTiming {
    /// Median time to open a socket (TCP, TLS, the WebSocket handshake), ms.
    pub connect_ms: u32,
    /// Median time from a REQ to its EOSE for one page (round trip and the relay's work), ms.
    pub query_ms: u32,
    /// σ of the per-session log-normal factor on every connect and query.
    #[serde(default)]
    pub jitter: f32,
    /// σ of the per-request log-normal factor.
    #[serde(default)]
    pub spread: f32,
    /// Share of queries in the slow tail, each taking [`TAIL_FACTOR`] times longer or more.
    #[serde(default)]
    pub tail: f32,
    /// When down, accept the socket and never answer (a black hole) instead of refusing.
    #[serde(default)]
    pub hangs: bool,
}

/// Timings are compared field by field; the reader refuses NaN ([`RelayTiming::check`]), so
/// equality is an equivalence on every timing a world holds.
impl Eq for RelayTiming {}

/// The least factor a query in the slow tail is slowed by (up to three times this).
pub const TAIL_FACTOR: f64 = 5.0;

/// How long a refused connection takes to fail, as a share of the connect median.
const REFUSE_SHARE: f64 = 0.5;

/// The most a median may be in a world file (ten minutes): a larger value is an error.
pub const MAX_TIMING_MS: u32 = 600_000;

impl Default for RelayTiming {
    /// A world without timing: every relay like the published median relay (connect 650 ms,
    /// query 850 ms), a little noise, no tail, refusing when down.
    fn default() -> Self {
        Self {
            connect_ms: 650,
            query_ms: 850,
            jitter: 0.2,
            spread: 0.3,
            tail: 0.0,
            hangs: false,
        }
    }
}

/// What a draw is for: each has its own stream.
#[derive(Clone, Copy)]
enum Draw {
    Session = 1,
    Connect = 2,
    Query = 3,
    Tail = 4,
}

impl RelayTiming {
    /// Whether every field is within its bounds (medians at most [`MAX_TIMING_MS`], shares in
    /// `[0, 1]`, σ in `[0, 4]`); the reader refuses a timing that is not.
    pub fn check(&self) -> Result<(), &'static str> {
        let sigma = |s: f32| s.is_finite() && (0.0..=4.0).contains(&s);
        if self.connect_ms > MAX_TIMING_MS || self.query_ms > MAX_TIMING_MS {
            return Err("a median above ten minutes");
        }
        if !sigma(self.jitter) || !sigma(self.spread) {
            return Err("a spread outside 0..=4");
        }
        if !(self.tail.is_finite() && (0.0..=1.0).contains(&self.tail)) {
            return Err("a tail share outside 0..=1");
        }
        Ok(())
    }

    /// The time attempt `n` of a connect in `session` takes to succeed, ms.
    pub fn connect_ms(&self, url: &str, session: u32, n: u64) -> f64 {
        let z = normal(url, session, Draw::Connect, n);
        f64::from(self.connect_ms)
            * self.session_factor(url, session)
            * (f64::from(self.spread) * z).exp()
    }

    /// The time a refused connect takes to fail, ms.
    pub fn refuse_ms(&self, url: &str, session: u32, n: u64) -> f64 {
        self.connect_ms(url, session, n) * REFUSE_SHARE
    }

    /// The time query `n` (a page: REQ to EOSE) in `session` takes, ms.
    pub fn query_ms(&self, url: &str, session: u32, n: u64) -> f64 {
        let z = normal(url, session, Draw::Query, n);
        let mut ms = f64::from(self.query_ms)
            * self.session_factor(url, session)
            * (f64::from(self.spread) * z).exp();
        let u = uniform(url, session, Draw::Tail, n);
        let tail = f64::from(self.tail);
        if u < tail {
            // Where in the tail: 1× to 3× the least factor.
            ms *= TAIL_FACTOR * (1.0 + 2.0 * u / tail);
        }
        ms
    }

    fn session_factor(&self, url: &str, session: u32) -> f64 {
        (f64::from(self.jitter) * normal(url, session, Draw::Session, 0)).exp()
    }
}

/// A uniform draw in `[0, 1)` for (`url`, `session`, `what`, `n`).
fn uniform(url: &str, session: u32, what: Draw, n: u64) -> f64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in url.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let seed = h ^ (u64::from(session) << 40) ^ ((what as u64) << 56) ^ n.wrapping_mul(0x9e37_79b9);
    (splitmix(seed) >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal draw for (`url`, `session`, `what`, `n`) (Box–Muller).
fn normal(url: &str, session: u32, what: Draw, n: u64) -> f64 {
    let u1 = uniform(url, session, what, n.wrapping_mul(2)).max(f64::MIN_POSITIVE);
    let u2 = uniform(url, session, what, n.wrapping_mul(2).wrapping_add(1));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same relay, session and counter give the same time in every call; another session
    /// gives another.
    #[test]
    fn draws_are_functions_of_url_session_and_counter() {
        let t = RelayTiming::default();
        let a = t.query_ms("wss://a.example", 0, 3);
        assert_eq!(a, t.query_ms("wss://a.example", 0, 3));
        assert_ne!(a, t.query_ms("wss://a.example", 1, 3));
        assert_ne!(a, t.query_ms("wss://b.example", 0, 3));
    }

    /// Over many draws the median sits near the given median and the tail share is kept.
    #[test]
    fn medians_and_tail_are_what_the_timing_says() {
        let t = RelayTiming {
            tail: 0.1,
            ..RelayTiming::default()
        };
        let mut qs: Vec<f64> = (0..4000)
            .map(|n| t.query_ms("wss://a.example", (n % 40) as u32, n))
            .collect();
        qs.sort_by(f64::total_cmp);
        let median = qs[qs.len() / 2];
        assert!((650.0..1150.0).contains(&median), "median {median}");
        let slow = qs.iter().filter(|&&q| q > 4.0 * 850.0).count() as f64 / qs.len() as f64;
        assert!((0.05..0.15).contains(&slow), "slow share {slow}");
    }

    #[test]
    fn out_of_bounds_timing_is_refused() {
        let ok = RelayTiming::default();
        assert!(ok.check().is_ok());
        for bad in [
            RelayTiming {
                connect_ms: u32::MAX,
                ..ok
            },
            RelayTiming {
                spread: f32::NAN,
                ..ok
            },
            RelayTiming { tail: 1.5, ..ok },
            RelayTiming { jitter: -1.0, ..ok },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
