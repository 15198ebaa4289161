//! NIP-42 sign-in for the slot's pages.
//!
//! Signing in is the socket's ([`Link::sign_in`](crate::sockets::Link::sign_in)): it keeps the
//! relay's challenge and signs it once for every link on the connection, and only when a link
//! asks — so a relay that serves anonymous readers never learns who reads. The slot asks when
//! a page is refused with `auth-required:` and the client has a signer
//! ([`Client::signer`](crate::Client::signer)); it then holds every page until the answer and
//! sends the refused pages again, once. A failed sign-in (refused, no challenge or no `OK` in
//! time), or a page refused again after it, sets the purpose aside as before, the reason saying
//! which. State is per connection: a new socket signs in anew when asked.

use super::*;
use crate::exchange::Step;

/// Where sign-in stands on the current connection, for this slot: the one sign-in answer
/// (`crate::exchange::SignIn`) for all its pages, and the purposes waiting on it.
pub(super) struct SignIn {
    answer: crate::exchange::SignIn,
    /// Purposes whose refused pages wait for the sign-in, with the first refusal's message.
    waiting: BTreeMap<SubKind, String>,
}

impl SignIn {
    /// A fresh connection of a client with (`signer`) or without a signer.
    pub(super) fn new(signer: bool) -> Self {
        Self {
            answer: crate::exchange::SignIn::new(signer),
            waiting: BTreeMap::new(),
        }
    }

    /// The relay accepted the sign-in on this connection.
    pub(super) fn is_signed_in(&self) -> bool {
        self.answer.is_signed_in()
    }

    /// A sign-in is under way: pages wait (the relay would refuse them).
    pub(super) fn holds_pages(&self) -> bool {
        self.answer.waiting()
    }

    /// A purpose no longer asked (closed by the coordinator) waits for nothing.
    pub(super) fn forget(&mut self, kind: SubKind) {
        self.waiting.remove(&kind);
    }
}

impl Slot {
    /// A fresh socket: not signed in, nothing waiting.
    pub(super) fn reset_sign_in(&mut self) {
        self.sign_in = SignIn::new(self.client.signer().is_some());
    }

    /// Page `open` was refused with `auth-required:` and the client has a signer: it waits for
    /// the socket's sign-in (asked here if nobody asked yet) and is sent again after.
    /// `Some(reason)` when it cannot be: the page is refused for good.
    pub(super) async fn auth_required(
        &mut self,
        ws: &mut Socket,
        open: &OpenSub,
        message: &str,
    ) -> Result<Option<String>, Failure> {
        let Some(purpose) = self.purposes.get_mut(&open.kind) else {
            return Ok(None);
        };
        let step = self.sign_in.answer.refused(message, open.signed_in);
        if let Step::GiveUp(why) = step {
            return Ok(Some(why));
        }
        if let Some(chunk) = purpose.chunks.get_mut(open.chunk) {
            if chunk.state == ChunkState::Asking {
                chunk.state = ChunkState::Ready;
            }
        }
        self.sign_in
            .waiting
            .entry(open.kind)
            .or_insert_with(|| message.to_string());
        match step {
            // The answer came while this page was in flight: ask again now.
            Step::Retry => self.resume(ws).await?,
            Step::Ask => {
                debug!("auth required; asking the socket to sign in");
                ws.sign_in().map_err(|e| Failure::Lost(e.to_string()))?;
            }
            Step::Wait | Step::GiveUp(_) => {}
        }
        Ok(None)
    }

    /// The socket's answer to the sign-in this slot asked for.
    pub(super) async fn signed_in(
        &mut self,
        ws: &mut Socket,
        result: Result<(), String>,
    ) -> Handled {
        match self.sign_in.answer.answered(result) {
            Step::Retry => {
                if !self.report(ReportKind::Authenticated).await {
                    return Handled::End(Ended::Shutdown);
                }
                match self.resume(ws).await {
                    Ok(()) => Handled::Ok,
                    Err(f) => Handled::End(Ended::Failed(f)),
                }
            }
            Step::GiveUp(_) => {
                let why = self
                    .sign_in
                    .answer
                    .failure()
                    .unwrap_or_default()
                    .to_string();
                self.give_up(ws, why).await
            }
            Step::Wait | Step::Ask => Handled::Ok,
        }
    }

    /// Sign-in failed: every waiting purpose is refused with its refusal and `why`; pages held
    /// meanwhile go out anonymously (a relay that refuses them too refuses them for good).
    async fn give_up(&mut self, ws: &mut Socket, why: String) -> Handled {
        let waiting = std::mem::take(&mut self.sign_in.waiting);
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
