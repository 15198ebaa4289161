//! The client side of a NIP-46 remote signer ("bunker"): the key stays with the signer, and
//! this process only knows its `bunker://` URL.
//!
//! Written here rather than taken from rust-nostr's `nostr-connect`: that crate needs
//! `nostr-sdk` 0.45, whose stable releases are all yanked, so a published crate depending on
//! it would not resolve. The protocol's vocabulary (the URL, requests, responses, the
//! kind:24133 event) is the `nostr` crate's own (`nips::nip46`); this module is the transport:
//! one WebSocket per bunker relay, a subscription to the answers tagged with our client key,
//! each request published to every relay and its answer matched by id.
//!
//! The client key is fresh for each [`Bunker::connect`] unless the caller keeps one
//! ([`Bunker::connect_with`]): a bunker that honours its secret once then knows that key, and
//! a refused `connect` is forgiven when the signer still answers this client's requests.
//! Nothing here waits unbounded: the [`Signer`] around the bunker bounds every call, and a
//! request whose relays all failed is answered at once with why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::{Event, FinalizeEvent, Kind, UnsignedEvent};
use nostr::filter::Filter;
use nostr::key::{Keys, PublicKey};
use nostr::message::{ClientMessage, RelayMessage, SubscriptionId};
use nostr::nips::nip44;
use nostr::nips::nip46::{
    NostrConnectEventBuilder, NostrConnectMessage, NostrConnectRequest, NostrConnectUri,
    ResponseResult,
};
use nostr::types::Timestamp;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use super::{Signer, SignerError, SignerFuture};

/// The most relays of one bunker URL used; the rest are ignored.
pub const MAX_BUNKER_RELAYS: usize = 8;

/// The largest frame read from a bunker relay: an answer carries at most one signed event
/// (or a decrypted message), NIP-44 encrypted.
pub const MAX_BUNKER_FRAME_BYTES: usize = 512 * 1024;

/// The most requests waiting for an answer at once; past it a request is refused at once
/// rather than queued without end.
pub const MAX_BUNKER_PENDING: usize = 256;

/// Why a bunker URL was not used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BunkerError {
    /// Not a `bunker://` URL, or malformed (the URL is not quoted: it may carry a secret).
    #[error("not a bunker:// URL: {0}")]
    BadUrl(String),
    /// The URL names no relay.
    #[error("the bunker URL names no relay")]
    NoRelay,
    /// Connecting (the `connect` request or the public key) failed.
    #[error("{0}")]
    Signer(#[from] SignerError),
}

/// A connected remote signer (see the [module docs](self)); wrapped in a [`Signer`] by
/// [`Bunker::connect`].
pub struct Bunker {
    remote: PublicKey,
    client: Keys,
    asks: mpsc::UnboundedSender<Ask>,
    next: AtomicU64,
}

impl std::fmt::Debug for Bunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bunker")
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// A response's `result` and `error` as the signer sent them, or why none came.
type Reply = Result<(Option<String>, Option<String>), String>;

/// One request for the transport task: the kind:24133 event carrying it, and where its answer
/// goes.
struct Ask {
    id: String,
    event: Event,
    answer: oneshot::Sender<Reply>,
}

impl Bunker {
    /// Connects to the signer `url` names with a fresh client key: sends `connect` (with the
    /// URL's secret) and asks the user's public key, each within `timeout`.
    pub async fn connect(url: &str, timeout: Duration) -> Result<Signer, BunkerError> {
        Self::connect_with(url, Keys::generate(), timeout).await
    }

    /// As [`connect`](Self::connect), with the client key `client`.
    pub async fn connect_with(
        url: &str,
        client: Keys,
        timeout: Duration,
    ) -> Result<Signer, BunkerError> {
        let parsed =
            NostrConnectUri::parse(url.trim()).map_err(|e| BunkerError::BadUrl(e.to_string()))?;
        let NostrConnectUri::Bunker {
            remote_signer_public_key: remote,
            relays,
            secret,
        } = parsed
        else {
            return Err(BunkerError::BadUrl(
                "a nostrconnect:// URL is the client's to show, not to be given".into(),
            ));
        };
        let relays: Vec<String> = relays
            .iter()
            .take(MAX_BUNKER_RELAYS)
            .map(|r| r.to_string())
            .collect();
        if relays.is_empty() {
            return Err(BunkerError::NoRelay);
        }
        let name = format!("bunker {} via {}", short(&remote), relays.join(", "));
        let (asks, rx) = mpsc::unbounded_channel();
        tokio::spawn(transport(relays, client.clone(), remote, rx));
        let bunker = Self {
            remote,
            client,
            asks,
            next: AtomicU64::new(rand::random::<u32>() as u64),
        };
        let connect = NostrConnectRequest::Connect {
            remote_signer_public_key: remote,
            secret,
        };
        let said = super::bounded(&name, timeout, "connect", Box::pin(bunker.request(connect)));
        let refused = match said.await {
            Ok(ResponseResult::Ack | ResponseResult::ConnectSecret(_)) => None,
            Ok(other) => Some(SignerError::Failed {
                signer: name.clone(),
                what: "connect",
                reason: format!("unexpected answer {other:?}"),
            }),
            Err(e @ SignerError::TimedOut { .. }) => return Err(e.into()),
            Err(e) => Some(e),
        };
        let bunker = std::sync::Arc::new(bunker);
        match (Signer::new(bunker, name, timeout).await, refused) {
            (Ok(signer), _) => Ok(signer),
            // A kept client key whose secret was spent: the signer's refusal is the error to show.
            (Err(_), Some(refused)) => Err(refused.into()),
            (Err(e), None) => Err(e.into()),
        }
    }

