//! The `resume` scenario (docs/protocol.md "Session resume"): `sessions` sessions stream
//! replies from the fake upstream; each has its socket cut `cuts` times at a random point of a
//! reply (after 1..=`chunks` of its frames were read: frames the server had already written to
//! the cut socket are lost with it and must come back), stays away a random 0..`away_ms`, and
//! resumes on a new socket: REGISTER with `resume: {session_id, resume_token, last_seen}`. A
//! cut may fall in a reply being replayed. With several targets a session resumes on the next
//! one each time (cross-node resume; needs nodes that share their sessions).
//!
//! Checked per request: text and voice stream seqs (each once, in order, no gap), the upstream's
//! chunk indices `@<ns>#<i>;` against what the fake upstream says it wrote for that reply (each
//! of them once, in order), and nothing after the request's end. Timed: REGISTER sent → its
//! REGISTER_ACK, and REGISTER sent → the first frame of the reply after it, counted only when that
//! frame is provably replayed (its chunks were written upstream before the REGISTER, or it is the
//! end of a reply that had finished upstream before the REGISTER); otherwise the reply had
//! nothing waiting and the resume is counted as "nothing to replay".

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::Report;
use super::client::Client;
use super::scenarios::Target;
use super::stats::{LagProbe, Samples, cpu_seconds};
use super::upstream::{FakeUpstream, UpstreamTiming, marks};

#[derive(Debug, Clone)]
pub struct ResumeParams {
    pub sessions: usize,
    /// Socket cuts per session.
    pub cuts: usize,
    /// Text chunks per reply, written upstream at `rate` per second (0: at once).
    pub chunks: usize,
    pub rate: f64,
    /// Longest pause between a cut and the new socket (uniform from 0).
    pub away_ms: f64,
    /// Ask for spoken replies (`require_tts`): voice frames are checked too.
    pub voice: bool,
    /// Sessions connecting and registering at a time at the start.
    pub concurrency: usize,
    /// Each session waits a random part of one reply's length before its first question
    /// (`--waves` turns it off).
    pub spread: bool,
}

/// Order checks of one numbered stream: text seqs, voice seqs or upstream chunk indices.
#[derive(Debug)]
struct Order {
    seen: Vec<bool>,
    distinct: u64,
    max: i64,
    repeated: u64,
    out_of_order: u64,
}

/// Numbers above this are not a seq any reply of this tool can reach: counted as out of order
/// rather than grown into.
const MAX_NUMBER: usize = 1 << 20;

impl Order {
    fn new() -> Self {
        Order {
            seen: Vec::new(),
            distinct: 0,
            max: -1,
            repeated: 0,
            out_of_order: 0,
        }
    }

    fn record(&mut self, n: usize) {
        if n > MAX_NUMBER {
            self.out_of_order += 1;
            return;
        }
        if n >= self.seen.len() {
            self.seen.resize(n + 1, false);
        }
        if self.seen[n] {
            self.repeated += 1;
            return;
        }
        self.seen[n] = true;
        self.distinct += 1;
        if (n as i64) < self.max {
            self.out_of_order += 1;
        } else {
            self.max = n as i64;
        }
    }

    /// Numbers never seen below the highest one seen.
    fn gaps(&self) -> u64 {
        (self.max + 1) as u64 - self.distinct
    }

    /// Numbers of `0..expected` never seen.
    fn missing(&self, expected: usize) -> u64 {
        (0..expected)
            .filter(|&i| !self.seen.get(i).copied().unwrap_or(false))
            .count() as u64
    }
}

/// Prints the first few frames of a kind worth a look (errors, frames after an end) to stderr.
fn show(what: &str, v: &Value) {
    static SHOWN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    if SHOWN.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 10 {
        eprintln!("resume: {what}: {v}");
    }
}

