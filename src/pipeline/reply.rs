//! The outgoing side of one request: turns the model's output into RESPONSE frames.
//!
//! Text deltas go out as they arrive with `text_stream_seq` 0, 1, 2, …; client function calls go
//! out as their own frames; [`ReplyStream::final_frame`] closes the streams that were opened.
//!
//! With `require_tts` and a TTS provider, the text is also cut into speakable pieces as it
//! streams ([`crate::audio::splitter`]); a synthesis task runs up to `[tts] max_concurrent`
//! pieces at once, and streams their audio in piece order, cut into `content.voice` chunks of
//! `[tts] chunk_ms`. One writer task numbers and sends both streams: a text delta takes a voice
//! chunk that is ready along in the same frame, and voice chunks go out on their own while the
//! text waits. Every frame is sent with [`Outbox::send_for`], so nothing of a cancelled request
//! is written; every task stops at once when the request's token is cancelled or the reply is
//! dropped (their upstream TTS connections closed with them).
//!
//! Without a TTS provider the voice stream of a `require_tts` reply is closed empty and the
//! final frame says why (`notice`). A voice that reads no CJK (`[tts] reads_cjk = false`) gets
//! each piece as it can say it ([`crate::audio::speakable`]); when part of the reply was left
//! unspoken, the final frame says so (`notice`).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use base64::Engine;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::audio::Chunker;
use crate::audio::speakable::{LatinVoice, StandIns};
use crate::audio::splitter::{Splitter, SplitterConfig};
use crate::config::{TtsConfig, secs};
use crate::protocol::{ErrorCode, FunctionCall, Response, ResponseContent, ServerMessage};
use crate::providers::tts::{TtsError, TtsProvider};
use crate::request::inflight::RequestCtx;
use crate::request::outbox::Outbox;

use super::speech::{Hop, Timings};
use super::{Deps, Failure};

pub const NO_TTS_NOTICE: &str =
    "speech output (TTS) is not configured on this server; this reply is text only";

/// The final frame's `notice` when a voice that reads no CJK (`[tts] reads_cjk = false`) left
/// part of the reply unspoken.
pub const CJK_NOT_SPOKEN_NOTICE: &str = "the configured voice does not read Chinese; the parts of this reply in Chinese were not spoken";

impl From<TtsError> for Failure {
    fn from(e: TtsError) -> Self {
        Failure::upstream(e.is_timeout(), format!("speech synthesis failed: {e}"))
    }
}

pub struct ReplyStream {
    ctx: Arc<RequestCtx>,
    outbox: Outbox,
    require_tts: bool,
    text_seq: i64,
    /// Everything sent as text so far (for the history).
    text: String,
    /// The speech side, when `require_tts` and a TTS provider is configured.
    voice: Option<VoiceOut>,
    timings: Arc<Timings>,
    /// When the transcript was ready (voice input), until the first token is timed.
    stt_done: Option<Instant>,
}

/// What the writer task sends besides voice.
enum Out {
    Text(String),
    Call(FunctionCall),
}

/// From the synthesis task to the writer.
enum VoiceMsg {
    Chunk(Vec<u8>),
    Failed(Failure),
}

/// A piece to synthesise and when it was cut.
struct Piece {
    text: String,
    cut_at: Instant,
}

struct VoiceOut {
    splitter: Splitter,
    /// A voice that reads no CJK: what it is given instead ([`crate::audio::speakable`]).
    latin: Option<LatinVoice>,
    pieces: Option<mpsc::UnboundedSender<Piece>>,
    frames: Option<mpsc::UnboundedSender<Out>>,
    writer: Option<AbortOnDropHandle<Result<(), Failure>>>,
    _synth: AbortOnDropHandle<()>,
    /// Cancelled when the reply is dropped: every task of it stops.
    _stop: tokio_util::sync::DropGuard,
}

/// Instants shared by the tasks of one reply, for the timed hops.
#[derive(Default)]
struct ReplyClock {
    first_tts_byte: OnceLock<Instant>,
}

