//! Publishing one signed event to a set of relays (a publish route's targets).
//!
//! Each relay gets its own socket: `["EVENT", event]`, then the relay's
//! `["OK", id, accepted, message]` for that id (other frames are ignored; frames above the
//! config's size limits are dropped or end the socket). The answer is classified by its NIP-01
//! prefix. Rate limits, timeouts and connect failures are tried again with the config's backoff
//! while the overall deadline and [`MAX_PUBLISH_ATTEMPTS`] allow; a definitive refusal never is.
//! With keys ([`RuntimeConfig::auth`]), an `auth-required:` refusal is answered by signing the
//! relay's NIP-42 challenge and sending the event again, once per socket.

use std::time::Duration;

use nostr::event::{Event, EventId};
use nostr::message::{ClientMessage, RelayMessage};
use rand::SeedableRng;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::config::RuntimeConfig;
use crate::pool::{Link as Socket, Role};

/// Sockets open at once during one publish, whatever the number of targets.
pub const MAX_PUBLISH_SOCKETS: usize = 32;

/// Attempts per relay (the first included) for retryable outcomes.
pub const MAX_PUBLISH_ATTEMPTS: u32 = 4;

/// Characters of a relay's OK message (or of a socket error) kept in the report.
pub const MAX_PUBLISH_MESSAGE_CHARS: usize = 256;

/// How a publish behaves.
#[derive(Clone, Debug)]
pub struct PublishConfig {
    /// Connect timeout, backoff between attempts, frame limits and the sign-in keys.
    pub runtime: RuntimeConfig,
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
            runtime: RuntimeConfig::default(),
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
            runtime: RuntimeConfig::fast_for_tests(),
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
            Self::Invalid => "invalid",
            Self::Pow => "pow",
            Self::Restricted => "restricted",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::ConnectFailed => "connect-failed",
        }
    }

    /// Classifies an OK by its NIP-01 machine-readable prefix.
    pub fn classify(accepted: bool, message: &str) -> Self {
        let prefix = message.split_once(':').map(|(p, _)| p.trim());
        if accepted {
            return match prefix {
                Some("duplicate") => Self::Duplicate,
                _ => Self::Accepted,
            };
        }
        match prefix {
            Some("duplicate") => Self::Duplicate,
            Some("blocked") => Self::Blocked,
            Some("rate-limited") => Self::RateLimited,
            Some("auth-required") => Self::AuthRequired,
            Some("invalid") => Self::Invalid,
            Some("pow") => Self::Pow,
            Some("restricted") => Self::Restricted,
            _ => Self::Error,
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
/// At most `min(targets, MAX_PUBLISH_SOCKETS)` sockets are open at once.
pub async fn publish(event: &Event, targets: &[String], cfg: &PublishConfig) -> PublishReport {
    crate::tls::install_crypto_provider();
    let mut urls: Vec<String> = Vec::new();
    for t in targets {
        if !urls.contains(t) {
            urls.push(t.clone());
        }
    }
    let deadline = Instant::now() + cfg.deadline;
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(
        urls.len().clamp(1, MAX_PUBLISH_SOCKETS),
    ));
    let mut tasks = JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let (url, event, cfg, permits) = (url.clone(), event.clone(), cfg.clone(), permits.clone());
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (i, to_relay(url, &event, &cfg, deadline, i).await)
        });
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
        .map(|(r, url)| {
            r.unwrap_or(RelayPublish {
                url,
                outcome: PublishOutcome::Error,
                message: "the publishing task failed".into(),
                attempts: 0,
            })
        })
        .collect();
    PublishReport { relays }
}