    /// Sends `request` and waits for its answer (the caller bounds the wait).
    async fn request(&self, request: NostrConnectRequest) -> Result<ResponseResult, String> {
        let method = request.method();
        let id = format!("{:x}", self.next.fetch_add(1, Ordering::Relaxed));
        let message = NostrConnectMessage::Request {
            id: id.clone(),
            method,
            params: request.params(),
        };
        let event = NostrConnectEventBuilder::new(self.remote, message)
            .finalize(&self.client)
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let (answer, rx) = oneshot::channel();
        self.asks
            .send(Ask { id, event, answer })
            .map_err(|_| "the bunker connection ended".to_string())?;
        let (result, error) = rx
            .await
            .map_err(|_| "the bunker connection ended".to_string())??;
        if let Some(error) = error.filter(|e| !e.is_empty()) {
            return Err(shown(&error));
        }
        let Some(result) = result else {
            return Err("an answer without a result".into());
        };
        match ResponseResult::parse(method, result) {
            Ok(ResponseResult::Error) => Err("error".into()),
            Ok(result) => Ok(result),
            Err(e) => Err(format!("an answer that does not parse: {e}")),
        }
    }
}

impl super::SignerBackend for Bunker {
    fn public_key(&self) -> SignerFuture<'_, PublicKey> {
        Box::pin(async move {
            match self.request(NostrConnectRequest::GetPublicKey).await? {
                ResponseResult::GetPublicKey(pk) => Ok(pk),
                other => Err(format!("unexpected answer {other:?}")),
            }
        })
    }

    fn sign_event(&self, unsigned: UnsignedEvent) -> SignerFuture<'_, Event> {
        Box::pin(async move {
            match self
                .request(NostrConnectRequest::SignEvent(unsigned))
                .await?
            {
                ResponseResult::SignEvent(event) => Ok(*event),
                other => Err(format!("unexpected answer {other:?}")),
            }
        })
    }

    fn nip44_encrypt<'a>(&'a self, to: &'a PublicKey, text: &'a str) -> SignerFuture<'a, String> {
        Box::pin(async move {
            let request = NostrConnectRequest::Nip44Encrypt {
                public_key: *to,
                text: text.to_string(),
            };
            match self.request(request).await? {
                ResponseResult::Nip44Encrypt { ciphertext } => Ok(ciphertext),
                other => Err(format!("unexpected answer {other:?}")),
            }
        })
    }

    fn nip44_decrypt<'a>(
        &'a self,
        from: &'a PublicKey,
        payload: &'a str,
    ) -> SignerFuture<'a, String> {
        Box::pin(async move {
            let request = NostrConnectRequest::Nip44Decrypt {
                public_key: *from,
                ciphertext: payload.to_string(),
            };
            match self.request(request).await? {
                ResponseResult::Nip44Decrypt { plaintext } => Ok(plaintext),
                other => Err(format!("unexpected answer {other:?}")),
            }
        })
    }
}

/// The first characters of a public key, enough to tell signers apart in a message.
fn short(pk: &PublicKey) -> String {
    pk.to_hex().chars().take(12).collect()
}

