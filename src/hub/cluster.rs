//! The hub across processes: connecting to NATS, the subscriptions of local clients, deliveries
//! from other processes, kicks (a newer connection elsewhere replaces ours), presence refresh,
//! inbox sweeps, and the outage buffer replayed when NATS comes back. See `nats.rs`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::envelope::{ClawCode, HubError, PeerType, Tier};
use super::mailbox::{Entry, PushError, StoredRef};
use super::nats::{self, Nats, Remote};
use super::{Address, Backend, Hub, group_key};
use crate::config::{HubBackend, secs};

/// A message for another process (or an inbox) held while NATS is unreachable.
pub(crate) struct Held {
    /// Dedup id for the inbox store, fixed at hold time so retries dedup and others do not.
    pub id: String,
    pub a: Address,
    pub entry: Arc<Entry>,
    pub role: String,
    /// Straight to the inbox (what a leaving connection had not acknowledged).
    pub store_only: bool,
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
                        Ok(n) => break Arc::new(n),
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

    /// A delivery from another process to a client of ours; answers ok, full or closed.
    async fn on_unicast(&self, key: &Arc<str>, msg: async_nats::Message) {
        let Some(n) = self.nats.get() else { return };
        n.metrics.received.fetch_add(1, Ordering::Relaxed);
        let conn = self.state().online.get(key).cloned();
        let answer: &'static [u8] = match (
            conn,
            Nats::entry_of(msg.headers.as_ref(), &msg.payload, None),
        ) {
            (Some(c), Some((mut e, role))) => {
                if c.opts.llm_format
                    && let Some(b) = super::route::with_formatted(&e.body, &role)
                {
                    e.body = b.into();
                }
                match c.mailbox.push(Arc::new(e)) {
                    Ok(()) => b"ok",
                    Err(PushError::Full) => b"full",
                    Err(PushError::Closed) => b"closed",
                }
            }
            // Not (or no longer, or not yet) ours: stay silent so the process that does hold
            // it answers; if none does, the sender times out and holds it for a retry.
            _ => return,
        };
        if let Some(reply) = msg.reply {
            // Bounded: a full client buffer (NATS down) blocks publish.
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                n.client.publish(reply, answer.into()),
            )
            .await;
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

    /// Another process is accepting a connection with an identity we hold: ours is replaced;
    /// the answer goes back once what it held is stored, so the new one reads a settled inbox.
    async fn on_kick(&self, n: &Nats, msg: async_nats::Message) {
        let key = String::from_utf8_lossy(&msg.payload).to_string();
        let lock = self.address_lock(&Arc::from(key.as_str()));
        {
            let _guard = lock.lock().await;
            let conn = self.state().online.get(key.as_str()).cloned();
            if let Some(c) = conn {
                tracing::info!(address = %key, "hub: replaced by a connection on another process");
                self.replace(&c).await;
            }
        }
        if let Some(reply) = msg.reply {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                n.client.publish(reply, "done".into()),
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
    ) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() >= self.config.nats_outage_buffer {
            return false;
        }
        held.push_back(Held {
            id: crate::util::random_id("held-"),
            a,
            entry,
            role,
            store_only,
        });
        true
    }

    pub(crate) fn hold_or_refuse(
        &self,
        a: &Address,
        entry: Arc<Entry>,
        role: &str,
    ) -> Result<(), HubError> {
        if self.hold(a.clone(), entry, role.to_string(), false) {
            Ok(())
        } else {
            Err(HubError::new(
                ClawCode::E005,
                "the hub's link to its other processes (NATS) is down and its buffer is full",
                "retry later",
            ))
        }
    }

    /// Messages held during an outage.
    pub fn held_len(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
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

    /// Sends what was held during an outage, in order, once NATS is back.
    async fn replay(&self, n: &Nats) {
        loop {
            if !n.connected() {
                return;
            }
            let Some(h) = self
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
                match n.deliver_remote(&h.a, &h.entry, &h.role).await {
                    Remote::Delivered => Ok(()),
                    Remote::Full => Err(false),
                    Remote::Unavailable => Err(true),
                    Remote::NotHere => {
                        // Through the normal path: known check, bound, dedup.
                        match self.store_for(&h.a, h.entry.clone(), &h.role).await {
                            Ok(()) => Ok(()),
                            Err(e) if e.code == ClawCode::E005 => Err(true),
                            Err(_) => Err(false),
                        }
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
                        .push_front(h);
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
