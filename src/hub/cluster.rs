//! The hub across processes: connecting to NATS, the subscriptions of local clients, deliveries
//! from other processes, kicks (a newer connection elsewhere replaces ours), presence refresh,
//! inbox sweeps, and the outage buffer replayed when NATS comes back. See `nats.rs`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use tokio::sync::{mpsc, oneshot};

use super::envelope::{ClawCode, HubError, PeerType, Tier};
use super::mailbox::{Entry, PushError, StoredRef};
use super::nats::{self, Corr, Meta, Nats, Remote};
use super::route::{Answered, Miss, full, take_pending, timed_out, uncorrelated};
use super::{Address, Backend, Conn, Hub, Pending, group_key};
use crate::config::{HubBackend, secs};

/// Deliveries to other processes one connection may have waiting for their answers. Past it
/// the connection's next one waits (the client's frames are read more slowly): bounded memory
/// and a bounded queue at the holders, whatever a sender does.
pub const PIPE_WINDOW: usize = 256;

/// How many deliveries from other processes a connection remembers, to recognise a retry of
/// one it already got (a holder that answered after the sender's timeout). Grown on demand;
/// 8 bytes each; looked through only for retries.
pub const SEEN_CAP: usize = 4096;

/// The delivery ids a connection received from other processes lately (a ring).
#[derive(Default)]
pub(crate) struct Seen {
    ids: Vec<u64>,
    next: usize,
}

impl Seen {
    pub fn insert(&mut self, id: u64) {
        if self.ids.len() < SEEN_CAP {
            self.ids.push(id);
        } else {
            self.ids[self.next] = id;
            self.next = (self.next + 1) % SEEN_CAP;
        }
    }

    pub fn contains(&self, id: u64) -> bool {
        self.ids.contains(&id)
    }
}

/// A routed message for a recipient on another process, as the router hands it over.
pub(crate) struct Outbound {
    pub a: Address,
    pub entry: Arc<Entry>,
    pub role: String,
    pub corr: Option<Corr>,
    /// For the error the sender gets if it is not delivered.
    pub msg_id: String,
    pub trace: String,
    /// The pending request a response answered (put back if it is not delivered).
    pub answered: Option<Answered>,
}

/// What a connection's pipe settles, in order.
pub(crate) enum Piped {
    Flight(Box<InFlight>),
    /// Completed once everything piped before it is settled.
    Barrier(oneshot::Sender<()>),
}