/// One relay: attempts with backoff until a final outcome, the attempts or the deadline.
async fn to_relay(
    url: String,
    event: &Event,
    cfg: &PublishConfig,
    deadline: Instant,
    i: usize,
) -> RelayPublish {
    let mut rng =
        rand_chacha::ChaCha8Rng::seed_from_u64(crate::route_feed::relay_seed(cfg.runtime.seed, i));
    let max_attempts = cfg.max_attempts.clamp(1, MAX_PUBLISH_ATTEMPTS);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let (outcome, message) = match timeout_at(deadline, attempt(&url, event, cfg)).await {
            Ok(result) => result,
            Err(_) => (
                PublishOutcome::Timeout,
                "the publish deadline passed".into(),
            ),
        };
        let delay = cfg.runtime.backoff.delay(attempts - 1, &mut rng);
        let retry =
            outcome.is_retryable() && attempts < max_attempts && Instant::now() + delay < deadline;
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

/// Where sign-in stands on one socket.
enum SignIn {
    /// Not asked.
    Anonymous,
    /// Refused for want of sign-in; no challenge yet.
    AwaitingChallenge,
    /// AUTH sent: waiting for its OK.
    Pending(EventId),
    /// Accepted; the event was sent again.
    SignedIn,
}

/// One socket: dial, EVENT, the OK (signing in once if asked and possible), close.
async fn attempt(url: &str, event: &Event, cfg: &PublishConfig) -> (PublishOutcome, String) {
    let mut ws = match cfg
        .runtime
        .pool
        .link(url, Role::Publish, &cfg.runtime)
        .await
    {
        Ok(ws) => ws,
        Err(why) => return (PublishOutcome::ConnectFailed, why.to_string()),
    };
    let result = exchange(&mut ws, url, event, cfg).await;
    let _ = tokio::time::timeout(Duration::from_millis(200), ws.close()).await;
    result
}

async fn send(ws: &mut Socket, msg: ClientMessage<'_>) -> Result<(), (PublishOutcome, String)> {
    ws.send(Message::text(msg.as_json()))
        .await
        .map_err(|e| (PublishOutcome::Timeout, format!("sending failed: {e}")))
}

async fn exchange(
    ws: &mut Socket,
    url: &str,
    event: &Event,
    cfg: &PublishConfig,
) -> (PublishOutcome, String) {
    if let Err(e) = send(ws, ClientMessage::event(event.clone())).await {
        return e;
    }
    let mut ok_deadline = Instant::now() + cfg.ok_timeout;
    let mut challenge: Option<String> = None;
    let mut sign_in = SignIn::Anonymous;
    let mut refusal = String::new();
    loop {
        let text = match timeout_at(ok_deadline, ws.recv()).await {
            Err(_) => {
                let why = match sign_in {
                    SignIn::AwaitingChallenge => {
                        return (
                            PublishOutcome::AuthRequired,
                            format!("{refusal} (no AUTH challenge came in time)"),
                        )
                    }
                    SignIn::Pending(_) => {
                        return (
                            PublishOutcome::AuthRequired,
                            format!("{refusal} (no OK for the AUTH event in time)"),
                        )
                    }
                    _ => "no OK in time",
                };
                return (PublishOutcome::Timeout, why.into());
            }
            Ok(None) => {
                return (
                    PublishOutcome::Timeout,
                    "the relay closed the connection before its OK".into(),
                )
            }
            Ok(Some(Err(e))) => return (PublishOutcome::Timeout, format!("socket error: {e}")),
            Ok(Some(Ok(Message::Text(text)))) => text,
            Ok(Some(Ok(_))) => continue,
        };
        if text.len() > cfg.runtime.max_message_bytes {
            continue;
        }
        let (id, accepted, message) = match RelayMessage::from_json(text.as_str()) {
            Ok(RelayMessage::Auth { challenge: c }) => {
                if c.is_empty() || c.len() > crate::slot::MAX_CHALLENGE_BYTES {
                    continue;
                }
                challenge = Some(c.into_owned());
                if matches!(sign_in, SignIn::AwaitingChallenge) {
                    match start_sign_in(ws, url, challenge.as_deref(), cfg).await {
                        Ok(Some(id)) => {
                            sign_in = SignIn::Pending(id);
                            ok_deadline = Instant::now() + cfg.ok_timeout;
                        }
                        Ok(None) => {}
                        Err(e) => return e,
                    }
                }
                continue;
            }
            Ok(RelayMessage::Ok {
                event_id,
                status,
                message,
            }) => (event_id, status, message.into_owned()),
            _ => continue,
        };
        if let SignIn::Pending(auth_id) = sign_in {
            if id == auth_id {
                if !accepted {
                    return (
                        PublishOutcome::AuthRequired,
                        format!("{refusal} (sign-in refused: {message})"),
                    );
                }
                sign_in = SignIn::SignedIn;
                if let Err(e) = send(ws, ClientMessage::event(event.clone())).await {
                    return e;
                }
                ok_deadline = Instant::now() + cfg.ok_timeout;
                continue;
            }
        }
        if id != event.id {
            continue;
        }
        let outcome = PublishOutcome::classify(accepted, &message);
        if outcome == PublishOutcome::AuthRequired
            && matches!(sign_in, SignIn::Anonymous)
            && cfg.runtime.auth.is_some()
        {
            refusal = message;
            match start_sign_in(ws, url, challenge.as_deref(), cfg).await {
                Ok(Some(id)) => sign_in = SignIn::Pending(id),
                Ok(None) => sign_in = SignIn::AwaitingChallenge,
                Err(e) => return e,
            }
            ok_deadline = Instant::now() + cfg.ok_timeout;
            continue;
        }
        if outcome == PublishOutcome::AuthRequired && matches!(sign_in, SignIn::SignedIn) {
            return (
                outcome,
                format!("{message} (still refused after signing in)"),
            );
        }
        return (outcome, message);
    }
}

/// Signs `challenge` and sends the AUTH; `None` when there is no challenge yet.
async fn start_sign_in(
    ws: &mut Socket,
    url: &str,
    challenge: Option<&str>,
    cfg: &PublishConfig,
) -> Result<Option<EventId>, (PublishOutcome, String)> {
    let (Some(keys), Some(challenge)) = (cfg.runtime.auth.as_ref(), challenge) else {
        return Ok(None);
    };
    let auth = crate::slot::auth_event(keys, url, challenge)
        .map_err(|why| (PublishOutcome::AuthRequired, why))?;
    let id = auth.id;
    send(ws, ClientMessage::auth(auth)).await?;
    Ok(Some(id))
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
