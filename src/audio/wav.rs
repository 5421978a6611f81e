//! A streaming reader for WAV as TTS endpoints send it: the RIFF header arrives first, then the
//! `data` chunk in pieces. Streamed WAV often declares a size of 0 or `0xFFFFFFFF` for the data
//! (the length is unknown when the header is written), so everything after the `data` header is
//! taken as samples. Only 16-bit integer PCM is accepted; channels are mixed down to mono.

use super::AudioError;

/// Header bytes buffered before giving up on finding the `data` chunk.
const MAX_HEADER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavFormat {
    pub sample_rate: u32,
    pub channels: u16,
}

#[derive(Debug, Default)]
pub struct StreamingWav {
    header: Vec<u8>,
    format: Option<WavFormat>,
    in_data: bool,
    /// Bytes of a partial frame carried to the next push.
    carry: Vec<u8>,
}

impl StreamingWav {
    pub fn new() -> Self {
        Self::default()
    }

    /// The format, once the header has been read.
    pub fn format(&self) -> Option<WavFormat> {
        self.format.filter(|_| self.in_data)
    }

    /// Feeds bytes; returns the mono samples they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<i16>, AudioError> {
        if self.in_data {
            return Ok(self.samples(bytes));
        }
        self.header.extend_from_slice(bytes);
        let Some(start) = self.parse_header()? else {
            if self.header.len() > MAX_HEADER_BYTES {
                return Err(AudioError::BadWav(
                    "no data chunk in the first 64 KiB".into(),
                ));
            }
            return Ok(Vec::new());
        };
        self.in_data = true;
        let rest = self.header.split_off(start);
        self.header = Vec::new();
        Ok(self.samples(&rest))
    }

    /// Parses as much of the header as is there; `Some(offset of the samples)` once complete.
    fn parse_header(&mut self) -> Result<Option<usize>, AudioError> {
        let h = &self.header;
        if h.len() < 12 {
            return Ok(None);
        }
        if &h[0..4] != b"RIFF" || &h[8..12] != b"WAVE" {
            return Err(AudioError::BadWav("missing RIFF/WAVE header".into()));
        }
        let mut pos = 12;
        loop {
            if h.len() < pos + 8 {
                return Ok(None);
            }
            let id = &h[pos..pos + 4];
            let size =
                u32::from_le_bytes([h[pos + 4], h[pos + 5], h[pos + 6], h[pos + 7]]) as usize;
            let body = pos + 8;
            if id == b"data" {
                if self.format.is_none() {
                    return Err(AudioError::BadWav("data chunk before fmt chunk".into()));
                }
                return Ok(Some(body));
            }
            if size > MAX_HEADER_BYTES {
                return Err(AudioError::BadWav(format!(
                    "header chunk {:?} of {size} bytes",
                    String::from_utf8_lossy(id)
                )));
            }
            if h.len() < body + size {
                return Ok(None);
            }
            if id == b"fmt " {
                if size < 16 {
                    return Err(AudioError::BadWav("fmt chunk too short".into()));
                }
                let f = &h[body..body + size];
                let tag = u16::from_le_bytes([f[0], f[1]]);
                let channels = u16::from_le_bytes([f[2], f[3]]);
                let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
                let bits = u16::from_le_bytes([f[14], f[15]]);
                // 1 = PCM; 0xFFFE = WAVE_FORMAT_EXTENSIBLE (its subformat is PCM for 16-bit int).
                if !(tag == 1 || tag == 0xFFFE) || bits != 16 {
                    return Err(AudioError::Unsupported(format!(
                        "WAV format tag {tag} with {bits}-bit samples (need 16-bit PCM)"
                    )));
                }
                if channels == 0 || rate == 0 {
                    return Err(AudioError::BadWav("zero channels or sample rate".into()));
                }
                self.format = Some(WavFormat {
                    sample_rate: rate,
                    channels,
                });
            }
            // Chunks are padded to an even size.
            pos = body + size + (size & 1);
        }
    }

    fn samples(&mut self, bytes: &[u8]) -> Vec<i16> {
        let channels = self.format.map_or(1, |f| f.channels as usize);
        let frame = 2 * channels;
        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(bytes);
        let whole = data.len() / frame * frame;
        let out = data[..whole]
            .chunks_exact(frame)
            .map(|f| {
                let sum: i32 = f
                    .chunks_exact(2)
                    .map(|s| i16::from_le_bytes([s[0], s[1]]) as i32)
                    .sum();
                (sum / channels as i32) as i16
            })
            .collect();
        self.carry = data[whole..].to_vec();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
        let spec = hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        for s in samples {
            w.write_sample(*s).unwrap();
        }
        w.finalize().unwrap();
        out.into_inner()
    }

    #[test]
    fn reads_a_wav_fed_one_byte_at_a_time() {
        let bytes = wav(24_000, 1, &[1, 2, 3, -4]);
        let mut r = StreamingWav::new();
        let mut got = Vec::new();
        for b in &bytes {
            got.extend(r.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(got, vec![1, 2, 3, -4]);
        assert_eq!(
            r.format(),
            Some(WavFormat {
                sample_rate: 24_000,
                channels: 1
            })
        );
    }

    #[test]
    fn mixes_stereo_down_and_accepts_unknown_data_size() {
        let mut bytes = wav(16_000, 2, &[100, 300, -10, -30]);
        // A streamed header: data size unknown.
        let data_at = bytes.windows(4).position(|w| w == b"data").unwrap();
        bytes[data_at + 4..data_at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut r = StreamingWav::new();
        assert_eq!(r.push(&bytes).unwrap(), vec![200, -20]);
    }

    #[test]
    fn refuses_garbage_and_float_wav() {
        assert!(StreamingWav::new().push(b"NOT A WAV FILE AT ALL").is_err());
        let mut bytes = wav(16_000, 1, &[0]);
        bytes[20] = 3; // IEEE float tag
        assert!(StreamingWav::new().push(&bytes).is_err());
        // An endless header is refused once it passes the limit.
        let mut r = StreamingWav::new();
        let mut h = b"RIFF\0\0\0\0WAVE".to_vec();
        h.extend_from_slice(b"junk");
        h.extend_from_slice(&(60_000u32).to_le_bytes());
        assert!(r.push(&h).unwrap().is_empty());
        assert!(r.push(&vec![0; 70_000]).is_err());
    }
}
