//! Streaming sample-rate conversion to the protocol's 16 kHz (rubato's synchronous FFT
//! resampler). Samples arrive in arbitrary pieces; output comes in pieces too, and after
//! [`StreamResampler::finish`] the total length is `input × 16000 / rate` (rounded), with the
//! resampler's delay removed so the speech is not shifted.

use rubato::{FftFixedIn, Resampler};

use super::{AudioError, SAMPLE_RATE};

/// Input frames per resampler call (at 24 kHz: 20 ms).
const CHUNK_IN: usize = 480;

pub struct StreamResampler {
    /// None when the input is already 16 kHz.
    inner: Option<FftFixedIn<f32>>,
    rate_in: u32,
    pending: Vec<f32>,
    /// Output frames still to drop (the resampler's delay).
    skip: usize,
    frames_in: u64,
    frames_out: u64,
}

impl std::fmt::Debug for StreamResampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamResampler")
            .field("rate_in", &self.rate_in)
            .finish_non_exhaustive()
    }
}

impl StreamResampler {
    pub fn new(rate_in: u32) -> Result<Self, AudioError> {
        if rate_in == 0 {
            return Err(AudioError::Unsupported("sample rate 0".into()));
        }
        let inner = if rate_in == SAMPLE_RATE {
            None
        } else {
            Some(
                FftFixedIn::<f32>::new(rate_in as usize, SAMPLE_RATE as usize, CHUNK_IN, 1, 1)
                    .map_err(|e| AudioError::Resample(e.to_string()))?,
            )
        };
        let skip = inner.as_ref().map_or(0, |r| r.output_delay());
        Ok(StreamResampler {
            inner,
            rate_in,
            pending: Vec::new(),
            skip,
            frames_in: 0,
            frames_out: 0,
        })
    }

    pub fn rate_in(&self) -> u32 {
        self.rate_in
    }

    /// Feeds samples at the input rate; returns 16 kHz samples.
    pub fn push(&mut self, samples: &[i16]) -> Result<Vec<i16>, AudioError> {
        self.frames_in += samples.len() as u64;
        let Some(r) = self.inner.as_mut() else {
            self.frames_out += samples.len() as u64;
            return Ok(samples.to_vec());
        };
        self.pending
            .extend(samples.iter().map(|&s| s as f32 / 32768.0));
        let mut out = Vec::new();
        loop {
            let need = r.input_frames_next();
            if self.pending.len() < need {
                break;
            }
            let chunk: Vec<f32> = self.pending.drain(..need).collect();
            let res = r
                .process(&[chunk], None)
                .map_err(|e| AudioError::Resample(e.to_string()))?;
            out.extend_from_slice(&res[0]);
        }
        Ok(self.emit(out, None))
    }

    /// Flushes what is buffered (and the resampler's delay line); the stream is then complete.
    pub fn finish(&mut self) -> Result<Vec<i16>, AudioError> {
        let Some(r) = self.inner.as_mut() else {
            return Ok(Vec::new());
        };
        let expected =
            (self.frames_in * SAMPLE_RATE as u64 + self.rate_in as u64 / 2) / self.rate_in as u64;
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() {
            let res = r
                .process_partial(Some(&[rest]), None)
                .map_err(|e| AudioError::Resample(e.to_string()))?;
            out.extend_from_slice(&res[0]);
        }
        // Push zeros through until the delayed tail is out.
        let mut guard = 0;
        while (self.frames_out + out.len().saturating_sub(self.skip) as u64) < expected
            && guard < 64
        {
            let res = r
                .process_partial::<Vec<f32>>(None, None)
                .map_err(|e| AudioError::Resample(e.to_string()))?;
            out.extend_from_slice(&res[0]);
            guard += 1;
        }
        Ok(self.emit(out, Some(expected)))
    }

    /// Drops the delay, converts to i16 and caps the total at `limit` frames.
    fn emit(&mut self, mut out: Vec<f32>, limit: Option<u64>) -> Vec<i16> {
        let drop = self.skip.min(out.len());
        self.skip -= drop;
        out.drain(..drop);
        if let Some(limit) = limit {
            let room = limit.saturating_sub(self.frames_out) as usize;
            out.truncate(room);
        }
        self.frames_out += out.len() as u64;
        out.iter()
            .map(|&x| (x * 32768.0).round().clamp(-32768.0, 32767.0) as i16)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(rate: u32, hz: f32, n: usize) -> Vec<i16> {
        (0..n)
            .map(|i| {
                ((i as f32 * hz * 2.0 * std::f32::consts::PI / rate as f32).sin() * 8000.0) as i16
            })
            .collect()
    }

    #[test]
    fn passes_16k_through() {
        let mut r = StreamResampler::new(16_000).unwrap();
        assert_eq!(r.push(&[1, 2, 3]).unwrap(), vec![1, 2, 3]);
        assert!(r.finish().unwrap().is_empty());
    }

    #[test]
    fn converts_24k_to_16k_with_the_right_length_in_odd_pieces() {
        let input = sine(24_000, 440.0, 24_000); // one second
        let mut r = StreamResampler::new(24_000).unwrap();
        let mut out = Vec::new();
        for piece in input.chunks(777) {
            out.extend(r.push(piece).unwrap());
        }
        out.extend(r.finish().unwrap());
        assert_eq!(out.len(), 16_000);
        // The tone survives: same energy (within 10 %) in the middle of the signal.
        let rms = |s: &[i16]| {
            (s.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / s.len() as f64).sqrt()
        };
        let a = rms(&input[2400..21600]);
        let b = rms(&out[1600..14400]);
        assert!((a - b).abs() / a < 0.1, "rms in {a} out {b}");
    }

    #[test]
    fn short_inputs_and_other_rates() {
        for rate in [8_000, 22_050, 44_100, 48_000] {
            let mut r = StreamResampler::new(rate).unwrap();
            let mut out = r.push(&sine(rate, 300.0, 100)).unwrap();
            out.extend(r.finish().unwrap());
            let expected = (100 * 16_000 + rate as usize / 2) / rate as usize;
            assert_eq!(out.len(), expected, "rate {rate}");
        }
        assert!(StreamResampler::new(0).is_err());
    }
}
