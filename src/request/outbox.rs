//! The bounded queue between a session's producers (session task, pipeline tasks) and the one
//! writer task that owns the socket's sink.
//!
//! Frames tied to a request carry a guard: the writer drops any such frame whose request was
//! cancelled before it reached the socket, which is how "after the interrupted final frame,
//! nothing more for that request" holds even for frames already queued. A producer that cannot
//! enqueue within the slow-client timeout closes the connection: a client that stops reading
//! costs at most `outbound_queue_frames` frames of memory.
//!
//! # Sockets come and go, the outbox stays (session resume)
//! A session keeps one outbox for its whole life; every clone (the session task, each request's
//! pipeline) shares it. What it writes to is the *current* socket's queue, which [`Outbox::attach`]
//! and [`Outbox::detach`] swap when a socket drops and a new one resumes the session. With a
//! replay buffer ([`Outbox::enable_replay`], `request::replay`), every frame of a reply (a
//! RESPONSE, or an ERROR with a request id) is also kept, numbered, until the client has it:
//! - *live*: the frame is queued to the socket and kept; frames are numbered and queued under one
//!   lock, so the queue's order is their numbering, and a WebSocket ping queued after them
//!   ([`Outbox::ping`]) acknowledges all of them when its pong comes back ([`Outbox::pong`]);
//! - *away* (no socket): the frame is only kept; a reply that outgrows the buffer is cancelled;
//! - *replaying* (a new socket, the kept frames not all re-sent yet): producers' frames are kept
//!   and the session sends them in order ([`Outbox::next_replay`]); once none is left the outbox
//!   is live again, in the same locked step, so nothing is sent twice or out of order.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::inflight::RequestCtx;
use super::replay::{FrameKey, Limits, Overflow, ReplayLog, ResumePlan};
use crate::metrics::Metrics;
use crate::protocol::{SeenUpTo, ServerMessage, encode_server, encode_text_chunk};
use crate::util::now_ms;

/// What the writer sends.
#[derive(Debug)]
pub enum OutKind {
    Text(String),
    /// A WebSocket ping carrying this mark (8 bytes, big-endian): a pong that echoes it
    /// acknowledges every frame queued before it.
    Ping(u64),
    /// Close the WebSocket with this code and reason, then stop writing.
    Close {
        code: u16,
        reason: String,
    },
}

#[derive(Debug)]
pub struct OutFrame {
    pub kind: OutKind,
    /// Set for frames that belong to a request: skipped once the request is cancelled; the text
    /// bytes are credited to the request once written.
    pub guard: Option<(Arc<RequestCtx>, usize)>,
}

impl OutFrame {
    /// Whether the writer should still send this frame; drops frames of cancelled requests.
    pub fn live(&self) -> bool {
        self.guard
            .as_ref()
            .is_none_or(|(c, _)| !c.token.is_cancelled())
    }

    /// Called by the writer after the frame was written.
    pub fn written(&self) {
        if let Some((ctx, bytes)) = &self.guard {
            ctx.add_delivered(*bytes);
        }
    }
}

/// A socket's bounded frame queue (see [`queue`]).
pub use queue::{Receiver as OutboxRx, Sender as OutboxTx};

#[derive(Clone)]
pub struct Outbox {
    link: Arc<Link>,
    slow_timeout: Duration,
    capacity: usize,
    metrics: Option<Arc<Metrics>>,
}

/// What every clone of one outbox shares.
struct Link {
    session_id: std::sync::RwLock<String>,
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Live,
    Replaying,
    Away,
}

struct State {
    /// The current socket's queue; None while away.
    tx: Option<OutboxTx>,
    /// The current socket's token: cancelled here when its client is too slow.
    conn: CancellationToken,
    mode: Mode,
    /// Frames of replies kept for a resume (None: resume off for this outbox).
    replay: Option<ReplayLog>,
    /// A ping is queued or out: its pong acknowledges the frames numbered below this.
    ping: Option<u64>,
}

/// Whether a frame still has to go to the socket after being kept.
enum Kept {
    /// Nothing more to do: kept for later (away, replaying, or the socket is gone).
    Done(bool),
    /// Queue it (and maybe wait for room) on this sender.
    Send(OutboxTx),
}

