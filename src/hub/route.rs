//! Routing one client frame: decode, check the sender, resolve the recipient against the
//! sender's own address (scope), apply the tier policy and request/response correlation, build
//! the delivery body once, and hand it to local mailboxes or the recipient's stored inbox.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::envelope::{
    self, ClawCode, HubError, Inbound, Kind, OutMessage, OutPeer, PeerType, Tier,
};
use super::mailbox::{Entry, PushError};
use super::nats::{Corr, Remote, SharedTake};
use super::{Address, Backend, Conn, Hub, Pending, group_key, hub_timestamp, services, society};
use crate::util::{now_ms, random_id};

/// Where a message goes, once its recipient is resolved against the sender.
enum Dest {
    Hub,
    One(Address),
    Group(Option<Arc<str>>, PeerType),
}

/// A pending request a response just answered: (requester, request id) and its entry.
pub(super) type Answered = ((Arc<str>, String), Pending);

/// The pending requests of this process, by (requester, request id).
pub(super) type PendingMap = std::collections::HashMap<(Arc<str>, String), Pending>;

/// Why a response matched no pending request.
#[derive(Debug, PartialEq)]
pub(super) enum Miss {
    /// None registered here.
    Unknown,
    /// Registered, but for another responder.
    NotYours,
    /// Registered, and timed out (the entry is removed).
    Expired,
}

/// Takes the pending request `k` answered by `responder`, the one rule for local and
/// cross-process responses: it exists, has not timed out, and was addressed to `responder`
/// (or to a group: anyone). Taken once.
pub(super) fn take_pending(
    p: &mut PendingMap,
    k: (Arc<str>, String),
    responder: &str,
    now: i64,
) -> Result<Answered, Miss> {
    match p.get(&k) {
        None => Err(Miss::Unknown),
        Some(pend) if pend.expires_at <= now => {
            p.remove(&k);
            Err(Miss::Expired)
        }
        Some(pend) if pend.responder.as_deref().is_some_and(|r| r != responder) => {
            Err(Miss::NotYours)
        }
        Some(_) => Ok(p.remove_entry(&k).expect("present")),
    }
}

/// What correlation decided for one message.
#[derive(Default)]
struct Correlated {
    /// The pending request a response answered (put back if the response is not delivered).
    answered: Option<Answered>,
    /// What the recipient's process needs to know, if the message crosses processes.
    corr: Option<Corr>,
}

impl Hub {
    /// Handles one text frame from `conn`. Every error it causes carries a real traceId: the
    /// sender's when it gave a valid one (even in a frame refused for another member), else a
    /// new one.
    pub async fn handle_text(&self, conn: &Arc<Conn>, text: &str) {
        self.metrics.received.fetch_add(1, Ordering::Relaxed);
        if text.len() > self.config.max_message_bytes {
            let err = HubError::validation(
                format!(
                    "message of {} bytes is over the limit of {}",
                    text.len(),
                    self.config.max_message_bytes
                ),
                "send large content by reference, or split it into stream messages",
            );
            let (id, trace) = envelope::loose_ids(text);
            conn.send_error(self, id.as_deref(), &trace_or_new(trace), &err);
            return;
        }
        match envelope::decode(text, self.config.max_ttl_seconds) {
            Err(e) => conn.send_error(
                self,
                e.original_id.as_deref(),
                &trace_or_new(e.trace_id.map(String::from)),
                &e.error,
            ),
            Ok(envelope::Frame::Heartbeat) => {}
            Ok(envelope::Frame::Message(m)) => {
                let trace = trace_or_new(m.trace_id.as_deref().map(str::to_owned));
                if let Err(err) = self.route(conn, &m, &trace).await {
                    conn.send_error(self, m.id.as_deref(), &trace, &err);
                }
            }
        }
    }