impl ReplyStream {
    pub fn new(ctx: Arc<RequestCtx>, outbox: Outbox, require_tts: bool, deps: &Deps) -> Self {
        let timings = deps.voice.timings.clone();
        let voice = match (&deps.tts, require_tts) {
            (Some(tts), true) => Some(VoiceOut::start(
                ctx.clone(),
                outbox.clone(),
                tts.clone(),
                &deps.tts_config,
                timings.clone(),
            )),
            _ => None,
        };
        ReplyStream {
            ctx,
            outbox,
            require_tts,
            text_seq: 0,
            text: String::new(),
            voice,
            timings,
            stt_done: None,
        }
    }

    /// Times the STT → first token hop from `stt_done` (when the transcript of a voice request
    /// was ready) to the first text this reply sends.
    pub fn with_stt_done(mut self, stt_done: Option<Instant>) -> Self {
        self.stt_done = stt_done;
        self
    }

    /// The reply text produced so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Sends one text delta (and, with speech, queues its complete pieces for synthesis).
    /// Frames of a cancelled request are never sent.
    pub async fn push_text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        if let Some(t) = self.stt_done.take() {
            self.timings
                .record(Hop::TextToFirstToken, t.elapsed(), &self.ctx.request_id);
        }
        self.text.push_str(delta);
        if let Some(v) = self.voice.as_mut() {
            let pieces = v.splitter.push(delta);
            v.queue(pieces);
            if let Some(f) = &v.frames {
                let _ = f.send(Out::Text(delta.to_string()));
            }
            return;
        }
        let seq = self.text_seq;
        self.text_seq += 1;
        self.outbox.send_text_for(&self.ctx, seq, delta).await;
    }

    /// Sends a function call for the client to execute.
    pub async fn push_function_call(&mut self, call: FunctionCall) {
        if let Some(f) = self.voice.as_ref().and_then(|v| v.frames.as_ref()) {
            let _ = f.send(Out::Call(call));
            return;
        }
        let frame = ServerMessage::Response(Response {
            request_id: self.ctx.request_id.clone(),
            function_call: Some(call),
            ..Default::default()
        });
        self.outbox.send_for(&self.ctx, &frame, 0).await;
    }

    /// Waits for work still producing frames (speech synthesis) to finish. The caller races it
    /// against the request's token. Call before claiming the request's end.
    pub async fn flush(&mut self) -> Result<(), Failure> {
        let Some(v) = self.voice.as_mut() else {
            return Ok(());
        };
        let pieces = v.splitter.finish();
        v.queue(pieces);
        v.pieces = None;
        v.frames = None;
        let Some(writer) = v.writer.take() else {
            return Ok(());
        };
        match writer.await {
            Ok(r) => r,
            Err(e) => Err(Failure::new(
                ErrorCode::InternalError,
                format!("speech output stopped: {e}"),
            )),
        }
    }

    /// The last frame: closes the text stream and, with `require_tts`, the voice stream.
    pub fn final_frame(&self) -> Response {
        Response {
            request_id: self.ctx.request_id.clone(),
            text_stream_seq: Some(-1),
            voice_stream_seq: self.require_tts.then_some(-1),
            content: Some(ResponseContent::default()),
            notice: match &self.voice {
                None if self.require_tts => Some(NO_TTS_NOTICE.to_string()),
                Some(VoiceOut { latin: Some(l), .. }) if l.skipped > 0 => {
                    Some(CJK_NOT_SPOKEN_NOTICE.to_string())
                }
                _ => None,
            },
            ..Default::default()
        }
    }
}

impl VoiceOut {
    /// Sends the pieces the splitter completed to synthesis (as the voice can say them).
    fn queue(&mut self, pieces: Vec<String>) {
        let now = Instant::now();
        for text in pieces {
            let text = match self.latin.as_mut() {
                Some(l) => match l.piece(text) {
                    Some(t) => t,
                    None => continue,
                },
                None => text,
            };
            let text = crate::audio::speakable::said_forms(&text);
            if let Some(p) = &self.pieces {
                let _ = p.send(Piece { text, cut_at: now });
            }
        }
    }

