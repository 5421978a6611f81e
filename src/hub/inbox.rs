//! Stored inboxes: registering a connection (restoring what was stored for it from the resume
//! point), storing what a leaving connection had not acknowledged, and storing messages for
//! offline recipients. Every change of one address's inbox runs under that address's lock
//! (within this process; across processes JetStream's consumer keeps the order).
//!
//! Two places to store, one behaviour: SQLite (`hub_inbox`, embedded backend) or the JetStream
//! inbox (NATS backend, see `nats.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::envelope::{ClawCode, HubError, PeerType, Priority};
use super::mailbox::{Control, Drained, Entry, Mailbox, PushError, StoredRef};
use super::nats::{Claim, Nats, Stamp, StreamState};
use super::route::{full, not_found};
use super::{Address, Backend, Conn, ConnOptions, Hub, group_key};
use crate::store::hub::InboxRow;
use crate::util::now_ms;

/// WebSocket close code of a connection replaced by a newer one with the same identity.
pub const CLOSE_REPLACED: u16 = 4001;

/// The error a connection replaced by a newer one of the same identity gets before its close.
fn replaced_error() -> HubError {
    HubError::new(
        ClawCode::E002,
        "another connection with this identity replaced this one",
        "do not run two clients with the same identity",
    )
    .with_extra(serde_json::json!({"reason": "replaced"}))
}

/// An attach that lost the tie-break to a newer one on another process: its connection, with
/// the greeting, the error saying why and the close (4001) queued, registered nowhere.
#[derive(Debug)]
pub struct Lost(pub Arc<Conn>);

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was replaced by a newer connection",
            self.0.address.key
        )
    }
}

impl std::error::Error for Lost {}

/// What was stored for an address when it connects.
struct Opened {
    next_seq: u64,
    acked: u64,
    /// With the sender's role when it was stored with one (for `format=llm`).
    entries: Vec<(Entry, String)>,
    expired: u64,
}

impl Hub {
    /// Registers a connection: replaces an older connection of the same address, restores its
    /// stored inbox from the resume point, and queues the welcome heartbeat and resume report.
    ///
    /// Across processes (NATS) the attach claims the identity first: a connection of it on
    /// another process is replaced, unless that process is attaching it too, later; then this
    /// attach is the one replaced ([`Lost`]). A kick that arrives here mid-attach is decided
    /// the same way (see `on_kick`): the later attach wins, by [`Stamp`].
    pub async fn attach(
        self: &Arc<Self>,
        address: Address,
        opts: ConnOptions,
        token: CancellationToken,
    ) -> anyhow::Result<Arc<Conn>> {
        let lock = self.address_lock(&address.key);
        let _guard = lock.lock().await;
        let key = address.key.clone();
        let stamp = Stamp {
            ms: now_ms(),
            node: self.node.clone(),
        };
        self.state().attaching.insert(key.clone(), stamp.clone());
        let res = self.attach_locked(address, opts, token, stamp).await;
        self.state().attaching.remove(&key);
        res
    }

