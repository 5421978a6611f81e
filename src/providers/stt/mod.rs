//! Speech-to-text providers: one utterance of 16 kHz s16le mono PCM in, its full text out
//! (spec §7.2: no partial results reach the LLM).
//!
//! Audio reaches a provider through a channel, so a streaming provider can forward it while the
//! visitor is still uploading; the channel closing marks the end of the utterance. Providers
//! know nothing of WebSockets to clients or sessions. Cancellation is by dropping the future:
//! that drops the upstream HTTP request or WebSocket and closes its connection at once. The
//! caller applies the overall timeout, the same for every provider.

pub mod funasr;
pub mod openai;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use tokio::sync::mpsc;

/// Audio of one utterance, in arrival order. Unbounded on purpose: the sender is the upload,
/// which is capped at `limits.max_upload_bytes`, so the queue never holds more than that.
pub type AudioIn = mpsc::UnboundedReceiver<Bytes>;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SttError {
    #[error("cannot reach the STT endpoint: {0}")]
    Connect(String),
    #[error("the STT endpoint timed out: {0}")]
    Timeout(String),
    #[error("the STT endpoint answered HTTP {status}")]
    Status { status: u16 },
    #[error("the STT endpoint sent a malformed answer: {0}")]
    Malformed(String),
    #[error("the STT connection closed early: {0}")]
    Closed(String),
}

impl SttError {
    /// Whether the protocol error is REQUEST_TIMEOUT (else INTERNAL_ERROR).
    pub fn is_timeout(&self) -> bool {
        matches!(self, SttError::Timeout(_))
    }
}

pub type SttFuture = Pin<Box<dyn Future<Output = Result<String, SttError>> + Send>>;

pub trait SttProvider: Send + Sync {
    /// Vendor name for logs.
    fn name(&self) -> &'static str;
    /// Whether audio should be forwarded while the upload is still arriving (the provider
    /// streams it upstream); otherwise the complete utterance is sent at once.
    fn streams_input(&self) -> bool;
    /// Recognises one utterance. Dropping the future cancels the upstream call.
    fn transcribe(&self, audio: AudioIn) -> SttFuture;
}

/// Collects a whole utterance from the channel (for providers that send it in one request).
pub async fn collect(mut audio: AudioIn) -> Vec<u8> {
    let mut pcm = Vec::new();
    while let Some(b) = audio.recv().await {
        pcm.extend_from_slice(&b);
    }
    pcm
}
