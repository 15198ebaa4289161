//! Publishing one signed event to a set of relays (a publish route's targets).
//!
//! Each relay is reached through a link on the client's one socket to it
//! ([`Sockets`](crate::Sockets)): a socket the feed, a lookup or a route feed already holds is
//! joined, and otherwise one is dialled within the socket budget (publishing is short work, so
//! it may take the reserve). On it: `["EVENT", event]`, then the relay's
//! `["OK", id, accepted, message]` for that id (other frames are ignored; frames above the
//! config's size limits are dropped or end the socket). The answer is classified by its
//! machine-readable prefix ([`Refusal::of`], the runtime's one reading of refusals). Rate
//! limits, timeouts and connect failures are tried again with the config's backoff while the
//! overall deadline and [`MAX_PUBLISH_ATTEMPTS`] allow; a definitive refusal never is. This is
//! the one place an event is sent again for `rate-limited:` (the exchange never resends an
//! `EVENT` for it). With a signer ([`Client::signer`](crate::Client::signer)), an
//! `auth-required:` refusal is answered by signing the relay's NIP-42 challenge and sending the
//! event again, once per attempt (each attempt takes a link of its own). So a relay receives
//! the event at most `max_attempts` times, twice that when it asks for sign-in.

use std::time::Duration;

use nostr::event::Event;
use rand::SeedableRng;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};

use crate::client::Client;
use crate::connection::exchange::{Answer, Ask, Ended, Exchange};
use crate::connection::refusal::Refusal;
use crate::connection::sockets::{Link as Socket, Role};

/// Attempts per relay (the first included) for retryable outcomes.
pub const MAX_PUBLISH_ATTEMPTS: u32 = 4;

/// Characters of a relay's OK message (or of a socket error) kept in the report.
pub const MAX_PUBLISH_MESSAGE_CHARS: usize = 256;

/// How a publish behaves; the client's knobs give the connect timeout, the backoff between
/// attempts and the frame limits, its signer the sign-in.
#[derive(Clone, Debug)]
pub struct PublishConfig {
    /// Longest wait for the relay's OK after the EVENT (and after a sign-in).
    pub ok_timeout: Duration,
    /// The whole publish ends by this long after it started; attempts that would start later
    /// are not made.
    pub deadline: Duration,
    /// Attempts per relay, at most [`MAX_PUBLISH_ATTEMPTS`].
    pub max_attempts: u32,
}

impl Default for PublishConfig {
    fn default() -> Self {
        Self {
            ok_timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
            max_attempts: 3,
        }
    }
}

impl PublishConfig {
    /// Short timeouts for tests on 127.0.0.1.
    pub fn fast_for_tests() -> Self {
        Self {
            ok_timeout: Duration::from_millis(700),
            deadline: Duration::from_secs(5),
            max_attempts: 3,
        }
    }
}

/// What one relay did with the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PublishOutcome {
    /// `OK true`.
    Accepted,
    /// `OK true "duplicate: …"`: the relay already had it.
    Duplicate,
    /// `blocked:`.
    Blocked,
    /// `rate-limited:` (retried).
    RateLimited,
    /// `auth-required:` and no (accepted) sign-in.
    AuthRequired,
    /// `payment-required:`.
    PaymentRequired,
    /// `invalid:`.
    Invalid,
    /// `pow:`.
    Pow,
    /// `restricted:`.
    Restricted,
    /// `error:` or `OK false` with no known prefix.
    Error,
    /// No OK in time, or the socket ended before it (retried).
    Timeout,
    /// The socket could not be opened (retried).
    ConnectFailed,
}

impl PublishOutcome {
    /// The relay has the event.
    pub fn is_success(self) -> bool {
        matches!(self, Self::Accepted | Self::Duplicate)
    }

    /// Trying again later may help.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::RateLimited | Self::Timeout | Self::ConnectFailed
        )
    }

    /// The outcome's name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Duplicate => "duplicate",
            Self::Blocked => "blocked",
            Self::RateLimited => "rate-limited",
            Self::AuthRequired => "auth-required",
            Self::PaymentRequired => "payment-required",
            Self::Invalid => "invalid",
            Self::Pow => "pow",
            Self::Restricted => "restricted",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::ConnectFailed => "connect-failed",
        }
    }

    /// Classifies an OK by its machine-readable prefix ([`Refusal::of`]).
    pub fn classify(accepted: bool, message: &str) -> Self {
        let refusal = Refusal::of(message);
        if accepted {
            return match refusal {
                Refusal::Duplicate => Self::Duplicate,
                _ => Self::Accepted,
            };
        }
        Self::of(refusal)
    }

    /// What a refused `OK` with this prefix means.
    pub fn of(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Duplicate => Self::Duplicate,
            Refusal::Blocked => Self::Blocked,
            Refusal::RateLimited => Self::RateLimited,
            Refusal::SignIn => Self::AuthRequired,
            Refusal::Payment => Self::PaymentRequired,
            Refusal::Invalid => Self::Invalid,
            Refusal::Pow => Self::Pow,
            Refusal::Restricted => Self::Restricted,
            Refusal::Unsupported | Refusal::Error | Refusal::Other => Self::Error,
        }
    }
}

