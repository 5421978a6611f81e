//! One hub connection after its client was admitted: attach (resume from the stored inbox), the
//! inbound loop (frames, heartbeats, kicks, draining), detach, and [`Outgoing`], the frames the
//! connection's [`Mailbox`](super::mailbox::Mailbox) gives its socket writer.
//!
//! Nothing here knows about sockets or the HTTP server. The transport checks the client before
//! the upgrade (ids, query, API key, origin, caps), calls [`open`], feeds [`Connection::run`]
//! any `Stream<Item = Inbound>` and writes what [`Outgoing`] yields; the tests below do the same
//! over channels with paused time.
//!
//! [`Outgoing`] keeps the hub's delivery rules in one place: control frames first, then the
//! mailbox's lanes; a message gets its sequence number when it is taken for writing; with
//! `ack=auto` it is acknowledged only once the batch it was in was flushed ([`Outgoing::settle`]),
//! which also settles stored messages with the backend.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::envelope::{self, ClawCode, HubError};
use super::mailbox::{Control, Next};
use super::route::new_trace;
use super::{Address, Conn, ConnOptions, Hub};
use crate::util::now_ms;

/// What a client sent, as the hub reads it. The stream ends when the client closes or its
/// connection fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    Text(String),
    /// A binary frame: not part of the hub protocol.
    Binary,
    /// A ping or pong: no content, but proof of life.
    Alive,
    /// The socket could not read a frame (over the hard size limit: `1009`; invalid UTF-8:
    /// `1007`; a WebSocket protocol violation: `1002`). The last item: the client gets a
    /// `VALIDATION_ERROR` saying why, then a close with `code`.
    Broken {
        code: u16,
        reason: String,
    },
}

/// The close the socket gets when the connection's stored state cannot be read.
pub const ATTACH_FAILED: (u16, &str) = (1011, "hub storage unavailable");

/// Attaches `address` (resuming from its stored inbox). Returns the connection's outgoing frames
/// and, when the attach worked, the connection to run; when it failed, the frames are one close
/// ([`ATTACH_FAILED`]). `who` names the authenticated principal in the logs; `token` closes the
/// connection when cancelled.
pub async fn open(
    hub: &Arc<Hub>,
    address: Address,
    opts: ConnOptions,
    token: CancellationToken,
    who: &str,
) -> (Outgoing, Option<Connection>) {
    let key = address.key.clone();
    match hub.attach(address, opts, token).await {
        Ok(conn) => {
            tracing::info!(address = %key, principal = %who, tier = ?conn.opts.tier, "hub client connected");
            let out = Outgoing::new(hub.clone(), Some(conn.clone()));
            (
                out,
                Some(Connection {
                    hub: hub.clone(),
                    conn,
                }),
            )
        }
        Err(e) => match e.downcast::<super::inbox::Lost>() {
            // A newer connection of this identity on another process keeps it: this one
            // writes its greeting, the error saying so and the close (4001).
            Ok(super::inbox::Lost(conn)) => (Outgoing::new(hub.clone(), Some(conn)), None),
            Err(e) => {
                tracing::error!(address = %key, error = %e, "hub: could not attach a connection");
                (Outgoing::new(hub.clone(), None), None)
            }
        },
    }
}

/// An attached connection: its inbound side.
pub struct Connection {
    hub: Arc<Hub>,
    conn: Arc<Conn>,
}

impl Connection {
    pub fn address(&self) -> &Address {
        &self.conn.address
    }