    /// Resolves the recipient of `m` against the sender `from`.
    fn resolve(&self, from: &Address, m: &Inbound<'_>) -> Result<Dest, HubError> {
        let t = &m.recipient;
        let own_env = from.env.clone();
        let env_of = |explicit: &Option<std::borrow::Cow<'_, str>>| -> Result<Arc<str>, HubError> {
            match (explicit, &own_env) {
                (Some(e), _) => Ok(Arc::from(&**e)),
                (None, Some(e)) => Ok(e.clone()),
                (None, None) => Err(HubError::validation(
                    "recipient.env is required: a human belongs to no environment",
                    "add recipient.env (the environment id)",
                )),
            }
        };
        let dest = match t.ty {
            PeerType::Hub => return Ok(Dest::Hub),
            PeerType::Human if t.is_broadcast() => Dest::Group(None, PeerType::Human),
            PeerType::Human => Dest::One(Address::human(&t.id)),
            PeerType::Agent => {
                let env = env_of(&t.env)?;
                if t.is_broadcast() {
                    Dest::Group(Some(env), PeerType::Agent)
                } else {
                    Dest::One(Address::agent(&env, &t.id))
                }
            }
            PeerType::Environment => {
                if t.is_broadcast() {
                    Dest::Group(Some(env_of(&t.env)?), PeerType::Environment)
                } else {
                    if let Some(e) = &t.env
                        && **e != *t.id
                    {
                        return Err(HubError::validation(
                            format!("an environment's id is its env: {:?} is not {:?}", t.id, e),
                            "omit recipient.env for environments",
                        ));
                    }
                    Dest::One(Address::environment(&t.id))
                }
            }
        };
        // Scope: agents and environments speak inside their own environment.
        if let Some(own) = &from.env {
            let target_env = match &dest {
                Dest::One(a) => a.env.clone(),
                Dest::Group(e, _) => e.clone(),
                Dest::Hub => None,
            };
            if let Some(te) = target_env
                && te != *own
            {
                return Err(HubError::denied(
                    format!("a client of environment {own:?} cannot address environment {te:?}"),
                    "agents and environments speak inside their own environment; ask a human or the environment to relay",
                ));
            }
        }
        Ok(dest)
    }

    async fn route(&self, conn: &Arc<Conn>, m: &Inbound<'_>, trace: &str) -> Result<(), HubError> {
        let me = &conn.address;
        if let Some(s) = &m.sender {
            let forged = s.id.as_deref().is_some_and(|i| i != &*me.id)
                || s.ty.as_deref().is_some_and(|t| t != me.ty.as_str())
                || s.env
                    .as_deref()
                    .is_some_and(|e| Some(e) != me.env.as_deref())
                || s.tier
                    .as_deref()
                    .is_some_and(|t| Some(t) != conn.opts.tier.map(Tier::as_str));
            if forged {
                return Err(HubError::denied(
                    format!(
                        "sender does not match this connection (you are {} {:?})",
                        me.ty.as_str(),
                        &*me.id
                    ),
                    "omit sender (the hub fills it) or give this connection's own identity",
                ));
            }
        }
        let dest = self.resolve(me, m)?;
        let id: String =
            m.id.as_deref()
                .map(str::to_owned)
                .unwrap_or_else(|| random_id("msg_"));
        let target_key = match &dest {
            Dest::Hub => return services::handle(self, conn, m, &id, trace).await,
            Dest::One(a) => Some(a.key.clone()),
            Dest::Group(..) => None,
        };
        if let Dest::One(a) = &dest {
            if a.key == me.key {
                return Err(HubError::validation(
                    "a client cannot send a message to itself",
                    "address another client",
                ));
            }
            self.check_tier(conn, a).await?;
        }
        let Correlated { answered, corr } =
            self.correlate(conn, m, &id, target_key.as_ref()).await?;
        let mut answered = answered;
        let ts_owned;
        let timestamp = match m.timestamp {
            Some(t) => t,
            None => {
                ts_owned = hub_timestamp();
                &ts_owned
            }
        };
        let recipient_peer = OutPeer {
            id: &m.recipient.id,
            ty: m.recipient.ty.as_str(),
            env: match &dest {
                Dest::One(a) => a.env.as_deref(),
                Dest::Group(e, _) => e.as_deref(),
                Dest::Hub => None,
            },
            tier: None,
        };
        let out = OutMessage {
            priority: m.priority.as_str(),
            ttl: m.ttl,
            kind: m.kind.map(Kind::as_str),
            request_id: m.request_id.as_deref(),
            metadata: m.metadata,
            ..OutMessage::new(
                "message",
                &id,
                me.peer(conn.opts.tier),
                recipient_peer,
                timestamp,
                trace,
                m.payload,
            )
        };
        let body: Arc<str> = envelope::body(&out).into();
        let result = self
            .dispatch(conn, m, &dest, body, trace, &id, (&mut answered, corr))
            .await;
        // A response that could not be delivered may be retried: its request waits again.
        // (A response sent on to another process is settled by the connection's pipe.)
        if result.is_err()
            && let Some(answered) = answered
        {
            self.restore_pending(answered).await;
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn dispatch(
        &self,
        conn: &Arc<Conn>,
        m: &Inbound<'_>,
        dest: &Dest,
        body: Arc<str>,
        trace: &str,
        id: &str,
        (answered, corr): (&mut Option<Answered>, Option<Corr>),
    ) -> Result<(), HubError> {
        let me = &conn.address;
        let now = now_ms();
        let formatted_body = || -> Arc<str> {
            let text = with_formatted(&body, &conn.opts.role).unwrap_or_else(|| body.to_string());
            text.into()
        };
        let entry = |body: Arc<str>| {
            Arc::new(Entry {
                body,
                priority: m.priority,
                expires_at: m.ttl.map(|t| now.saturating_add((t * 1000.0) as i64)),
                received: Instant::now(),
                seq: None,
                row: None,
            })
        };
        tracing::trace!(trace_id = trace, msg_id = %id, from = %me.key, "hub: routing");
        match dest {
            Dest::Hub => unreachable!("handled above"),
            Dest::One(a) => {
                let target = self.state().online.get(&a.key).cloned();
                let local = target.is_some();
                let b = match target {
                    Some(t) if t.opts.llm_format => formatted_body(),
                    _ => body,
                };
                // NATS down: held for the replay with its correlation, so the process that
                // gets it after the outage checks its response as any other.
                if !local && matches!(self.backend(), Backend::NatsDown) {
                    let meta = super::nats::Meta {
                        corr,
                        ..Default::default()
                    };
                    return self.hold_or_refuse(a, entry(b), &conn.opts.role, meta);
                }
                // Not here: sent on to the process that holds it without waiting for its
                // answer (the connection's pipe settles it, in order).
                if !local && let Backend::Nats(n) = self.backend() {
                    let remote = super::cluster::Outbound {
                        a: a.clone(),
                        entry: entry(b),
                        role: conn.opts.role.clone(),
                        corr,
                        msg_id: id.to_string(),
                        trace: trace.to_string(),
                        answered: answered.take(),
                    };
                    return self.send_remote(conn, n, remote).await;
                }
                self.deliver(a, entry(b), &conn.opts.role).await
            }
            Dest::Group(env, ty) => {
                let members: Vec<Arc<Conn>> = self
                    .state()
                    .groups
                    .get(&group_key(env.as_ref(), *ty))
                    .cloned()
                    .unwrap_or_default();
                let mut full_ids = Vec::new();
                let mut plain: Option<Arc<Entry>> = None;
                for c in members.iter().filter(|c| c.serial != conn.serial) {
                    if !self.policy.allows(conn.opts.tier, c.opts.tier) {
                        continue;
                    }
                    let e = if c.opts.llm_format {
                        entry(formatted_body())
                    } else {
                        plain.get_or_insert_with(|| entry(body.clone())).clone()
                    };
                    if c.mailbox.push(e) == Err(PushError::Full) {
                        full_ids.push(c.address.id.to_string());
                    }
                }
                // Other processes fan out to their own members of the group.
                match self.backend() {
                    Backend::Nats(n) => {
                        let e = entry(body.clone());
                        if let Err(err) = n
                            .broadcast(
                                env.as_deref(),
                                *ty,
                                &e,
                                &conn.opts.role,
                                &me.key,
                                conn.opts.tier,
                            )
                            .await
                        {
                            tracing::warn!(error = %err, "hub: broadcast to other processes failed");
                        }
                    }
                    Backend::NatsDown => {
                        tracing::debug!("hub: NATS down: broadcast reached local clients only");
                    }
                    Backend::Embedded => {}
                }
                if full_ids.is_empty() {
                    Ok(())
                } else {
                    Err(HubError::unavailable(
                        format!(
                            "broadcast not delivered to {} recipient(s) whose inbox is full",
                            full_ids.len()
                        ),
                        "retry later; those recipients are not acknowledging",
                    )
                    .with_extra(serde_json::json!({ "undelivered": full_ids })))
                }
            }
        }
    }

    /// The tier policy between `conn` and the recipient `a` (its tier as last connected; across
    /// processes from the shared streams bucket).
    pub(super) async fn check_tier(&self, conn: &Conn, a: &Address) -> Result<(), HubError> {
        if conn.opts.tier.is_none() {
            return Ok(()); // untiered: outside the tier system
        }
        self.known(&self.backend(), a).await;
        let their_tier = self.state().known.get(&a.key).copied().flatten();
        if self.policy.allows(conn.opts.tier, their_tier) {
            return Ok(());
        }
        Err(HubError::denied(
            format!(
                "tier {} may not message tier {}",
                conn.opts.tier.map(Tier::as_str).unwrap_or("-"),
                their_tier.map(Tier::as_str).unwrap_or("-")
            ),
            "go through the tier in between (pm↔pm via command, worker↔worker via pm)",
        ))
    }

    /// Request/response correlation by (requester, id). The requests of this process are
    /// checked here; with the NATS backend a request that leaves the process (its responder is
    /// not here, or it is a broadcast) is also registered in the shared pending bucket, and a
    /// response to such a request (or to one this process never saw) takes it there.
    async fn correlate(
        &self,
        conn: &Conn,
        m: &Inbound<'_>,
        id: &str,
        target: Option<&Arc<str>>,
    ) -> Result<Correlated, HubError> {
        let now = now_ms();
        match m.kind {
            Some(Kind::Request) => {
                let ttl = m.ttl.unwrap_or(self.config.request_timeout_seconds);
                let until_ms = now.saturating_add((ttl * 1000.0) as i64);
                {
                    let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    if p.len() >= 100_000 {
                        p.retain(|_, v| v.expires_at > now);
                        if p.len() >= 100_000 {
                            return Err(HubError::unavailable(
                                "too many requests waiting for a response",
                                "retry later",
                            ));
                        }
                    }
                }
                // Two ends on this process: checked here alone, no NATS round trip.
                let leaves = target.is_none_or(|t| !self.state().online.contains_key(t));
                let record = super::nats::SharedPending {
                    requester: conn.address.key.to_string(),
                    id: id.to_string(),
                    responder: target.map(|t| t.to_string()),
                    until: until_ms,
                    taken: false,
                };
                let backend = self.backend();
                let shared = match &backend {
                    Backend::Nats(n) if leaves => n.register_pending(&record).await,
                    _ => false,
                };
                let k = (conn.address.key.clone(), id.to_string());
                self.pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(
                        k.clone(),
                        Pending {
                            responder: target.cloned(),
                            expires_at: until_ms,
                            shared,
                            taken_rev: None,
                        },
                    );
                // Leaving unregistered (NATS down, or no answer): registered when NATS answers,
                // before anything held after it is sent (the request itself, if held). Owed
                // after the entry is in place: the replay registers only what is pending here.
                let owed = leaves && !shared && !matches!(backend, Backend::Embedded);
                if owed
                    && !self.owe(super::cluster::Owed::Register(record))
                    && matches!(backend, Backend::NatsDown)
                {
                    self.pending
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&k);
                    return Err(outage_full());
                }
                Ok(Correlated {
                    answered: None,
                    corr: Some(Corr::Request {
                        requester: conn.address.key.clone(),
                        id: id.to_string(),
                        until_ms,
                        shared,
                    }),
                })
            }
            Some(Kind::Response | Kind::Error) => {
                let rid = m.request_id.as_deref().unwrap_or_default();
                let Some(requester) = target else {
                    return Err(HubError::validation(
                        "a response goes to one requester, not a broadcast",
                        "address the client that sent the request",
                    ));
                };
                let me = &conn.address.key;
                let k = (requester.clone(), rid.to_string());
                let taken = {
                    let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    take_pending(&mut p, k.clone(), me, now)
                };
                let checked = || Corr::Checked {
                    responder: me.clone(),
                    request_id: rid.to_string(),
                };
                let accepted = |answered: Answered| {
                    Ok(Correlated {
                        answered: Some(answered),
                        corr: Some(checked()),
                    })
                };
                // Accepted against this process's entry alone (the registry did not answer):
                // the registry's record is taken when NATS answers again.
                let owe_taken = |pend: &Pending| {
                    self.owe(super::cluster::Owed::Taken {
                        request: pend.record(requester, rid),
                        by: me.to_string(),
                    });
                };
                match taken {
                    // A request that never left this process: the fast path.
                    Ok(answered) if !answered.1.shared => accepted(answered),
                    // Also registered in the shared bucket: taken there too, once for all
                    // processes (this process's entry alone does not know of responses
                    // accepted elsewhere while the requester was offline).
                    Ok((k, mut pend)) => {
                        let Backend::Nats(n) = self.backend() else {
                            // NATS down: checked here alone.
                            owe_taken(&pend);
                            return accepted((k, pend));
                        };
                        // Not in the bucket (aged out, or not registered yet): a record is
                        // created, taken, from this entry.
                        let claim = pend.record(requester, rid);
                        match n.take_pending(requester, rid, me, now, Some(&claim)).await {
                            SharedTake::Taken { rev, .. } => {
                                pend.taken_rev = Some(rev);
                                accepted((k, pend))
                            }
                            SharedTake::Absent => accepted((k, pend)),
                            SharedTake::Unavailable => {
                                owe_taken(&pend);
                                accepted((k, pend))
                            }
                            SharedTake::Expired => Err(timed_out(rid, requester)),
                            SharedTake::Answered => Err(uncorrelated(rid, requester)),
                            SharedTake::NotYours => {
                                self.pending
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .insert(k, pend);
                                Err(uncorrelated(rid, requester))
                            }
                        }
                    }
                    Err(Miss::Expired) => Err(timed_out(rid, requester)),
                    Err(Miss::NotYours) => Err(uncorrelated(rid, requester)),
                    Err(Miss::Unknown) => {
                        // Not registered here: the shared bucket knows a request that left
                        // another process, wherever its requester is now (or if it is offline).
                        if let Backend::Nats(n) = self.backend() {
                            match n.take_pending(requester, rid, me, now, None).await {
                                SharedTake::Taken { rev, until } => {
                                    return accepted((
                                        k,
                                        Pending {
                                            responder: Some(me.clone()),
                                            expires_at: until,
                                            shared: true,
                                            taken_rev: Some(rev),
                                        },
                                    ));
                                }
                                SharedTake::Expired => return Err(timed_out(rid, requester)),
                                SharedTake::Answered | SharedTake::NotYours => {
                                    return Err(uncorrelated(rid, requester));
                                }
                                // Not there (sent while NATS was unreachable) or no answer:
                                // the per-process checks below.
                                SharedTake::Absent | SharedTake::Unavailable => {}
                            }
                        }
                        // The requester is on another process (NATS backend): its process
                        // checks it against the entry it registered.
                        if self.config.backend == crate::config::HubBackend::Nats
                            && !self.state().online.contains_key(requester)
                        {
                            Ok(Correlated {
                                answered: None,
                                corr: Some(Corr::Check {
                                    responder: me.clone(),
                                    request_id: rid.to_string(),
                                }),
                            })
                        } else {
                            Err(uncorrelated(rid, requester))
                        }
                    }
                }
            }
            _ => Ok(Correlated::default()),
        }
    }

    /// Puts back the pending request a response answered when the response was not
    /// delivered (the responder may send it again): here, and in the shared bucket if the
    /// response took it there.
    pub(super) async fn restore_pending(&self, answered: Answered) {
        let ((requester, id), mut pend) = answered;
        if let Some(rev) = pend.taken_rev.take()
            && let Backend::Nats(n) = self.backend()
        {
            n.untake_pending(&requester, &id, rev).await;
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((requester, id), pend);
    }

    /// Delivers to one address: its live connection here, the process that holds it (NATS
    /// backend), or its stored inbox. `role` is the sender's (for formatted deliveries made by
    /// another process).
    pub(super) async fn deliver(
        &self,
        a: &Address,
        entry: Arc<Entry>,
        role: &str,
    ) -> Result<(), HubError> {
        let target = self.state().online.get(&a.key).cloned();
        if let Some(t) = target {
            match t.mailbox.push(entry.clone()) {
                Ok(()) => return Ok(()),
                Err(PushError::Full) => return Err(full(a, self.config.inbox_depth)),
                Err(PushError::Closed) => {} // it is leaving: store below
            }
        } else {
            match self.backend() {
                Backend::Embedded => {}
                Backend::Nats(n) => {
                    let meta = super::nats::Meta {
                        delivery: n.next_delivery(),
                        ..Default::default()
                    };
                    match n.deliver_remote(a, &entry, role, &meta).await {
                        Remote::NotHere => {}
                        other => return self.settle_outcome(a, entry, role, meta, other).await,
                    }
                }
                Backend::NatsDown => {
                    return self.hold_or_refuse(a, entry, role, Default::default());
                }
            }
        }
        self.store_for(a, entry, role).await
    }
}

/// The outage buffer is full (E005): what would be held cannot be.
pub(super) fn outage_full() -> HubError {
    HubError::new(
        ClawCode::E005,
        "the hub's link to its other processes (NATS) is down and its buffer is full",
        "retry later",
    )
}

/// A response whose request timed out (E004).
pub(super) fn timed_out(rid: &str, requester: &str) -> HubError {
    HubError::new(
        ClawCode::E004,
        format!("request {rid:?} of {requester} timed out before this response"),
        "the requester has given up; send a notification instead if it still matters",
    )
}

/// A response that answers no request pending for its sender.
pub(super) fn uncorrelated(rid: &str, requester: &str) -> HubError {
    HubError::validation(
        format!("requestId {rid:?} matches no pending request from {requester} to you"),
        "answer a request you received, once, with its id as requestId",
    )
}

/// The sender's traceId, or a new one (`trace-…`) when it gave none.
pub(super) fn trace_or_new(t: Option<String>) -> String {
    t.unwrap_or_else(new_trace)
}

/// A new traceId, for what the hub sends on its own (heartbeats, resume reports, closes).
pub(super) fn new_trace() -> String {
    random_id("trace-")
}

pub(super) fn full(a: &Address, depth: usize) -> HubError {
    HubError::unavailable(
        format!(
            "the inbox of {} {:?} is full ({depth} unacknowledged messages)",
            a.ty.as_str(),
            &*a.id
        ),
        "retry later; the recipient is not acknowledging",
    )
}

pub(super) fn not_found(a: &Address) -> HubError {
    let mut e = HubError::unavailable(
        format!(
            "{} {:?} is unknown to this hub (it never connected and was not spawned)",
            a.ty.as_str(),
            &*a.id
        ),
        "check the id and environment; an agent must connect (or be spawned) once before it can receive",
    );
    if a.ty == PeerType::Agent {
        e = e.with_extra(serde_json::json!({"error": "agent_not_found", "agentId": &*a.id}));
    }
    e
}

/// The delivery body `body` with the seed-001 `formatted` text added (for a connection with
/// `format=llm` that receives a message routed by another process).
pub(super) fn with_formatted(body: &str, role: &str) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(&format!("{{{body}")).ok()?;
    if v.get("formatted").is_some() {
        return None; // rendered already (stored after being queued for this recipient)
    }
    let sender = &v["sender"];
    let from = if sender["type"] == "human" {
        "user".to_string()
    } else {
        sender["id"].as_str()?.to_string()
    };
    let text = society::format_message_for_agent(
        &from,
        Some(if role.is_empty() { "unknown" } else { role }),
        &v["payload"],
    );
    v.as_object_mut()?.insert("formatted".into(), text.into());
    Some(envelope::body(&v))
}