    async fn attach_locked(
        self: &Arc<Self>,
        address: Address,
        opts: ConnOptions,
        token: CancellationToken,
        stamp: Stamp,
    ) -> anyhow::Result<Arc<Conn>> {
        let old = self.state().online.get(&address.key).cloned();
        if let Some(old) = old {
            tracing::info!(address = %address.key, "hub: a new connection replaces the old one");
            self.replace(&old).await;
        }
        let backend = self.backend();
        if let Backend::Nats(n) = &backend {
            // Any other process's connection with this identity is replaced too (or, if it is
            // a newer attach, this one is); then listen before reading the inbox, so nothing
            // sent meanwhile is missed.
            if n.claim(&address, &stamp).await == Claim::Lost {
                tracing::info!(address = %address.key, "hub: a newer connection on another process keeps this identity");
                let conn = self.new_conn(address, opts, token, (1, 0), stamp);
                let trace = super::route::new_trace();
                conn.control_envelope("heartbeat", &trace, &self.heartbeat_payload(&conn, true));
                conn.send_error(self, None, &trace, &replaced_error());
                conn.mailbox
                    .control(Control::Close(CLOSE_REPLACED, "replaced".into()));
                conn.mailbox.close();
                return Err(anyhow::Error::new(Lost(conn)));
            }
            self.subscribe(n, &address).await?;
        }
        let opened = match self.open_inbox(&backend, &address, opts.tier).await {
            Ok(o) => o,
            Err(e) => {
                if let Backend::Nats(n) = &backend {
                    self.unsubscribe(n, &address);
                }
                return Err(e);
            }
        };
        let (mut next_seq, acked) = (opened.next_seq, opened.acked);
        // Resume: the client says what it last saw; by default, what it last acknowledged.
        let claimed = opts.last_seq.unwrap_or(acked);
        let mut complete = true;
        let mut notes = Vec::new();
        if claimed >= next_seq {
            complete = false;
            notes.push(format!(
                "last_seq {claimed} is beyond the last sequence this hub assigned ({}); numbering continues after it",
                next_seq - 1
            ));
            next_seq = claimed + 1;
        }
        let missing = acked.saturating_sub(claimed);
        if missing > 0 {
            complete = false;
            notes.push(format!(
                "{missing} message(s) after {claimed} were acknowledged earlier and are no longer kept"
            ));
        }
        let acked_now = acked.max(claimed);
        let now = now_ms();
        let mut drop_refs = Vec::new();
        let mut expired = opened.expired;
        let mut resend = Vec::new();
        let mut fresh = Vec::new();
        for (mut e, role) in opened.entries {
            e.received = Instant::now();
            if opts.llm_format {
                let role = if role.is_empty() {
                    "unknown"
                } else {
                    role.as_str()
                };
                if let Some(b) = super::route::with_formatted(&e.body, role) {
                    e.body = b.into();
                }
            }
            if e.expires_at.is_some_and(|t| t <= now) {
                expired += 1;
                drop_refs.extend(e.row.clone());
                continue;
            }
            match e.seq {
                Some(s) if s <= acked_now => drop_refs.extend(e.row.clone()),
                Some(_) => resend.push(Arc::new(e)),
                None => fresh.push(Arc::new(e)),
            }
        }
        resend.sort_by_key(|e| e.seq);
        self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
        let resent = resend.len();
        let pending = fresh.len();
        let conn = self.new_conn(address, opts, token, (next_seq, acked_now), stamp);
        // The seed's lifecycle: the hub greets a new connection with a heartbeat.
        // One trace for the greeting: the welcome heartbeat and the resume report.
        let trace = super::route::new_trace();
        conn.control_envelope("heartbeat", &trace, &self.heartbeat_payload(&conn, true));
        conn.reply(
            "resume",
            &trace,
            &serde_json::json!({
                "type": "resume",
                "last_seq": claimed,
                "next_seq": next_seq,
                "complete": complete,
                "missing": missing,
                "resent": resent,
                "pending": pending,
                "expired": expired,
                "notes": notes,
            }),
        );
        // Counters first: a connection whose state cannot be saved is not registered.
        if let Err(e) = self
            .save_counters(&backend, &conn.address, conn.opts.tier, next_seq, acked_now)
            .await
        {
            if let Backend::Nats(n) = &backend {
                self.unsubscribe(n, &conn.address);
            }
            return Err(e);
        }
        for e in resend.into_iter().chain(fresh) {
            // Stored inboxes are bounded by the same depth, so these fit; a failure means the
            // bound was lowered since, and the message stays stored for the next connection.
            if conn.mailbox.push(e.clone()) == Err(PushError::Full)
                && let Some(StoredRef::Js(m)) = &e.row
                && let Backend::Nats(n) = &backend
            {
                n.settle(vec![m.clone()], true).await;
            }
        }
        {
            let mut st = self.state();
            let k = conn.address.key.clone();
            st.online.insert(k.clone(), conn.clone());
            st.known.insert(k.clone(), conn.opts.tier);
            st.stored.remove(&k);
            st.groups
                .entry(group_key(conn.address.env.as_ref(), conn.address.ty))
                .or_default()
                .push(conn.clone());
        }
        self.metrics.connections.fetch_add(1, Ordering::Relaxed);
        self.release(&backend, drop_refs).await;
        if let Backend::Nats(n) = &backend {
            n.present(&conn.address).await;
        }
        if conn.address.ty == PeerType::Agent {
            self.society_join(&conn).await;
        }
        Ok(conn)
    }

