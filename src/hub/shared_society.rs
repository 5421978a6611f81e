//! The agent societies across processes (`[hub] backend = "nats"`): every process keeps its
//! societies in memory (and its own changes in its SQLite file, as the embedded hub does) and
//! shares them through the JetStream KV bucket `<PREFIX>_SOCIETY` (keys in [`nats::society_key`]).
//!
//! - **Writing**: a change made here is stored locally, then shared ([`Nats::share_society`]):
//!   an agent record is merged into the shared one with compare-and-set; a registry entry is
//!   created only if absent, so the first entry recorded on any process holds (keep first, as
//!   within one process) and a process that lost the race takes the winner in place.
//! - **Reading**: one watch per process delivers the bucket's contents at start (a process that
//!   joins later, or restarts, learns every society) and each change after; applying one is
//!   idempotent. An entry whose owner is not known yet waits for the owner's record.
//! - **Joining**: at start a process shares what it stored and the bucket lacks (nothing present
//!   is changed), so an embedded hub that becomes one process of several keeps its societies.
//! - **Outages**: a change that cannot be shared is held, in order, and shared when NATS is back
//!   (the local store has it meanwhile; other processes see it then).
//!
//! Limits: two processes spawning the same agent id at the same moment both succeed locally
//! (the shared record is then the merge of both); a registry entry replaced by the winner here
//! keeps the loser's row in this process's SQLite file, which the watch overrides at every start.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::nats::{self, Nats};
use super::society::{Change, ContactEntry};
use super::{Address, Hub};

/// Changes held while NATS is unreachable; past this the oldest are dropped from the queue
/// (they stay stored here and are shared at this process's next start).
const SOCIETY_HELD_MAX: usize = 100_000;

/// Registry entries whose owner's record has not arrived yet, by (env, owner).
type Waiting = HashMap<(String, String), Vec<ContactEntry>>;

impl Hub {
    /// Shares changes just stored here; what cannot be shared now is held (see the module docs).
    pub(super) async fn share_society(&self, env: &str, changes: Vec<Change>) {
        let held_before = !self.lock_society_held().is_empty();
        let n = match self.nats.get() {
            Some(n) if n.connected() && !held_before => n.clone(),
            _ => return self.hold_society(env, changes),
        };
        for (i, c) in changes.iter().enumerate() {
            match n.share_society(env, c, false).await {
                Ok(Some(first)) => self.settle_shared_contact(env, c, first),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, %env, "hub: a society change could not be shared; held until NATS answers");
                    return self.hold_society(env, changes[i..].to_vec());
                }
            }
        }
    }

    fn lock_society_held(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(String, Change)>> {
        self.society_held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hold_society(&self, env: &str, changes: Vec<Change>) {
        let mut held = self.lock_society_held();
        held.extend(changes.into_iter().map(|c| (env.to_string(), c)));
        let over = held.len().saturating_sub(SOCIETY_HELD_MAX);
        if over > 0 {
            held.drain(..over);
            tracing::warn!(
                dropped = over,
                "hub: too many society changes held during a NATS outage; the oldest are shared at the next start"
            );
        }
    }

    /// Shares the held changes in order; stops at the first failure (kept for the next try).
    async fn share_held_society(&self, n: &Nats) {
        loop {
            let Some((env, c)) = self.lock_society_held().pop_front() else {
                return;
            };
            match n.share_society(&env, &c, false).await {
                Ok(Some(first)) => self.settle_shared_contact(&env, &c, first),
                Ok(None) => {}
                Err(_) => {
                    self.lock_society_held().push_front((env, c));
                    return;
                }
            }
        }
    }

    fn settle_shared_contact(&self, env: &str, c: &Change, first: ContactEntry) {
        if let Change::Contact { owner, .. } = c {
            let mut socs = self.societies.lock().unwrap_or_else(|p| p.into_inner());
            socs.entry(env.to_string())
                .or_default()
                .settle_contact(owner, first);
        }
    }

    /// Applies one shared change to this process's societies (idempotent).
    fn absorb_society(&self, env: &str, change: Change, waiting: &mut Waiting) {
        let agent = {
            let mut socs = self.societies.lock().unwrap_or_else(|p| p.into_inner());
            let soc = socs.entry(env.to_string()).or_default();
            match change {
                Change::Agent(a) => {
                    let id = a.id.clone();
                    soc.restore(vec![a], Vec::new());
                    for e in waiting
                        .remove(&(env.to_string(), id.clone()))
                        .unwrap_or_default()
                    {
                        soc.settle_contact(&id, e);
                    }
                    Some(id)
                }
                Change::Contact { owner, entry } => {
                    if !soc.settle_contact(&owner, entry.clone()) {
                        waiting
                            .entry((env.to_string(), owner))
                            .or_default()
                            .push(entry);
                    }
                    None
                }
            }
        };
        if let Some(id) = agent {
            // A spawned agent is known (messages to it wait in its inbox) on every process.
            self.state()
                .known
                .entry(Address::agent(env, &id).key)
                .or_insert(None);
        }
    }

    /// Starts sharing the societies once the NATS backend is set up (see the module docs):
    /// publishes what this process stored, and watches the bucket until `stop`.
    pub(super) fn start_shared_society(self: &Arc<Self>, n: Arc<Nats>, stop: CancellationToken) {
        let stored: Vec<(String, Change)> = {
            let socs = self.societies.lock().unwrap_or_else(|p| p.into_inner());
            socs.iter()
                .flat_map(|(env, soc)| {
                    let (agents, contacts) = soc.snapshot();
                    let agents = agents.into_iter().map(Change::Agent);
                    let contacts = contacts
                        .into_iter()
                        .map(|(owner, entry)| Change::Contact { owner, entry });
                    agents
                        .chain(contacts)
                        .map(|c| (env.clone(), c))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let (n1, stop1) = (n.clone(), stop.clone());
        tokio::spawn(async move {
            for (env, c) in stored {
                // Retried until it is shared: the bucket must end up with what was stored here.
                loop {
                    let r = tokio::select! {
                        _ = stop1.cancelled() => return,
                        r = n1.share_society(&env, &c, true) => r,
                    };
                    match r {
                        Ok(_) => break,
                        Err(e) => {
                            tracing::debug!(error = %e, "hub: sharing a stored society change failed; retrying");
                            tokio::select! {
                                _ = stop1.cancelled() => return,
                                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                            }
                        }
                    }
                }
            }
        });
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut waiting = Waiting::new();
            let mut retry = tokio::time::interval(Duration::from_millis(500));
            retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let watch = tokio::select! {
                    _ = stop.cancelled() => return,
                    w = n.watch_society() => w,
                };
                match watch {
                    Ok(mut watch) => loop {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = retry.tick() => {
                                let Some(hub) = weak.upgrade() else { return };
                                if n.connected() {
                                    hub.share_held_society(&n).await;
                                }
                            }
                            e = watch.next() => match e {
                                Some(Ok(e)) if e.operation == kv::Operation::Put => {
                                    let Some(hub) = weak.upgrade() else { return };
                                    match nats::society_change(&e.key, &e.value) {
                                        Some((env, c)) => hub.absorb_society(&env, c, &mut waiting),
                                        None => tracing::debug!(key = %e.key, "hub: unreadable society entry skipped"),
                                    }
                                }
                                Some(Ok(_)) => {}
                                Some(Err(e)) => {
                                    tracing::warn!(error = %e, "hub: the society watch failed; watching again");
                                    break;
                                }
                                None => break,
                            },
                        }
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "hub: cannot watch the shared societies; retrying")
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }
}
