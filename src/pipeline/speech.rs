//! Speech input: a complete utterance (16 kHz s16le mono PCM) to text, spec §7.2 (full text
//! only, no partial results reach the LLM), plus the per-request voice timings.
//!
//! Two ways in:
//! - A provider that streams input (FunASR) gets the audio while it is uploaded: the session
//!   starts a [`LiveStt`] when the upload opens, feeds it every chunk, and passes it in the
//!   request's [`Input::Voice`](super::Input::Voice) when the upload is complete; [`transcribe`]
//!   then only waits for the final text.
//! - Otherwise [`transcribe`] sends the whole utterance at once.
//!
//! Either way the wait is under the request's token and `[stt] timeout_seconds`, and dropping it
//! closes the upstream connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use crate::config::{SttConfig, secs};
pub use crate::metrics::Hop;
use crate::protocol::ErrorCode;
use crate::providers::stt::{SttError, SttProvider};
use crate::request::inflight::RequestCtx;

use super::{Deps, Failure};

impl From<SttError> for Failure {
    fn from(e: SttError) -> Self {
        // The error texts never carry upstream bodies or credentials.
        Failure::upstream(e.is_timeout(), format!("speech recognition failed: {e}"))
    }
}

/// Voice settings and timings, shared by every session (in [`Deps`]).
pub struct Voice {
    pub stt_timeout: Duration,
    /// Open uploads idle this long are discarded.
    pub upload_idle_timeout: Duration,
    pub timings: Arc<Timings>,
}

impl Voice {
    pub fn new(stt: &SttConfig) -> Self {
        Voice {
            stt_timeout: secs(stt.timeout_seconds),
            upload_idle_timeout: secs(stt.upload_idle_timeout_seconds),
            timings: Arc::new(Timings::default()),
        }
    }
}

/// A recognition running while its audio is uploaded. Dropping it cancels the upstream call.
pub struct LiveStt {
    tx: Option<mpsc::UnboundedSender<Bytes>>,
    result: oneshot::Receiver<Result<String, SttError>>,
    _task: AbortOnDropHandle<()>,
}

impl std::fmt::Debug for LiveStt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveStt")
            .field("audio_open", &self.tx.is_some())
            .finish_non_exhaustive()
    }
}

/// A recognised utterance and when its text was ready.
#[derive(Debug)]
pub struct Transcript {
    pub text: String,
    pub ready: Instant,
}

impl LiveStt {
    /// Starts recognising under the request's token.
    pub fn start(stt: &Arc<dyn SttProvider>, ctx: &Arc<RequestCtx>) -> LiveStt {
        let (tx, rx) = mpsc::unbounded_channel();
        let (rtx, rrx) = oneshot::channel();
        let fut = stt.transcribe(rx);
        let token = ctx.token.clone();
        let task = tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = token.cancelled() => {}
                r = fut => { let _ = rtx.send(r); }
            }
        });
        LiveStt {
            tx: Some(tx),
            result: rrx,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// Forwards a piece of the upload (bounded by the upload's own size limit).
    pub fn feed(&self, pcm: &[u8]) {
        if let Some(tx) = &self.tx
            && !pcm.is_empty()
        {
            let _ = tx.send(Bytes::copy_from_slice(pcm));
        }
    }

    /// Ends the audio and waits for the text.
    async fn finish(mut self) -> Result<String, SttError> {
        self.tx = None;
        match (&mut self.result).await {
            Ok(r) => r,
            Err(_) => Err(SttError::Closed("the recognition task ended".into())),
        }
    }
}

/// Transcribes one utterance under the request's token and `[stt] timeout_seconds`: waits for
/// `live`, the recognition that ran during the upload, or else sends `pcm` whole.
pub async fn transcribe(
    deps: &Deps,
    pcm: &[u8],
    live: Option<LiveStt>,
    ctx: &Arc<RequestCtx>,
) -> Result<Transcript, Failure> {
    let Some(stt) = deps.stt.clone() else {
        return Err(Failure {
            message: Some(super::capabilities::NO_SPEECH_INPUT_MESSAGE),
            ..Failure::new(
                ErrorCode::MalformedPayload,
                super::capabilities::NO_SPEECH_INPUT,
            )
        });
    };
    let started = Instant::now();
    let work = async move {
        match live {
            Some(l) => l.finish().await,
            None => {
                let (tx, rx) = mpsc::unbounded_channel();
                let _ = tx.send(Bytes::copy_from_slice(pcm));
                drop(tx);
                stt.transcribe(rx).await
            }
        }
    };
    let res = tokio::select! {
        biased;
        _ = ctx.token.cancelled() => {
            return Err(Failure::new(ErrorCode::InternalError, "cancelled"));
        }
        r = tokio::time::timeout(deps.voice.stt_timeout, work) => r,
    };
    let text = match res {
        Err(_) => {
            return Err(Failure::new(
                ErrorCode::RequestTimeout,
                "speech recognition (STT) did not answer in time",
            ));
        }
        Ok(r) => r?,
    };
    let now = Instant::now();
    deps.voice
        .timings
        .record(Hop::UploadToText, now - started, &ctx.request_id);
    if text.trim().is_empty() {
        return Err(Failure::new(
            ErrorCode::MalformedPayload,
            "no speech was recognised in the upload; speak again or send text",
        ));
    }
    tracing::debug!(request_id = %ctx.request_id, chars = text.chars().count(), "transcribed");
    Ok(Transcript { text, ready: now })
}

/// Recent durations per hop (the last [`Timings::KEEP`] of each), logged as they happen.
#[derive(Default)]
pub struct Timings {
    samples: Mutex<HashMap<Hop, std::collections::VecDeque<Duration>>>,
}

/// Percentiles of one hop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopSummary {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Timings {
    pub const KEEP: usize = 4096;

    pub fn record(&self, hop: Hop, d: Duration, request_id: &str) {
        tracing::debug!(target: "museum_agent::timing", request_id, hop = hop.name(), us = d.as_micros() as u64, "voice hop");
        let mut m = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let q = m.entry(hop).or_default();
        if q.len() == Self::KEEP {
            q.pop_front();
        }
        q.push_back(d);
    }

    pub fn summary(&self, hop: Hop) -> Option<HopSummary> {
        let m = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<Duration> = m.get(&hop)?.iter().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort();
        let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
        Some(HopSummary {
            count: v.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: v[v.len() - 1],
        })
    }

    pub fn clear(&self) {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_keep_percentiles() {
        let t = Timings::default();
        assert!(t.summary(Hop::UploadToText).is_none());
        for i in 1..=100 {
            t.record(Hop::UploadToText, Duration::from_micros(i), "r");
        }
        let s = t.summary(Hop::UploadToText).unwrap();
        assert_eq!(s.count, 100);
        assert_eq!(s.p50, Duration::from_micros(51));
        assert_eq!(s.p99, Duration::from_micros(99));
        assert_eq!(s.max, Duration::from_micros(100));
    }
}