    fn new_conn(
        &self,
        address: Address,
        opts: ConnOptions,
        token: CancellationToken,
        (next_seq, acked): (u64, u64),
        stamp: Stamp,
    ) -> Arc<Conn> {
        Arc::new(Conn {
            mailbox: Mailbox::new(self.config.inbox_depth, opts.manual_ack, next_seq, acked),
            address,
            opts,
            token,
            serial: self.serial.fetch_add(1, Ordering::Relaxed),
            pipe: Default::default(),
            seen: Default::default(),
            stamp,
            kicked: Default::default(),
        })
    }

    /// Closes `old` as replaced by a newer connection with the same identity.
    pub(super) async fn replace(&self, old: &Arc<Conn>) {
        old.send_error(self, None, &super::route::new_trace(), &replaced_error());
        old.mailbox
            .control(Control::Close(CLOSE_REPLACED, "replaced".into()));
        self.take_offline(old).await;
        old.token.cancel();
    }

    /// Reads the stream counters and the stored messages of `a`.
    async fn open_inbox(
        &self,
        backend: &Backend<'_>,
        a: &Address,
        tier: Option<super::envelope::Tier>,
    ) -> anyhow::Result<Opened> {
        match backend {
            Backend::Embedded => {
                let key = a.key.to_string();
                let tier = tier.map(|t| t.as_str().to_string());
                let ((next_seq, acked), rows) = self
                    .store
                    .call(move |s| {
                        let st = s.hub_open_stream(&key, tier.as_deref())?;
                        Ok((st, s.hub_inbox_load(&key)?))
                    })
                    .await?;
                let entries = rows
                    .into_iter()
                    .map(|r| {
                        (
                            Entry {
                                body: r.body.into(),
                                priority: Priority::from_index(r.priority),
                                expires_at: r.expires_at,
                                received: Instant::now(),
                                seq: r.seq,
                                row: Some(StoredRef::Row(r.id)),
                            },
                            r.role,
                        )
                    })
                    .collect();
                Ok(Opened {
                    next_seq,
                    acked,
                    entries,
                    expired: 0,
                })
            }
            Backend::Nats(n) => {
                let st = n.stream_state(a).await?.unwrap_or(StreamState {
                    next_seq: 1,
                    acked: 0,
                    tier: None,
                });
                let (loaded, expired) = n.load(a, &Default::default()).await?;
                Ok(Opened {
                    next_seq: st.next_seq.max(1),
                    acked: st.acked,
                    entries: loaded,
                    expired,
                })
            }
            Backend::NatsDown => anyhow::bail!("NATS is unreachable: the hub cannot open inboxes"),
        }
    }

    /// Deletes (acknowledges) stored messages that were processed, expired or already seen.
    async fn release(&self, backend: &Backend<'_>, refs: Vec<StoredRef>) {
        if refs.is_empty() {
            return;
        }
        let mut rows = Vec::new();
        let mut js = Vec::new();
        for r in refs {
            match r {
                StoredRef::Row(id) => rows.push(id),
                StoredRef::Js(m) => js.push(m),
            }
        }
        if !rows.is_empty()
            && let Err(e) = self.store.call(move |s| s.hub_inbox_delete(&rows)).await
        {
            tracing::warn!(error = %e, "hub: could not delete processed inbox rows; they will be redelivered");
        }
        if !js.is_empty() {
            match backend {
                Backend::Nats(n) => n.settle(js, false).await,
                _ => tracing::warn!(
                    n = js.len(),
                    "hub: NATS unreachable; processed messages will be redelivered"
                ),
            }
        }
    }

    async fn save_counters(
        &self,
        backend: &Backend<'_>,
        a: &Address,
        tier: Option<super::envelope::Tier>,
        next_seq: u64,
        acked: u64,
    ) -> anyhow::Result<()> {
        match backend {
            Backend::Nats(n) => {
                n.save_stream_state(
                    a,
                    StreamState {
                        next_seq,
                        acked,
                        tier: tier.map(|t| t as u8),
                    },
                )
                .await
            }
            _ => {
                let key = a.key.to_string();
                Ok(self
                    .store
                    .call(move |s| s.hub_save_stream(&key, next_seq, acked))
                    .await?)
            }
        }
    }

    /// Unregisters a finished connection and stores whatever it had not acknowledged.
    pub async fn detach(&self, conn: &Arc<Conn>) {
        let lock = self.address_lock(&conn.address.key);
        let _guard = lock.lock().await;
        self.take_offline(conn).await;
    }

