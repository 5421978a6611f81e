//! A connection's outbound queue: control frames first, then re-sent stored messages (in their
//! sequence order), then new messages by priority (critical, high, normal, low; first in, first
//! out within one priority). Sequence numbers are assigned when a message is taken for writing,
//! so they follow delivery order and a cumulative acknowledgement means "everything up to here".
//!
//! The bound is per recipient: queued + written-but-unacknowledged messages may not exceed
//! `depth`; a sender pushing past it gets [`PushError::Full`]. Control frames (heartbeats,
//! errors, service replies) have their own bound; a client that lets them pile up is not reading
//! and is closed by the caller.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

use super::envelope::Priority;

/// Where a stored message lives, so it can be deleted (acknowledged) once processed.
#[derive(Clone)]
pub enum StoredRef {
    /// A row of the SQLite inbox (embedded backend).
    Row(i64),
    /// A message of the JetStream inbox (NATS backend), acknowledged through its reply subject.
    Js(Arc<async_nats::jetstream::Message>),
}

impl std::fmt::Debug for StoredRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoredRef::Row(r) => write!(f, "Row({r})"),
            StoredRef::Js(m) => write!(f, "Js({:?})", m.reply),
        }
    }
}

impl PartialEq for StoredRef {
    fn eq(&self, o: &Self) -> bool {
        match (self, o) {
            (StoredRef::Row(a), StoredRef::Row(b)) => a == b,
            (StoredRef::Js(a), StoredRef::Js(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A routed message waiting for one recipient.
#[derive(Debug)]
pub struct Entry {
    /// The delivery envelope without its opening brace (shared by broadcast recipients).
    pub body: Arc<str>,
    pub priority: Priority,
    /// Unix ms after which it must not be delivered.
    pub expires_at: Option<i64>,
    /// When the hub received it (for the latency metric).
    pub received: Instant,
    /// Set for a message re-sent from storage with the sequence number it was first written with.
    pub seq: Option<u64>,
    /// Its place in the stored inbox, when it has one.
    pub row: Option<StoredRef>,
}

/// A frame that is not a sequenced message.
#[derive(Debug)]
pub enum Control {
    Text(String),
    Ping,
    Close(u16, String),
}

/// What the writer takes next.
#[derive(Debug)]
pub enum Next {
    Control(Control),
    Message { seq: u64, entry: Arc<Entry> },
}

#[derive(Debug, PartialEq, Eq)]
pub enum PushError {
    /// The recipient's unacknowledged messages reached the bound.
    Full,
    /// The connection is closing: route through storage instead.
    Closed,
}

#[derive(Default)]
struct Inner {
    closed: bool,
    control: VecDeque<Control>,
    resend: VecDeque<Arc<Entry>>,
    lanes: [VecDeque<Arc<Entry>>; 4],
    unacked: VecDeque<(u64, Arc<Entry>)>,
    next_seq: u64,
    acked: u64,
    /// Stored messages that were acknowledged (auto mode: written) and can be deleted.
    released_rows: Vec<StoredRef>,
    /// Stored messages that got a sequence number when written.
    sequenced_rows: Vec<(StoredRef, u64)>,
    expired: u64,
}

impl Inner {
    fn queued(&self) -> usize {
        self.resend.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>()
    }
}

pub struct Mailbox {
    inner: Mutex<Inner>,
    notify: Notify,
    depth: usize,
    control_limit: usize,
    manual_ack: bool,
}

/// Everything a closed mailbox still held, to be stored.
#[derive(Debug, Default)]
pub struct Drained {
    /// Written but not acknowledged, in sequence order.
    pub unacked: Vec<(u64, Arc<Entry>)>,
    /// Never written, in delivery order.
    pub queued: Vec<Arc<Entry>>,
    pub next_seq: u64,
    pub acked: u64,
    pub released_rows: Vec<StoredRef>,
    pub sequenced_rows: Vec<(StoredRef, u64)>,
}

impl Mailbox {
    pub fn new(depth: usize, manual_ack: bool, next_seq: u64, acked: u64) -> Self {
        Mailbox {
            inner: Mutex::new(Inner {
                next_seq: next_seq.max(1),
                acked,
                ..Inner::default()
            }),
            notify: Notify::new(),
            depth,
            control_limit: depth.max(64) * 2,
            manual_ack,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a routed message.
    pub fn push(&self, entry: Arc<Entry>) -> Result<(), PushError> {
        {
            let mut g = self.lock();
            if g.closed {
                return Err(PushError::Closed);
            }
            if g.queued() + g.unacked.len() >= self.depth {
                return Err(PushError::Full);
            }
            if entry.seq.is_some() {
                g.resend.push_back(entry);
            } else {
                let lane = 3 - entry.priority as usize;
                g.lanes[lane].push_back(entry);
            }
        }
        self.notify.notify_one();
        Ok(())
    }

    /// Queues a control frame. False when closed, or when the client has let too many pile
    /// up (it is not reading): the caller closes the connection.
    pub fn control(&self, c: Control) -> bool {
        {
            let mut g = self.lock();
            if g.closed || g.control.len() >= self.control_limit {
                return false;
            }
            g.control.push_back(c);
        }
        self.notify.notify_one();
        true
    }

    /// The next frame to write, if any. Expired messages are skipped (and counted).
    pub fn pop(&self, now_ms: i64) -> Option<Next> {
        let mut g = self.lock();
        if let Some(c) = g.control.pop_front() {
            return Some(Next::Control(c));
        }
        loop {
            let entry = match g.resend.pop_front() {
                Some(e) => e,
                None => {
                    let lane = g.lanes.iter().position(|l| !l.is_empty())?;
                    g.lanes[lane].pop_front()?
                }
            };
            if entry.expires_at.is_some_and(|t| t <= now_ms) {
                g.expired += 1;
                if let Some(r) = &entry.row {
                    g.released_rows.push(r.clone());
                }
                continue;
            }
            let seq = match entry.seq {
                Some(s) => {
                    g.next_seq = g.next_seq.max(s + 1);
                    s
                }
                None => {
                    let s = g.next_seq;
                    g.next_seq += 1;
                    if let Some(r) = &entry.row {
                        g.sequenced_rows.push((r.clone(), s));
                    }
                    s
                }
            };
            // Unacknowledged until the client acks it (manual) or the writer has written it
            // (auto: the writer calls `ack` after a successful flush).
            g.unacked.push_back((seq, entry.clone()));
            return Some(Next::Message { seq, entry });
        }
    }

    /// Whether a frame is queued for writing now (an expired message counts: `pop` skips it).
    pub fn has_next(&self) -> bool {
        let g = self.lock();
        !g.control.is_empty() || g.queued() > 0
    }

    /// Waits until something may be ready.
    pub async fn ready(&self) {
        self.notify.notified().await
    }

    /// A cumulative acknowledgement: everything up to `seq` was processed. Returns how many
    /// messages it released.
    pub fn ack(&self, seq: u64) -> usize {
        let n = self.ack_quietly(seq);
        if n > 0 {
            // The writer settles released stored messages.
            self.notify.notify_one();
        }
        n
    }

    /// [`Mailbox::ack`] from the writer itself (ack=auto, after a flush): it settles what
    /// this released right after, so nobody needs waking.
    pub fn ack_quietly(&self, seq: u64) -> usize {
        let mut g = self.lock();
        // Nothing beyond what was written can be acknowledged.
        let seq = seq.min(g.next_seq.saturating_sub(1));
        let mut n = 0;
        while g.unacked.front().is_some_and(|(s, _)| *s <= seq) {
            let (_, e) = g.unacked.pop_front().expect("front exists");
            if let Some(r) = &e.row {
                g.released_rows.push(r.clone());
            }
            n += 1;
        }
        if seq > g.acked {
            g.acked = seq;
        }
        n
    }

    /// Whether acknowledgements come from the client (`ack=manual`) or from the writer.
    pub fn manual_ack(&self) -> bool {
        self.manual_ack
    }

    /// The JetStream messages this mailbox holds (queued or unacknowledged).
    pub fn held_js(&self) -> Vec<Arc<async_nats::jetstream::Message>> {
        let g = self.lock();
        let js = |e: &Arc<Entry>| match &e.row {
            Some(StoredRef::Js(m)) => Some(m.clone()),
            _ => None,
        };
        g.unacked
            .iter()
            .filter_map(|(_, e)| js(e))
            .chain(g.resend.iter().filter_map(js))
            .chain(g.lanes.iter().flatten().filter_map(js))
            .collect()
    }

    /// JetStream stream sequences of the stored messages this mailbox holds, so a sweep does
    /// not take a redelivery of one of them for a new message.
    pub fn held_stream_seqs(&self) -> std::collections::HashSet<u64> {
        self.held_js()
            .iter()
            .filter_map(|m| m.info().ok().map(|i| i.stream_sequence))
            .collect()
    }

    /// Stored-row bookkeeping accumulated since the last call: rows to delete, rows that got a
    /// sequence number, and how many messages expired.
    pub fn take_bookkeeping(&self) -> (Vec<StoredRef>, Vec<(StoredRef, u64)>, u64) {
        let mut g = self.lock();
        (
            std::mem::take(&mut g.released_rows),
            std::mem::take(&mut g.sequenced_rows),
            std::mem::take(&mut g.expired),
        )
    }

    /// (queued, unacknowledged) right now.
    pub fn depth(&self) -> (usize, usize) {
        let g = self.lock();
        (g.queued(), g.unacked.len())
    }

    pub fn counters(&self) -> (u64, u64) {
        let g = self.lock();
        (g.next_seq, g.acked)
    }

    /// Closes the mailbox (later pushes fail with `Closed`) and hands back the messages it held;
    /// control frames already queued (an error, a close) are still written.
    pub fn close(&self) -> Drained {
        let mut g = self.lock();
        g.closed = true;
        let mut queued: Vec<Arc<Entry>> = g.resend.drain(..).collect();
        for lane in 0..4 {
            queued.extend(g.lanes[lane].drain(..));
        }
        let d = Drained {
            unacked: g.unacked.drain(..).collect(),
            queued,
            next_seq: g.next_seq,
            acked: g.acked,
            released_rows: std::mem::take(&mut g.released_rows),
            sequenced_rows: std::mem::take(&mut g.sequenced_rows),
        };
        drop(g);
        self.notify.notify_one();
        d
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &str, p: Priority) -> Arc<Entry> {
        Arc::new(Entry {
            body: body.into(),
            priority: p,
            expires_at: None,
            received: Instant::now(),
            seq: None,
            row: None,
        })
    }

    fn take(m: &Mailbox) -> Vec<(u64, String)> {
        let mut out = vec![];
        while let Some(n) = m.pop(0) {
            if let Next::Message { seq, entry } = n {
                out.push((seq, entry.body.to_string()));
            }
        }
        out
    }

    #[test]
    fn priority_overtakes_and_seq_follows_delivery_order() {
        let m = Mailbox::new(10, false, 1, 0);
        m.push(entry("n1", Priority::Normal)).unwrap();
        m.push(entry("l1", Priority::Low)).unwrap();
        m.push(entry("c1", Priority::Critical)).unwrap();
        m.push(entry("n2", Priority::Normal)).unwrap();
        m.push(entry("h1", Priority::High)).unwrap();
        assert_eq!(
            take(&m),
            vec![
                (1, "c1".into()),
                (2, "h1".into()),
                (3, "n1".into()),
                (4, "n2".into()),
                (5, "l1".into())
            ]
        );
    }

    #[test]
    fn bound_counts_unacked_in_manual_mode() {
        let m = Mailbox::new(2, true, 1, 0);
        m.push(entry("a", Priority::Normal)).unwrap();
        m.push(entry("b", Priority::Normal)).unwrap();
        assert_eq!(m.push(entry("c", Priority::Normal)), Err(PushError::Full));
        assert_eq!(take(&m).len(), 2);
        assert_eq!(m.push(entry("c", Priority::Normal)), Err(PushError::Full));
        assert_eq!(m.ack(1), 1);
        m.push(entry("c", Priority::Normal)).unwrap();
        assert_eq!(m.counters(), (3, 1));
        let d = m.close();
        assert_eq!(d.unacked.len(), 1);
        assert_eq!(d.unacked[0].0, 2);
        assert_eq!(d.queued.len(), 1);
        assert_eq!(m.push(entry("d", Priority::Normal)), Err(PushError::Closed));
    }

    #[test]
    fn expired_are_skipped_and_counted_and_resends_keep_their_seq() {
        let m = Mailbox::new(10, false, 1, 0);
        let mut e = Entry {
            body: "old".into(),
            priority: Priority::Normal,
            expires_at: Some(100),
            received: Instant::now(),
            seq: None,
            row: Some(StoredRef::Row(7)),
        };
        m.push(Arc::new(e)).unwrap();
        e = Entry {
            body: "again".into(),
            priority: Priority::Low,
            expires_at: None,
            received: Instant::now(),
            seq: Some(41),
            row: Some(StoredRef::Row(8)),
        };
        m.push(Arc::new(e)).unwrap();
        m.push(entry("new", Priority::Critical)).unwrap();
        let mut out = vec![];
        while let Some(Next::Message { seq, entry }) = m.pop(200) {
            out.push((seq, entry.body.to_string()));
        }
        assert_eq!(out, vec![(41, "again".into()), (42, "new".into())]);
        // The expired one is released at once; the written one (auto mode) only once the
        // writer acknowledges it after its flush.
        let (first, _, expired) = m.take_bookkeeping();
        assert_eq!((first, expired), (vec![StoredRef::Row(7)], 1));
        m.ack(42);
        assert_eq!(m.take_bookkeeping().0, vec![StoredRef::Row(8)]);
    }

    #[test]
    fn control_first_and_bounded() {
        let m = Mailbox::new(1, false, 1, 0);
        m.push(entry("a", Priority::Normal)).unwrap();
        assert!(m.control(Control::Ping));
        assert!(matches!(m.pop(0), Some(Next::Control(Control::Ping))));
        for _ in 0..128 {
            assert!(m.control(Control::Ping));
        }
        assert!(!m.control(Control::Ping));
    }
}