    fn start(
        ctx: Arc<RequestCtx>,
        outbox: Outbox,
        tts: Arc<dyn TtsProvider>,
        cfg: &TtsConfig,
        timings: Arc<Timings>,
    ) -> VoiceOut {
        let stop = ctx.token.child_token();
        let clock = Arc::new(ReplyClock::default());
        let (piece_tx, piece_rx) = mpsc::unbounded_channel();
        let (frame_tx, frame_rx) = mpsc::unbounded_channel();
        // Bounded: a slow client holds the synthesis back instead of buffering its audio.
        let (voice_tx, voice_rx) = mpsc::channel(8);
        let synth = Synth {
            tts,
            cfg: cfg.clone(),
            stop: stop.clone(),
            timings: timings.clone(),
            clock: clock.clone(),
            request_id: ctx.request_id.clone(),
        };
        let synth = tokio::spawn(synth.run(piece_rx, voice_tx));
        let writer = Writer {
            ctx,
            outbox,
            stop: stop.clone(),
            timings,
            clock,
        };
        let writer = tokio::spawn(writer.run(frame_rx, voice_rx));
        VoiceOut {
            splitter: Splitter::new(SplitterConfig {
                first_min_chars: cfg.first_piece_min_chars,
                clause_min_chars: cfg.clause_min_chars,
                max_chars: cfg.max_piece_chars,
            }),
            latin: (!cfg.reads_cjk).then(|| {
                LatinVoice::new(StandIns {
                    title: cfg.cjk_title_as.clone(),
                    text: cfg.cjk_text_as.clone(),
                })
            }),
            pieces: Some(piece_tx),
            frames: Some(frame_tx),
            writer: Some(AbortOnDropHandle::new(writer)),
            _synth: AbortOnDropHandle::new(synth),
            _stop: stop.drop_guard(),
        }
    }
}

/// Numbers and sends the text and voice streams of one reply.
struct Writer {
    ctx: Arc<RequestCtx>,
    outbox: Outbox,
    stop: CancellationToken,
    timings: Arc<Timings>,
    clock: Arc<ReplyClock>,
}

impl Writer {
    async fn run(
        self,
        mut frames: mpsc::UnboundedReceiver<Out>,
        mut voice: mpsc::Receiver<VoiceMsg>,
    ) -> Result<(), Failure> {
        let id = self.ctx.request_id.clone();
        let mut text_seq = 0i64;
        let mut voice_seq = 0i64;
        let (mut text_open, mut voice_open) = (true, true);
        while text_open || voice_open {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Ok(()),
                m = frames.recv(), if text_open => match m {
                    None => text_open = false,
                    Some(Out::Text(delta)) => {
                        let mut r = Response::text(&id, text_seq, delta.as_str());
                        text_seq += 1;
                        if voice_open {
                            match voice.try_recv() {
                                Ok(VoiceMsg::Chunk(pcm)) => {
                                    attach(&mut r, voice_seq, &pcm);
                                    voice_seq += 1;
                                }
                                Ok(VoiceMsg::Failed(f)) => return Err(f),
                                Err(mpsc::error::TryRecvError::Disconnected) => voice_open = false,
                                Err(mpsc::error::TryRecvError::Empty) => {}
                            }
                        }
                        let had_voice = r.voice_stream_seq.is_some();
                        self.outbox.send_for(&self.ctx, &ServerMessage::Response(r), delta.len()).await;
                        if had_voice && voice_seq == 1 {
                            self.first_voice_sent();
                        }
                    }
                    Some(Out::Call(call)) => {
                        let r = Response {
                            request_id: id.clone(),
                            function_call: Some(call),
                            ..Default::default()
                        };
                        self.outbox.send_for(&self.ctx, &ServerMessage::Response(r), 0).await;
                    }
                },
                v = voice.recv(), if voice_open => match v {
                    None => voice_open = false,
                    Some(VoiceMsg::Failed(f)) => return Err(f),
                    Some(VoiceMsg::Chunk(pcm)) => {
                        let mut r = Response {
                            request_id: id.clone(),
                            ..Default::default()
                        };
                        attach(&mut r, voice_seq, &pcm);
                        voice_seq += 1;
                        self.outbox.send_for(&self.ctx, &ServerMessage::Response(r), 0).await;
                        if voice_seq == 1 {
                            self.first_voice_sent();
                        }
                    }
                },
            }
        }
        Ok(())
    }

    fn first_voice_sent(&self) {
        if let Some(t) = self.clock.first_tts_byte.get() {
            self.timings
                .record(Hop::TtsByteToVoiceFrame, t.elapsed(), &self.ctx.request_id);
        }
    }
}