    /// Removes `conn` from routing (if still registered) and stores its mailbox. Idempotent.
    /// Caller holds the address lock.
    pub(super) async fn take_offline(&self, conn: &Arc<Conn>) {
        let was_online = {
            let mut st = self.state();
            let k = &conn.address.key;
            let was = st.online.get(k).is_some_and(|c| c.serial == conn.serial);
            if was {
                st.online.remove(k);
                self.metrics.connections.fetch_sub(1, Ordering::Relaxed);
            }
            let g = group_key(conn.address.env.as_ref(), conn.address.ty);
            if let Some(v) = st.groups.get_mut(&g) {
                v.retain(|c| c.serial != conn.serial);
                if v.is_empty() {
                    st.groups.remove(&g);
                }
            }
            was
        };
        // Deliveries to other processes already sent are still settled (errors reported);
        // no new ones start.
        conn.close_pipe();
        if conn.mailbox.is_closed() {
            return;
        }
        let d = conn.mailbox.close();
        let backend = self.backend();
        // Requests between this client and another one here were checked here alone; the
        // other end may now answer or be answered from another process. Shared before the
        // presence entry goes: until then an attach of this identity on another process kicks
        // this one and waits for it (the address lock), so its responses find them shared.
        // NATS down: owed to the registry, written when it is back.
        match &backend {
            Backend::Nats(n) => self.share_pending_of(Some(n), &conn.address.key).await,
            Backend::NatsDown => self.share_pending_of(None, &conn.address.key).await,
            Backend::Embedded => {}
        }
        if was_online && let Some(n) = self.nats.get() {
            // Local subscriptions go whatever the link's state.
            self.unsubscribe(n, &conn.address);
            // Replaced from another process: the presence entry is the new holder's now.
            if let Backend::Nats(n) = &backend
                && !conn.kicked.load(Ordering::Relaxed)
            {
                n.absent(&conn.address).await;
            }
        }
        let kept = d.unacked.len() + d.queued.len();
        let res = match &backend {
            Backend::Embedded => self.persist_sqlite(&conn.address, d).await,
            Backend::Nats(n) => self.persist_nats(n, conn, d).await,
            Backend::NatsDown => {
                self.hold_drained(conn, d);
                Ok(())
            }
        };
        match res {
            Ok(()) => {
                self.state().stored.insert(conn.address.key.clone(), kept);
            }
            Err(e) => {
                tracing::error!(address = %conn.address.key, error = %e, "hub: could not store an inbox at disconnect")
            }
        }
    }

