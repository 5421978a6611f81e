//! Speech input: a complete utterance (16 kHz s16le mono PCM) to text, spec §7.2 (full text
//! only, no partial results reach the LLM). Speech-to-text providers plug in here.

use std::sync::Arc;

use crate::protocol::ErrorCode;
use crate::session::inflight::RequestCtx;

use super::{Deps, Failure};

/// Transcribes one utterance under the request's token.
pub async fn transcribe(
    _deps: &Deps,
    _pcm: &[u8],
    _ctx: &Arc<RequestCtx>,
) -> Result<String, Failure> {
    Err(Failure {
        code: ErrorCode::InternalError,
        detail: "speech recognition (STT) is not configured on this server; send text instead"
            .into(),
    })
}
