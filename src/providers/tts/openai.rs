//! OpenAI-compatible `POST {base_url}/audio/speech` with a JSON body `{model, input, voice,
//! response_format, speed?, instructions?}`, answered with the audio as a streamed body.
//! `response_format: "pcm"` is raw 16-bit little-endian mono at the endpoint's rate (24 kHz for
//! OpenAI); `"wav"` carries its own header. Either way the audio is resampled to 16 kHz as it
//! streams. Spoken by OpenAI, speaches/Kokoro-FastAPI, openedai-speech, vLLM and others.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::json;

use super::{PcmStream, TtsError, TtsProvider};
use crate::audio::resample::StreamResampler;
use crate::audio::wav::StreamingWav;
use crate::audio::{AudioError, bytes_to_samples, samples_to_bytes};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeechFormat {
    /// Raw s16le mono at `sample_rate`.
    Pcm { sample_rate: u32 },
    /// WAV (16-bit PCM, any rate and channel count).
    Wav,
}

pub struct OpenAiTtsOptions {
    pub base_url: String,
    pub model: String,
    pub voice: String,
    pub api_key: Option<String>,
    pub format: SpeechFormat,
    /// Sent when set (0.25–4.0).
    pub speed: Option<f64>,
    /// Sent when non-empty (gpt-4o-mini-tts style guidance).
    pub instructions: String,
    pub connect_timeout: Duration,
}

#[derive(Clone)]
pub struct OpenAiTts {
    client: reqwest::Client,
    url: String,
    model: String,
    voice: String,
    api_key: Option<String>,
    format: SpeechFormat,
    speed: Option<f64>,
    instructions: String,
}

impl std::fmt::Debug for OpenAiTts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiTts")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("voice", &self.voice)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

impl OpenAiTts {
    pub fn new(o: OpenAiTtsOptions) -> Result<Self, TtsError> {
        let client = crate::util::http_client_builder()
            .connect_timeout(o.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| TtsError::Connect(format!("cannot build HTTP client: {e}")))?;
        Ok(OpenAiTts {
            client,
            url: format!("{}/audio/speech", o.base_url.trim_end_matches('/')),
            model: o.model,
            voice: o.voice,
            api_key: o.api_key,
            format: o.format,
            speed: o.speed,
            instructions: o.instructions,
        })
    }

    /// The request body (public for tests).
    pub fn body(&self, text: &str) -> serde_json::Value {
        let mut b = json!({
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": match self.format { SpeechFormat::Pcm { .. } => "pcm", SpeechFormat::Wav => "wav" },
        });
        if let Some(s) = self.speed {
            b["speed"] = json!(s);
        }
        if !self.instructions.is_empty() {
            b["instructions"] = json!(self.instructions);
        }
        b
    }
}

/// Turns the vendor's byte stream into 16 kHz samples, piece by piece.
pub(crate) struct Decoder {
    format: SpeechFormat,
    wav: StreamingWav,
    resampler: Option<StreamResampler>,
    /// An odd byte of raw PCM carried to the next piece.
    carry: Option<u8>,
}

impl Decoder {
    pub(crate) fn new(format: SpeechFormat) -> Result<Self, AudioError> {
        let resampler = match format {
            SpeechFormat::Pcm { sample_rate } => Some(StreamResampler::new(sample_rate)?),
            SpeechFormat::Wav => None,
        };
        Ok(Decoder {
            format,
            wav: StreamingWav::new(),
            resampler,
            carry: None,
        })
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<u8>, AudioError> {
        let samples = match self.format {
            SpeechFormat::Pcm { .. } => {
                let mut joined;
                let data = match self.carry.take() {
                    Some(b) => {
                        joined = vec![b];
                        joined.extend_from_slice(bytes);
                        &joined[..]
                    }
                    None => bytes,
                };
                if data.len() % 2 == 1 {
                    self.carry = Some(data[data.len() - 1]);
                }
                bytes_to_samples(data)
            }
            SpeechFormat::Wav => {
                let s = self.wav.push(bytes)?;
                if self.resampler.is_none()
                    && let Some(f) = self.wav.format()
                {
                    self.resampler = Some(StreamResampler::new(f.sample_rate)?);
                }
                s
            }
        };
        match self.resampler.as_mut() {
            Some(r) => Ok(samples_to_bytes(&r.push(&samples)?)),
            None => Ok(Vec::new()),
        }
    }

    pub(crate) fn finish(&mut self) -> Result<Vec<u8>, AudioError> {
        match self.resampler.as_mut() {
            Some(r) => Ok(samples_to_bytes(&r.finish()?)),
            None => Err(AudioError::BadWav(
                "the WAV stream ended inside its header".into(),
            )),
        }
    }
}

impl TtsProvider for OpenAiTts {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn synthesize(&self, text: String) -> PcmStream {
        // Nothing to say: servers refuse it (local-tts-studio: 400 "input must not be blank").
        if !has_speakable(&text) {
            return Box::pin(futures_util::stream::empty());
        }
        let this = self.clone();
        let stream = async_stream(move |tx| async move {
            let mut decoder =
                Decoder::new(this.format).map_err(|e| TtsError::Malformed(e.to_string()))?;
            let mut req = this.client.post(&this.url).json(&this.body(&text));
            if let Some(k) = &this.api_key {
                req = req.bearer_auth(k);
            }
            let resp = req.send().await.map_err(|e| {
                if e.is_timeout() {
                    TtsError::Timeout(e.without_url().to_string())
                } else {
                    TtsError::Connect(e.without_url().to_string())
                }
            })?;
            let status = resp.status();
            if !status.is_success() {
                return Err(TtsError::Status {
                    status: status.as_u16(),
                });
            }
            let mut body = resp.bytes_stream();
            let mut any = false;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| TtsError::Closed(e.without_url().to_string()))?;
                any |= !chunk.is_empty();
                let pcm = decoder
                    .push(&chunk)
                    .map_err(|e| TtsError::Malformed(e.to_string()))?;
                if !pcm.is_empty() && tx.send(Ok(Bytes::from(pcm))).await.is_err() {
                    return Ok(());
                }
            }
            if !any {
                return Err(TtsError::Malformed("the endpoint sent no audio".into()));
            }
            let tail = decoder
                .finish()
                .map_err(|e| TtsError::Malformed(e.to_string()))?;
            if !tail.is_empty() {
                let _ = tx.send(Ok(Bytes::from(tail))).await;
            }
            Ok(())
        });
        Box::pin(stream)
    }
}