/// A signer's error text as shown: one line, bounded (it came from afar).
fn shown(text: &str) -> String {
    text.chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What a relay's task tells the transport.
enum FromRelay {
    /// A kind:24133 event for our client key.
    Answer(Box<Event>),
    /// The relay's connection ended (or never opened), and why.
    Gone(String, String),
}

/// Owns the requests waiting for answers; a task per relay carries the frames. Ends when the
/// bunker is dropped.
async fn transport(
    relays: Vec<String>,
    client: Keys,
    remote: PublicKey,
    mut asks: mpsc::UnboundedReceiver<Ask>,
) {
    let (from_relays, mut incoming) = mpsc::unbounded_channel();
    let mut to_relays: Vec<mpsc::UnboundedSender<String>> = Vec::new();
    for url in &relays {
        let (tx, rx) = mpsc::unbounded_channel();
        to_relays.push(tx);
        tokio::spawn(relay(
            url.clone(),
            client.public_key(),
            rx,
            from_relays.clone(),
        ));
    }
    drop(from_relays);
    let mut waiting: HashMap<String, oneshot::Sender<Reply>> = HashMap::new();
    let mut gone: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            ask = asks.recv() => {
                let Some(ask) = ask else { return };
                waiting.retain(|_, w| !w.is_closed());
                if gone.len() == relays.len() {
                    let _ = ask.answer.send(Err(format!("no bunker relay is reachable: {}", gone.join("; "))));
                    continue;
                }
                if waiting.len() >= MAX_BUNKER_PENDING {
                    let _ = ask.answer.send(Err("too many requests waiting".into()));
                    continue;
                }
                let frame = ClientMessage::event(ask.event).as_json();
                for tx in &to_relays {
                    let _ = tx.send(frame.clone());
                }
                waiting.insert(ask.id, ask.answer);
            }
            from = incoming.recv() => match from {
                Some(FromRelay::Answer(event)) => {
                    if event.pubkey != remote || event.verify().is_err() {
                        continue;
                    }
                    let Ok(text) = nip44::decrypt(client.secret_key(), &remote, &event.content) else {
                        continue;
                    };
                    let Ok(NostrConnectMessage::Response { id, result, error }) =
                        NostrConnectMessage::from_json(text)
                    else {
                        continue;
                    };
                    if result.as_deref() == Some("auth_url") {
                        // The signer wants the person to approve at a URL; the answer follows.
                        let url = error.as_deref().map(shown).unwrap_or_default();
                        tracing::warn!(%url, "the remote signer asks for approval at this URL");
                        continue;
                    }
                    if let Some(w) = waiting.remove(&id) {
                        let _ = w.send(Ok((result, error)));
                    }
                }
                Some(FromRelay::Gone(url, why)) => {
                    tracing::info!(relay = %url, reason = %why, "bunker relay lost");
                    gone.push(format!("{url}: {why}"));
                    if gone.len() == relays.len() {
                        let why = format!("no bunker relay is reachable: {}", gone.join("; "));
                        for (_, w) in waiting.drain() {
                            let _ = w.send(Err(why.clone()));
                        }
                    }
                }
                None => {}
            }
        }
    }
}

/// One bunker relay: dials, subscribes to the answers for `client`, sends every request
/// frame it is given, and passes kind:24133 events on. Dialled once: a lost relay is reported
/// and the others carry on.
async fn relay(
    url: String,
    client: PublicKey,
    mut frames: mpsc::UnboundedReceiver<String>,
    out: mpsc::UnboundedSender<FromRelay>,
) {
    crate::connection::tls::install_crypto_provider();
    let limits = WebSocketConfig::default()
        .max_message_size(Some(MAX_BUNKER_FRAME_BYTES))
        .max_frame_size(Some(MAX_BUNKER_FRAME_BYTES));
    let dial =
        tokio_tungstenite::connect_async_tls_with_config(url.clone(), Some(limits), true, None);
    let mut ws = match tokio::time::timeout(Duration::from_secs(30), dial).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            let _ = out.send(FromRelay::Gone(url, format!("connect failed: {e}")));
            return;
        }
        Err(_) => {
            let _ = out.send(FromRelay::Gone(url, "connect timed out".into()));
            return;
        }
    };
    let sub = SubscriptionId::new("bunker");
    // A minute back: answers are matched by id, and a signer's clock may run behind ours.
    let filter = Filter::new()
        .kind(Kind::NostrConnect)
        .pubkey(client)
        .since(Timestamp::now() - 60);
    let req = ClientMessage::req(sub.clone(), filter).as_json();
    if let Err(e) = ws.send(Message::text(req)).await {
        let _ = out.send(FromRelay::Gone(url, format!("sending failed: {e}")));
        return;
    }
    loop {
        tokio::select! {
            frame = frames.recv() => {
                let Some(frame) = frame else {
                    let _ = ws.close(None).await;
                    return;
                };
                if let Err(e) = ws.send(Message::text(frame)).await {
                    let _ = out.send(FromRelay::Gone(url, format!("sending failed: {e}")));
                    return;
                }
            }
            read = ws.next() => match read {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(RelayMessage::Event { event, .. }) = RelayMessage::from_json(text.as_str()) {
                        if event.kind == Kind::NostrConnect {
                            let _ = out.send(FromRelay::Answer(Box::new(event.into_owned())));
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None => {
                    let _ = out.send(FromRelay::Gone(url, "closed by the relay".into()));
                    return;
                }
                Some(Err(e)) => {
                    let _ = out.send(FromRelay::Gone(url, e.to_string()));
                    return;
                }
                Some(Ok(_)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_urls_are_refused_before_anything_is_dialled() {
        let t = Duration::from_secs(1);
        assert!(matches!(
            Bunker::connect("https://example.com", t).await,
            Err(BunkerError::BadUrl(_))
        ));
        let pk = Keys::generate().public_key().to_hex();
        assert!(matches!(
            Bunker::connect(&format!("bunker://{pk}"), t).await,
            Err(BunkerError::NoRelay | BunkerError::BadUrl(_))
        ));
    }
}
