//! OpenAI-compatible `POST {base_url}/audio/transcriptions`: a multipart form with the audio as
//! a WAV `file`, the `model` name, `response_format=json` and optionally `language` and
//! `prompt`; the answer is `{"text": "..."}`. Spoken by OpenAI, whisper.cpp's server (with
//! `--inference-path /v1/audio/transcriptions`), faster-whisper-server/speaches, vLLM's audio
//! endpoint and others.
//!
//! faster-whisper-server (PyPI 0.0.3) reads the model from the form field `model_name` and
//! ignores `model`; started with a models file it answers 400 `unknown model: whisper-1`
//! unless `model_name` names one of them: `send_model_name` adds that field. It accepts
//! `response_format` `json` and `verbose_json` only (we send `json`), and its text starts with
//! a space (trimmed here).

use std::time::Duration;

use serde::Deserialize;

use super::{AudioIn, SttError, SttFuture, SttProvider, collect};
use crate::audio::pcm_to_wav;

pub struct OpenAiSttOptions {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// ISO-639-1 hint (`zh`, `en`); empty: let the model detect it.
    pub language: String,
    /// Optional prompt (e.g. exhibit names) to guide recognition; empty: none.
    pub prompt: String,
    /// Also send the model name as `model_name` (faster-whisper-server reads only that field).
    pub send_model_name: bool,
    pub connect_timeout: Duration,
}

#[derive(Clone)]
pub struct OpenAiStt {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    language: String,
    prompt: String,
    send_model_name: bool,
}

impl std::fmt::Debug for OpenAiStt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiStt")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

#[derive(Deserialize)]
struct Transcription {
    text: String,
}

impl OpenAiStt {
    pub fn new(o: OpenAiSttOptions) -> Result<Self, SttError> {
        let client = crate::util::http_client_builder()
            .connect_timeout(o.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| SttError::Connect(format!("cannot build HTTP client: {e}")))?;
        Ok(OpenAiStt {
            client,
            url: format!("{}/audio/transcriptions", o.base_url.trim_end_matches('/')),
            model: o.model,
            api_key: o.api_key,
            language: o.language,
            prompt: o.prompt,
            send_model_name: o.send_model_name,
        })
    }
}

impl SttProvider for OpenAiStt {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn streams_input(&self) -> bool {
        false
    }

    fn transcribe(&self, audio: AudioIn) -> SttFuture {
        let this = self.clone();
        Box::pin(async move {
            let pcm = collect(audio).await;
            let wav = pcm_to_wav(&pcm);
            drop(pcm);
            let file = reqwest::multipart::Part::bytes(wav)
                .file_name("audio.wav")
                .mime_str("audio/wav")
                .map_err(|e| SttError::Malformed(e.to_string()))?;
            let mut form = reqwest::multipart::Form::new()
                .part("file", file)
                .text("model", this.model.clone())
                .text("response_format", "json");
            if this.send_model_name {
                form = form.text("model_name", this.model.clone());
            }
            if !this.language.is_empty() {
                form = form.text("language", this.language.clone());
            }
            if !this.prompt.is_empty() {
                form = form.text("prompt", this.prompt.clone());
            }
            let mut req = this.client.post(&this.url).multipart(form);
            if let Some(k) = &this.api_key {
                req = req.bearer_auth(k);
            }
            let resp = req.send().await.map_err(|e| {
                if e.is_timeout() {
                    SttError::Timeout(e.without_url().to_string())
                } else {
                    SttError::Connect(e.without_url().to_string())
                }
            })?;
            let status = resp.status();
            if !status.is_success() {
                return Err(SttError::Status {
                    status: status.as_u16(),
                });
            }
            let body = resp
                .bytes()
                .await
                .map_err(|e| SttError::Closed(e.without_url().to_string()))?;
            let t: Transcription = serde_json::from_slice(&body)
                .map_err(|e| SttError::Malformed(format!("expected {{\"text\": ...}}: {e}")))?;
            Ok(t.text.trim().to_string())
        })
    }
}