impl Outbox {
    pub fn new(
        capacity: usize,
        conn: CancellationToken,
        slow_timeout: Duration,
    ) -> (Outbox, OutboxRx) {
        let (tx, rx) = queue::channel(capacity);
        let state = State {
            tx: Some(tx),
            conn,
            mode: Mode::Live,
            replay: None,
            ping: None,
        };
        (
            Outbox {
                link: Arc::new(Link {
                    session_id: Default::default(),
                    state: Mutex::new(state),
                }),
                slow_timeout,
                capacity,
                metrics: None,
            },
            rx,
        )
    }

    /// Records queue depths and ERROR frames in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.link.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the frames of replies from now on, within `limits`, so the session can be resumed.
    pub fn enable_replay(&self, limits: Limits) {
        self.state().replay = Some(ReplayLog::new(limits));
    }

    /// The socket is gone: frames of replies are kept (others dropped) until [`Outbox::attach`].
    pub fn detach(&self) {
        let mut st = self.state();
        st.tx = None;
        st.mode = Mode::Away;
        st.ping = None;
    }

    /// Writes to `other`'s socket from now on (a resume). Frames are kept, not sent, until the
    /// session has replayed what the client missed ([`Outbox::next_replay`]).
    pub fn attach(&self, other: &Outbox) {
        let (tx, conn) = {
            let o = other.state();
            (o.tx.clone(), o.conn.clone())
        };
        let mut st = self.state();
        st.tx = tx;
        st.conn = conn;
        st.mode = Mode::Replaying;
        st.ping = None;
    }