/// One relay's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelayPublish {
    /// The relay.
    pub url: String,
    /// What it did.
    pub outcome: PublishOutcome,
    /// The relay's message (or why the socket failed), at most
    /// [`MAX_PUBLISH_MESSAGE_CHARS`] characters; not escaped.
    pub message: String,
    /// Attempts made.
    pub attempts: u32,
}

/// Every target's result, in the order of the targets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PublishReport {
    /// One entry per distinct target.
    pub relays: Vec<RelayPublish>,
}

impl PublishReport {
    /// Relays that have the event (accepted or duplicate).
    pub fn successes(&self) -> usize {
        self.relays
            .iter()
            .filter(|r| r.outcome.is_success())
            .count()
    }
}

/// Sends `event` to every relay of `targets` (duplicates once) and reports what each did.
/// Every relay's link waits for a place of the client's socket budget, so a publish never
/// holds more connections than the budget allows, whatever the number of targets.
pub async fn publish(
    event: &Event,
    targets: &[String],
    client: &Client,
    cfg: &PublishConfig,
) -> PublishReport {
    publish_until(
        event,
        targets,
        client,
        cfg,
        crate::deadline::after(cfg.deadline),
    )
    .await
}

/// [`publish`], every relay's attempts ending by `deadline`.
async fn publish_until(
    event: &Event,
    targets: &[String],
    client: &Client,
    cfg: &PublishConfig,
    deadline: Instant,
) -> PublishReport {
    let urls = distinct(targets);
    let mut tasks = JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let (url, event, client, cfg) = (url.clone(), event.clone(), client.clone(), cfg.clone());
        // Each waits for a place of the client's socket budget, the one cap on connections.
        tasks.spawn(async move { (i, to_relay(url, &event, &client, &cfg, deadline, i).await) });
    }
    let mut results: Vec<Option<RelayPublish>> = vec![None; urls.len()];
    while let Some(joined) = tasks.join_next().await {
        if let Ok((i, result)) = joined {
            results[i] = Some(result);
        }
    }
    let relays = results
        .into_iter()
        .zip(urls)
        .map(|(r, url)| r.unwrap_or_else(|| task_failed(url)))
        .collect();
    PublishReport { relays }
}

/// Sends an existing `event` to the targets that do not have it yet (NIP-65 rebroadcast: after
/// a write relay failed, or to relays newly on the route). Each target is first asked for the
/// event's id, on the same sockets the sending then uses; those that return it are reported
/// [`Duplicate`](PublishOutcome::Duplicate) with no attempt, the others get the EVENT as in
/// [`publish`].
///
/// The whole rebroadcast ends by the config's [`deadline`](PublishConfig::deadline): the
/// questions get the first half of it (a target that has not answered by then is sent the
/// event), the sending what is left.
pub async fn rebroadcast(
    event: &Event,
    targets: &[String],
    client: &Client,
    cfg: &PublishConfig,
) -> PublishReport {
    let start = Instant::now();
    let deadline = crate::deadline::offset(start, cfg.deadline);
    let asked_by = crate::deadline::offset(start, cfg.deadline / 2);
    let urls = distinct(targets);
    let filter = nostr::filter::Filter::new().id(event.id).limit(1);
    let mut asks = JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let (url, filter, client) = (url.clone(), filter.clone(), client.clone());
        asks.spawn(async move {
            let ask =
                crate::asks::lookup::fetch_events(std::slice::from_ref(&url), &filter, &client);
            // Unanswered in time: treated as lacking the event.
            let found = timeout_at(asked_by, ask).await.unwrap_or_default();
            (i, !found.is_empty())
        });
    }
    let mut has = vec![false; urls.len()];
    while let Some(joined) = asks.join_next().await {
        if let Ok((i, found)) = joined {
            has[i] = found;
        }
    }
    let missing: Vec<String> = urls
        .iter()
        .zip(&has)
        .filter(|(_, h)| !**h)
        .map(|(u, _)| u.clone())
        .collect();
    let sent = publish_until(event, &missing, client, cfg, deadline).await;
    let mut sent = sent.relays.into_iter();
    let relays = urls
        .into_iter()
        .zip(has)
        .map(|(url, had)| {
            if had {
                RelayPublish {
                    url,
                    outcome: PublishOutcome::Duplicate,
                    message: "already there: not sent again".into(),
                    attempts: 0,
                }
            } else {
                sent.next().unwrap_or_else(|| task_failed(url))
            }
        })
        .collect();
    PublishReport { relays }
}

/// `targets` without repeats, in their order.
fn distinct(targets: &[String]) -> Vec<String> {
    let mut urls: Vec<String> = Vec::new();
    for t in targets {
        if !urls.contains(t) {
            urls.push(t.clone());
        }
    }
    urls
}

/// The report of a relay whose task ended without one.
fn task_failed(url: String) -> RelayPublish {
    RelayPublish {
        url,
        outcome: PublishOutcome::Error,
        message: "the publishing task failed".into(),
        attempts: 0,
    }
}

