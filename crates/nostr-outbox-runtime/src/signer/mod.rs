//! The one signer interface: everything that signs or decrypts (NIP-42 sign-in, publishing,
//! opening and sealing NIP-17 messages, one's own lists) goes through a [`Signer`].
//!
//! A signer's key may live elsewhere (a NIP-46 remote signer, [`nip46::Bunker`]), so every
//! call is asynchronous and may never come back: each is bounded by the signer's timeout and a
//! late or refused answer is a [`SignerError`] naming the signer. A raw key ([`Keys`]) is one
//! signer among others.
//!
//! Why a trait of our own ([`SignerBackend`]): `nostr` 0.45.6 has no single signer trait; it
//! splits signing into `AsyncGetPublicKey`, `AsyncSignEvent` and `AsyncNip44`, each with its
//! own error type, which cannot be one trait object. `SignerBackend` is that object, and
//! anything implementing the three (`Keys` does) is one. [`Signer`] implements the three in
//! turn, with its bound, so `nostr`'s builders (gift wraps, seals) take it directly.

pub mod nip46;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{AsyncSignEvent, Event, EventBuilder, FinalizeUnsignedEvent, UnsignedEvent};
use nostr::key::{AsyncGetPublicKey, Keys, PublicKey};
use nostr::nips::nip44::AsyncNip44;

/// How long one signer call may take by default: long enough for a person to approve a
/// request on a phone, short enough that a signer that never answers is an error soon.
pub const SIGNER_TIMEOUT: Duration = Duration::from_secs(60);

/// A signer call's future: boxed, so [`SignerBackend`] is a trait object.
pub type SignerFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// What a signer does, as one trait object (see the [module docs](self) for why it is ours).
/// Errors are text: the [`Signer`] around it names the signer and the call.
pub trait SignerBackend: fmt::Debug + Send + Sync {
    /// The public key it signs for.
    fn public_key(&self) -> SignerFuture<'_, PublicKey>;
    /// Signs `unsigned`, whose `pubkey` is [`public_key`](Self::public_key).
    fn sign_event(&self, unsigned: UnsignedEvent) -> SignerFuture<'_, Event>;
    /// NIP-44 encrypts `text` for `to`.
    fn nip44_encrypt<'a>(&'a self, to: &'a PublicKey, text: &'a str) -> SignerFuture<'a, String>;
    /// NIP-44 decrypts `payload` from `from`.
    fn nip44_decrypt<'a>(
        &'a self,
        from: &'a PublicKey,
        payload: &'a str,
    ) -> SignerFuture<'a, String>;
}