/// Puts a voice chunk into a frame.
fn attach(r: &mut Response, seq: i64, pcm: &[u8]) {
    r.voice_stream_seq = Some(seq);
    let content = r.content.get_or_insert_with(ResponseContent::default);
    content.voice = Some(base64::engine::general_purpose::STANDARD.encode(pcm));
}

/// Synthesises the pieces of one reply, several at once, and streams their audio in order.
struct Synth {
    tts: Arc<dyn TtsProvider>,
    cfg: TtsConfig,
    stop: CancellationToken,
    timings: Arc<Timings>,
    clock: Arc<ReplyClock>,
    request_id: String,
}

/// One piece being synthesised: its audio arrives on `rx`.
struct Job {
    rx: mpsc::Receiver<Result<bytes::Bytes, TtsError>>,
    _task: AbortOnDropHandle<()>,
}

impl Synth {
    async fn run(self, mut pieces: mpsc::UnboundedReceiver<Piece>, out: mpsc::Sender<VoiceMsg>) {
        let max = self.cfg.max_concurrent.max(1);
        let mut active: VecDeque<Job> = VecDeque::new();
        let mut pieces_open = true;
        let mut chunker = Chunker::new(self.cfg.chunk_ms);
        let mut first = true;
        loop {
            if active.is_empty() && !pieces_open {
                break;
            }
            let room = active.len() < max;
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return,
                chunk = recv_front(&mut active) => match chunk {
                    Some(Ok(pcm)) => {
                        for frame in chunker.push(&pcm) {
                            if out.send(VoiceMsg::Chunk(frame)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Some(Err(e)) => {
                        let _ = out.send(VoiceMsg::Failed(e.into())).await;
                        return;
                    }
                    None => {
                        active.pop_front();
                    }
                },
                p = pieces.recv(), if pieces_open && room => match p {
                    None => pieces_open = false,
                    Some(p) => {
                        active.push_back(self.start(p, first));
                        first = false;
                    }
                },
            }
        }
        if let Some(tail) = chunker.finish() {
            let _ = out.send(VoiceMsg::Chunk(tail)).await;
        }
    }

    fn start(&self, piece: Piece, first: bool) -> Job {
        let (tx, rx) = mpsc::channel(8);
        let tts = self.tts.clone();
        let stop = self.stop.clone();
        let first_byte = secs(self.cfg.first_byte_timeout_seconds);
        let idle = secs(self.cfg.idle_timeout_seconds);
        let timings = self.timings.clone();
        let clock = self.clock.clone();
        let request_id = self.request_id.clone();
        let task = tokio::spawn(async move {
            let mut stream = tts.synthesize(piece.text);
            if first {
                timings.record(Hop::PieceToTtsRequest, piece.cut_at.elapsed(), &request_id);
            }
            let mut got_any = false;
            loop {
                let wait = if got_any { idle } else { first_byte };
                let next = tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    r = tokio::time::timeout(wait, stream.next()) => r,
                };
                let item = match next {
                    Err(_) => {
                        let what = if got_any {
                            "next audio chunk"
                        } else {
                            "first audio byte"
                        };
                        Err(TtsError::Timeout(format!("no {what} in time")))
                    }
                    Ok(None) => return,
                    Ok(Some(item)) => item,
                };
                let failed = item.is_err();
                if !failed && !got_any {
                    got_any = true;
                    let _ = clock.first_tts_byte.set(Instant::now());
                }
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    r = tx.send(item) => if r.is_err() { return },
                }
                if failed {
                    return;
                }
            }
        });
        Job {
            rx,
            _task: AbortOnDropHandle::new(task),
        }
    }
}

/// The next audio of the oldest piece; pending forever when there is none.
async fn recv_front(active: &mut VecDeque<Job>) -> Option<Result<bytes::Bytes, TtsError>> {
    match active.front_mut() {
        Some(j) => j.rx.recv().await,
        None => std::future::pending().await,
    }
}