/// Whether `text` has anything to pronounce (a letter or a digit, in any script).
pub(crate) fn has_speakable(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

/// A stream fed by an async producer through a small channel. Dropping the stream drops the
/// producer's future (and with it the HTTP response) the next time it is polled or at drop.
pub(crate) fn async_stream<F, Fut>(
    producer: F,
) -> impl futures_util::Stream<Item = Result<Bytes, TtsError>> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, TtsError>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), TtsError>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let err_tx = tx.clone();
    let fut = async move {
        if let Err(e) = producer(tx).await {
            let _ = err_tx.send(Err(e)).await;
        }
    };
    // The producer runs inside the stream's own poll (no spawned task), so dropping the
    // stream drops it.
    ProducerStream {
        fut: Some(Box::pin(fut)),
        rx,
    }
}

struct ProducerStream {
    fut: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, TtsError>>,
}

impl futures_util::Stream for ProducerStream {
    type Item = Result<Bytes, TtsError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if let Some(f) = self.fut.as_mut()
            && f.as_mut().poll(cx).is_ready()
        {
            self.fut = None;
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending if self.fut.is_none() => {
                // The producer is done and dropped its senders: drain what is left.
                match self.rx.try_recv() {
                    Ok(item) => Poll::Ready(Some(item)),
                    Err(_) => Poll::Ready(None),
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_the_wire_fields() {
        let t = OpenAiTts::new(OpenAiTtsOptions {
            base_url: "http://127.0.0.1:1/v1/".into(),
            model: "tts-1".into(),
            voice: "alloy".into(),
            api_key: None,
            format: SpeechFormat::Pcm {
                sample_rate: 24_000,
            },
            speed: Some(1.1),
            instructions: String::new(),
            connect_timeout: Duration::from_secs(1),
        })
        .unwrap();
        assert_eq!(t.url, "http://127.0.0.1:1/v1/audio/speech");
        let b = t.body("你好");
        assert_eq!(b["input"], "你好");
        assert_eq!(b["response_format"], "pcm");
        assert_eq!(b["voice"], "alloy");
        assert_eq!(b["speed"], 1.1);
        assert!(b.get("instructions").is_none());
    }

    #[test]
    fn pcm_decoder_carries_odd_bytes_and_resamples() {
        let mut d = Decoder::new(SpeechFormat::Pcm {
            sample_rate: 16_000,
        })
        .unwrap();
        let pcm = samples_to_bytes(&[1, 2, 3]);
        let mut out = d.push(&pcm[..3]).unwrap();
        out.extend(d.push(&pcm[3..]).unwrap());
        out.extend(d.finish().unwrap());
        assert_eq!(bytes_to_samples(&out), vec![1, 2, 3]);
        let mut d = Decoder::new(SpeechFormat::Pcm {
            sample_rate: 24_000,
        })
        .unwrap();
        let mut out = d.push(&vec![0; 48_000]).unwrap();
        out.extend(d.finish().unwrap());
        assert_eq!(out.len(), 32_000);
    }

    #[test]
    fn wav_decoder_refuses_a_cut_header() {
        let mut d = Decoder::new(SpeechFormat::Wav).unwrap();
        assert!(d.push(b"RIFF").unwrap().is_empty());
        assert!(d.finish().is_err());
    }
}