/// One relay: attempts with backoff until a final outcome, the attempts or the deadline.
async fn to_relay(
    url: String,
    event: &Event,
    client: &Client,
    cfg: &PublishConfig,
    deadline: Instant,
    i: usize,
) -> RelayPublish {
    let knobs = client.config();
    let mut rng =
        rand_chacha::ChaCha8Rng::seed_from_u64(crate::asks::route_feed::relay_seed(knobs.seed, i));
    let max_attempts = cfg.max_attempts.clamp(1, MAX_PUBLISH_ATTEMPTS);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let (outcome, message) = match timeout_at(deadline, attempt(&url, event, client, cfg)).await
        {
            Ok(result) => result,
            Err(_) => (
                PublishOutcome::Timeout,
                "the publish deadline passed".into(),
            ),
        };
        let delay = knobs.backoff.delay(attempts - 1, &mut rng);
        let retry = outcome.is_retryable()
            && attempts < max_attempts
            && crate::deadline::after(delay) < deadline;
        tracing::debug!(relay = %url, outcome = outcome.as_str(), attempts, retry, "publish attempt");
        if !retry {
            return RelayPublish {
                url,
                outcome,
                message: bounded(&message),
                attempts,
            };
        }
        tokio::time::sleep(delay).await;
    }
}

/// `s` cut to [`MAX_PUBLISH_MESSAGE_CHARS`] characters.
fn bounded(s: &str) -> String {
    match s.char_indices().nth(MAX_PUBLISH_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_string(),
    }
}

/// One socket: dial, EVENT, the OK (signing in once if asked and possible), close.
async fn attempt(
    url: &str,
    event: &Event,
    client: &Client,
    cfg: &PublishConfig,
) -> (PublishOutcome, String) {
    let mut ws = match client
        .sockets()
        .link(url, Role::Publish, client.config().dial())
        .await
    {
        Ok(ws) => ws,
        Err(why) => return (PublishOutcome::ConnectFailed, why.to_string()),
    };
    let result = answer(&mut ws, event, client, cfg).await;
    let _ = tokio::time::timeout(Duration::from_millis(200), ws.close()).await;
    result
}

/// The event sent as one exchange (`crate::connection::exchange`: sign-in as on every path; a
/// `rate-limited:` `OK` is this attempt's outcome), and the relay's `OK` read as an outcome.
async fn answer(
    ws: &mut Socket,
    event: &Event,
    client: &Client,
    cfg: &PublishConfig,
) -> (PublishOutcome, String) {
    let ask = Ask::Event(Box::new(event.clone()));
    let seed = client.config().seed;
    let mut exchange = match Exchange::send(ws, ask, client, cfg.ok_timeout, seed).await {
        Ok(exchange) => exchange,
        Err(ended) => return ended_as(ended),
    };
    loop {
        match exchange.next().await {
            Answer::Ok { accepted, message } => {
                return (PublishOutcome::classify(accepted, &message), message)
            }
            Answer::Ended(ended) => return ended_as(ended),
            Answer::Event(_) | Answer::Eose | Answer::Count(_) | Answer::Reconcile(_) => {}
        }
    }
}

/// An exchange that ended without an `OK`, as a publish outcome.
fn ended_as(ended: Ended) -> (PublishOutcome, String) {
    match ended {
        Ended::Refused { refusal, message } => (PublishOutcome::of(refusal), message),
        Ended::Lost(why) | Ended::TimedOut(why) => (PublishOutcome::Timeout, why),
        ended @ Ended::Flooded(_) => (PublishOutcome::Timeout, ended.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_classify() {
        use PublishOutcome as O;
        assert_eq!(O::classify(true, ""), O::Accepted);
        assert_eq!(O::classify(true, "duplicate: have it"), O::Duplicate);
        assert_eq!(O::classify(false, "blocked: no"), O::Blocked);
        assert_eq!(O::classify(false, "rate-limited: slow"), O::RateLimited);
        assert_eq!(O::classify(false, "auth-required: who"), O::AuthRequired);
        assert_eq!(O::classify(false, "invalid: bad"), O::Invalid);
        assert_eq!(O::classify(false, "pow: 20"), O::Pow);
        assert_eq!(O::classify(false, "restricted: members"), O::Restricted);
        assert_eq!(O::classify(false, "error: disk"), O::Error);
        assert_eq!(O::classify(false, " rate-limited: slow"), O::RateLimited);
        assert_eq!(
            O::classify(false, "payment-required: 5k"),
            O::PaymentRequired
        );
        assert_eq!(O::classify(false, "nope"), O::Error);
    }

    #[test]
    fn messages_are_bounded() {
        let long = "é".repeat(MAX_PUBLISH_MESSAGE_CHARS * 3);
        assert_eq!(
            bounded(&long).chars().count(),
            MAX_PUBLISH_MESSAGE_CHARS + 1
        );
        assert_eq!(bounded("short"), "short");
    }
}