/// Totals over every request of every session.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    text_gaps: u64,
    text_repeated: u64,
    text_out_of_order: u64,
    voice_gaps: u64,
    voice_repeated: u64,
    voice_out_of_order: u64,
    chunks_missing: u64,
    chunks_repeated: u64,
    chunks_out_of_order: u64,
    /// Frames of a request after its end, or of a request that had already ended.
    after_end: u64,
    requests: u64,
    request_errors: u64,
    /// Replies whose upstream record never appeared (not checked for missing chunks).
    unverified: u64,
    /// Replies that ended normally for the client while the upstream was dropped before its
    /// end (a reply cut short without an ERROR).
    truncated: u64,
    voice_frames: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.text_gaps += o.text_gaps;
        self.text_repeated += o.text_repeated;
        self.text_out_of_order += o.text_out_of_order;
        self.voice_gaps += o.voice_gaps;
        self.voice_repeated += o.voice_repeated;
        self.voice_out_of_order += o.voice_out_of_order;
        self.chunks_missing += o.chunks_missing;
        self.chunks_repeated += o.chunks_repeated;
        self.chunks_out_of_order += o.chunks_out_of_order;
        self.after_end += o.after_end;
        self.requests += o.requests;
        self.request_errors += o.request_errors;
        self.unverified += o.unverified;
        self.truncated += o.truncated;
        self.voice_frames += o.voice_frames;
    }

    fn lost(&self) -> u64 {
        self.text_gaps + self.voice_gaps + self.chunks_missing
    }

    fn duplicated(&self) -> u64 {
        self.text_repeated + self.voice_repeated + self.chunks_repeated + self.after_end
    }

    fn out_of_order(&self) -> u64 {
        self.text_out_of_order + self.voice_out_of_order + self.chunks_out_of_order
    }
}

/// What the client has of one request.
struct Req {
    id: String,
    tag: String,
    text: Order,
    voice: Order,
    chunks: Order,
    unsequenced: u32,
    ended: bool,
    error: bool,
}

/// A frame of the request being read.
struct Ours {
    /// The earliest upstream stamp among its chunks.
    stamp: Option<u128>,
    end: bool,
}

impl Req {
    fn new(id: String, tag: String) -> Req {
        Req {
            id,
            tag,
            text: Order::new(),
            voice: Order::new(),
            chunks: Order::new(),
            unsequenced: 0,
            ended: false,
            error: false,
        }
    }

    /// Takes in one frame; `Some` when it is one of this request's.
    fn absorb(&mut self, v: &Value, tally: &mut Tally) -> Option<Ours> {
        let p = &v["payload"];
        let rid = p["request_id"].as_str()?;
        let kind = v["msg_type"].as_str().unwrap_or("");
        if kind != "RESPONSE" && kind != "ERROR" {
            return None;
        }
        if rid != self.id || self.ended {
            tally.after_end += 1;
            show("a frame after its request's end", v);
            return None;
        }
        if kind == "ERROR" {
            show("a request ended with an error", v);
            self.ended = true;
            self.error = true;
            return Some(Ours {
                stamp: None,
                end: true,
            });
        }
        let t = p["text_stream_seq"].as_i64();
        let s = p["voice_stream_seq"].as_i64();
        let mut stamp: Option<u128> = None;
        if let Some(text) = p["content"]["text"].as_str() {
            for (ns, i) in marks(text) {
                stamp = Some(stamp.map_or(ns, |s| s.min(ns)));
                if let Some(i) = i {
                    self.chunks.record(i);
                }
            }
        }
        match t {
            Some(-1) => self.ended = true,
            Some(n) if n >= 0 => self.text.record(n as usize),
            Some(_) => self.text.out_of_order += 1,
            None => {}
        }
        match s {
            Some(-1) => self.ended = true,
            Some(n) if n >= 0 => {
                tally.voice_frames += 1;
                self.voice.record(n as usize)
            }
            Some(_) => self.voice.out_of_order += 1,
            None => {}
        }
        if t.is_none() && s.is_none() {
            self.unsequenced += 1;
        }
        Some(Ours {
            stamp,
            end: self.ended,
        })
    }

    /// `last_seen` for this request: the highest seqs received and the unsequenced count.
    fn last_seen(&self) -> Value {
        json!([self.text.max, self.voice.max, self.unsequenced])
    }

