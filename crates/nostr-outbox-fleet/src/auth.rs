//! A relay that asks for NIP-42 sign-in in one of several ways, for what nostr-relay-builder's
//! relay does not do on demand (challenge late, never challenge, reject or ignore a sign-in).

use std::sync::{Arc, Mutex};

use futures_util::SinkExt;
use nostr::event::Event;
use nostr::filter::{Filter, MatchEventOptions};
use tokio_tungstenite::tungstenite::Message;

use crate::task::Task;
use crate::wire::next_json;

/// How a scripted relay asks for sign-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthScript {
    /// Challenges at connect but serves everyone.
    ChallengeOnly,
    /// Challenges at connect, refuses REQs with `auth-required:` until signed in.
    ChallengeFirst,
    /// Refuses REQs with `auth-required:`, and only then challenges.
    ChallengeAfterRefusal,
    /// Refuses REQs with `auth-required:` and never challenges.
    NoChallenge,
    /// Challenges at connect, refuses REQs, and answers every AUTH with OK false.
    RejectsAuth,
    /// Challenges at connect, accepts AUTH, and refuses REQs all the same.
    RefusesAfterAuth,
}

/// What a scripted relay saw.
#[derive(Default, Debug)]
pub struct AuthSeen {
    /// Every AUTH event received, with the challenge it was sent on that connection.
    pub auths: Vec<(Event, String)>,
    /// REQs received, signed in or not.
    pub reqs: usize,
    /// REQs received after the connection signed in.
    pub reqs_signed_in: usize,
}

/// A WebSocket relay on 127.0.0.1 following an [`AuthScript`], serving `events`.
pub struct AuthRelay {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    // Test-only shared log; the lock is taken briefly and never across an await.
    seen: Arc<Mutex<AuthSeen>>,
    _task: Task,
}

impl AuthRelay {
    /// A relay following `script` serving `events`; stops when dropped.
    pub async fn start(script: AuthScript, events: Vec<Event>) -> Self {
        let (listener, url) = crate::task::listen_locally().await;
        let seen = Arc::new(Mutex::new(AuthSeen::default()));
        let log = seen.clone();
        let _task = Task::spawn(async move {
            let mut connection = 0u32;
            while let Ok((stream, _)) = listener.accept().await {
                connection += 1;
                let challenge = format!("challenge-{connection}");
                let (events, log) = (events.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    let auth_frame = format!(r#"["AUTH","{challenge}"]"#);
                    let at_connect = !matches!(
                        script,
                        AuthScript::ChallengeAfterRefusal | AuthScript::NoChallenge
                    );
                    if at_connect && ws.send(Message::text(auth_frame.clone())).await.is_err() {
                        return;
                    }
                    let mut signed_in = false;
                    while let Some((_, value)) = next_json(&mut ws).await {
                        let mut replies = Vec::new();
                        match value[0].as_str() {
                            Some("REQ") => {
                                let sub = value[1].as_str().unwrap_or_default().to_string();
                                {
                                    let mut seen = log.lock().unwrap();
                                    seen.reqs += 1;
                                    seen.reqs_signed_in += usize::from(signed_in);
                                }
                                let serves = match script {
                                    AuthScript::ChallengeOnly => true,
                                    AuthScript::RefusesAfterAuth => false,
                                    _ => signed_in,
                                };
                                if serves {
                                    let filter = Filter::from_json(value[2].to_string()).unwrap();
                                    for e in &events {
                                        if filter.match_event(e, MatchEventOptions::new()) {
                                            replies.push(format!(
                                                r#"["EVENT","{sub}",{}]"#,
                                                e.as_json()
                                            ));
                                        }
                                    }
                                    replies.push(format!(r#"["EOSE","{sub}"]"#));
                                } else {
                                    replies.push(format!(
                                        r#"["CLOSED","{sub}","auth-required: sign in first"]"#
                                    ));
                                    if script == AuthScript::ChallengeAfterRefusal {
                                        replies.push(auth_frame.clone());
                                    }
                                }
                            }
                            Some("AUTH") => {
                                let event: Event =
                                    serde_json::from_value(value[1].clone()).unwrap();
                                let id = event.id;
                                log.lock().unwrap().auths.push((event, challenge.clone()));
                                if script == AuthScript::RejectsAuth {
                                    replies.push(format!(
                                        r#"["OK","{id}",false,"restricted: not on the list"]"#
                                    ));
                                } else {
                                    signed_in = true;
                                    replies.push(format!(r#"["OK","{id}",true,""]"#));
                                }
                            }
                            _ => {}
                        }
                        for r in replies {
                            if ws.send(Message::text(r)).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        Self { url, seen, _task }
    }

    /// What it saw so far; hold the guard briefly.
    pub fn seen(&self) -> std::sync::MutexGuard<'_, AuthSeen> {
        self.seen.lock().unwrap()
    }
}
