//! NIP-42 sign-in on the open socket.
//!
//! The slot remembers the relay's latest `["AUTH", challenge]` and answers it only when a REQ is
//! refused with `auth-required:` and the client has a signer ([`Client::signer`](crate::Client::signer)): a relay that serves
//! anonymous readers never learns who reads. It then signs a kind:22242 event (tags `relay`, this
//! slot's URL, and `challenge`), sends it to this relay alone, holds every page until the relay's
//! `OK` for it (within the EOSE timeout) and sends the refused pages again, once. A relay that
//! refuses the sign-in, sends no challenge or no `OK` in time, or refuses a page sent after it
//! accepted the sign-in is set aside as before, the reason saying which. The challenge may come
//! before the refusal (at connect) or after it. State is per connection: a new socket signs in
//! anew when asked.

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::Keys;

use super::*;

/// The longest challenge answered. Real challenges are a few dozen characters; a longer one is
/// ignored rather than signed and echoed back.
pub(crate) const MAX_CHALLENGE_BYTES: usize = 1024;

/// Where sign-in stands on the current connection.
#[derive(Default)]
pub(super) struct SignIn {
    /// The relay's latest challenge on this connection.
    challenge: Option<String>,
    state: State,
    /// Purposes whose refused pages wait for the sign-in, with the first refusal's message.
    waiting: BTreeMap<SubKind, String>,
}

#[derive(Default)]
enum State {
    /// Not asked to sign in on this connection.
    #[default]
    Anonymous,
    /// Refused for want of sign-in before any challenge came: waiting for one.
    AwaitingChallenge { deadline: Instant },
    /// AUTH sent: waiting for the relay's `OK` for it.
    Pending { event: EventId, deadline: Instant },
    /// The relay accepted the AUTH event.
    SignedIn,
    /// Sign-in failed on this connection, and why.
    Failed(String),
}

impl SignIn {
    /// The relay accepted our AUTH on this connection.
    pub(super) fn is_signed_in(&self) -> bool {
        matches!(self.state, State::SignedIn)
    }

    /// A sign-in is under way: pages wait (the relay would refuse them).
    pub(super) fn holds_pages(&self) -> bool {
        matches!(
            self.state,
            State::AwaitingChallenge { .. } | State::Pending { .. }
        )
    }

    /// When the sign-in under way gives up.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::AwaitingChallenge { deadline } | State::Pending { deadline, .. } => {
                Some(deadline)
            }
            _ => None,
        }
    }

    /// A purpose no longer asked (closed by the coordinator) waits for nothing.
    pub(super) fn forget(&mut self, kind: SubKind) {
        self.waiting.remove(&kind);
    }
}

