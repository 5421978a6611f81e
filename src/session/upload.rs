//! Assembly of one voice upload (spec §4.3.2, §4.3.3; docs/protocol.md "Voice"). Pure.
//!
//! One open upload per session. BASE64 chunks must arrive with `stream_seq` 0, 1, 2, ... and end
//! with -1 (which may carry the last chunk); BINARY uploads are a JSON start, binary frames and a
//! JSON end. Any break in those rules is a [`UploadError::Seq`]; the caller discards the upload.

use base64::Engine;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadMode {
    Base64Chunks,
    Binary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadError {
    /// STREAM_SEQ_ERROR.
    Seq(String),
    /// PAYLOAD_TOO_LARGE.
    TooLarge(String),
    /// MALFORMED_PAYLOAD (bad base64, odd byte count, empty audio).
    Malformed(String),
}

#[derive(Debug)]
pub struct Upload {
    pub request_id: String,
    pub mode: UploadMode,
    next_seq: i64,
    pcm: Vec<u8>,
    max_bytes: usize,
}

/// Decodes base64 audio (standard alphabet, padding optional, whitespace not allowed).
pub fn decode_b64(data: &str) -> Result<Vec<u8>, UploadError> {
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine.decode(data).map_err(|e| {
        UploadError::Malformed(format!(
            "field `payload.content.voice`: invalid base64: {e}"
        ))
    })
}

/// Checks a complete utterance: 16-bit samples (even byte count), not empty.
pub fn check_pcm(pcm: &[u8]) -> Result<(), UploadError> {
    if pcm.is_empty() {
        return Err(UploadError::Malformed("the upload holds no audio".into()));
    }
    if !pcm.len().is_multiple_of(2) {
        return Err(UploadError::Malformed(format!(
            "the upload has an odd byte count ({}); PCM must be 16-bit little-endian samples",
            pcm.len()
        )));
    }
    Ok(())
}

impl Upload {
    pub fn new(request_id: &str, mode: UploadMode, max_bytes: usize) -> Self {
        Upload {
            request_id: request_id.to_string(),
            mode,
            next_seq: match mode {
                UploadMode::Base64Chunks => 0,
                UploadMode::Binary => 1,
            },
            pcm: Vec::new(),
            max_bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.pcm.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pcm.is_empty()
    }

    /// The audio appended since the upload held `from` bytes (what a streaming STT has not
    /// been sent yet).
    pub fn pcm_since(&self, from: usize) -> &[u8] {
        &self.pcm[from.min(self.pcm.len())..]
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), UploadError> {
        if self.pcm.len() + bytes.len() > self.max_bytes {
            return Err(UploadError::TooLarge(format!(
                "the upload exceeds {} bytes ({:.1} s of 16 kHz 16-bit mono audio)",
                self.max_bytes,
                self.max_bytes as f64 / 32000.0
            )));
        }
        self.pcm.extend_from_slice(bytes);
        Ok(())
    }

    /// A BASE64 chunk with `seq` (0, 1, 2, ... or -1). Returns true when the upload is complete.
    pub fn push_chunk(&mut self, seq: i64, data: Option<&str>) -> Result<bool, UploadError> {
        debug_assert_eq!(self.mode, UploadMode::Base64Chunks);
        if seq != -1 && seq != self.next_seq {
            return Err(UploadError::Seq(format!(
                "expected stream_seq {} (or -1) for request {:?}, got {seq}",
                self.next_seq, self.request_id
            )));
        }
        if let Some(d) = data.filter(|d| !d.is_empty()) {
            let bytes = decode_b64(d)?;
            self.append(&bytes)?;
        }
        if seq == -1 {
            return Ok(true);
        }
        self.next_seq += 1;
        Ok(false)
    }

    /// A binary frame of a BINARY upload.
    pub fn push_binary(&mut self, bytes: &[u8]) -> Result<(), UploadError> {
        if self.mode != UploadMode::Binary {
            return Err(UploadError::Seq(format!(
                "binary frame during BASE64 upload {:?}",
                self.request_id
            )));
        }
        self.append(bytes)?;
        self.next_seq += 1;
        Ok(())
    }

    /// The complete utterance.
    pub fn finish(self) -> Result<Vec<u8>, UploadError> {
        check_pcm(&self.pcm)?;
        Ok(self.pcm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn chunks_in_order_assemble() {
        let mut u = Upload::new("r", UploadMode::Base64Chunks, 100);
        assert_eq!(u.push_chunk(0, Some(&b64(&[1, 2]))), Ok(false));
        assert_eq!(u.push_chunk(1, Some(&b64(&[3, 4]))), Ok(false));
        assert_eq!(u.push_chunk(-1, Some(&b64(&[5, 6]))), Ok(true));
        assert_eq!(u.finish().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn gaps_size_and_content_errors() {
        let mut u = Upload::new("r", UploadMode::Base64Chunks, 4);
        assert!(matches!(u.push_chunk(1, None), Err(UploadError::Seq(_))));
        assert_eq!(u.push_chunk(0, Some(&b64(&[1, 2]))), Ok(false));
        assert!(matches!(u.push_chunk(0, None), Err(UploadError::Seq(_))));
        assert!(matches!(
            u.push_chunk(1, Some("!!!")),
            Err(UploadError::Malformed(_))
        ));
        assert!(matches!(
            u.push_chunk(1, Some(&b64(&[0; 4]))),
            Err(UploadError::TooLarge(_))
        ));
        let mut odd = Upload::new("r", UploadMode::Binary, 100);
        odd.push_binary(&[1, 2, 3]).unwrap();
        assert!(matches!(odd.finish(), Err(UploadError::Malformed(_))));
        let empty = Upload::new("r", UploadMode::Binary, 100);
        assert!(matches!(empty.finish(), Err(UploadError::Malformed(_))));
        let mut wrong = Upload::new("r", UploadMode::Base64Chunks, 100);
        assert!(matches!(
            wrong.push_binary(&[1, 2]),
            Err(UploadError::Seq(_))
        ));
        assert!(decode_b64("AAA").is_ok(), "unpadded accepted");
    }
}