    /// Applies a resuming client's `last_seen` to the kept frames (`request::replay`).
    pub fn resume<'a>(
        &self,
        last_seen: impl IntoIterator<Item = (&'a str, &'a SeenUpTo)>,
    ) -> ResumePlan {
        match self.state().replay.as_mut() {
            Some(log) => log.resume(last_seen),
            None => ResumePlan {
                nothing_kept: last_seen.into_iter().map(|(r, _)| r.to_string()).collect(),
                ..Default::default()
            },
        }
    }

    /// The next kept frame to re-send after a resume (queue it with [`Outbox::push`]); None
    /// once all were: the outbox is live again from that moment.
    pub fn next_replay(&self) -> Option<OutFrame> {
        let mut st = self.state();
        match st.replay.as_mut().and_then(|l| l.next_unsent()) {
            Some((text, guard)) => Some(OutFrame {
                kind: OutKind::Text(text.to_string()),
                guard,
            }),
            None => {
                if st.mode == Mode::Replaying {
                    st.mode = Mode::Live;
                }
                None
            }
        }
    }

    /// Whether frames are kept that the client has not acknowledged.
    pub fn has_kept(&self) -> bool {
        self.state().replay.as_ref().is_some_and(|l| !l.is_empty())
    }

    /// (frames, bytes) kept now.
    pub fn kept(&self) -> (usize, usize) {
        let st = self.state();
        st.replay.as_ref().map_or((0, 0), |l| (l.len(), l.bytes()))
    }

    /// Queues a WebSocket ping whose pong will acknowledge every frame kept so far; nothing when
    /// a ping is already out, nothing is kept, or the outbox is not live.
    pub fn ping(&self) {
        let mut st = self.state();
        if st.ping.is_some() || st.mode != Mode::Live {
            return;
        }
        let Some(cutoff) = st
            .replay
            .as_ref()
            .filter(|l| !l.is_empty())
            .map(|l| l.next_no())
        else {
            return;
        };
        let sent = st.tx.as_ref().is_some_and(|tx| {
            tx.try_send(OutFrame {
                kind: OutKind::Ping(cutoff),
                guard: None,
            })
            .is_ok()
        });
        if sent {
            st.ping = Some(cutoff);
        }
    }

    /// A pong came back echoing `mark`: when it is the outstanding ping's, the frames queued
    /// before that ping reached the client. Any other pong (RFC 6455 allows unsolicited ones,
    /// a stale one, an empty one) acknowledges nothing: a frame is dropped from the replay
    /// buffer only once the client has provably read past it.
    pub fn pong(&self, mark: Option<u64>) {
        let mut st = self.state();
        if mark.is_none() || st.ping != mark {
            return;
        }
        if let Some(cutoff) = st.ping.take()
            && let Some(log) = st.replay.as_mut()
        {
            log.acked(cutoff);
        }
    }

    /// Sets the session id written into every later frame's envelope.
    pub fn set_session_id(&self, id: &str) {
        *self
            .link
            .session_id
            .write()
            .unwrap_or_else(|p| p.into_inner()) = id.to_string();
    }

    pub fn session_id(&self) -> String {
        self.link
            .session_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn encode(&self, msg: &ServerMessage) -> String {
        let sid = self
            .link
            .session_id
            .read()
            .unwrap_or_else(|p| p.into_inner());
        encode_server(&sid, msg, now_ms())
    }

    /// Queues a message. Returns false when the connection is gone (or just closed as too slow)
    /// and the frame was not kept for a resume either.
    pub async fn send(&self, msg: &ServerMessage) -> bool {
        if let (Some(m), ServerMessage::Error(e)) = (&self.metrics, msg) {
            m.error(e.error_code);
        }
        let key = key_of(msg, None);
        let frame = OutFrame {
            kind: OutKind::Text(self.encode(msg)),
            guard: None,
        };
        self.push_keyed(frame, key).await
    }

    /// Queues a message of a request; dropped by the writer if the request gets cancelled first.
    pub async fn send_for(
        &self,
        ctx: &Arc<RequestCtx>,
        msg: &ServerMessage,
        text_bytes: usize,
    ) -> bool {
        if ctx.token.is_cancelled() {
            return false;
        }
        let key = key_of(msg, Some(ctx));
        self.push_keyed(
            OutFrame {
                kind: OutKind::Text(self.encode(msg)),
                guard: Some((ctx.clone(), text_bytes)),
            },
            key,
        )
        .await
    }

    /// Queues one streamed text chunk of a request (RESPONSE with `text_stream_seq` `seq`),
    /// encoded straight from the borrowed text: the per-token path.
    pub async fn send_text_for(&self, ctx: &Arc<RequestCtx>, seq: i64, text: &str) -> bool {
        if ctx.token.is_cancelled() {
            return false;
        }
        let encoded = {
            let sid = self
                .link
                .session_id
                .read()
                .unwrap_or_else(|p| p.into_inner());
            encode_text_chunk(&sid, &ctx.request_id, seq, text, now_ms())
        };
        self.push_keyed(
            OutFrame {
                kind: OutKind::Text(encoded),
                guard: Some((ctx.clone(), text.len())),
            },
            Some((ctx.request_id.as_str(), FrameKey::text(seq))),
        )
        .await
    }

    /// Queues a close frame.
    pub async fn close(&self, code: u16, reason: &str) {
        let _ = self
            .push(OutFrame {
                kind: OutKind::Close {
                    code,
                    reason: reason.to_string(),
                },
                guard: None,
            })
            .await;
    }

    /// Queues a frame to the current socket (not kept for a resume).
    pub async fn push(&self, frame: OutFrame) -> bool {
        self.push_keyed(frame, None).await
    }

    /// Keeps a frame of a reply (when the outbox keeps them) and, when live, queues it in the
    /// same locked step (with `reserved` room when the caller waited for it). Returns what is
    /// left to do.
    fn keep_or_queue(
        &self,
        frame: &mut Option<OutFrame>,
        key: Option<(&str, FrameKey)>,
        reserved: Option<queue::Permit>,
    ) -> Kept {
        let mut st = self.state();
        let keeping = st.replay.is_some().then_some(key).flatten();
        let Some((request, key)) = keeping else {
            return match (&st.tx, st.mode) {
                // A closed queue (the writer is gone) is not waited on: a frame of a reply, not
                // kept, would otherwise be retried without end.
                (Some(tx), Mode::Live | Mode::Replaying) if !tx.is_closed() => {
                    Kept::Send(tx.clone())
                }
                _ => Kept::Done(false),
            };
        };
        let f = frame.as_ref().expect("frame present");
        let text: Arc<str> = match &f.kind {
            OutKind::Text(t) => t.as_str().into(),
            _ => return Kept::Done(false),
        };
        let guard = f.guard.clone();
        let live = st.mode == Mode::Live;
        let current = st.tx.as_ref().filter(|_| live);
        let permit = match (current, reserved) {
            (Some(tx), Some(p)) if p.same_channel(tx) => Some(p),
            (Some(tx), _) => match tx.clone().try_reserve_owned() {
                Ok(p) => Some(p),
                Err(queue::TryError::Full) => return Kept::Send(tx.clone()),
                // The socket just went: kept, to be sent on resume.
                Err(queue::TryError::Closed) => None,
            },
            // Away or replaying: kept, to be sent on resume or by the replay.
            (None, _) => None,
        };
        let sent = permit.is_some();
        let log = st.replay.as_mut().expect("checked");
        if let Err(Overflow) = log.record(request, key, text, guard.clone(), sent)
            && !live
            && let Some((ctx, _)) = &guard
        {
            tracing::warn!(request_id = %request, "reply outgrew the replay buffer while the client is away; stopping it");
            ctx.token.cancel();
        }
        match permit {
            Some(p) => {
                p.send(frame.take().expect("frame present"));
                Kept::Done(true)
            }
            None => Kept::Done(!guard.is_some_and(|(c, _)| c.token.is_cancelled())),
        }
    }

    async fn push_keyed(&self, frame: OutFrame, key: Option<(&str, FrameKey)>) -> bool {
        let mut frame = Some(frame);
        let mut reserved = None;
        loop {
            let tx = match self.keep_or_queue(&mut frame, key, reserved.take()) {
                Kept::Done(ok) => return ok,
                Kept::Send(tx) => tx,
            };
            if tx.is_closed() && key.is_none() {
                return false;
            }
            if let Some(m) = &self.metrics {
                m.outbox_depth
                    .observe(self.capacity.saturating_sub(tx.capacity()) as f64);
            }
            let permit = match tokio::time::timeout(self.slow_timeout, tx.reserve_owned()).await {
                Ok(Ok(p)) => p,
                // The socket went: a kept frame is kept on the next turn.
                Ok(Err(_)) if key.is_some() => continue,
                Ok(Err(_)) => return false,
                Err(_) => {
                    tracing::warn!(
                        timeout_s = self.slow_timeout.as_secs_f64(),
                        "client is not reading: outbound queue full; closing the connection"
                    );
                    self.state().conn.cancel();
                    if key.is_some() {
                        continue;
                    }
                    return false;
                }
            };
            if key.is_none() {
                permit.send(frame.take().expect("frame present"));
                return true;
            }
            // A kept frame is numbered and queued in one locked step (next turn), with this room
            // unless the socket changed meanwhile.
            reserved = Some(permit);
        }
    }
}