    /// Reads client frames until the client goes, the connection's token is cancelled, the
    /// server drains (`draining`), or a kick arrives (`kick`: the reason, e.g. a revoked
    /// credential). Sends the periodic heartbeat and closes a client silent for
    /// `max_missed_heartbeats` periods.
    pub async fn run<S>(
        &self,
        mut inbound: S,
        draining: CancellationToken,
        mut kick: mpsc::Receiver<String>,
    ) where
        S: Stream<Item = Inbound> + Unpin,
    {
        let (hub, conn) = (&self.hub, &self.conn);
        let key = &conn.address.key;
        let period = super::heartbeat_period(&hub.config);
        let dead_after = period * hub.config.max_missed_heartbeats.max(1);
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_inbound = Instant::now();
        loop {
            tokio::select! {
                _ = conn.token.cancelled() => break,
                _ = draining.cancelled() => {
                    conn.mailbox.control(Control::Close(1001, "server shutting down".into()));
                    break;
                }
                reason = kick.recv() => {
                    let reason = reason.unwrap_or_else(|| "closed".into());
                    conn.send_error(hub, None, &new_trace(), &HubError::denied(format!("connection closed: {reason}"), "use a valid API key"));
                    conn.mailbox.control(Control::Close(1008, reason));
                    break;
                }
                _ = ticker.tick() => {
                    if hub.config.max_missed_heartbeats > 0 && last_inbound.elapsed() >= dead_after {
                        tracing::info!(address = %key, silent_s = last_inbound.elapsed().as_secs_f64(), "hub: client presumed dead");
                        conn.send_error(hub, None, &new_trace(), &HubError::new(
                            ClawCode::E004,
                            format!("no frame from this client for {:.0} s: presumed dead", dead_after.as_secs_f64()),
                            "answer heartbeats (any frame, or WebSocket pongs)",
                        ));
                        conn.mailbox.control(Control::Close(1001, "heartbeat timeout".into()));
                        break;
                    }
                    hub.heartbeat(conn);
                    conn.mailbox.control(Control::Ping);
                    hub.sweep(conn).await;
                }
                msg = inbound.next() => {
                    match msg {
                        None => break,
                        Some(Inbound::Text(t)) => {
                            last_inbound = Instant::now();
                            hub.handle_text(conn, &t).await;
                        }
                        Some(Inbound::Binary) => {
                            last_inbound = Instant::now();
                            conn.send_error(hub, None, &new_trace(), &HubError::validation(
                                "binary frames are not part of the hub protocol",
                                "send JSON envelopes as text frames",
                            ));
                        }
                        Some(Inbound::Alive) => last_inbound = Instant::now(),
                        Some(Inbound::Broken { code, reason }) => {
                            let (message, action) = match code {
                                1009 => (
                                    format!("frame over the hard limit of {} bytes: connection closed", super::hard_frame_limit(&hub.config)),
                                    "send large content by reference, or split it into stream messages",
                                ),
                                1007 => ("a text frame that is not UTF-8: connection closed".to_string(), "send JSON envelopes as UTF-8 text frames"),
                                _ => (format!("{reason}: connection closed"), "speak WebSocket (RFC 6455)"),
                            };
                            conn.send_error(hub, None, &new_trace(), &HubError::validation(message, action));
                            conn.mailbox.control(Control::Close(code, reason));
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Takes the connection off the hub and stores what it did not deliver. Its [`Outgoing`]
    /// then writes what is still queued (an error saying why, a close) and ends.
    pub async fn detach(self) {
        self.hub.detach(&self.conn).await;
    }
}

/// A frame of one hub connection, in the order it is to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// An unsequenced envelope from the hub (heartbeat, error, service reply).
    Text(String),
    /// A routed message with the sequence number it was just given.
    Message { seq: u64, text: String },
    /// A WebSocket ping (with every heartbeat).
    Ping,
    /// The last frame.
    Close(u16, String),
}

/// The outgoing side of a hub connection: what its socket writer writes, frame by frame.
///
/// The writer calls [`Outgoing::try_next`] until it yields nothing, flushes, calls
/// [`Outgoing::settle`], then [`Outgoing::wait`]s; [`Outgoing::written`] after each message it
/// wrote and [`Outgoing::finished`] when it stops. Once the connection closes (token cancelled
/// or mailbox closed by detach) one more pass writes what is already queued, then a close
/// (1000 unless a close was queued) ends it.
pub struct Outgoing {
    hub: Arc<Hub>,
    /// None: the attach failed, and the only frame is [`ATTACH_FAILED`].
    conn: Option<Arc<Conn>>,
    /// The highest sequence number written in the current batch.
    last_seq: Option<u64>,
    last_pass: bool,
    /// The next frame is the final close.
    closing: bool,
}

impl Outgoing {
    fn new(hub: Arc<Hub>, conn: Option<Arc<Conn>>) -> Self {
        let refused = conn.is_none();
        Outgoing {
            hub,
            conn,
            last_seq: None,
            last_pass: refused,
            closing: refused,
        }
    }

    /// The next frame to write, if one is ready now.
    pub fn try_next(&mut self) -> Option<Frame> {
        let Some(conn) = &self.conn else {
            return std::mem::take(&mut self.closing)
                .then(|| Frame::Close(ATTACH_FAILED.0, ATTACH_FAILED.1.into()));
        };
        if std::mem::take(&mut self.closing) {
            return Some(Frame::Close(1000, String::new()));
        }
        Some(match conn.mailbox.pop(now_ms())? {
            Next::Control(Control::Text(t)) => Frame::Text(t),
            Next::Control(Control::Ping) => Frame::Ping,
            Next::Control(Control::Close(code, reason)) => Frame::Close(code, reason),
            Next::Message { seq, entry } => {
                let m = &self.hub.metrics;
                m.latency_seconds
                    .observe(entry.received.elapsed().as_secs_f64());
                m.delivered.fetch_add(1, Ordering::Relaxed);
                Frame::Message {
                    seq,
                    text: envelope::with_seq(seq, &entry.body),
                }
            }
        })
    }

    /// Whether a frame is ready now (the writer batches while there is).
    pub fn more(&self) -> bool {
        match &self.conn {
            Some(conn) => self.closing || conn.mailbox.has_next(),
            None => self.closing,
        }
    }

    /// The message with `seq` was written.
    pub fn written(&mut self, seq: u64) {
        self.last_seq = Some(seq);
    }

    /// End of a flushed batch: `ack=auto` acknowledges what it wrote (written and flushed is
    /// acknowledged, never before), then stored messages released or sequenced are settled.
    pub async fn settle(&mut self) {
        let Some(conn) = &self.conn else { return };
        if let Some(seq) = self.last_seq.take()
            && !conn.mailbox.manual_ack()
        {
            conn.mailbox.ack_quietly(seq);
        }
        self.hub.flush_bookkeeping(conn).await;
    }

    /// Waits for more to write. False once the final close was handed out.
    pub async fn wait(&mut self) -> bool {
        let Some(conn) = &self.conn else {
            return self.closing;
        };
        if self.last_pass {
            // The last pass is over: the close is next.
            self.closing = true;
            return true;
        }
        if conn.mailbox.is_closed() {
            // Closed while we were writing: one more pass writes the error and close that
            // were queued just before.
            self.last_pass = true;
            return true;
        }
        tokio::select! {
            _ = conn.mailbox.ready() => {}
            // Cancelled: one more pass writes what is already queued (an error saying why,
            // a close), then stop.
            _ = conn.token.cancelled() => self.last_pass = true,
        }
        true
    }

    /// The writer stopped (it wrote a close, or a write failed): the connection ends.
    pub fn finished(&mut self) {
        if let Some(conn) = &self.conn {
            conn.token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    //! A hub connection driven over channels: client frames go in through an `Inbound` stream,
    //! and `pump` does what the socket writer does with `Outgoing`, minus the socket. Paused
    //! time makes the heartbeat schedule exact.

    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use crate::config::HubConfig;
    use crate::store::Store;

    fn hub(heartbeat_s: f64, missed: u32) -> Arc<Hub> {
        let config = HubConfig {
            enabled: true,
            heartbeat_interval_seconds: heartbeat_s,
            max_missed_heartbeats: missed,
            ..HubConfig::default()
        };
        Arc::new(Hub::new(config, Store::open_in_memory().unwrap()).unwrap())
    }

    /// The socket writer's loop, writing into a channel.
    async fn pump(mut out: Outgoing, tx: mpsc::UnboundedSender<Frame>) {
        loop {
            while let Some(f) = out.try_next() {
                if let Frame::Message { seq, .. } = &f {
                    out.written(*seq);
                }
                let last = matches!(f, Frame::Close(..));
                let _ = tx.send(f);
                if last {
                    out.finished();
                    return;
                }
            }
            out.settle().await;
            if !out.wait().await {
                break;
            }
        }
        out.finished();
    }

    struct Client {
        input: Option<mpsc::Sender<Inbound>>,
        frames: mpsc::UnboundedReceiver<Frame>,
        kick: mpsc::Sender<String>,
        draining: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    async fn connect(hub: &Arc<Hub>, address: Address, manual_ack: bool) -> Client {
        let opts = ConnOptions {
            role: address.ty.as_str().into(),
            manual_ack,
            ..ConnOptions::default()
        };
        let (out, conn) = open(hub, address, opts, CancellationToken::new(), "test").await;
        let conn = conn.expect("attached");
        let (ftx, frames) = mpsc::unbounded_channel();
        let writer = tokio::spawn(pump(out, ftx));
        let (input, rx) = mpsc::channel(16);
        let inbound = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|i| (i, rx))
        }));
        let (kick, kick_rx) = mpsc::channel(1);
        let draining = CancellationToken::new();
        let d = draining.clone();
        let task = tokio::spawn(async move {
            conn.run(inbound, d, kick_rx).await;
            conn.detach().await;
            writer.await.unwrap();
        });
        let mut c = Client {
            input: Some(input),
            frames,
            kick,
            draining,
            task,
        };
        // The seed's greeting, then the resume report.
        let hello = c.json().await;
        assert_eq!(hello["type"], "heartbeat");
        assert!(hello["payload"]["identity"].is_object(), "{hello}");
        assert_eq!(c.json().await["payload"]["type"], "resume");
        c
    }

    impl Client {
        async fn frame(&mut self) -> Frame {
            tokio::time::timeout(Duration::from_secs(600), self.frames.recv())
                .await
                .expect("a frame in time")
                .expect("the writer is still running")
        }

        async fn json(&mut self) -> Value {
            match self.frame().await {
                Frame::Text(t) | Frame::Message { text: t, .. } => {
                    serde_json::from_str(&t).unwrap()
                }
                other => panic!("expected an envelope, got {other:?}"),
            }
        }

        async fn send(&self, i: Inbound) {
            self.input.as_ref().unwrap().send(i).await.unwrap();
        }

        /// Waits for the connection to end; the writer's last frame was `close`.
        async fn ended(self) {
            tokio::time::timeout(Duration::from_secs(10), self.task)
                .await
                .expect("the connection ends")
                .unwrap();
        }
    }

    fn message_to(id: &str, body: &str) -> Inbound {
        Inbound::Text(format!(
            r#"{{"type":"message","id":"m-{id}","recipient":{{"type":"agent","id":"{id}"}},"payload":{body}}}"#
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn routed_message_gets_its_seq_at_write_and_auto_ack_after_the_flush() {
        let hub = hub(15.0, 3);
        let mut a = connect(&hub, Address::agent("hall", "guide-a"), false).await;
        let mut b = connect(&hub, Address::agent("hall", "guide-b"), true).await;
        b.send(message_to("guide-a", r#"{"n":1}"#)).await;
        a.send(message_to("guide-b", r#"{"n":2}"#)).await;
        for (client, from, n) in [(&mut a, "guide-b", 1), (&mut b, "guide-a", 2)] {
            match client.frame().await {
                Frame::Message { seq, text } => {
                    assert_eq!(seq, 1);
                    let v: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(v["seq"], 1);
                    assert_eq!(v["sender"]["id"], from);
                    assert_eq!(v["payload"]["n"], n);
                }
                other => panic!("expected a message, got {other:?}"),
            }
        }
        // ack=auto: written and flushed is acknowledged; ack=manual waits for the client.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let counters = |key: &str| hub.state().online[key].mailbox.counters();
        assert_eq!(counters("agent/hall/guide-a"), (2, 1));
        assert_eq!(counters("agent/hall/guide-b"), (2, 0));
        b.send(Inbound::Text(
            r#"{"type":"message","id":"k","recipient":{"type":"hub","id":"hub"},"payload":{"type":"ack","seq":1}}"#.into(),
        ))
        .await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(counters("agent/hall/guide-b"), (2, 1));
        // The client goes: the stream ends, the connection detaches, the writer closes (1000).
        for mut c in [a, b] {
            c.input = None;
            let mut last = c.frame().await;
            while !matches!(last, Frame::Close(..)) {
                last = c.frame().await;
            }
            assert_eq!(last, Frame::Close(1000, String::new()));
            c.ended().await;
        }
        assert!(!hub.is_online("agent/hall/guide-a"));
    }

    #[tokio::test(start_paused = true)]
    async fn silent_client_gets_heartbeats_then_is_closed_as_dead() {
        let hub = hub(10.0, 3);
        let start = Instant::now();
        let mut c = connect(&hub, Address::human("docent"), false).await;
        for n in 1..=2u64 {
            let hb = c.json().await;
            assert_eq!(hb["type"], "heartbeat");
            assert_eq!(hb["payload"]["interval_seconds"], 10.0);
            assert_eq!(c.frame().await, Frame::Ping);
            assert_eq!(start.elapsed(), Duration::from_secs(10 * n));
        }
        // Proof of life at 25 s (a pong): the deadline moves to 55 s, checked at the 60 s tick.
        tokio::time::sleep_until(start + Duration::from_secs(25)).await;
        c.send(Inbound::Alive).await;
        for _ in 3..=5 {
            assert_eq!(c.json().await["type"], "heartbeat");
            assert_eq!(c.frame().await, Frame::Ping);
        }
        let err = c.json().await;
        assert_eq!(start.elapsed(), Duration::from_secs(60));
        assert_eq!(err["type"], "error");
        assert!(
            err["payload"].to_string().contains("presumed dead"),
            "{err}"
        );
        assert_eq!(
            c.frame().await,
            Frame::Close(1001, "heartbeat timeout".into())
        );
        c.ended().await;
        assert!(!hub.is_online("human/docent"));
    }

    #[tokio::test(start_paused = true)]
    async fn kick_drain_and_binary_frames() {
        let hub = hub(15.0, 3);
        let mut c = connect(&hub, Address::environment("hall"), false).await;
        c.send(Inbound::Binary).await;
        let err = c.json().await;
        assert_eq!(err["type"], "error");
        assert!(
            err["payload"].to_string().contains("binary frames"),
            "{err}"
        );
        c.kick.send("credential revoked".into()).await.unwrap();
        let err = c.json().await;
        assert!(
            err["payload"]
                .to_string()
                .contains("connection closed: credential revoked"),
            "{err}"
        );
        assert_eq!(
            c.frame().await,
            Frame::Close(1008, "credential revoked".into())
        );
        c.ended().await;

        let mut c = connect(&hub, Address::environment("hall"), false).await;
        c.draining.cancel();
        assert_eq!(
            c.frame().await,
            Frame::Close(1001, "server shutting down".into())
        );
        c.ended().await;
    }

    #[tokio::test]
    async fn failed_attach_writes_one_close() {
        let mut out = Outgoing::new(hub(15.0, 3), None);
        assert!(out.more());
        assert_eq!(
            out.try_next(),
            Some(Frame::Close(1011, "hub storage unavailable".into()))
        );
        assert_eq!(out.try_next(), None);
        assert!(!out.wait().await);
    }
}