/// The signed kind:22242 event answering `challenge` on `relay`: its `relay` tag names exactly
/// the relay that challenged.
pub(crate) fn auth_event(keys: &Keys, relay: &str, challenge: &str) -> Result<Event, String> {
    let tags = [["relay", relay], ["challenge", challenge]]
        .into_iter()
        .map(|t| Tag::parse(t).map_err(|e| format!("cannot build the AUTH tags: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    EventBuilder::new(Kind::Authentication, "")
        .tags(tags)
        .finalize(keys)
        .map_err(|e| format!("cannot sign the AUTH event: {e}"))
}

impl Slot {
    /// A fresh socket: no challenge, not signed in, nothing waiting.
    pub(super) fn reset_sign_in(&mut self) {
        self.sign_in = SignIn::default();
    }

    /// An `["AUTH", challenge]` frame: remembered for a later refusal, or answered at once if a
    /// refusal is waiting for it.
    pub(super) async fn on_challenge(
        &mut self,
        ws: &mut Socket,
        challenge: &str,
    ) -> Result<(), Failure> {
        if challenge.len() > MAX_CHALLENGE_BYTES || challenge.is_empty() {
            debug!(
                bytes = challenge.len(),
                "AUTH challenge ignored (empty or too long)"
            );
            return Ok(());
        }
        trace!("AUTH challenge");
        self.sign_in.challenge = Some(challenge.to_string());
        if matches!(self.sign_in.state, State::AwaitingChallenge { .. }) {
            return self.send_auth(ws).await;
        }
        Ok(())
    }

    /// Page `open` was refused with `auth-required:` and keys are configured: it waits for a
    /// sign-in (started here if none is under way) and is sent again after. `Some(reason)`
    /// when it cannot be: the page is refused for good.
    pub(super) async fn auth_required(
        &mut self,
        ws: &mut Socket,
        open: &OpenSub,
        message: &str,
    ) -> Result<Option<String>, Failure> {
        if open.signed_in {
            return Ok(Some(format!("{message} (still refused after signing in)")));
        }
        if let State::Failed(why) = &self.sign_in.state {
            return Ok(Some(format!("{message} ({why})")));
        }
        let Some(purpose) = self.purposes.get_mut(&open.kind) else {
            return Ok(None);
        };
        if let Some(chunk) = purpose.chunks.get_mut(open.chunk) {
            if chunk.state == ChunkState::Asking {
                chunk.state = ChunkState::Ready;
            }
        }
        self.sign_in
            .waiting
            .entry(open.kind)
            .or_insert_with(|| message.to_string());
        match self.sign_in.state {
            // The OK came while this page was in flight: ask again now.
            State::SignedIn => self.resume(ws).await?,
            State::Anonymous => self.send_auth(ws).await?,
            State::AwaitingChallenge { .. } | State::Pending { .. } | State::Failed(_) => {}
        }
        Ok(None)
    }

    /// Signs the latest challenge and sends it to this relay; without a challenge yet, waits
    /// for one (within the EOSE timeout).
    async fn send_auth(&mut self, ws: &mut Socket) -> Result<(), Failure> {
        let deadline = crate::deadline::after(self.cfg.eose_timeout);
        let Some(keys) = self.client.signer() else {
            self.sign_in.state = State::Failed("no keys to sign in with".into());
            return Ok(());
        };
        let Some(challenge) = &self.sign_in.challenge else {
            debug!("auth required; waiting for the relay's challenge");
            self.sign_in.state = State::AwaitingChallenge { deadline };
            return Ok(());
        };
        let event = match auth_event(keys, &self.url, challenge) {
            Ok(event) => event,
            Err(why) => {
                self.sign_in.state = State::Failed(why);
                return Ok(());
            }
        };
        info!(pubkey = %keys.public_key(), "signing in (NIP-42)");
        self.sign_in.state = State::Pending {
            event: event.id,
            deadline,
        };
        let json = ClientMessage::auth(event).as_json();
        ws.send(Message::text(json))
            .await
            .map_err(|e| Failure::Lost(e.to_string()))
    }

    /// An `OK` frame: the answer to our AUTH event, if it names it (we publish nothing else).
    pub(super) async fn on_ok(
        &mut self,
        ws: &mut Socket,
        event_id: EventId,
        accepted: bool,
        message: &str,
    ) -> Handled {
        let State::Pending { event, .. } = self.sign_in.state else {
            trace!("OK for nothing we sent");
            return Handled::Ok;
        };
        if event != event_id {
            trace!("OK for another event");
            return Handled::Ok;
        }
        if !accepted {
            let why = format!("sign-in refused: {}", truncate(message));
            info!(reason = %truncate(message), "sign-in refused");
            return self.give_up(ws, why).await;
        }
        info!("signed in");
        self.sign_in.state = State::SignedIn;
        if !self.report(ReportKind::Authenticated).await {
            return Handled::End(Ended::Shutdown);
        }
        match self.resume(ws).await {
            Ok(()) => Handled::Ok,
            Err(f) => Handled::End(Ended::Failed(f)),
        }
    }

    /// The sign-in under way ran out of time.
    pub(super) async fn sign_in_expired(&mut self, ws: &mut Socket) -> Handled {
        let why = match self.sign_in.state {
            State::AwaitingChallenge { .. } => "no AUTH challenge came in time",
            State::Pending { .. } => "no OK for the AUTH event in time",
            _ => return Handled::Ok,
        };
        self.give_up(ws, why.to_string()).await
    }

    /// Sign-in failed: every waiting purpose is refused with its refusal and `why`; pages held
    /// meanwhile go out anonymously (a relay that refuses them too refuses them for good).
    async fn give_up(&mut self, ws: &mut Socket, why: String) -> Handled {
        let waiting = std::mem::take(&mut self.sign_in.waiting);
        self.sign_in.state = State::Failed(why.clone());
        for (kind, message) in waiting {
            match self.refuse(ws, kind, format!("{message} ({why})")).await {
                Handled::Ok | Handled::Bad => {}
                ended => return ended,
            }
        }
        for kind in [SubKind::Feed, SubKind::Lists] {
            if let Err(f) = self.pump(ws, kind).await {
                return Handled::End(Ended::Failed(f));
            }
        }
        Handled::Ok
    }

    /// Signed in: the waiting pages (and any held meanwhile) are sent.
    async fn resume(&mut self, ws: &mut Socket) -> Result<(), Failure> {
        self.sign_in.waiting.clear();
        for kind in [SubKind::Feed, SubKind::Lists] {
            self.pump(ws, kind).await?;
        }
        Ok(())
    }
}