/// Which request and place a frame belongs to, for the replay buffer (`request::replay`).
fn key_of<'a>(msg: &'a ServerMessage, ctx: Option<&RequestCtx>) -> Option<(&'a str, FrameKey)> {
    match msg {
        ServerMessage::Response(r) => {
            let end = r.text_stream_seq == Some(-1)
                || r.voice_stream_seq == Some(-1)
                || r.interrupted == Some(true);
            let unsequenced = match (r.text_stream_seq, r.voice_stream_seq, end) {
                (None, None, false) => Some(ctx?.next_unsequenced()),
                _ => None,
            };
            Some((
                r.request_id.as_str(),
                FrameKey {
                    text: r.text_stream_seq,
                    voice: r.voice_stream_seq,
                    unsequenced,
                    end,
                },
            ))
        }
        ServerMessage::Error(e) => e.request_id.as_deref().map(|r| (r, FrameKey::end())),
        _ => None,
    }
}

/// A socket's frame queue: bounded like `tokio::sync::mpsc::channel(capacity)` (the same
/// operations: fair waiting for room, reserve then send, the receiver ends once every sender is
/// gone), but sized by what it holds. A tokio channel allocates its first 32-slot block with the
/// channel (32 × 48 bytes here) besides its ~500-byte shared part, ~2 KiB of every idle session;
/// this one is a `VecDeque` allocated on the first frame and given back after a burst, behind
/// one small shared part (~200 bytes).
pub mod queue {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};

    use tokio::sync::{Notify, Semaphore, TryAcquireError};

    use super::OutFrame;

    /// Above this many slots, an emptied queue gives its buffer back (a burst is over).
    const KEEP_SLOTS: usize = 8;

    struct Shared {
        frames: Mutex<VecDeque<OutFrame>>,
        /// Free slots; a frame takes one when reserved or sent, the receiver gives it back.
        room: Semaphore,
        capacity: usize,
        /// The receiver waits here for a frame or for the last sender to go.
        readable: Notify,
        senders: AtomicUsize,
        /// The receiver is gone.
        closed: AtomicBool,
    }

    impl Shared {
        fn frames(&self) -> MutexGuard<'_, VecDeque<OutFrame>> {
            self.frames.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Queues a frame whose slot was already taken.
        fn push(&self, frame: OutFrame) {
            if self.closed.load(Ordering::Acquire) {
                return; // dropped, as a channel whose receiver is gone drops it
            }
            self.frames().push_back(frame);
            self.readable.notify_one();
        }
    }

    /// Why a frame could not be queued or a slot reserved right now.
    #[derive(Debug, PartialEq, Eq)]
    pub enum TryError {
        Full,
        Closed,
    }

    /// A bounded queue for `capacity` frames.
    pub fn channel(capacity: usize) -> (Sender, Receiver) {
        let shared = Arc::new(Shared {
            frames: Mutex::new(VecDeque::new()),
            room: Semaphore::new(capacity),
            capacity,
            readable: Notify::new(),
            senders: AtomicUsize::new(1),
            closed: AtomicBool::new(false),
        });
        (Sender(shared.clone()), Receiver(shared))
    }

    pub struct Sender(Arc<Shared>);

    impl Clone for Sender {
        fn clone(&self) -> Self {
            self.0.senders.fetch_add(1, Ordering::Relaxed);
            Sender(self.0.clone())
        }
    }

    impl Drop for Sender {
        fn drop(&mut self) {
            if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.0.readable.notify_one(); // the receiver's end
            }
        }
    }

    impl Sender {
        /// Queues `frame` when there is room.
        pub fn try_send(&self, frame: OutFrame) -> Result<(), TryError> {
            let p = self.clone().try_reserve_owned()?;
            p.send(frame);
            Ok(())
        }

        /// Takes a slot, waiting for room (in turn with other waiters); Err when the receiver is
        /// gone. Cancel-safe: a wait given up takes nothing.
        pub async fn reserve_owned(self) -> Result<Permit, TryError> {
            match self.0.room.acquire().await {
                Ok(p) => p.forget(),
                Err(_) => return Err(TryError::Closed),
            }
            Ok(Permit(Some(self)))
        }

        /// Takes a slot if one is free now.
        pub fn try_reserve_owned(self) -> Result<Permit, TryError> {
            if self.is_closed() {
                return Err(TryError::Closed);
            }
            match self.0.room.try_acquire() {
                Ok(p) => p.forget(),
                Err(TryAcquireError::NoPermits) => return Err(TryError::Full),
                Err(TryAcquireError::Closed) => return Err(TryError::Closed),
            }
            Ok(Permit(Some(self)))
        }

        pub fn is_closed(&self) -> bool {
            self.0.closed.load(Ordering::Acquire)
        }

        pub fn same_channel(&self, other: &Sender) -> bool {
            Arc::ptr_eq(&self.0, &other.0)
        }

        /// Free slots now.
        pub fn capacity(&self) -> usize {
            self.0.room.available_permits()
        }

        /// Slots in all.
        pub fn max_capacity(&self) -> usize {
            self.0.capacity
        }
    }

    /// A slot taken for one frame; given back if dropped unused.
    pub struct Permit(Option<Sender>);

    impl Permit {
        pub fn send(mut self, frame: OutFrame) {
            if let Some(tx) = self.0.take() {
                tx.0.push(frame);
            }
        }

        pub fn same_channel(&self, tx: &Sender) -> bool {
            self.0.as_ref().is_some_and(|s| s.same_channel(tx))
        }
    }

    impl Drop for Permit {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                tx.0.room.add_permits(1);
            }
        }
    }

    /// The writer's end; dropping it closes the queue (frames queued are dropped, senders
    /// waiting for room are told).
    pub struct Receiver(Arc<Shared>);

    /// Nothing to take now (`Empty`) or ever again (`Disconnected`: every sender is gone).
    #[derive(Debug, PartialEq, Eq)]
    pub enum TryRecvError {
        Empty,
        Disconnected,
    }

    impl Receiver {
        pub fn try_recv(&mut self) -> Result<OutFrame, TryRecvError> {
            let mut frames = self.0.frames();
            match frames.pop_front() {
                Some(f) => {
                    if frames.is_empty() && frames.capacity() > KEEP_SLOTS {
                        *frames = VecDeque::new();
                    }
                    drop(frames);
                    self.0.room.add_permits(1);
                    Ok(f)
                }
                None if self.0.senders.load(Ordering::Acquire) == 0 => {
                    Err(TryRecvError::Disconnected)
                }
                None => Err(TryRecvError::Empty),
            }
        }

        /// The next frame; None once the queue is empty and every sender is gone. Cancel-safe.
        pub async fn recv(&mut self) -> Option<OutFrame> {
            loop {
                match self.try_recv() {
                    Ok(f) => return Some(f),
                    Err(TryRecvError::Disconnected) => return None,
                    // A push or the last sender's drop after the check leaves a permit in
                    // `readable` (one receiver), so no wake-up is lost.
                    Err(TryRecvError::Empty) => self.0.readable.notified().await,
                }
            }
        }

        pub fn is_empty(&self) -> bool {
            self.0.frames().is_empty()
        }

        pub fn len(&self) -> usize {
            self.0.frames().len()
        }
    }

    impl Drop for Receiver {
        fn drop(&mut self) {
            self.0.closed.store(true, Ordering::Release);
            self.0.room.close();
            let frames = std::mem::take(&mut *self.0.frames());
            drop(frames);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::super::OutKind;
        use super::*;

        fn frame(t: &str) -> OutFrame {
            OutFrame {
                kind: OutKind::Text(t.into()),
                guard: None,
            }
        }

        fn text(f: OutFrame) -> String {
            match f.kind {
                OutKind::Text(t) => t,
                k => panic!("{k:?}"),
            }
        }

        #[tokio::test(start_paused = true)]
        async fn bounded_in_order_and_ends_with_its_last_sender() {
            let (tx, mut rx) = channel(2);
            tx.try_send(frame("a")).unwrap();
            let p = tx.clone().try_reserve_owned().unwrap();
            assert_eq!(tx.try_send(frame("x")), Err(TryError::Full));
            assert_eq!(tx.capacity(), 0);
            // A waiter gets the slot the receiver gives back.
            let waiter = tokio::spawn({
                let tx = tx.clone();
                async move { tx.reserve_owned().await.map(|p| p.send(frame("c"))) }
            });
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished());
            p.send(frame("b"));
            assert_eq!(text(rx.recv().await.unwrap()), "a");
            waiter.await.unwrap().unwrap();
            assert_eq!(text(rx.try_recv().unwrap()), "b");
            assert_eq!(text(rx.recv().await.unwrap()), "c");
            assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Empty);
            // A permit dropped unused gives its slot back.
            drop(tx.clone().try_reserve_owned().unwrap());
            assert_eq!(tx.capacity(), 2);
            drop(tx);
            assert!(rx.recv().await.is_none());
            assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Disconnected);
        }

        #[tokio::test(start_paused = true)]
        async fn a_receiver_waiting_is_woken_by_a_frame_and_by_the_end() {
            let (tx, mut rx) = channel(4);
            let reader = tokio::spawn(async move {
                let first = rx.recv().await.map(text);
                (first, rx.recv().await.is_none())
            });
            tokio::task::yield_now().await;
            tx.try_send(frame("a")).unwrap();
            tokio::task::yield_now().await;
            drop(tx);
            assert_eq!(reader.await.unwrap(), (Some("a".into()), true));
        }

        #[tokio::test(start_paused = true)]
        async fn a_dropped_receiver_closes_and_frees_waiting_senders() {
            let (tx, rx) = channel(1);
            tx.try_send(frame("a")).unwrap();
            let waiter = tokio::spawn({
                let tx = tx.clone();
                async move { tx.reserve_owned().await.is_err() }
            });
            tokio::task::yield_now().await;
            drop(rx);
            assert!(waiter.await.unwrap(), "told the queue is closed");
            assert!(tx.is_closed());
            assert_eq!(tx.try_send(frame("b")), Err(TryError::Closed));
        }

        #[tokio::test]
        async fn an_emptied_queue_gives_a_burst_buffer_back() {
            let (tx, mut rx) = channel(64);
            for i in 0..40 {
                tx.try_send(frame(&i.to_string())).unwrap();
            }
            assert!(rx.0.frames().capacity() >= 40);
            while rx.try_recv().is_ok() {}
            assert_eq!(rx.0.frames().capacity(), 0);
            assert_eq!(tx.capacity(), 64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Response, ResponseContent};
    use crate::request::replay::Limits;

    fn outbox(cap: usize) -> (Outbox, OutboxRx) {
        let (o, rx) = Outbox::new(cap, CancellationToken::new(), Duration::from_secs(5));
        o.enable_replay(Limits {
            max_frames: 100,
            max_bytes: 100_000,
        });
        (o, rx)
    }

    fn ctx(id: &str) -> Arc<RequestCtx> {
        Arc::new(RequestCtx::new(id.into(), CancellationToken::new()))
    }

    fn texts(rx: &mut OutboxRx) -> Vec<String> {
        let mut v = vec![];
        while let Ok(f) = rx.try_recv() {
            v.push(match f.kind {
                OutKind::Text(t) => {
                    let j: serde_json::Value = serde_json::from_str(&t).unwrap();
                    j["payload"]["content"]["text"]
                        .as_str()
                        .map_or_else(|| j["msg_type"].to_string(), str::to_string)
                }
                OutKind::Ping(mark) => format!("PING {mark}"),
                OutKind::Close { .. } => "CLOSE".into(),
            });
        }
        v
    }

    #[tokio::test]
    async fn frames_are_kept_until_a_pong_and_replayed_in_order_after_a_resume() {
        let (o, mut rx) = outbox(16);
        let r = ctx("r");
        o.send_text_for(&r, 0, "a").await;
        o.send_text_for(&r, 1, "b").await;
        // A frame of no request is never kept.
        o.send(&ServerMessage::Heartbeat(crate::protocol::Heartbeat {
            remaining_seconds: 1,
        }))
        .await;
        assert_eq!(o.kept().0, 2);
        o.ping();
        o.send_text_for(&r, 2, "c").await;
        let sent = texts(&mut rx);
        assert_eq!(sent[..3], ["a", "b", "\"HEARTBEAT\""]);
        assert_eq!(sent[4], "c");
        let mark: u64 = sent[3].strip_prefix("PING ").unwrap().parse().unwrap();
        // A pong that does not echo the ping (unsolicited, empty, stale) acknowledges nothing.
        o.pong(None);
        o.pong(Some(mark + 1));
        assert_eq!(o.kept().0, 3);
        // The pong covers what was queued before the ping only.
        o.pong(Some(mark));
        assert_eq!(o.kept().0, 1);
        // The socket drops; the reply goes on into the buffer.
        o.detach();
        assert!(o.send_text_for(&r, 3, "d").await);
        let end = Response {
            request_id: "r".into(),
            text_stream_seq: Some(-1),
            content: Some(ResponseContent::default()),
            ..Default::default()
        };
        assert!(o.send(&ServerMessage::Response(end)).await);
        // Not kept while away: frames of no request.
        assert!(
            !o.send(&ServerMessage::Heartbeat(crate::protocol::Heartbeat {
                remaining_seconds: 1,
            }))
            .await
        );
        // A new socket; the client saw "c".
        let (other, mut rx2) = Outbox::new(16, CancellationToken::new(), Duration::from_secs(5));
        o.attach(&other);
        let seen = SeenUpTo {
            text: 2,
            voice: -1,
            unsequenced: None,
        };
        assert_eq!(o.resume([("r", &seen)]), ResumePlan::default());
        // While replaying, a producer's frame waits its turn behind the replay.
        let r2 = ctx("r2");
        o.send_text_for(&r2, 0, "x").await;
        assert!(texts(&mut rx2).is_empty());
        while let Some(f) = o.next_replay() {
            assert!(o.push(f).await);
        }
        o.send_text_for(&r2, 1, "y").await;
        assert_eq!(texts(&mut rx2), ["d", "\"RESPONSE\"", "x", "y"]);
    }

    #[tokio::test]
    async fn a_reply_that_outgrows_the_buffer_while_away_is_cancelled() {
        let (o, _rx) = Outbox::new(16, CancellationToken::new(), Duration::from_secs(5));
        o.enable_replay(Limits {
            max_frames: 2,
            max_bytes: 100_000,
        });
        o.detach();
        let r = ctx("r");
        assert!(o.send_text_for(&r, 0, "a").await);
        assert!(o.send_text_for(&r, 1, "b").await);
        assert!(!o.send_text_for(&r, 2, "c").await);
        assert!(r.token.is_cancelled(), "the upstream is stopped");
        let none = SeenUpTo::default();
        assert_eq!(o.resume([("r", &none)]).overflowed, ["r"]);
    }
}