impl<T> SignerBackend for T
where
    T: AsyncGetPublicKey + AsyncSignEvent + AsyncNip44,
{
    fn public_key(&self) -> SignerFuture<'_, PublicKey> {
        Box::pin(async move {
            AsyncGetPublicKey::get_public_key_async(self)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn sign_event(&self, unsigned: UnsignedEvent) -> SignerFuture<'_, Event> {
        Box::pin(async move {
            self.sign_event_async(unsigned)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn nip44_encrypt<'a>(&'a self, to: &'a PublicKey, text: &'a str) -> SignerFuture<'a, String> {
        Box::pin(async move {
            self.nip44_encrypt_async(to, text)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn nip44_decrypt<'a>(
        &'a self,
        from: &'a PublicKey,
        payload: &'a str,
    ) -> SignerFuture<'a, String> {
        Box::pin(async move {
            self.nip44_decrypt_async(from, payload)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// Why a signer call failed; every message names the signer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignerError {
    /// No answer within the signer's timeout.
    #[error("the signer ({signer}) did not answer in time ({what}, waited {after:?})")]
    TimedOut {
        /// The signer, as [`Signer::name`].
        signer: String,
        /// What was asked.
        what: &'static str,
        /// How long it was waited for.
        after: Duration,
    },
    /// The signer answered with an error or refused.
    #[error("the signer ({signer}) refused or failed to {what}: {reason}")]
    Failed {
        /// The signer, as [`Signer::name`].
        signer: String,
        /// What was asked.
        what: &'static str,
        /// What it said.
        reason: String,
    },
}

/// A signer with its public key, its name and its timeout (see the [module docs](self)).
/// Clones share the signer.
#[derive(Clone)]
pub struct Signer {
    backend: Arc<dyn SignerBackend>,
    public_key: PublicKey,
    name: Arc<str>,
    timeout: Duration,
}

impl fmt::Debug for Signer {
    // Never the backend's own Debug: a key's shows only its public key, but another's may not.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("name", &self.name)
            .field("public_key", &self.public_key)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl From<Keys> for Signer {
    fn from(keys: Keys) -> Self {
        Self::from_keys(keys)
    }
}

impl Signer {
    /// A raw key: its public key is known without asking.
    pub fn from_keys(keys: Keys) -> Self {
        Self {
            public_key: keys.public_key(),
            backend: Arc::new(keys),
            name: Arc::from("secret key"),
            timeout: SIGNER_TIMEOUT,
        }
    }

    /// Any backend, named `name` in errors: asks its public key once, within `timeout`, which
    /// then bounds every later call too.
    pub async fn new(
        backend: Arc<dyn SignerBackend>,
        name: impl Into<String>,
        timeout: Duration,
    ) -> Result<Self, SignerError> {
        let name: Arc<str> = Arc::from(name.into());
        let public_key =
            bounded(&name, timeout, "give its public key", backend.public_key()).await?;
        Ok(Self {
            backend,
            public_key,
            name,
            timeout,
        })
    }

    /// The same signer with calls bounded by `timeout` instead.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The public key it signs for.
    pub fn public_key(&self) -> PublicKey {
        self.public_key
    }

    /// How errors name it (`secret key`, `bunker … via wss://…`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long one call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Signs `unsigned` (whose `pubkey` must be this signer's), within the timeout. The answer
    /// is checked: a remote signer's event must carry our key, the same id and a valid
    /// signature.
    pub async fn sign(&self, mut unsigned: UnsignedEvent) -> Result<Event, SignerError> {
        unsigned.ensure_id();
        let id = unsigned.id;
        let event = self
            .call("sign an event", self.backend.sign_event(unsigned))
            .await?;
        let wrong = if event.pubkey != self.public_key {
            Some("it signed with another key".to_string())
        } else if id.is_some_and(|id| id != event.id) {
            Some("it signed another event".to_string())
        } else if let Err(e) = event.verify() {
            Some(format!("its signature does not verify: {e}"))
        } else {
            None
        };
        match wrong {
            Some(reason) => Err(self.failed("sign an event", reason)),
            None => Ok(event),
        }
    }

    /// Builds `builder` with this signer's key and signs it.
    pub async fn sign_builder(&self, builder: EventBuilder) -> Result<Event, SignerError> {
        self.sign(builder.finalize_unsigned(self.public_key)).await
    }

    /// NIP-44 encrypts `text` for `to`, within the timeout.
    pub async fn nip44_encrypt(&self, to: &PublicKey, text: &str) -> Result<String, SignerError> {
        self.call("encrypt", self.backend.nip44_encrypt(to, text))
            .await
    }

    /// NIP-44 decrypts `payload` from `from`, within the timeout.
    pub async fn nip44_decrypt(
        &self,
        from: &PublicKey,
        payload: &str,
    ) -> Result<String, SignerError> {
        self.call("decrypt", self.backend.nip44_decrypt(from, payload))
            .await
    }

    async fn call<T>(
        &self,
        what: &'static str,
        call: SignerFuture<'_, T>,
    ) -> Result<T, SignerError> {
        bounded(&self.name, self.timeout, what, call).await
    }

    fn failed(&self, what: &'static str, reason: String) -> SignerError {
        SignerError::Failed {
            signer: self.name.to_string(),
            what,
            reason,
        }
    }
}

/// One signer call within `timeout`.
async fn bounded<T>(
    name: &str,
    timeout: Duration,
    what: &'static str,
    call: SignerFuture<'_, T>,
) -> Result<T, SignerError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(reason)) => Err(SignerError::Failed {
            signer: name.to_string(),
            what,
            reason,
        }),
        Err(_) => Err(SignerError::TimedOut {
            signer: name.to_string(),
            what,
            after: timeout,
        }),
    }
}

impl AsyncGetPublicKey for Signer {
    type Error = SignerError;

    fn get_public_key_async(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<PublicKey, SignerError>> + Send + '_>> {
        let key = self.public_key;
        Box::pin(async move { Ok(key) })
    }
}

impl AsyncSignEvent for Signer {
    type Error = SignerError;

    fn sign_event_async(
        &self,
        unsigned: UnsignedEvent,
    ) -> Pin<Box<dyn Future<Output = Result<Event, SignerError>> + Send + '_>> {
        Box::pin(self.sign(unsigned))
    }
}

impl AsyncNip44 for Signer {
    type Error = SignerError;

    fn nip44_encrypt_async<'a>(
        &'a self,
        public_key: &'a PublicKey,
        content: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<String, SignerError>> + Send + 'a>> {
        Box::pin(self.nip44_encrypt(public_key, content))
    }

    fn nip44_decrypt_async<'a>(
        &'a self,
        public_key: &'a PublicKey,
        payload: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<String, SignerError>> + Send + 'a>> {
        Box::pin(self.nip44_decrypt(public_key, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::Kind;

    /// Answers nothing, ever.
    #[derive(Debug)]
    struct Silent(PublicKey);

    impl SignerBackend for Silent {
        fn public_key(&self) -> SignerFuture<'_, PublicKey> {
            let key = self.0;
            Box::pin(async move { Ok(key) })
        }
        fn sign_event(&self, _: UnsignedEvent) -> SignerFuture<'_, Event> {
            Box::pin(std::future::pending())
        }
        fn nip44_encrypt<'a>(&'a self, _: &'a PublicKey, _: &'a str) -> SignerFuture<'a, String> {
            Box::pin(std::future::pending())
        }
        fn nip44_decrypt<'a>(&'a self, _: &'a PublicKey, _: &'a str) -> SignerFuture<'a, String> {
            Box::pin(std::future::pending())
        }
    }

    /// Signs with a key other than the one it claims.
    #[derive(Debug)]
    struct Impostor(Keys, PublicKey);

    impl SignerBackend for Impostor {
        fn public_key(&self) -> SignerFuture<'_, PublicKey> {
            let key = self.1;
            Box::pin(async move { Ok(key) })
        }
        fn sign_event(&self, mut unsigned: UnsignedEvent) -> SignerFuture<'_, Event> {
            unsigned.pubkey = self.0.public_key();
            unsigned.id = None;
            Box::pin(async move {
                nostr::event::FinalizeEvent::finalize(unsigned, &self.0).map_err(|e| e.to_string())
            })
        }
        fn nip44_encrypt<'a>(&'a self, _: &'a PublicKey, _: &'a str) -> SignerFuture<'a, String> {
            Box::pin(async { Err("no".into()) })
        }
        fn nip44_decrypt<'a>(&'a self, _: &'a PublicKey, _: &'a str) -> SignerFuture<'a, String> {
            Box::pin(async { Err("no".into()) })
        }
    }

    #[tokio::test]
    async fn a_key_signs_and_its_events_verify() {
        let keys = Keys::generate();
        let signer = Signer::from_keys(keys.clone());
        let event = signer
            .sign_builder(EventBuilder::new(Kind::TextNote, "hi"))
            .await
            .unwrap();
        assert_eq!(event.pubkey, keys.public_key());
        event.verify().unwrap();
        let other = Keys::generate();
        let sealed = signer
            .nip44_encrypt(&other.public_key(), "x")
            .await
            .unwrap();
        let opened = Signer::from_keys(other)
            .nip44_decrypt(&keys.public_key(), &sealed)
            .await
            .unwrap();
        assert_eq!(opened, "x");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_signer_is_an_error_naming_it_within_its_timeout() {
        let backend = Arc::new(Silent(Keys::generate().public_key()));
        let signer = Signer::new(backend, "test signer", Duration::from_secs(3))
            .await
            .unwrap();
        // Paused time: the clock moves only as far as the timers ask, so this is exact.
        let start = tokio::time::Instant::now();
        let err = signer
            .sign_builder(EventBuilder::new(Kind::TextNote, "hi"))
            .await
            .unwrap_err();
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(3),
            "bounded by its timeout"
        );
        assert!(matches!(err, SignerError::TimedOut { .. }), "{err}");
        assert!(err.to_string().contains("test signer"), "{err}");
    }

    #[tokio::test]
    async fn an_event_signed_with_another_key_is_refused() {
        let claimed = Keys::generate().public_key();
        let backend = Arc::new(Impostor(Keys::generate(), claimed));
        let signer = Signer::new(backend, "impostor", Duration::from_secs(5))
            .await
            .unwrap();
        let err = signer
            .sign_builder(EventBuilder::new(Kind::TextNote, "hi"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("another key"), "{err}");
    }
}
