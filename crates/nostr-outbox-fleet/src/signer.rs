//! A NIP-46 remote signer on a local relay (rust-nostr's `nostr-connect`, a second
//! implementation of the protocol): it holds the user's key, so a test's client side knows
//! only the `bunker://` URL.

use std::time::Duration;

use nostr::key::Keys;
use nostr::nips::nip46::NostrConnectRequest;
use nostr_connect::prelude::{
    NostrConnectKeys, NostrConnectRemoteSigner, NostrConnectSignerActions, PublicKey,
};

use crate::relay::RealRelay;

/// Approves every request: the tests' person always says yes.
struct Approve;

impl NostrConnectSignerActions for Approve {
    fn approve(&self, _: &PublicKey, _: &NostrConnectRequest) -> bool {
        true
    }
}

/// A remote signer serving on a relay until dropped.
pub struct RemoteSigner {
    /// Its `bunker://` URL, with a secret.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RemoteSigner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RemoteSigner {
    /// Starts a signer for `user` on `relay` and waits until it listens there (the relay saw
    /// its subscription), so no request sent after this returns goes unheard.
    pub async fn start(user: Keys, relay: &RealRelay) -> Self {
        let secret = Some("fleet-secret".to_string());
        Self::start_as(Keys::generate(), user, relay, secret).await
    }

    /// As [`start`](Self::start), the signer's own key `signer` (its URL then stays the same
    /// from run to run) and the connection secret `secret`.
    pub async fn start_as(
        signer: Keys,
        user: Keys,
        relay: &RealRelay,
        secret: Option<String>,
    ) -> Self {
        let before = subscriptions(relay);
        let keys = NostrConnectKeys::new(signer, user);
        let signer = NostrConnectRemoteSigner::new(keys, [relay.url.as_str()], secret, None)
            .expect("a local relay URL");
        let url = signer.bunker_uri().to_string();
        let task = tokio::spawn(async move {
            if let Err(e) = signer.serve(Approve).await {
                eprintln!("the remote signer stopped: {e}");
            }
        });
        let waited =
            crate::feed::wait_until(Duration::from_secs(30), || subscriptions(relay) > before)
                .await;
        assert!(
            waited,
            "the remote signer never subscribed on {}",
            relay.url
        );
        Self { url, task }
    }
}

/// A `bunker://` URL on `relay` for a signer nobody runs: every request goes unanswered.
pub fn silent_bunker(relay: &RealRelay) -> String {
    let nobody = Keys::generate().public_key().to_hex();
    format!("bunker://{nobody}?relay={}", relay.url)
}

/// Subscriptions to NIP-46 messages (kind 24133) the relay has seen.
fn subscriptions(relay: &RealRelay) -> usize {
    relay
        .counter
        .reqs()
        .iter()
        .filter(|r| r.kinds.contains(&24133))
        .count()
}
