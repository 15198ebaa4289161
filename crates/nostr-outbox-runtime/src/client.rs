//! The client handle: what every relay conversation of one client shares.
//!
//! A [`Client`] owns the live resources — the sockets (one per relay, one budget for every
//! connection the client opens, relay documents included), the signer it signs in with, and
//! the cache of relay documents, what each relay was learned to speak
//! ([`Extensions`](crate::connection::extensions)) — beside the knobs ([`RuntimeConfig`], plain data). The feed
//! ([`start`](crate::start)), route feeds ([`start_route`](crate::start_route)), lookups
//! ([`lookup`](crate::lookup)), probes, monitors and publishing ([`publish`](crate::publish()))
//! all borrow it, so two of them running at once share one socket per relay and stay within
//! one budget. Clones share everything;
//! [`with_config`](Client::with_config) gives other knobs on the same sockets.

use std::sync::Arc;

use crate::config::RuntimeConfig;
use crate::connection::extensions::{decide, Extension, Extensions, Outcome, Verdict, Wait};
use crate::connection::nip11::Nip11Cache;
use crate::connection::sockets::{SocketBudget, Sockets};
use crate::signer::Signer;

/// One client's sockets, signer, relay documents and knobs (see the [module docs](self)).
#[derive(Clone)]
pub struct Client {
    config: Arc<RuntimeConfig>,
    shared: Arc<Shared>,
}

/// What clones of a client share whatever their knobs. The signer is the sockets' (they sign
/// the connections in).
struct Shared {
    sockets: Sockets,
    documents: Nip11Cache,
    extensions: Extensions,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A signer's `Debug` shows only its name and public key.
        f.debug_struct("Client")
            .field("config", &self.config)
            .field("sockets", &self.shared.sockets)
            .field("signer", &self.signer())
            .finish()
    }
}

impl Default for Client {
    fn default() -> Self {
        Self::new(RuntimeConfig::default())
    }
}

impl Client {
    /// A client with `config`'s knobs, the desktop socket budget and no signer.
    pub fn new(config: RuntimeConfig) -> Self {
        Self::with(config, SocketBudget::default(), None)
    }

    /// A client with `config`'s knobs, sockets under `budget`, signing in with `signer` where
    /// a relay asks (NIP-42). Only a relay that challenged and refused a request ever sees the
    /// signed AUTH event; without a signer such a relay is set aside as *needs sign-in*. A raw
    /// key is a signer too (`Some(keys.into())`).
    pub fn with(config: RuntimeConfig, budget: SocketBudget, signer: Option<Signer>) -> Self {
        Self {
            config: Arc::new(config),
            shared: Arc::new(Shared {
                sockets: Sockets::signing(budget, signer),
                documents: Nip11Cache::new(),
                extensions: Extensions::default(),
            }),
        }
    }

    /// The same sockets, signer and documents, with other knobs.
    pub fn with_config(&self, config: RuntimeConfig) -> Self {
        Self {
            config: Arc::new(config),
            shared: self.shared.clone(),
        }
    }

    /// The knobs.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The knobs, shared with tasks that outlive a borrow.
    pub(crate) fn config_arc(&self) -> Arc<RuntimeConfig> {
        self.config.clone()
    }

    /// The sockets every conversation of this client shares.
    pub fn sockets(&self) -> &Sockets {
        &self.shared.sockets
    }

    /// The identity it signs in with, if any.
    pub fn signer(&self) -> Option<&Signer> {
        self.shared.sockets.signer()
    }

    /// The relay documents (NIP-11) this client has read, kept for a while.
    pub fn documents(&self) -> &Nip11Cache {
        &self.shared.documents
    }

    /// What this client learned of the extensions each relay speaks (restore a store's with
    /// [`Extensions::restore`], keep it with [`Extensions::learned`]).
    pub fn extensions(&self) -> &Extensions {
        &self.shared.extensions
    }

    /// Whether to ask `relay` for `extension`, and how long to wait for its first answer.
    /// Reads the relay's document (cached, else fetched within its own timeout) only when
    /// what was learned does not settle it.
    pub async fn verdict(&self, relay: &str, extension: Extension) -> Verdict {
        let learned = self.extensions().known(relay, extension);
        if learned.is_some_and(|s| s.outcome == Outcome::Answered) {
            return Verdict::Ask(Wait::Full);
        }
        let cfg = &self.config().limits.nip11;
        let nips = self
            .documents()
            .supported_nips(relay, cfg, self.sockets())
            .await;
        decide(extension, learned, nips.as_deref())
    }
}