/// A delivery published to another process, waiting for its answer in its sender's pipe.
pub(crate) struct InFlight {
    token: u64,
    answer: oneshot::Receiver<Remote>,
    deadline: tokio::time::Instant,
    meta: Meta,
    out: Outbound,
    /// Its place in the process's window ([`nats::PROCESS_WINDOW`]), given back when settled.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// What the outage buffer holds, replayed in order once NATS is back.
pub(crate) enum Held {
    /// A message for another process or an inbox.
    Message(HeldMessage),
    /// A record the shared pending registry missed while it could not be reached.
    Owed(Owed),
}

/// A record the shared pending registry is owed: written by the replay before anything held
/// after it is sent, so a request held during an outage is registered before it is sent.
#[derive(Clone)]
pub(crate) enum Owed {
    /// A request that left this process unregistered (NATS down, or its registration did not
    /// answer), or one between two clients here of which one left while NATS was down:
    /// registered, if it is still pending here (neither answered nor timed out meanwhile).
    Register(nats::SharedPending),
    /// A response `by` accepted here while the registry could not answer (checked against
    /// this process's entry alone): the request's record is taken, unless the response was not
    /// delivered and its request waits here again.
    Taken {
        request: nats::SharedPending,
        by: String,
    },
}

/// A message for another process (or an inbox) held while NATS is unreachable.
pub(crate) struct HeldMessage {
    /// Dedup id for the inbox store, fixed at hold time so retries dedup and others do not.
    pub id: String,
    pub a: Address,
    pub entry: Arc<Entry>,
    pub role: String,
    /// Straight to the inbox (what a leaving connection had not acknowledged).
    pub store_only: bool,
    /// Its delivery id and correlation (a replay is a retry of the same delivery).
    pub meta: Meta,
}

/// A connection's pipe: settles its deliveries to other processes in the order they were sent
/// (each waits for its answer until its deadline), reporting each failure to the sender with the
/// message's id and trace, and putting back the pending request a failed response answered.
/// Ends when the connection closes its side and the last one is settled.
async fn run_pipe(hub: Weak<Hub>, conn: Weak<Conn>, mut rx: mpsc::Receiver<Piped>) {
    while let Some(item) = rx.recv().await {
        let f = match item {
            Piped::Flight(f) => f,
            Piped::Barrier(done) => {
                let _ = done.send(());
                continue;
            }
        };
        let f = *f;
        let answer = tokio::time::timeout_at(f.deadline, f.answer).await;
        let Some(hub) = hub.upgrade() else { return };
        let r = match answer {
            Ok(Ok(r)) => r,
            _ => {
                if let Some(n) = hub.nats.get() {
                    n.forget(f.token);
                }
                Remote::Unavailable
            }
        };
        if r == Remote::Delivered {
            continue;
        }
        let o = f.out;
        if let Err(err) = hub.settle_outcome(&o.a, o.entry, &o.role, f.meta, r).await {
            if let Some(answered) = o.answered {
                hub.restore_pending(answered).await;
            }
            match conn.upgrade() {
                Some(c) => c.send_error(&hub, Some(&o.msg_id), &o.trace, &err),
                None => {
                    hub.metrics.error(err.code.star());
                    tracing::debug!(to = %o.a.key, trace_id = %o.trace, msg_id = %o.msg_id, error = %err.message, "hub: undelivered, and its sender has gone");
                }
            }
        }
    }
}

impl Conn {
    /// Closes the pipe: deliveries already sent are still settled, no new ones start.
    pub(super) fn close_pipe(&self) {
        self.pipe.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Subscriptions of this process, by local client and by broadcast group.
#[derive(Default)]
pub(crate) struct Subs {
    unicast: std::collections::HashMap<Arc<str>, JoinHandle<()>>,
    broadcast: std::collections::HashMap<String, (usize, JoinHandle<()>)>,
}

impl Drop for Subs {
    fn drop(&mut self) {
        for t in self.unicast.values() {
            t.abort();
        }
        for (_, t) in self.broadcast.values() {
            t.abort();
        }
    }
}

impl Hub {
    /// Starts the NATS side when `[hub] backend = "nats"`: connects (retrying while NATS is
    /// down), sets up the stream and buckets, then serves kicks, presence and the outage buffer
    /// until `stop`.
    pub fn start(self: &Arc<Self>, stop: CancellationToken) {
        if self.config.backend != HubBackend::Nats {
            return;
        }
        let weak = Arc::downgrade(self);
        let _ = self.me.set(weak.clone());
        let cfg = self.config.clone();
        let node = self.node.clone();
        tokio::spawn(async move {
            let (client, mut events) = match nats::connect(&cfg, &node).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "hub: cannot configure the NATS connection; the hub stays degraded");
                    return;
                }
            };
            let n = loop {
                if client.connection_state() == async_nats::connection::State::Connected {
                    match Nats::setup(client.clone(), &cfg, &node).await {
                        Ok(n) => {
                            let n = Arc::new(n);
                            match n.serve_replies().await {
                                Ok(()) => break n,
                                Err(e) => {
                                    tracing::warn!(error = %e, "hub: NATS reply subscription failed; retrying")
                                }
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "hub: NATS setup failed; retrying"),
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            };
            let Some(hub) = weak.upgrade() else { return };
            let _ = hub.nats.set(n.clone());
            hub.start_shared_society(n.clone(), stop.clone());
            tracing::info!(url = %cfg.nats_url, node = %node, "hub: NATS backend ready");
            let mut kicks = match client.subscribe(n.kick_subject()).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "hub: cannot subscribe to kicks");
                    return;
                }
            };
            drop(hub);
            let refresh = secs(cfg.presence_ttl_seconds / 3.0);
            let mut tick = tokio::time::interval(refresh);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut replay = tokio::time::interval(Duration::from_millis(250));
            loop {
                let Some(hub) = weak.upgrade() else { return };
                tokio::select! {
                    _ = stop.cancelled() => return,
                    ev = events.recv() => match ev {
                        Some(async_nats::Event::Connected) => {
                            tracing::info!("hub: NATS connection restored");
                            hub.held_notify.notify_one();
                        }
                        Some(async_nats::Event::Disconnected) => {
                            tracing::warn!("hub: NATS connection lost; serving local clients, holding the rest");
                        }
                        Some(other) => tracing::debug!(event = %other, "hub: NATS event"),
                        None => return,
                    },
                    Some(k) = kicks.next() => hub.on_kick(&n, k).await,
                    _ = tick.tick() => hub.refresh_presence(&n).await,
                    _ = replay.tick() => hub.replay(&n).await,
                    _ = hub.held_notify.notified() => hub.replay(&n).await,
                }
            }
        });
    }