    /// Adds this ended request's checks to `tally`, against what the upstream wrote for it.
    async fn settle(self, up: &FakeUpstream, tally: &mut Tally) {
        tally.requests += 1;
        tally.text_gaps += self.text.gaps();
        tally.text_repeated += self.text.repeated;
        tally.text_out_of_order += self.text.out_of_order;
        tally.voice_gaps += self.voice.gaps();
        tally.voice_repeated += self.voice.repeated;
        tally.voice_out_of_order += self.voice.out_of_order;
        tally.chunks_repeated += self.chunks.repeated;
        tally.chunks_out_of_order += self.chunks.out_of_order;
        if self.error {
            // Stopped by the server (told with an ERROR): its missing tail is not a loss.
            tally.request_errors += 1;
            return;
        }
        // The upstream records a reply when its stream is dropped, which may come just after
        // the server relayed its end: wait for it, bounded.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            if let Some(sent) = up.sent(&self.tag) {
                tally.chunks_missing += self.chunks.missing(sent.chunks);
                tally.truncated += u64::from(!sent.complete);
                return;
            }
            if Instant::now() > deadline {
                tally.unverified += 1;
                tally.chunks_missing += self.chunks.gaps();
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[derive(Default)]
struct SessionOut {
    tally: Tally,
    ack: Samples,
    first_replayed: Samples,
    /// Phases of a resume, to tell where its time goes: connect start → WebSocket upgrade done;
    /// REGISTER sent → the server's stamp on its REGISTER_ACK, and that stamp → ACK read (both
    /// on the wall clock, in whole ms: the stamp's resolution); ACK read → first replayed frame.
    connect: Samples,
    tcp: Samples,
    upgrade: Samples,
    to_server_stamp: Samples,
    from_server_stamp: Samples,
    ack_to_first: Samples,
    nothing_to_replay: u64,
    resumes: u64,
    cross_node: u64,
    refused: u64,
    retries: u64,
    refusals: Vec<String>,
    /// One line per resume for `--phases` (see [`PHASES`]).
    rows: Vec<String>,
}

/// Where the `resume` scenario writes one CSV line per resume, when set (`--phases PATH`):
/// `start_ms` (since the scenario started), `tcp_us`, `upgrade_us`, `ack_us` (REGISTER sent →
/// ACK read), `first_us` (REGISTER sent → first replayed frame; empty when not timed), so
/// that slow resumes can be lined up in time (do they come together, in bursts, or alone?).
pub static PHASES: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// A resume in progress: the REGISTER's send time, waiting for the reply's first frame.
struct Pending {
    sent: Instant,
    sent_ns: u128,
    /// When the first frame after the resume arrived, if it carried no upstream stamp (a voice
    /// frame): whether it was replayed is known from the next stamped frame or the end.
    first_at: Option<Instant>,
    acked: Instant,
    /// Its `--phases` line so far (the first replayed frame is added when known).
    row: Option<String>,
}

pub async fn resume(
    targets: &[Target],
    up: &FakeUpstream,
    epoch: Instant,
    p: ResumeParams,
) -> anyhow::Result<Report> {
    anyhow::ensure!(!targets.is_empty(), "no target");
    up.set_timing(UpstreamTiming {
        chunks: p.chunks,
        rate: p.rate,
    });
    let run: u64 = rand::random();
    let sem = Arc::new(Semaphore::new(p.concurrency.max(1)));
    let cpu = || -> (Option<f64>, Option<f64>) {
        let server: Option<f64> = targets.iter().map(|t| t.pid.and_then(cpu_seconds)).sum();
        (server, cpu_seconds(std::process::id()))
    };
    let cpu_before = cpu();
    let lag = LagProbe::start();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..p.sessions {
        let (targets, up, p, sem) = (targets.to_vec(), up.clone(), p.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            session(s, &targets, &up, (epoch, start), &p, run, sem).await
        }));
    }
    let mut all = SessionOut::default();
    let mut failed = 0u64;
    let mut failures: Vec<String> = Vec::new();
    for task in tasks {
        match task.await? {
            Ok(o) => {
                all.tally.add(&o.tally);
                all.ack.extend(o.ack);
                all.first_replayed.extend(o.first_replayed);
                all.connect.extend(o.connect);
                all.tcp.extend(o.tcp);
                all.upgrade.extend(o.upgrade);
                all.rows.extend(o.rows);
                all.to_server_stamp.extend(o.to_server_stamp);
                all.from_server_stamp.extend(o.from_server_stamp);
                all.ack_to_first.extend(o.ack_to_first);
                all.nothing_to_replay += o.nothing_to_replay;
                all.resumes += o.resumes;
                all.cross_node += o.cross_node;
                all.refused += o.refused;
                all.retries += o.retries;
                all.refusals.extend(o.refusals);
            }
            Err(e) => {
                failed += 1;
                failures.push(format!("{e:#}"));
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if let Some(path) = PHASES.get() {
        let mut text = String::from("start_ms,tcp_us,upgrade_us,ack_us,first_us\n");
        all.rows.sort_by(|a, b| {
            let f = |r: &str| r.split(',').next().and_then(|x| x.parse::<f64>().ok());
            f(a).partial_cmp(&f(b)).unwrap_or(std::cmp::Ordering::Equal)
        });
        for r in &all.rows {
            text.push_str(r);
            text.push('\n');
        }
        std::fs::write(path, text)?;
    }
    let mut lag = lag.finish().await;
    let cpu_after = cpu();
    let pct = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (b - a) / secs * 100.0,
        _ => f64::NAN,
    };
    for (what, list) in [("refused", &all.refusals), ("failed", &failures)] {
        if let Some(first) = list.first() {
            eprintln!("resume: {} {what}, the first: {first}", list.len());
        }
    }
    let t = all.tally;
    let mut r = Report::new(
        "resume",
        json!({"sessions": p.sessions, "cuts": p.cuts, "chunks": p.chunks, "rate": p.rate,
               "away_ms": p.away_ms, "voice": p.voice, "nodes": targets.len()}),
    );
    r.add("resumes", all.resumes as f64, "");
    r.add("resumes on another node", all.cross_node as f64, "");
    r.add("resumes refused", all.refused as f64, "");
    r.add("resume retries (retryable errors)", all.retries as f64, "");
    r.add("REGISTER -> ACK p50", all.ack.pct(0.5), "us");
    r.add("REGISTER -> ACK p99", all.ack.pct(0.99), "us");
    r.add(
        "REGISTER -> first replayed frame p50",
        all.first_replayed.pct(0.5),
        "us",
    );
    r.add(
        "REGISTER -> first replayed frame p99",
        all.first_replayed.pct(0.99),
        "us",
    );
    r.add(
        "REGISTER -> first replayed frame p99.9",
        all.first_replayed.pct(0.999),
        "us",
    );
    r.add(
        "REGISTER -> first replayed frame max",
        all.first_replayed.max(),
        "us",
    );
    for (name, s) in [
        ("connect + upgrade", &mut all.connect),
        ("of which TCP connect", &mut all.tcp),
        ("of which WebSocket upgrade", &mut all.upgrade),
        (
            "REGISTER sent -> ACK stamped (ms clock)",
            &mut all.to_server_stamp,
        ),
        ("ACK stamped -> read (ms clock)", &mut all.from_server_stamp),
        ("ACK read -> first replayed frame", &mut all.ack_to_first),
    ] {
        r.add(&format!("  {name} p50"), s.pct(0.5), "us");
        r.add(&format!("  {name} p99"), s.pct(0.99), "us");
    }
    r.add("load tool timer lateness p50", lag.pct(0.5), "us");
    r.add("load tool timer lateness p99", lag.pct(0.99), "us");
    r.add("load tool timer lateness max", lag.max(), "us");
    r.add(
        "server CPU",
        pct(cpu_before.0, cpu_after.0),
        "% of one core",
    );
    r.add(
        "load tool CPU (with the fake upstream)",
        pct(cpu_before.1, cpu_after.1),
        "% of one core",
    );
    r.add(
        "resumes timed (frames replayed)",
        all.first_replayed.len() as f64,
        "",
    );
    r.add(
        "resumes with nothing to replay",
        all.nothing_to_replay as f64,
        "",
    );
    r.add("frames lost", t.lost() as f64, "");
    r.add("frames duplicated", t.duplicated() as f64, "");
    r.add("frames out of order", t.out_of_order() as f64, "");
    r.add("  text seq gaps", t.text_gaps as f64, "");
    r.add("  text seqs repeated", t.text_repeated as f64, "");
    r.add("  voice seq gaps", t.voice_gaps as f64, "");
    r.add("  voice seqs repeated", t.voice_repeated as f64, "");
    r.add("  upstream chunks missing", t.chunks_missing as f64, "");
    r.add("  upstream chunks repeated", t.chunks_repeated as f64, "");
    r.add("  frames after their request's end", t.after_end as f64, "");
    r.add("voice frames received", t.voice_frames as f64, "");
    r.add("requests completed", t.requests as f64, "");
    r.add("request errors", t.request_errors as f64, "");
    r.add(
        "replies without an upstream record",
        t.unverified as f64,
        "",
    );
    r.add(
        "replies ended before the upstream's end",
        t.truncated as f64,
        "",
    );
    r.add("failed sessions", failed as f64, "");
    r.add("resumes per second", all.resumes as f64 / secs, "/s");
    r.add("duration", secs, "s");
    Ok(r)
}

async fn session(
    s: usize,
    targets: &[Target],
    up: &FakeUpstream,
    (epoch, start): (Instant, Instant),
    p: &ResumeParams,
    run: u64,
    sem: Arc<Semaphore>,
) -> anyhow::Result<SessionOut> {
    let mut out = SessionOut::default();
    let mut node = s % targets.len();
    let api_key = targets[node].api_key.clone();
    let mut c = {
        let _permit = sem.acquire().await?;
        let mut c = Client::connect(&targets[node].url).await?;
        c.register(&api_key).await?;
        c
    };
    anyhow::ensure!(
        !c.resume_token.is_empty(),
        "REGISTER_ACK has no resume_token: is resume on ([session] resume_window_seconds)?"
    );
    let (sid, mut token) = (c.session_id.clone(), c.resume_token.clone());
    if p.spread && p.rate > 0.0 {
        let reply = p.chunks as f64 / p.rate;
        tokio::time::sleep(Duration::from_secs_f64(reply * rand::random::<f64>())).await;
    }
    let mut cuts_left = p.cuts;
    let mut q = 0usize;
    while cuts_left > 0 {
        let id = format!("r{q}");
        let tag = format!("load resume {run:x} s{s} q{q}");
        q += 1;
        c.send(
            "REQUEST",
            json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
                   "require_tts": p.voice, "content": {"text": tag}}),
        )
        .await?;
        let mut req = Req::new(id, tag);
        let mut pending: Option<Pending> = None;
        loop {
            let cut_after = (cuts_left > 0).then(|| rand::rng().random_range(1..=p.chunks.max(1)));
            let mut n = 0;
            while !req.ended && cut_after.is_none_or(|k| n < k) {
                let v = c.recv().await?;
                let Some(ours) = req.absorb(&v, &mut out.tally) else {
                    continue;
                };
                n += 1;
                if let Some(mut pd) = pending.take() {
                    let at = *pd.first_at.get_or_insert_with(Instant::now);
                    // The server sends what it held before the live stream, in order: when the
                    // first stamped frame (or the end) after the resume was made before the
                    // REGISTER, every frame before it was replayed too.
                    let replayed = match ours.stamp {
                        Some(st) => Some(st < pd.sent_ns),
                        None if ours.end => Some(up.sent(&req.tag).is_some_and(|x| x.at < pd.sent)),
                        None => None,
                    };
                    match replayed {
                        Some(true) => {
                            out.first_replayed
                                .push_micros(at.duration_since(pd.sent).as_secs_f64() * 1e6);
                            out.ack_to_first.push_micros(
                                at.saturating_duration_since(pd.acked).as_secs_f64() * 1e6,
                            );
                            if let Some(row) = pd.row.take() {
                                let first = at.duration_since(pd.sent).as_secs_f64() * 1e6;
                                out.rows.push(format!("{row}{first:.0}"));
                            }
                        }
                        Some(false) => {
                            out.nothing_to_replay += 1;
                            out.rows.extend(pd.row.take());
                        }
                        None => pending = Some(pd),
                    }
                }
            }
            if req.ended {
                break;
            }
            // Cut: the socket goes without a close frame; what the server wrote to it and the
            // client did not read is lost with it.
            drop(c);
            cuts_left -= 1;
            if p.away_ms > 0.0 {
                let away = rand::rng().random_range(0.0..p.away_ms);
                tokio::time::sleep(Duration::from_secs_f64(away / 1000.0)).await;
            }
            let from = node;
            node = (node + 1) % targets.len();
            let mut tries = 0;
            c = loop {
                let connecting = Instant::now();
                let (mut nc, tcp, upgrade) = Client::connect_timed(&targets[node].url).await?;
                out.connect
                    .push_micros(connecting.elapsed().as_secs_f64() * 1e6);
                out.tcp.push_micros(tcp.as_secs_f64() * 1e6);
                out.upgrade.push_micros(upgrade.as_secs_f64() * 1e6);
                let seen = json!({ req.id.clone(): req.last_seen() });
                let sent_ms = museum_agent::util::now_ms();
                let (ack, sent) = nc.resume(&api_key, &sid, &token, seen).await?;
                if ack["msg_type"] == "REGISTER_ACK" {
                    let acked = Instant::now();
                    let read_ms = museum_agent::util::now_ms();
                    anyhow::ensure!(nc.session_id == sid, "resumed into another session: {ack}");
                    out.ack.push_micros((acked - sent).as_secs_f64() * 1e6);
                    if let Some(stamp) = ack["timestamp"].as_i64() {
                        out.to_server_stamp
                            .push_micros((stamp - sent_ms) as f64 * 1e3);
                        out.from_server_stamp
                            .push_micros((read_ms - stamp) as f64 * 1e3);
                    }
                    out.resumes += 1;
                    if node != from {
                        out.cross_node += 1;
                    }
                    token = nc.resume_token.clone();
                    let row = PHASES.get().map(|_| {
                        let us = |d: Duration| d.as_secs_f64() * 1e6;
                        format!(
                            "{:.3},{:.0},{:.0},{:.0},",
                            connecting.duration_since(start).as_secs_f64() * 1e3,
                            us(tcp),
                            us(upgrade),
                            us(acked - sent)
                        )
                    });
                    if let Some(old) = pending.take() {
                        out.rows.extend(old.row); // never told whether it replayed
                    }
                    pending = Some(Pending {
                        sent,
                        sent_ns: sent.saturating_duration_since(epoch).as_nanos(),
                        first_at: None,
                        acked,
                        row,
                    });
                    break nc;
                }
                if ack["payload"]["retryable"] == true && tries < 20 {
                    tries += 1;
                    out.retries += 1;
                    nc.close().await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                // Refused: the session is gone for this client.
                out.refused += 1;
                out.refusals.push(ack.to_string());
                return Ok(out);
            };
        }
        req.settle(up, &mut out.tally).await;
    }
    c.close().await;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_counts_gaps_repeats_and_reordering() {
        let mut o = Order::new();
        for n in [0, 1, 3, 2, 3, 5] {
            o.record(n);
        }
        assert_eq!(o.repeated, 1);
        assert_eq!(o.out_of_order, 1); // 2 after 3
        assert_eq!(o.gaps(), 1); // 4
        assert_eq!(o.missing(8), 3); // 4, 6, 7
        assert_eq!(Order::new().gaps(), 0);
    }

    #[test]
    fn a_request_reads_text_voice_and_chunks() {
        let mut t = Tally::default();
        let mut r = Req::new("r0".into(), "tag".into());
        let f = |v: Value| json!({"msg_type": "RESPONSE", "payload": v});
        let a = r
            .absorb(
                &f(json!({"request_id": "r0", "text_stream_seq": 0, "content": {"text": "@5#0;@4#1;"}})),
                &mut t,
            )
            .unwrap();
        assert_eq!(a.stamp, Some(4));
        r.absorb(
            &f(json!({"request_id": "r0", "voice_stream_seq": 0, "content": {}})),
            &mut t,
        );
        assert_eq!(r.last_seen(), json!([0, 0, 0]));
        assert!(
            r.absorb(
                &f(json!({"request_id": "other", "text_stream_seq": 1})),
                &mut t
            )
            .is_none()
        );
        assert_eq!(t.after_end, 1);
        let end = r
            .absorb(
                &f(json!({"request_id": "r0", "text_stream_seq": -1, "voice_stream_seq": -1, "content": {}})),
                &mut t,
            )
            .unwrap();
        assert!(end.end && r.ended);
        r.absorb(
            &f(json!({"request_id": "r0", "text_stream_seq": -1})),
            &mut t,
        );
        assert_eq!(t.after_end, 2);
        assert_eq!(r.chunks.missing(2), 0);
        assert_eq!(t.voice_frames, 1);
    }
}
