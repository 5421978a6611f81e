//! Stored inboxes: registering a connection (restoring what was stored for it from the resume
//! point), storing what a leaving connection had not acknowledged, and storing messages for
//! offline recipients. Every change of one address's inbox runs under that address's lock.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::envelope::{ClawCode, HubError, PeerType, Priority};
use super::mailbox::{Control, Entry, Mailbox, PushError};

/// WebSocket close code of a connection replaced by a newer one with the same identity.
pub const CLOSE_REPLACED: u16 = 4001;
use super::route::{full, not_found};
use super::{Address, Conn, ConnOptions, Hub, group_key};
use crate::store::hub::InboxRow;
use crate::util::now_ms;

impl Hub {
    /// Registers a connection: replaces an older connection of the same address, restores its
    /// stored inbox from the resume point, and queues the welcome heartbeat and resume report.
    pub async fn attach(
        &self,
        address: Address,
        opts: ConnOptions,
        token: CancellationToken,
    ) -> anyhow::Result<Arc<Conn>> {
        let lock = self.address_lock(&address.key);
        let _guard = lock.lock().await;
        let old = self.state().online.get(&address.key).cloned();
        if let Some(old) = old {
            tracing::info!(address = %address.key, "hub: a new connection replaces the old one");
            old.send_error(
                self,
                None,
                "-",
                &HubError::new(
                    ClawCode::E002,
                    "another connection with this identity replaced this one",
                    "do not run two clients with the same identity",
                )
                .with_extra(serde_json::json!({"reason": "replaced"})),
            );
            old.mailbox
                .control(Control::Close(CLOSE_REPLACED, "replaced".into()));
            self.take_offline(&old).await;
            old.token.cancel();
        }
        let key = address.key.to_string();
        let tier = opts.tier.map(|t| t.as_str().to_string());
        let (stream, rows) = self
            .store
            .call(move |s| {
                let st = s.hub_open_stream(&key, tier.as_deref())?;
                Ok((st, s.hub_inbox_load(&key)?))
            })
            .await?;
        let (mut next_seq, acked) = stream;
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
        let (mut drop_rows, mut expired) = (Vec::new(), 0u64);
        let mut resend = Vec::new();
        let mut fresh = Vec::new();
        for r in rows {
            if r.expires_at.is_some_and(|t| t <= now) {
                expired += 1;
                drop_rows.push(r.id);
                continue;
            }
            let entry = Arc::new(Entry {
                body: r.body.into(),
                priority: Priority::from_index(r.priority),
                expires_at: r.expires_at,
                received: Instant::now(),
                seq: r.seq,
                row: Some(r.id),
            });
            match r.seq {
                Some(s) if s <= acked_now => drop_rows.push(r.id),
                Some(_) => resend.push(entry),
                None => fresh.push(entry),
            }
        }
        resend.sort_by_key(|e| e.seq);
        self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
        let resent = resend.len();
        let pending = fresh.len();
        let conn = Arc::new(Conn {
            mailbox: Mailbox::new(
                self.config.inbox_depth,
                opts.manual_ack,
                next_seq,
                acked_now,
            ),
            address,
            opts,
            token,
            serial: self.serial.fetch_add(1, Ordering::Relaxed),
        });
        // The seed's lifecycle: the hub greets a new connection with a heartbeat.
        conn.control_envelope("heartbeat", "-", &self.heartbeat_payload(&conn, true));
        conn.reply(
            "resume",
            "-",
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
        for e in resend.into_iter().chain(fresh) {
            // Stored inboxes are bounded by the same depth, so these fit; a failure means the
            // bound was lowered since, and the row simply stays stored for the next connection.
            let _ = conn.mailbox.push(e);
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
        if !drop_rows.is_empty() || claimed != acked || next_seq != stream.0 {
            let key = conn.address.key.to_string();
            self.store
                .call(move |s| {
                    s.hub_inbox_delete(&drop_rows)?;
                    s.hub_save_stream(&key, next_seq, acked_now)
                })
                .await?;
        }
        if conn.address.ty == PeerType::Agent {
            self.society_join(&conn).await;
        }
        Ok(conn)
    }

    /// Unregisters a finished connection and stores whatever it had not acknowledged.
    pub async fn detach(&self, conn: &Arc<Conn>) {
        let lock = self.address_lock(&conn.address.key);
        let _guard = lock.lock().await;
        self.take_offline(conn).await;
    }

    /// Removes `conn` from routing (if still registered) and stores its mailbox. Idempotent.
    /// Caller holds the address lock.
    async fn take_offline(&self, conn: &Arc<Conn>) {
        {
            let mut st = self.state();
            let k = &conn.address.key;
            if st.online.get(k).is_some_and(|c| c.serial == conn.serial) {
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
        }
        if conn.mailbox.is_closed() {
            return;
        }
        let d = conn.mailbox.close();
        let key = conn.address.key.to_string();
        let mut inserts = Vec::new();
        let mut seqs = d.sequenced_rows;
        let mut kept = 0usize;
        for (seq, e) in &d.unacked {
            kept += 1;
            match e.row {
                Some(r) => seqs.push((r, *seq)),
                None => inserts.push(row_of(&key, Some(*seq), e)),
            }
        }
        for e in &d.queued {
            kept += 1;
            if e.row.is_none() {
                inserts.push(row_of(&key, None, e));
            }
        }
        self.metrics
            .stored
            .fetch_add(inserts.len() as u64, Ordering::Relaxed);
        let released = d.released_rows;
        let (next_seq, acked) = (d.next_seq, d.acked);
        let k2 = key.clone();
        let res = self
            .store
            .call(move |s| {
                s.hub_inbox_delete(&released)?;
                s.hub_inbox_set_seqs(&seqs)?;
                s.hub_inbox_append(&inserts)?;
                s.hub_save_stream(&k2, next_seq, acked)
            })
            .await;
        match res {
            Ok(()) => {
                self.state().stored.insert(conn.address.key.clone(), kept);
            }
            Err(e) => {
                tracing::error!(address = %key, error = %e, "hub: could not store an inbox at disconnect")
            }
        }
    }

    /// Flushes a live connection's stored-row bookkeeping (acknowledged rows, new seqs).
    pub async fn flush_bookkeeping(&self, conn: &Conn) {
        let (released, seqs, expired) = conn.mailbox.take_bookkeeping();
        self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
        if released.is_empty() && seqs.is_empty() {
            return;
        }
        let n = released.len();
        let res = self
            .store
            .call(move |s| {
                s.hub_inbox_delete(&released)?;
                s.hub_inbox_set_seqs(&seqs)
            })
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, "hub: stored inbox bookkeeping failed; will redeliver");
        } else if n > 0 {
            let mut st = self.state();
            if let Some(c) = st.stored.get_mut(&conn.address.key) {
                *c = c.saturating_sub(n);
            }
        }
    }

    /// Stores a message for an offline (or leaving) recipient.
    pub(super) async fn store_for(&self, a: &Address, entry: Arc<Entry>) -> Result<(), HubError> {
        if !self.state().known.contains_key(&a.key) {
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
        let row = row_of(&a.key, None, &entry);
        self.store
            .call(move |s| s.hub_inbox_append(&[row]))
            .await
            .map_err(store_failed)?;
        *self.state().stored.entry(a.key.clone()).or_insert(0) += 1;
        self.metrics.stored.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn row_of(key: &str, seq: Option<u64>, e: &Entry) -> InboxRow {
    InboxRow {
        id: 0,
        address: key.to_string(),
        seq,
        priority: e.priority as i64,
        expires_at: e.expires_at,
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
