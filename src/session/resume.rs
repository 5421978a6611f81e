//! Session resume on the same node (docs/protocol.md "Session resume"): the registry of
//! resumable sessions, resume tokens, the parked session, and the takeover of a session by a
//! new socket.
//!
//! A registered session is always owned by exactly one task: the connection task while a socket
//! is attached, a *parked* task (this module's [`park`]) for `resume_window_seconds` after the
//! socket dropped. Either one listens for a [`Takeover`]: a new connection that presented the
//! session's resume token gets the whole [`Session`] moved to it (its in-flight requests keep
//! running, their frames kept by the session's outbox meanwhile), and the old socket, if still
//! open, is closed with [`close_code::RESUMED_ELSEWHERE`]. What a parked session is made of
//! besides running tasks (id, attributes, history, replay buffer, credential) sits in `Session`
//! and its outbox, so it can later be moved to another node as data.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use rand::TryRngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::Session;
use crate::auth::Principal;

/// Close code and reason for a socket whose session was resumed from another socket.
pub mod close_code {
    pub const RESUMED_ELSEWHERE: u16 = 4001;
    pub const RESUMED_ELSEWHERE_REASON: &str = "session resumed on another connection";
}

/// A new connection asking for the session: the session is sent back on `reply`.
pub(super) struct Takeover {
    pub reply: oneshot::Sender<Box<Session>>,
}

/// Where a takeover waits for the session's owner: one slot and a wake-up (a few dozen bytes
/// per session, where a channel would cost a kilobyte of every idle session's memory).
#[derive(Default)]
pub(super) struct Takeovers {
    slot: Mutex<Option<Takeover>>,
    wake: Notify,
}

impl Takeovers {
    /// Hands a takeover to the owner; gives it back when another one is already waiting.
    pub(super) fn offer(&self, t: Takeover) -> Result<(), Takeover> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(t);
        }
        *slot = Some(t);
        drop(slot);
        self.wake.notify_one();
        Ok(())
    }

    /// The next takeover (a wake-up stored by `offer` is not lost between the check and the wait).
    pub(super) async fn next(&self) -> Takeover {
        loop {
            if let Some(t) = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return t;
            }
            self.wake.notified().await;
        }
    }
}

struct Handle {
    token_hash: [u8; 32],
    principal: Principal,
    takeovers: Arc<Takeovers>,
}

/// Resumable sessions by id (those registered while `resume_window_seconds` > 0).
#[derive(Default)]
pub struct Resumable(Mutex<HashMap<String, Handle>>);

/// Why a resume was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// No such session here (never, ended, or its window ran out).
    Unknown,
    /// The session exists; the token is not its token.
    WrongToken,
}

impl Resumable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Handle>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session; returns its first resume token and where its takeovers arrive.
    /// The session removes itself ([`Resumable::remove`]) when it ends.
    pub(super) fn insert(&self, id: &str, principal: Principal) -> (String, Arc<Takeovers>) {
        let takeovers = Arc::new(Takeovers::default());
        let token = new_token();
        self.lock().insert(
            id.to_string(),
            Handle {
                token_hash: hash(&token),
                principal,
                takeovers: takeovers.clone(),
            },
        );
        (token, takeovers)
    }

    pub(super) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Checks a resume request: the session's credential and where to ask for it.
    pub(super) fn check(
        &self,
        id: &str,
        token: &str,
    ) -> Result<(Principal, Arc<Takeovers>), Refused> {
        let map = self.lock();
        let h = map.get(id).ok_or(Refused::Unknown)?;
        if bool::from(h.token_hash.ct_eq(&hash(token))) {
            Ok((h.principal.clone(), h.takeovers.clone()))
        } else {
            Err(Refused::WrongToken)
        }
    }

    /// A fresh token for a resumed session (the old one stops working).
    pub(super) fn rotate(&self, id: &str) -> Option<String> {
        let token = new_token();
        let mut map = self.lock();
        map.get_mut(id)?.token_hash = hash(&token);
        Some(token)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// 256 random bits from the OS, base64url.
fn new_token() -> String {
    let mut b = [0u8; 32];
    if rand::rngs::OsRng.try_fill_bytes(&mut b).is_err() {
        // The OS generator failing is fatal for every secret we make; rand's thread generator is
        // seeded from it and reseeds, and is what session ids use.
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut b);
    }
    format!(
        "rt_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    )
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Keeps a session whose socket dropped until its client resumes it, its window runs out, its
/// credential is revoked, or the server stops. Runs as a tracked task.
pub(super) async fn park(mut session: Box<Session>, window: Duration) {
    session.conn.outbox.detach();
    let app = session.conn.app.clone();
    let until = Instant::now() + window;
    tracing::info!(session = %session.id, window_s = window.as_secs(), "socket gone: session parked for resume");
    let outcome = loop {
        let token = session.token.clone();
        let Some(takeovers) = session.takeovers.clone() else {
            break "resume off";
        };
        tokio::select! {
            biased;
            _ = token.cancelled() => break "server stopped",
            _ = app.draining.cancelled() => break "server shutting down",
            _ = session.kick.kicked() => break "credential revoked",
            t = takeovers.next() => match t.reply.send(session) {
                Ok(()) => return,
                Err(back) => session = back, // the new connection gave up: park on
            },
            _ = tokio::time::sleep_until(until) => break "resume window over",
        }
    };
    tracing::info!(session = %session.id, why = outcome, "parked session ended");
}