    /// Registers in the shared pending bucket the requests of `key` (as requester or
    /// responder) that are pending here and were not shared (both ends were on this process,
    /// or the registry could not be reached). From the first that NATS does not store (or all,
    /// `n` None: NATS down), they are owed to the registry (written when it answers again).
    async fn share_pending_of(&self, mut n: Option<&super::nats::Nats>, key: &Arc<str>) {
        let now = now_ms();
        let local: Vec<(Arc<str>, super::nats::SharedPending)> = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(k, v)| {
                !v.shared
                    && v.expires_at > now
                    && (k.0 == *key || v.responder.as_ref() == Some(key))
            })
            .map(|(k, v)| (k.0.clone(), v.record(&k.0, &k.1)))
            .collect();
        for (requester, shared) in local {
            let stored = match n {
                Some(nats) => nats.register_pending_late(&shared).await,
                None => false,
            };
            if !stored {
                n = None; // not answering: the rest are owed without asking again
                self.owe(super::cluster::Owed::Register(shared));
                continue;
            }
            if let Some(v) = self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(&(requester, shared.id))
                && v.expires_at == shared.until
            {
                v.shared = true;
            }
        }
    }

    async fn persist_sqlite(&self, a: &Address, d: Drained) -> anyhow::Result<()> {
        let key = a.key.to_string();
        let mut inserts = Vec::new();
        let mut seqs: Vec<(i64, u64)> = d
            .sequenced_rows
            .iter()
            .filter_map(|(r, s)| match r {
                StoredRef::Row(id) => Some((*id, *s)),
                StoredRef::Js(_) => None,
            })
            .collect();
        for (seq, e) in &d.unacked {
            match &e.row {
                Some(StoredRef::Row(r)) => seqs.push((*r, *seq)),
                _ => inserts.push(row_of(&key, Some(*seq), e, "")),
            }
        }
        for e in &d.queued {
            if e.row.is_none() {
                inserts.push(row_of(&key, None, e, ""));
            }
        }
        self.metrics
            .stored
            .fetch_add(inserts.len() as u64, Ordering::Relaxed);
        let released: Vec<i64> = d
            .released_rows
            .iter()
            .filter_map(|r| match r {
                StoredRef::Row(id) => Some(*id),
                StoredRef::Js(_) => None,
            })
            .collect();
        let (next_seq, acked) = (d.next_seq, d.acked);
        Ok(self
            .store
            .call(move |s| {
                s.hub_inbox_delete(&released)?;
                s.hub_inbox_set_seqs(&seqs)?;
                s.hub_inbox_append(&inserts)?;
                s.hub_save_stream(&key, next_seq, acked)
            })
            .await?)
    }

    /// NATS: written-but-unacknowledged messages are stored again with their sequence number
    /// (and the original acknowledged); never-written stored ones are given back (redelivered
    /// first, in order); never-written local ones are stored.
    async fn persist_nats(&self, n: &Nats, conn: &Conn, d: Drained) -> anyhow::Result<()> {
        let a = &conn.address;
        let mut ack = Vec::new();
        let mut nak = Vec::new();
        for r in d.released_rows {
            if let StoredRef::Js(m) = r {
                ack.push(m);
            }
        }
        for (seq, e) in &d.unacked {
            let dedup = format!("re:{}:{}:{}:{}", a.key, seq, self.node, conn.serial);
            n.store(a, e, Some(*seq), "", &dedup).await?;
            self.metrics.stored.fetch_add(1, Ordering::Relaxed);
            if let Some(StoredRef::Js(m)) = &e.row {
                ack.push(m.clone());
            }
        }
        for e in &d.queued {
            match &e.row {
                Some(StoredRef::Js(m)) => nak.push(m.clone()),
                _ => {
                    let dedup = format!("q:{}:{}", a.key, body_hash(&e.body));
                    n.store(a, e, None, "", &dedup).await?;
                    self.metrics.stored.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        n.settle(ack, false).await;
        n.settle(nak, true).await;
        n.save_stream_state(
            a,
            StreamState {
                next_seq: d.next_seq,
                acked: d.acked,
                tier: conn.opts.tier.map(|t| t as u8),
            },
        )
        .await
    }

    /// NATS down at disconnect: what the connection held waits in the outage buffer.
    fn hold_drained(&self, conn: &Conn, d: Drained) {
        for (seq, e) in d.unacked {
            // Stored ones stay unacknowledged in JetStream: redelivered after ack_wait (their
            // seq is lost; a copy here would be a duplicate).
            if e.row.is_some() {
                continue;
            }
            let mut copy = clone_entry(&e);
            copy.seq = Some(seq);
            self.hold(
                conn.address.clone(),
                Arc::new(copy),
                String::new(),
                true,
                Default::default(),
            );
        }
        for e in d.queued {
            // Stored ones stay in JetStream unacknowledged: redelivered after ack_wait.
            if e.row.is_none() {
                self.hold(
                    conn.address.clone(),
                    e,
                    String::new(),
                    true,
                    Default::default(),
                );
            }
        }
    }

    /// Flushes a live connection's stored-message bookkeeping (acknowledged, new seqs).
    pub async fn flush_bookkeeping(&self, conn: &Conn) {
        let (released, seqs, expired) = conn.mailbox.take_bookkeeping();
        self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
        let n = released.len();
        let backend = self.backend();
        self.release(&backend, released).await;
        let rows: Vec<(i64, u64)> = seqs
            .into_iter()
            .filter_map(|(r, s)| match r {
                StoredRef::Row(id) => Some((id, s)),
                StoredRef::Js(_) => None, // re-stored with its seq at disconnect
            })
            .collect();
        if !rows.is_empty()
            && let Err(e) = self.store.call(move |s| s.hub_inbox_set_seqs(&rows)).await
        {
            tracing::warn!(error = %e, "hub: could not record inbox sequence numbers");
        }
        if n > 0 {
            let mut st = self.state();
            if let Some(c) = st.stored.get_mut(&conn.address.key) {
                *c = c.saturating_sub(n);
            }
        }
    }

    /// Whether `a` is known (connected once or spawned), here or on any process: the local
    /// cache, then the presence bucket (online elsewhere), then the streams bucket.
    pub(super) async fn known(&self, backend: &Backend<'_>, a: &Address) -> bool {
        if self.state().known.contains_key(&a.key) {
            return true;
        }
        if let Backend::Nats(n) = backend
            && n.is_present(a).await
        {
            // Connected on another process right now (its counters may not be written yet).
            self.state().known.insert(a.key.clone(), None);
            return true;
        }
        if let Backend::Nats(n) = backend
            && let Ok(Some(st)) = n.stream_state(a).await
        {
            let tier = st.tier.and_then(|t| match t {
                0 => Some(super::envelope::Tier::Command),
                1 => Some(super::envelope::Tier::Pm),
                2 => Some(super::envelope::Tier::Worker),
                _ => None,
            });
            self.state().known.insert(a.key.clone(), tier);
            return true;
        }
        false
    }

    /// Stores a message for an offline (or leaving) recipient.
    pub(super) async fn store_for(
        &self,
        a: &Address,
        entry: Arc<Entry>,
        role: &str,
    ) -> Result<(), HubError> {
        let backend = self.backend();
        if let Backend::NatsDown = backend {
            return self.hold_or_refuse(a, entry, role, Default::default());
        }
        if !self.known(&backend, a).await {
            return Err(not_found(a));
        }
        let lock = self.address_lock(&a.key);
        let _guard = lock.lock().await;
        // It may have connected while we waited for the lock.
        let target = self.state().online.get(&a.key).cloned();
        if let Some(t) = target {
            match t.mailbox.push(entry.clone()) {
                Ok(()) => return Ok(()),
                Err(PushError::Full) => return Err(full(a, self.config.inbox_depth)),
                Err(PushError::Closed) => {}
            }
        }
        match backend {
            Backend::Nats(n) => {
                let count = n.stored_count(a).await.map_err(nats_failed)?;
                if count >= self.config.inbox_depth {
                    return Err(full(a, self.config.inbox_depth));
                }
                let dedup = format!("s:{}:{}", a.key, body_hash(&entry.body));
                n.store(a, &entry, None, role, &dedup)
                    .await
                    .map_err(nats_failed)?;
                self.metrics.stored.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            _ => self.store_sqlite(a, &entry, role).await,
        }
    }

    async fn store_sqlite(&self, a: &Address, entry: &Entry, role: &str) -> Result<(), HubError> {
        let cached = self.state().stored.get(&a.key).copied();
        let count = match cached {
            Some(n) => n,
            None => {
                let k = a.key.to_string();
                let n = self
                    .store
                    .call(move |s| s.hub_inbox_count(&k))
                    .await
                    .map_err(store_failed)?;
                self.state().stored.insert(a.key.clone(), n);
                n
            }
        };
        if count >= self.config.inbox_depth {
            return Err(full(a, self.config.inbox_depth));
        }
        let row = row_of(&a.key, None, entry, role);
        self.store
            .call(move |s| s.hub_inbox_append(&[row]))
            .await
            .map_err(store_failed)?;
        *self.state().stored.entry(a.key.clone()).or_insert(0) += 1;
        self.metrics.stored.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

pub(super) fn clone_entry(e: &Entry) -> Entry {
    Entry {
        body: e.body.clone(),
        priority: e.priority,
        expires_at: e.expires_at,
        received: e.received,
        seq: e.seq,
        row: None,
    }
}

fn body_hash(body: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(body.as_bytes())[..12])
}

fn row_of(key: &str, seq: Option<u64>, e: &Entry, role: &str) -> InboxRow {
    InboxRow {
        id: 0,
        address: key.to_string(),
        seq,
        priority: e.priority as i64,
        expires_at: e.expires_at,
        role: role.to_string(),
        body: e.body.to_string(),
    }
}

pub(super) fn store_failed(e: crate::store::StoreError) -> HubError {
    tracing::error!(error = %e, "hub: storage failed");
    HubError::new(
        ClawCode::E006,
        "the hub could not store the message",
        "retry later",
    )
}

pub(super) fn nats_failed(e: anyhow::Error) -> HubError {
    tracing::warn!(error = %e, "hub: NATS inbox operation failed");
    HubError::new(
        ClawCode::E005,
        "the hub's message store (NATS) failed",
        "retry later",
    )
}