    /// Listens for deliveries to `a` (and to its broadcast group) from other processes.
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        n: &Arc<Nats>,
        a: &Address,
    ) -> anyhow::Result<()> {
        let mut sub = n.client.subscribe(n.unicast_subject(a)).await?;
        let weak: Weak<Hub> = Arc::downgrade(self);
        let key = a.key.clone();
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let Some(hub) = weak.upgrade() else { return };
                hub.on_unicast(&key, msg).await;
            }
        });
        let subject = n.broadcast_subject(a.env.as_deref(), a.ty);
        let need_group = {
            let mut st = self.state();
            if let Some(old) = st.subs.unicast.insert(a.key.clone(), task) {
                old.abort();
            }
            match st.subs.broadcast.get_mut(&subject) {
                Some((count, _)) => {
                    *count += 1;
                    false
                }
                None => true,
            }
        };
        if need_group {
            let mut bsub = match n.client.subscribe(subject.clone()).await {
                Ok(b) => b,
                Err(e) => {
                    if let Some(t) = self.state().subs.unicast.remove(&a.key) {
                        t.abort();
                    }
                    return Err(e.into());
                }
            };
            let weak: Weak<Hub> = Arc::downgrade(self);
            let group = group_key(a.env.as_ref(), a.ty);
            let task = tokio::spawn(async move {
                while let Some(msg) = bsub.next().await {
                    let Some(hub) = weak.upgrade() else { return };
                    hub.on_broadcast(&group, msg);
                }
            });
            let mut st = self.state();
            match st.subs.broadcast.get_mut(&subject) {
                // Another attach subscribed meanwhile: keep one.
                Some((count, _)) => {
                    *count += 1;
                    task.abort();
                }
                None => {
                    st.subs.broadcast.insert(subject, (1, task));
                }
            }
        }
        // The server has registered the interest once a round trip after it completes.
        n.barrier().await;
        Ok(())
    }

    pub(super) fn unsubscribe(&self, n: &Nats, a: &Address) {
        let subject = n.broadcast_subject(a.env.as_deref(), a.ty);
        let mut st = self.state();
        if let Some(t) = st.subs.unicast.remove(&a.key) {
            t.abort();
        }
        if let Some((count, _)) = st.subs.broadcast.get_mut(&subject) {
            *count -= 1;
            if *count == 0
                && let Some((_, t)) = st.subs.broadcast.remove(&subject)
            {
                t.abort();
            }
        }
    }

    /// A delivery from another process to a client of ours; answers ok, full or closed (and,
    /// for a response, expired or uncorrelated). A retry of a delivery the client already got
    /// is answered ok and not delivered again.
    async fn on_unicast(&self, key: &Arc<str>, msg: async_nats::Message) {
        let Some(n) = self.nats.get() else { return };
        n.metrics.received.fetch_add(1, Ordering::Relaxed);
        let conn = self.state().online.get(key).cloned();
        // Not (or no longer, or not yet) ours: stay silent so the process that does hold it
        // answers; if none does, the sender times out and holds it for a retry.
        let Some(c) = conn else { return };
        let Some((e, role)) = Nats::entry_of(msg.headers.as_ref(), &msg.payload, None) else {
            return;
        };
        let meta = Meta::read(msg.headers.as_ref());
        let answer = self.receive_remote(&c, e, &role, &meta);
        if let Some(reply) = msg.reply {
            n.answer_to(reply, answer).await;
        }
    }

    /// Delivers a message from another process to the local connection `c`: drops a retry it
    /// already got, checks a response against the request pending here, registers a request
    /// for the local responder. What to answer the sender.
    fn receive_remote(&self, c: &Arc<Conn>, mut e: Entry, role: &str, meta: &Meta) -> Remote {
        let key = &c.address.key;
        if meta.delivery != 0 && meta.retry && c.seen().contains(meta.delivery) {
            return Remote::Delivered;
        }
        let now = crate::util::now_ms();
        let taken = match &meta.corr {
            Some(Corr::Check {
                responder,
                request_id,
            }) => {
                let k = (key.clone(), request_id.clone());
                match take_pending(&mut self.pending(), k, responder, now) {
                    Ok(t) => Some(t),
                    Err(Miss::Expired) => return Remote::Expired,
                    Err(_) => return Remote::Uncorrelated,
                }
            }
            // Checked (and taken) at the responder's process: this process's own entry for
            // the request goes too, so a second response is refused wherever it comes from.
            Some(Corr::Checked {
                responder,
                request_id,
            }) => {
                let k = (key.clone(), request_id.clone());
                take_pending(&mut self.pending(), k, responder, now).ok()
            }
            _ => None,
        };
        if c.opts.llm_format
            && let Some(b) = super::route::with_formatted(&e.body, role)
        {
            e.body = b.into();
        }
        match c.mailbox.push(Arc::new(e)) {
            Ok(()) => {
                if meta.delivery != 0 {
                    c.seen().insert(meta.delivery);
                }
                if let Some(Corr::Request {
                    requester,
                    id,
                    until_ms,
                    shared: _,
                }) = &meta.corr
                {
                    // The response will be sent from here: register the request here too,
                    // its response taken in the shared bucket as well; also when the
                    // requester's process could not register it there (`shared` false): the
                    // response then claims a record, so a late registration cannot open it
                    // again.
                    self.pending().insert(
                        (requester.clone(), id.clone()),
                        Pending {
                            responder: Some(key.clone()),
                            expires_at: *until_ms,
                            shared: true,
                            taken_rev: None,
                        },
                    );
                }
                Remote::Delivered
            }
            Err(err) => {
                if let Some((k, p)) = taken {
                    self.pending().insert(k, p);
                }
                match err {
                    PushError::Full => Remote::Full,
                    PushError::Closed => Remote::NotHere,
                }
            }
        }
    }

    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, super::route::PendingMap> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends a routed message on to the process holding its recipient without waiting for
    /// the answer: it is published now (so one sender's messages reach a recipient in the
    /// order sent) and settled by the sender's pipe. Waits only while the sender has
    /// [`PIPE_WINDOW`] deliveries unanswered or the process [`nats::PROCESS_WINDOW`].
    pub(super) async fn send_remote(
        &self,
        conn: &Arc<Conn>,
        n: &Arc<Nats>,
        out: Outbound,
    ) -> Result<(), HubError> {
        let meta = Meta {
            delivery: n.next_delivery(),
            retry: false,
            corr: out.corr.clone(),
        };
        let tx = self.pipe_of(conn);
        let permit = match &tx {
            Some(tx) => tx.reserve().await.ok(),
            None => None,
        };
        let slot = match &permit {
            Some(_) => n.inflight.clone().acquire_owned().await.ok(),
            None => None,
        };
        let (Some(permit), Some(slot)) = (permit, slot) else {
            // The connection is leaving (no pipe): settle it here, waiting.
            let r = n.deliver_remote(&out.a, &out.entry, &out.role, &meta).await;
            return self
                .settle_outcome(&out.a, out.entry, &out.role, meta, r)
                .await;
        };
        match n.send_remote(&out.a, &out.entry, &out.role, &meta).await {
            Ok((token, answer)) => {
                permit.send(Piped::Flight(Box::new(InFlight {
                    token,
                    answer,
                    deadline: n.answer_deadline(),
                    meta,
                    out,
                    _slot: slot,
                })));
                Ok(())
            }
            Err(r) => {
                self.settle_outcome(&out.a, out.entry, &out.role, meta, r)
                    .await
            }
        }
    }

    /// Waits until every delivery `conn` sent to other processes before now is settled (its
    /// errors queued): hub services answer after what the client sent before them.
    pub(super) async fn settle_pipe(&self, conn: &Conn) {
        let tx = conn.pipe.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(tx) = tx else { return };
        let (done, wait) = oneshot::channel();
        if tx.send(Piped::Barrier(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    /// The sender side of `conn`'s pipe, started on first use; None once it is closed.
    fn pipe_of(&self, conn: &Arc<Conn>) -> Option<mpsc::Sender<Piped>> {
        let mut pipe = conn.pipe.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = &*pipe {
            return Some(tx.clone());
        }
        if conn.mailbox.is_closed() {
            return None;
        }
        let hub = self.me.get()?.clone();
        let (tx, rx) = mpsc::channel(PIPE_WINDOW);
        tokio::spawn(run_pipe(hub, Arc::downgrade(conn), rx));
        *pipe = Some(tx.clone());
        Some(tx)
    }

    /// What to do with a delivery to another process once its answer is known: nothing when
    /// delivered; the recipient's inbox when nobody holds it; held for a retry when NATS did not
    /// answer; else the error the sender gets.
    pub(super) async fn settle_outcome(
        &self,
        a: &Address,
        entry: Arc<Entry>,
        role: &str,
        meta: Meta,
        r: Remote,
    ) -> Result<(), HubError> {
        let rid = |m: &Meta| match &m.corr {
            Some(Corr::Check { request_id, .. } | Corr::Checked { request_id, .. }) => {
                request_id.clone()
            }
            _ => String::new(),
        };
        match r {
            Remote::Delivered => Ok(()),
            Remote::Full => Err(full(a, self.config.inbox_depth)),
            Remote::NotHere => self.store_for(a, entry, role).await,
            Remote::Unavailable => self.hold_or_refuse(a, entry, role, meta),
            Remote::Expired => Err(timed_out(&rid(&meta), &a.key)),
            Remote::Uncorrelated => Err(uncorrelated(&rid(&meta), &a.key)),
        }
    }

    /// A broadcast from another process: fan out to our clients of that group.
    fn on_broadcast(&self, group: &(Arc<str>, PeerType), msg: async_nats::Message) {
        let Some(n) = self.nats.get() else { return };
        let h = msg.headers.as_ref();
        let get = |k: &str| h.and_then(|h| h.get(k)).map(|v| v.as_str().to_string());
        if get(nats::H_ORIGIN).as_deref() == Some(&n.node) {
            return; // ours: already delivered locally
        }
        n.metrics.received.fetch_add(1, Ordering::Relaxed);
        let sender_tier = get("Hub-Sender-Tier").and_then(|t| Tier::parse(&t));
        let Some((entry, role)) = Nats::entry_of(h, &msg.payload, None) else {
            return;
        };
        let members = self.state().groups.get(group).cloned().unwrap_or_default();
        let plain = Arc::new(entry);
        for c in members {
            if !self.policy.allows(sender_tier, c.opts.tier) {
                continue;
            }
            let e = if c.opts.llm_format {
                let mut f = super::inbox::clone_entry(&plain);
                if let Some(b) = super::route::with_formatted(&f.body, &role) {
                    f.body = b.into();
                }
                Arc::new(f)
            } else {
                plain.clone()
            };
            if c.mailbox.push(e) == Err(PushError::Full) {
                tracing::debug!(to = %c.address.key, "hub: broadcast from another process dropped: inbox full");
            }
        }
    }

    /// Another process is attaching an identity we hold, or are attaching ourselves. The
    /// later attach wins ([`nats::Stamp`]): if ours is later we answer "kept" at once (the other
    /// attach is then the one replaced); otherwise ours is replaced, once its attach (if one is
    /// under way) has finished, and the answer goes back when what it held is stored, so the
    /// new one reads a settled inbox. Answering "kept" without waiting for our own attach is
    /// what keeps two concurrent attaches from waiting on each other.
    async fn on_kick(&self, n: &Nats, msg: async_nats::Message) {
        let kick: nats::Kick = match serde_json::from_slice(&msg.payload) {
            Ok(k) => k,
            // A bare address (an older process): it wins, as a kick always did.
            Err(_) => nats::Kick {
                key: String::from_utf8_lossy(&msg.payload).to_string(),
                stamp: nats::Stamp {
                    ms: i64::MAX,
                    node: String::new(),
                },
            },
        };
        let key: Arc<str> = Arc::from(kick.key.as_str());
        let ours = {
            let st = self.state();
            st.attaching
                .get(&key)
                .cloned()
                .or_else(|| st.online.get(&key).map(|c| c.stamp.clone()))
        };
        let answer: &'static str = match ours {
            Some(ours) if ours > kick.stamp => {
                tracing::info!(address = %key, "hub: kept against an older attach on another process");
                "kept"
            }
            _ => {
                let lock = self.address_lock(&key);
                let _guard = lock.lock().await;
                let conn = self.state().online.get(&key).cloned();
                match conn {
                    // A newer attach of ours meanwhile: it stays.
                    Some(c) if c.stamp > kick.stamp => "kept",
                    Some(c) => {
                        tracing::info!(address = %key, "hub: replaced by a connection on another process");
                        c.kicked.store(true, Ordering::Relaxed);
                        self.replace(&c).await;
                        "done"
                    }
                    None => "done",
                }
            }
        };
        if let Some(reply) = msg.reply {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                n.client.publish(reply, answer.into()),
            )
            .await;
        }
    }

    async fn refresh_presence(&self, n: &Nats) {
        if !n.connected() {
            return;
        }
        let addrs: Vec<Address> = self
            .state()
            .online
            .values()
            .map(|c| c.address.clone())
            .collect();
        for a in addrs {
            n.present(&a).await;
        }
    }

    /// Holds a message for later while NATS is unreachable. False when the buffer is full.
    pub(crate) fn hold(
        &self,
        a: Address,
        entry: Arc<Entry>,
        role: String,
        store_only: bool,
        meta: Meta,
    ) -> bool {
        self.push_held(Held::Message(HeldMessage {
            id: crate::util::random_id("held-"),
            a,
            entry,
            role,
            store_only,
            meta,
        }))
    }

    /// Owes the shared pending registry a record (see [`Owed`]), in the outage buffer's order.
    /// False when the buffer is full.
    pub(crate) fn owe(&self, o: Owed) -> bool {
        let ok = self.push_held(Held::Owed(o));
        if ok {
            // Written as soon as NATS answers (an unanswered registration with NATS up).
            self.held_notify.notify_one();
        } else {
            tracing::warn!(
                "hub: outage buffer full: a pending request's record is not kept for the shared registry"
            );
        }
        ok
    }

    fn push_held(&self, h: Held) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() >= self.config.nats_outage_buffer {
            return false;
        }
        held.push_back(h);
        true
    }

    pub(crate) fn hold_or_refuse(
        &self,
        a: &Address,
        entry: Arc<Entry>,
        role: &str,
        meta: Meta,
    ) -> Result<(), HubError> {
        if self.hold(a.clone(), entry, role.to_string(), false, meta) {
            Ok(())
        } else {
            Err(super::route::outage_full())
        }
    }

    /// Messages held during an outage.
    pub fn held_len(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.iter()
            .filter(|h| matches!(h, Held::Message(_)))
            .count()
    }

    /// Records the shared pending registry is owed (requests and responses it missed while it
    /// could not be reached), written when NATS answers again.
    pub fn owed_len(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.iter().filter(|h| matches!(h, Held::Owed(_))).count()
    }

    /// Writes one owed record. False when NATS did not answer (kept for later).
    async fn pay(&self, n: &Nats, o: &Owed) -> bool {
        let now = crate::util::now_ms();
        let (p, by) = match o {
            Owed::Register(p) => (p, None),
            Owed::Taken { request, by } => (request, Some(by)),
        };
        let k: (Arc<str>, String) = (Arc::from(p.requester.as_str()), p.id.clone());
        let here = self
            .pending()
            .get(&k)
            .is_some_and(|v| v.expires_at == p.until && v.expires_at > now && !v.shared);
        match by {
            // Answered or timed out here meanwhile: nothing to register.
            None if !here => true,
            None => {
                if !n.register_pending_late(p).await {
                    return false;
                }
                if let Some(v) = self.pending().get_mut(&k)
                    && v.expires_at == p.until
                {
                    v.shared = true;
                }
                true
            }
            Some(by) => {
                // Given back (the response was not delivered): it waits again.
                if self
                    .pending()
                    .get(&k)
                    .is_some_and(|v| v.expires_at == p.until)
                {
                    return true;
                }
                n.take_pending(&p.requester, &p.id, by, now, Some(p)).await
                    != nats::SharedTake::Unavailable
            }
        }
    }

    /// The NATS backend's metrics (empty for the embedded backend).
    pub fn nats_metrics(&self) -> String {
        if self.config.backend != HubBackend::Nats {
            return String::new();
        }
        let (up, m) = match self.nats.get() {
            Some(n) => (n.connected(), Some(&n.metrics)),
            None => (false, None),
        };
        let load = |f: fn(&nats::NatsMetrics) -> &std::sync::atomic::AtomicU64| {
            m.map(|m| f(m).load(Ordering::Relaxed)).unwrap_or(0)
        };
        format!(
            "# HELP hub_nats_connected 1 when the NATS backend is reachable (0: DEGRADED).\n# TYPE hub_nats_connected gauge\nhub_nats_connected {}\n\
             # HELP hub_nats_received_total Messages received from other hub processes.\n# TYPE hub_nats_received_total counter\nhub_nats_received_total {}\n\
             # HELP hub_nats_published_total Messages sent to other processes or stored in JetStream.\n# TYPE hub_nats_published_total counter\nhub_nats_published_total {}\n\
             # HELP hub_nats_held Messages held while NATS is unreachable.\n# TYPE hub_nats_held gauge\nhub_nats_held {}\n\
             # HELP hub_nats_replayed_total Held messages sent after an outage.\n# TYPE hub_nats_replayed_total counter\nhub_nats_replayed_total {}\n\
             # HELP hub_nats_dropped_total Held messages undeliverable after an outage.\n# TYPE hub_nats_dropped_total counter\nhub_nats_dropped_total {}\n",
            u8::from(up),
            load(|m| &m.received),
            load(|m| &m.published),
            self.held_len(),
            load(|m| &m.replayed),
            load(|m| &m.dropped),
        )
    }

    /// A response held during an outage that its process had no entry for (`Corr::Check`):
    /// judged by the shared registry now that it answers, as it would have been then, so it is
    /// checked even if its requester is offline everywhere. Taken there: sent as checked, with
    /// the revision to give back if it is not delivered. Refused there: Err(false), dropped as
    /// an undeliverable replay; no answer: Err(true), tried later. Not there: sent for the
    /// requester's process to check.
    async fn judge_held_response(
        &self,
        n: &Nats,
        to: &Address,
        meta: &mut Meta,
    ) -> Result<Option<u64>, bool> {
        let Some(Corr::Check {
            responder,
            request_id,
        }) = &meta.corr
        else {
            return Ok(None);
        };
        let now = crate::util::now_ms();
        match n
            .take_pending(&to.key, request_id, responder, now, None)
            .await
        {
            nats::SharedTake::Taken { rev, .. } => {
                meta.corr = Some(Corr::Checked {
                    responder: responder.clone(),
                    request_id: request_id.clone(),
                });
                Ok(Some(rev))
            }
            nats::SharedTake::Absent => Ok(None),
            nats::SharedTake::Unavailable => Err(true),
            refused => {
                tracing::warn!(to = %to.key, request_id = %request_id, outcome = ?refused, "hub: a response held during the outage was refused by the shared registry");
                Err(false)
            }
        }
    }

    /// Sends what was held during an outage, in order, once NATS is back.
    async fn replay(&self, n: &Nats) {
        loop {
            if !n.connected() {
                return;
            }
            // An owed record stays first in the buffer until written (it is counted in
            // `owed_len` until then; only this loop takes from the front).
            let owed = match self.held.lock().unwrap_or_else(|p| p.into_inner()).front() {
                None => return,
                Some(Held::Owed(o)) => Some(o.clone()),
                Some(Held::Message(_)) => None,
            };
            if let Some(o) = owed {
                if !self.pay(n, &o).await {
                    return; // no answer: what follows waits for it; tried later
                }
                self.held
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop_front();
                continue;
            }
            let Some(Held::Message(h)) = self
                .held
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
            else {
                return;
            };
            let outcome = if h.store_only {
                match n.store(&h.a, &h.entry, h.entry.seq, &h.role, &h.id).await {
                    Ok(()) => Ok(()),
                    Err(_) => Err(true),
                }
            } else {
                // The same delivery id again, marked as a retry: a holder that got it before
                // (it answered after the sender gave up waiting) does not deliver it twice.
                let mut meta = h.meta.clone();
                if meta.delivery == 0 {
                    meta.delivery = n.next_delivery();
                } else {
                    meta.retry = true;
                }
                match self.judge_held_response(n, &h.a, &mut meta).await {
                    Err(again) => Err(again),
                    Ok(taken) => {
                        let outcome = match n.deliver_remote(&h.a, &h.entry, &h.role, &meta).await {
                            Remote::Delivered => Ok(()),
                            Remote::Full | Remote::Expired | Remote::Uncorrelated => Err(false),
                            Remote::Unavailable => Err(true),
                            Remote::NotHere => {
                                // Through the normal path: known check, bound, dedup.
                                match self.store_for(&h.a, h.entry.clone(), &h.role).await {
                                    Ok(()) => Ok(()),
                                    Err(e) if e.code == ClawCode::E005 => Err(true),
                                    Err(_) => Err(false),
                                }
                            }
                        };
                        // Not delivered: the request waits again (or is judged again).
                        if outcome.is_err()
                            && let (Some(rev), Some(Corr::Checked { request_id, .. })) =
                                (taken, &meta.corr)
                        {
                            n.untake_pending(&h.a.key, request_id, rev).await;
                        }
                        outcome
                    }
                }
            };
            match outcome {
                Ok(()) => {
                    n.metrics.replayed.fetch_add(1, Ordering::Relaxed);
                }
                Err(true) => {
                    // Still unreachable: put it back first and try later.
                    self.held
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push_front(Held::Message(h));
                    return;
                }
                Err(false) => {
                    n.metrics.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(to = %h.a.key, "hub: a message held during the outage could not be delivered (recipient unknown or inbox full)");
                }
            }
        }
    }

    /// A stored message as delivered to `conn`: with the seed-001 `formatted` text when it
    /// asked for it (the role travels with messages stored in JetStream; else "unknown").
    pub(super) fn formatted_for(&self, conn: &super::Conn, mut e: Entry, role: &str) -> Entry {
        if conn.opts.llm_format {
            let role = if role.is_empty() { "unknown" } else { role };
            if let Some(b) = super::route::with_formatted(&e.body, role) {
                e.body = b.into();
            }
        }
        e
    }

    /// On every heartbeat: keeps the stored messages this client holds from timing out in
    /// JetStream (`ack_wait` 30 s > the 15 s heartbeat), and pulls messages stored for it after
    /// it connected (a sender on another process that found it offline a moment before).
    pub async fn sweep(&self, conn: &Arc<super::Conn>) {
        let Backend::Nats(n) = self.backend() else {
            return;
        };
        let held_js = conn.mailbox.held_js();
        let held_count = held_js.len();
        n.in_progress(held_js).await;
        let Ok(count) = n.stored_count(&conn.address).await else {
            return;
        };
        // Whatever the consumer still counts beyond what this connection holds is new.
        if count <= held_count {
            return;
        }
        let lock = self.address_lock(&conn.address.key);
        let _guard = lock.lock().await;
        let held = conn.mailbox.held_stream_seqs();
        match n.load(&conn.address, &held).await {
            Ok((entries, expired)) => {
                self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
                let (_, acked) = conn.mailbox.counters();
                for (e, role) in entries {
                    let row = e.row.clone();
                    // A copy stored by a previous holder of what this client already saw.
                    if e.seq.is_some_and(|s| s <= acked) {
                        if let Some(StoredRef::Js(m)) = row {
                            n.settle(vec![m], false).await;
                        }
                        continue;
                    }
                    let e = self.formatted_for(conn, e, &role);
                    if conn.mailbox.push(Arc::new(e)).is_err()
                        && let Some(StoredRef::Js(m)) = row
                    {
                        n.settle(vec![m], true).await;
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "hub: inbox sweep failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_remembers_the_last_deliveries_only() {
        let mut s = Seen::default();
        for id in 0..SEEN_CAP as u64 {
            s.insert(id);
        }
        assert!(s.contains(0) && s.contains(SEEN_CAP as u64 - 1));
        assert!(!s.contains(SEEN_CAP as u64));
        // Full: the oldest goes first.
        s.insert(SEEN_CAP as u64);
        assert!(!s.contains(0));
        assert!(s.contains(1) && s.contains(SEEN_CAP as u64));
        assert_eq!(s.ids.len(), SEEN_CAP);
    }
}
