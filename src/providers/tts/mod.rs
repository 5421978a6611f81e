//! Text-to-speech providers: one piece of text in, a stream of 16 kHz s16le mono PCM out
//! (whatever the vendor's format, the provider converts it).
//!
//! Providers know nothing of WebSockets to clients or sessions. Cancellation is by dropping
//! the stream: that drops the HTTP response and closes its connection at once. Timeouts (first
//! byte, between chunks) are applied by the caller, the same for every provider.

pub mod command;
pub mod openai;

use std::pin::Pin;

use bytes::Bytes;
use futures_util::Stream;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TtsError {
    #[error("cannot reach the TTS endpoint: {0}")]
    Connect(String),
    #[error("the TTS endpoint timed out: {0}")]
    Timeout(String),
    #[error("the TTS endpoint answered HTTP {status}")]
    Status { status: u16 },
    #[error("the TTS endpoint sent unusable audio: {0}")]
    Malformed(String),
    #[error("the TTS stream ended early: {0}")]
    Closed(String),
}

impl TtsError {
    /// Whether the protocol error is REQUEST_TIMEOUT (else INTERNAL_ERROR).
    pub fn is_timeout(&self) -> bool {
        matches!(self, TtsError::Timeout(_))
    }
}

/// 16 kHz s16le mono PCM, in pieces of any (even) size.
pub type PcmStream = Pin<Box<dyn Stream<Item = Result<Bytes, TtsError>> + Send>>;

pub trait TtsProvider: Send + Sync {
    /// Vendor name for logs.
    fn name(&self) -> &'static str;
    /// Starts synthesising `text`. Dropping the stream cancels the upstream call.
    fn synthesize(&self, text: String) -> PcmStream;
}
