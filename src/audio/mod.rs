//! Audio helpers for the voice path. Pure and synchronous: no I/O, no tokio.
//!
//! The protocol's audio is 16 kHz, 16-bit little-endian, mono PCM in both directions (spec
//! §7.3). This module wraps PCM as WAV for STT uploads ([`pcm_to_wav`]), reads streamed WAV
//! from TTS ([`wav::StreamingWav`]), converts other rates to 16 kHz ([`resample::StreamResampler`]),
//! cuts PCM into voice frames of a fixed duration ([`Chunker`]) and cuts streamed reply text
//! into speakable pieces ([`splitter::Splitter`]), rewritten for a voice that reads no CJK
//! ([`speakable::for_latin_voice`]).

pub mod resample;
pub mod speakable;
pub mod splitter;
pub mod wav;

/// The protocol's sample rate.
pub const SAMPLE_RATE: u32 = 16_000;
/// Bytes of protocol PCM per second (16 kHz × 2 bytes).
pub const BYTES_PER_SECOND: usize = 32_000;

/// Bytes of protocol PCM in `ms` milliseconds (always even: whole samples).
pub fn ms_to_bytes(ms: u32) -> usize {
    (ms as usize * BYTES_PER_SECOND / 1000) & !1
}

/// Milliseconds of protocol PCM in `bytes`.
pub fn bytes_to_ms(bytes: usize) -> f64 {
    bytes as f64 * 1000.0 / BYTES_PER_SECOND as f64
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioError {
    #[error("not a WAV stream: {0}")]
    BadWav(String),
    #[error("unsupported audio: {0}")]
    Unsupported(String),
    #[error("resampler: {0}")]
    Resample(String),
}

/// Wraps 16 kHz s16le mono PCM as a WAV file (for upload to an STT endpoint). An odd trailing
/// byte is dropped.
pub fn pcm_to_wav(pcm: &[u8]) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: SAMPLE_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = std::io::Cursor::new(Vec::with_capacity(pcm.len() + 44));
    {
        // Writing to memory cannot fail for sizes under 4 GiB; uploads are capped far below.
        let mut w = hound::WavWriter::new(&mut out, spec).expect("in-memory WAV header");
        let mut samples = w.get_i16_writer((pcm.len() / 2) as u32);
        for s in pcm.chunks_exact(2) {
            samples.write_sample(i16::from_le_bytes([s[0], s[1]]));
        }
        samples.flush().expect("in-memory WAV samples");
        w.finalize().expect("in-memory WAV finalize");
    }
    out.into_inner()
}

/// Little-endian bytes to samples (an odd trailing byte is ignored).
pub fn bytes_to_samples(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// Samples to little-endian bytes.
pub fn samples_to_bytes(samples: &[i16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 2);
    for s in samples {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

/// Cuts a PCM byte stream into frames of `frame_bytes` (the last one may be shorter).
/// Memory: at most one frame is held.
#[derive(Debug)]
pub struct Chunker {
    buf: Vec<u8>,
    frame_bytes: usize,
}

impl Chunker {
    /// `frame_ms` of 16 kHz s16le mono per frame (at least one sample).
    pub fn new(frame_ms: u32) -> Self {
        let frame_bytes = ms_to_bytes(frame_ms).max(2);
        Chunker {
            buf: Vec::with_capacity(frame_bytes),
            frame_bytes,
        }
    }

    /// Appends PCM; returns every complete frame.
    pub fn push(&mut self, mut pcm: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while !pcm.is_empty() {
            let take = (self.frame_bytes - self.buf.len()).min(pcm.len());
            self.buf.extend_from_slice(&pcm[..take]);
            pcm = &pcm[take..];
            if self.buf.len() == self.frame_bytes {
                out.push(std::mem::replace(
                    &mut self.buf,
                    Vec::with_capacity(self.frame_bytes),
                ));
            }
        }
        out
    }

    /// Bytes waiting for the next frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The last, possibly short frame (whole samples only).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let len = self.buf.len() & !1;
        self.buf.truncate(len);
        (!self.buf.is_empty()).then(|| std::mem::take(&mut self.buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_round_trip_keeps_samples() {
        let pcm = samples_to_bytes(&[0, 1, -1, i16::MAX, i16::MIN]);
        let wav = pcm_to_wav(&pcm);
        let r = hound::WavReader::new(std::io::Cursor::new(&wav)).unwrap();
        assert_eq!(r.spec().sample_rate, 16_000);
        assert_eq!(r.spec().channels, 1);
        assert_eq!(r.spec().bits_per_sample, 16);
        let s: Vec<i16> = r.into_samples::<i16>().map(|s| s.unwrap()).collect();
        assert_eq!(s, vec![0, 1, -1, i16::MAX, i16::MIN]);
    }

    #[test]
    fn chunker_emits_fixed_frames_and_a_short_tail() {
        let mut c = Chunker::new(10); // 320 bytes
        assert!(c.push(&[0; 100]).is_empty());
        let frames = c.push(&[0; 700]);
        assert_eq!(frames.len(), 2);
        assert!(frames.iter().all(|f| f.len() == 320));
        assert_eq!(c.pending(), 160);
        assert_eq!(c.finish().unwrap().len(), 160);
        assert!(c.finish().is_none());
        assert_eq!(ms_to_bytes(160), 5120);
        assert_eq!(bytes_to_ms(32_000), 1000.0);
    }
}
