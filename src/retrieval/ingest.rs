//! Parsing collection files (JSONL and CSV) into [`Exhibit`]s. Pure apart from reading the
//! given reader: every bad row is rejected with its line number and the reason, the good rows
//! are kept.
//!
//! Field names: the canonical names of [`Exhibit`] or the names of the shared demo data
//! (`artist_or_maker`, `culture_or_period`, `gallery_or_department`) and a few common aliases.
//! Any other field goes to `extra` (its string values are indexed, e.g. `aliases`, `tags`).
//!
//! Also the bulk path that writes rows to the store ([`store_rows`], [`store_rows_from`]:
//! content hashes skip unchanged rows, analysis on every core, large transactions written in
//! file order; a JSONL or CSV file is parsed as the analysis threads take its rows,
//! [`open_rows`], never whole in memory), the start-up check of the index ([`check_index`]: a stored
//! fingerprint instead of a full integrity check when nothing changed) and of an automatically
//! loaded file ([`check_source`]: its size and times; hashed only when they changed).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{Exhibit, text};
use crate::store::StoreError;
use crate::store::collection::{
    CollectionStore, DfAccumulator, ExhibitRow, IndexedExhibit, TermDfs,
};

/// Longest accepted line of a JSONL file.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 100_000;
/// Longest value of any other field, in characters.
pub const MAX_FIELD_CHARS: usize = 2_000;
/// Longest id, in characters.
pub const MAX_ID_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// 1-based line number in the file (for CSV: the line the record starts on).
    pub line: u64,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Parsed {
    /// Good rows with their line numbers, in file order.
    pub rows: Vec<(u64, Exhibit)>,
    pub rejected: Vec<Rejected>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// By file extension: `.jsonl`/`.ndjson` or `.csv`.
    pub fn for_path(path: &Path) -> Result<Format, String> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("jsonl" | "ndjson") => Ok(Format::Jsonl),
            Some("csv") => Ok(Format::Csv),
            _ => Err(format!(
                "{}: unsupported file type (expected .jsonl, .ndjson or .csv)",
                path.display()
            )),
        }
    }
}

/// (field, accepted names in order of preference)
const FIELDS: [(&str, &[&str]); 12] = [
    (
        "id",
        &[
            "id",
            "object_id",
            "identifier",
            "object_number",
            "accession_number",
        ],
    ),
    ("title", &["title", "name", "object_name"]),
    (
        "maker",
        &["maker", "artist_or_maker", "artist", "creator", "author"],
    ),
    ("date", &["date", "dated", "date_made", "year", "made"]),
    (
        "period",
        &["period", "culture_or_period", "culture", "dynasty"],
    ),
    ("medium", &["medium", "material", "materials"]),
    ("dimensions", &["dimensions", "size"]),
    (
        "gallery",
        &["gallery", "gallery_or_department", "department"],
    ),
    (
        "description",
        &["description", "notes", "label_text", "summary"],
    ),
    ("language", &["language", "lang"]),
    ("source", &["source"]),
    ("license", &["license", "licence"]),
];

fn scalar(name: &str, v: Value) -> Result<String, String> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(trimmed(s)),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(format!("field `{name}` must be a string")),
    }
}

/// `s.trim()`, reusing `s` when there is nothing to trim (most fields: no copy).
fn trimmed(s: String) -> String {
    let t = s.trim();
    if t.len() == s.len() { s } else { t.to_string() }
}

/// Builds an exhibit from one row's fields, or says why the row is refused.
pub fn exhibit_from_map(mut map: Map<String, Value>) -> Result<Exhibit, String> {
    // The chosen value of each of FIELDS, in its order.
    let mut vals: [String; FIELDS.len()] = Default::default();
    for ((field, names), chosen) in FIELDS.iter().zip(vals.iter_mut()) {
        for name in *names {
            if let Some(v) = map.remove(*name) {
                let s = scalar(name, v)?;
                if chosen.is_empty() {
                    *chosen = s;
                }
            }
        }
        let max = match *field {
            "description" => MAX_DESCRIPTION_CHARS,
            "id" => MAX_ID_CHARS,
            _ => MAX_FIELD_CHARS,
        };
        // (A string of at most `max` bytes has at most `max` characters: no count needed.)
        if chosen.len() > max {
            let n = chosen.chars().count();
            if n > max {
                return Err(format!(
                    "field `{field}` is too long ({n} characters, at most {max})"
                ));
            }
        }
    }
    let [
        id,
        title,
        maker,
        date,
        period,
        medium,
        dimensions,
        gallery,
        description,
        language,
        source,
        license,
    ] = vals;
    if id.is_empty() {
        return Err("missing `id`".into());
    }
    if id.chars().any(|c| c.is_control()) {
        return Err("`id` contains control characters".into());
    }
    if title.is_empty() {
        return Err("missing `title`".into());
    }
    let mut extra = Map::new();
    if let Some(v) = map.remove("extra") {
        match v {
            Value::Object(m) => extra.extend(m),
            Value::Null => {}
            _ => return Err("field `extra` must be an object".into()),
        }
    }
    for (k, v) in map {
        if !(v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty())) {
            extra.insert(k, v);
        }
    }
    // (An empty `extra` is "{}": no need to serialise a copy of it for every row.)
    let extra_len = if extra.is_empty() {
        2
    } else {
        Value::Object(extra.clone()).to_string().chars().count()
    };
    if extra_len > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "extra fields are too long ({extra_len} characters, at most {MAX_DESCRIPTION_CHARS})"
        ));
    }
    let mut e = Exhibit {
        id,
        title,
        maker,
        date,
        period,
        medium,
        dimensions,
        gallery,
        description,
        language,
        source,
        license,
        extra,
    };
    if e.language.is_empty() {
        let cjk = e
            .title
            .chars()
            .chain(e.description.chars())
            .any(super::text::is_cjk);
        e.language = if cjk { "zh" } else { "en" }.into();
    }
    Ok(e)
}

/// The good rows of a JSONL stream (one JSON object a line; blank lines are skipped) with their
/// line numbers, in file order, read as they are taken (the whole file is never in memory): bad
/// lines and duplicate ids are collected for [`JsonlRows::finish`], and an I/O error ends the
/// rows and is returned there (only an I/O error fails the whole file).
pub struct JsonlRows<R> {
    reader: R,
    /// id → its first line (ids kept in place: one map entry a row of the file).
    seen: SeenIds,
    rejected: Vec<Rejected>,
    buf: Vec<u8>,
    line_no: u64,
    error: Option<std::io::Error>,
}

impl<R: BufRead> JsonlRows<R> {
    pub fn new(reader: R) -> Self {
        JsonlRows {
            reader,
            seen: SeenIds::default(),
            rejected: Vec::new(),
            buf: Vec::new(),
            line_no: 0,
            error: None,
        }
    }

    /// The reader (positioned where the rows stopped) and the rejected lines, or the I/O error
    /// that ended the rows.
    pub fn finish(self) -> std::io::Result<(R, Vec<Rejected>)> {
        match self.error {
            Some(e) => Err(e),
            None => Ok((self.reader, self.rejected)),
        }
    }

    fn reject(&mut self, reason: String) {
        self.rejected.push(Rejected {
            line: self.line_no,
            reason,
        });
    }

    fn read_line(&mut self) -> std::io::Result<usize> {
        self.buf.clear();
        // Read at most one byte past the limit, so a huge line costs bounded memory.
        let n = (&mut self.reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut self.buf)?;
        if n > 0 && self.buf.len() > MAX_LINE_BYTES && !self.buf.ends_with(b"\n") {
            // Skip the rest of the over-long line.
            loop {
                let mut rest = Vec::new();
                let m = (&mut self.reader)
                    .take(64 * 1024)
                    .read_until(b'\n', &mut rest)?;
                if m == 0 || rest.ends_with(b"\n") {
                    break;
                }
            }
        }
        Ok(n)
    }
}

impl<R: BufRead> Iterator for JsonlRows<R> {
    type Item = (u64, Exhibit);

    fn next(&mut self) -> Option<(u64, Exhibit)> {
        if self.error.is_some() {
            return None;
        }
        loop {
            let n = match self.read_line() {
                Ok(n) => n,
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            };
            if n == 0 {
                return None;
            }
            self.line_no += 1;
            if self.buf.len() > MAX_LINE_BYTES && !self.buf.ends_with(b"\n") {
                self.reject(format!("line longer than {MAX_LINE_BYTES} bytes"));
                continue;
            }
            // Parsed from the bytes first: a line that parses is valid UTF-8 (serde_json checks
            // what is inside strings, and allows only ASCII outside them), so the usual line
            // is not checked twice. Any other line (blank, a byte-order mark, an error) takes
            // the slow path, which says what is wrong with it.
            let parsed = match serde_json::from_slice::<Value>(&self.buf) {
                Ok(v) => v,
                Err(_) => {
                    let Ok(text) = std::str::from_utf8(&self.buf) else {
                        self.reject("not valid UTF-8".into());
                        continue;
                    };
                    let text = text.trim_start_matches('\u{feff}').trim();
                    if text.is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Value>(text) {
                        Ok(v) => v,
                        Err(e) => {
                            self.reject(format!("invalid JSON: {e}"));
                            continue;
                        }
                    }
                }
            };
            let row = match parsed {
                Value::Object(m) => exhibit_from_map(m),
                _ => Err("not a JSON object".to_string()),
            };
            match row {
                Ok(e) => {
                    if let Some(row) =
                        first_of_id(&mut self.seen, &mut self.rejected, self.line_no, e)
                    {
                        return Some(row);
                    }
                }
                Err(reason) => self.reject(reason),
            }
        }
    }
}

/// The good rows of a CSV stream (a header row, then one exhibit a record; empty cells are
/// absent fields, columns that are not exhibit fields go to `extra`) with their line numbers
/// (the line a record starts on), in file order, read as they are taken, as [`JsonlRows`] does
/// for JSONL: a malformed record is rejected, an I/O error fails the file.
pub struct CsvRows<R> {
    rdr: csv::Reader<R>,
    headers: Vec<String>,
    record: csv::StringRecord,
    /// id → its first line (ids kept in place: one map entry a row of the file).
    seen: SeenIds,
    rejected: Vec<Rejected>,
    error: Option<std::io::Error>,
    done: bool,
}

impl<R: Read> CsvRows<R> {
    /// Reads the header row ("Date made", "Date-made" and "date_made" are one header). An I/O
    /// error or an unreadable header row fails the file.
    pub fn new(reader: R) -> std::io::Result<Self> {
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .buffer_capacity(256 * 1024)
            .from_reader(reader);
        let headers = match rdr.headers() {
            Ok(h) => h
                .iter()
                .map(|h| {
                    h.trim_start_matches('\u{feff}')
                        .trim()
                        .to_ascii_lowercase()
                        .replace([' ', '-'], "_")
                })
                .collect::<Vec<_>>(),
            Err(e) => return Err(csv_io(e)),
        };
        let mut rows = CsvRows {
            rdr,
            headers,
            record: csv::StringRecord::new(),
            seen: SeenIds::default(),
            rejected: Vec::new(),
            error: None,
            done: false,
        };
        if rows.headers.is_empty() || rows.headers.iter().all(|h| h.is_empty()) {
            rows.rejected.push(Rejected {
                line: 1,
                reason: "no header row".into(),
            });
            rows.done = true;
        }
        Ok(rows)
    }

    /// The reader (where the rows stopped) and the rejected records, or the I/O error that
    /// ended the rows.
    pub fn finish(self) -> std::io::Result<(R, Vec<Rejected>)> {
        match self.error {
            Some(e) => Err(e),
            None => Ok((self.rdr.into_inner(), self.rejected)),
        }
    }
}

impl<R: Read> Iterator for CsvRows<R> {
    type Item = (u64, Exhibit);

    fn next(&mut self) -> Option<(u64, Exhibit)> {
        while !self.done {
            let line = self.rdr.position().line() + 1;
            match self.rdr.read_record(&mut self.record) {
                Ok(false) => self.done = true,
                Ok(true) => {
                    let line = self.record.position().map_or(line, |p| p.line());
                    let mut map = Map::new();
                    for (h, v) in self.headers.iter().zip(self.record.iter()) {
                        if !h.is_empty() && !v.trim().is_empty() {
                            map.insert(h.clone(), Value::String(v.to_string()));
                        }
                    }
                    if map.is_empty() {
                        continue;
                    }
                    match exhibit_from_map(map) {
                        Ok(e) => {
                            if let Some(row) =
                                first_of_id(&mut self.seen, &mut self.rejected, line, e)
                            {
                                return Some(row);
                            }
                        }
                        Err(reason) => self.rejected.push(Rejected { line, reason }),
                    }
                }
                Err(e) => {
                    let at = e.position().map_or(line, |p| p.line());
                    if let csv::ErrorKind::Io(_) = e.kind() {
                        self.error = Some(csv_io(e));
                        self.done = true;
                        return None;
                    }
                    self.rejected.push(Rejected {
                        line: at,
                        reason: csv_reason(&e),
                    });
                    // After a UTF-8 or length error the reader continues with the next record.
                }
            }
        }
        None
    }
}

/// The ids a file has given so far, each with its first line (kept in place: `ShortStr`).
type SeenIds = rustc_hash::FxHashMap<crate::util::ShortStr, u64>;

/// The row, when its id is the first of its kind in the file; else rejects it, naming the
/// line of the first.
fn first_of_id(
    seen: &mut SeenIds,
    rejected: &mut Vec<Rejected>,
    line: u64,
    e: Exhibit,
) -> Option<(u64, Exhibit)> {
    if let Some(first) = seen.get(e.id.as_str()) {
        rejected.push(Rejected {
            line,
            reason: format!("duplicate id `{}` (first on line {first})", e.id),
        });
        return None;
    }
    seen.insert(crate::util::ShortStr::new(&e.id), line);
    Some((line, e))
}

fn csv_reason(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("expected {expected_len} fields, found {len}"),
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".into(),
        _ => e.to_string(),
    }
}

fn csv_io(e: csv::Error) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => io,
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{other:?}")),
    }
}

/// Parses a file by its extension, whole (the ingest streams it instead: [`open_rows`]).
pub fn parse_file(path: &Path) -> Result<Parsed, String> {
    let mut rows = open_rows(path)?;
    let good: Vec<(u64, Exhibit)> = rows.by_ref().collect();
    let (rejected, _) = rows.finish()?;
    Ok(Parsed {
        rows: good,
        rejected,
    })
}

/// A reader that hashes what passes through it.
pub struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

impl<R: Read> Hashing<R> {
    /// Reads what is left, so every byte is in the hash, and returns it (hex SHA-256).
    fn finish(mut self) -> std::io::Result<String> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok(hex::encode(self.hash.finalize()))
    }
}

/// The rows of a collection file as they are read and hashed ([`open_rows`]), parsed as they
/// are taken: the file is never whole in memory.
pub struct FileRows {
    path: std::path::PathBuf,
    rows: Rows,
}

enum Rows {
    Jsonl(Box<JsonlRows<std::io::BufReader<Hashing<std::fs::File>>>>),
    Csv(Box<CsvRows<Hashing<std::fs::File>>>),
}

/// Opens a collection file by its extension for [`store_rows_from`].
pub fn open_rows(path: &Path) -> Result<FileRows, String> {
    let format = Format::for_path(path)?;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let hashing = Hashing {
        inner: file,
        hash: Sha256::new(),
    };
    let rows = match format {
        Format::Jsonl => Rows::Jsonl(Box::new(JsonlRows::new(std::io::BufReader::with_capacity(
            256 * 1024,
            hashing,
        )))),
        Format::Csv => Rows::Csv(Box::new(
            CsvRows::new(hashing).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        )),
    };
    Ok(FileRows {
        path: path.to_path_buf(),
        rows,
    })
}

impl Iterator for FileRows {
    type Item = (u64, Exhibit);

    fn next(&mut self) -> Option<(u64, Exhibit)> {
        match &mut self.rows {
            Rows::Jsonl(rows) => rows.next(),
            Rows::Csv(rows) => rows.next(),
        }
    }
}

impl FileRows {
    /// After the rows: the rejected lines and the SHA-256 (hex) of the whole file, or the I/O
    /// error that ended the rows early (the rows before it have been taken).
    pub fn finish(self) -> Result<(Vec<Rejected>, String), String> {
        let path = self.path;
        let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
        // The bytes a buffer had read are in the hash already; the rest is read by `finish`.
        let (hashing, rejected) = match self.rows {
            Rows::Jsonl(rows) => rows.finish().map(|(r, rej)| (r.into_inner(), rej)),
            Rows::Csv(rows) => rows.finish(),
        }
        .map_err(cannot)?;
        Ok((rejected, hashing.finish().map_err(cannot)?))
    }
}

/// A digest of the exhibit's content and the analyzer version: re-ingesting an unchanged row
/// is a no-op, and a new analyzer re-indexes everything. Each field is hashed with its length
/// in front (so no two exhibits' fields run together into the same bytes), the extra fields as
/// JSON when there are any. Since 2026-11-24 (`DIGEST_FORMAT` 2); the first form hashed the
/// exhibit's JSON, whose escaping cost ~3 % of an ingest: rows stored before are rewritten
/// once, unchanged, by the next ingest of their file.
pub fn content_hash(e: &Exhibit) -> String {
    const DIGEST_FORMAT: &[u8] = b"2";
    let mut h = Sha256::new();
    h.update(DIGEST_FORMAT);
    h.update([0]);
    h.update(super::text::ANALYZER_VERSION.as_bytes());
    h.update([0]);
    for field in [
        &e.id,
        &e.title,
        &e.maker,
        &e.date,
        &e.period,
        &e.medium,
        &e.dimensions,
        &e.gallery,
        &e.description,
        &e.language,
        &e.source,
        &e.license,
    ] {
        h.update((field.len() as u64).to_le_bytes());
        h.update(field.as_bytes());
    }
    if !e.extra.is_empty() {
        h.update(serde_json::to_vec(&e.extra).unwrap_or_default());
    }
    hex::encode(&h.finalize()[..16])
}

/// SHA-256 of a file, hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

// ---- writing rows to the store ----

/// Exhibits one analysis worker takes at a time.
const ANALYSIS_BATCH: usize = 1_000;
/// Exhibits written per transaction (other writers of the database wait at most one batch).
const WRITE_BATCH: usize = 10_000;
/// Most analysis threads (the writer is one more).
const MAX_WORKERS: usize = 4;

fn into_row(e: Exhibit) -> ExhibitRow {
    ExhibitRow {
        extra: Value::Object(e.extra).to_string(),
        id: e.id,
        title: e.title,
        maker: e.maker,
        date: e.date,
        period: e.period,
        medium: e.medium,
        dimensions: e.dimensions,
        gallery: e.gallery,
        description: e.description,
        language: e.language,
        source: e.source,
        license: e.license,
    }
}

/// Writes rows to the store: unchanged rows (same content hash) are skipped, the others are
/// analysed ([`analyze`]) on every core and upserted in file order (keys are assigned as
/// before), [`WRITE_BATCH`] rows a transaction. Idempotent. Blocking: run it on the blocking
/// pool. When the index was trusted before (its fingerprint stored), the fingerprint is
/// renewed afterwards, so the next start does not re-check what this ingest wrote.
pub fn store_rows(store: &CollectionStore, rows: Vec<Exhibit>) -> Result<RowCounts, StoreError> {
    if rows.is_empty() {
        return Ok(RowCounts::default());
    }
    store_rows_from(store, rows.into_iter()).map(|(counts, _)| counts)
}

/// [`store_rows`] over rows as they come (a file being parsed: [`JsonlRows`]): the analysis
/// threads take them [`ANALYSIS_BATCH`] at a time, so reading and parsing overlap the analysis
/// and at most a few batches are in memory. Returns the iterator, drained, for what it
/// collected on the way.
pub fn store_rows_from<I>(store: &CollectionStore, rows: I) -> Result<(RowCounts, I), StoreError>
where
    I: Iterator<Item = Exhibit> + Send,
{
    // One load at a time in this process (the index's writer is shared).
    let _load = store.load_guard();
    // And in other processes: the writer before the collection is read (what is stored, and
    // whether it is empty), so a load of another process under way has ended by then and its
    // rows are all seen (read before, they looked new or the collection empty).
    store.take_writer()?;
    let mut counts = RowCounts::default();
    let empty = store.exhibit_count()? == 0;
    let existing = if empty {
        HashMap::new()
    } else {
        store.exhibit_hashes()?
    };
    let trusted = index_trusted(store);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS);
    // (next batch number, the rows): a worker takes the next batch under the lock.
    let source = Mutex::new((0usize, rows));
    // (batch number, rows to write, their document frequencies, unchanged rows)
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<(usize, Vec<IndexedExhibit>, TermDfs, usize)>(workers);
    // A load into an empty collection (a bulk load) writes the document frequencies once at
    // the end instead of in every transaction (`upsert_counted` with `None`): each analysis
    // thread counts all its batches ([`DfAccumulator`]) and leaves its counts here as it ends.
    let defer_dfs = empty;
    let accumulated: Mutex<Vec<TermDfs>> = Mutex::new(Vec::new());
    let result = std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (source, existing, accumulated) = (&source, &existing, &accumulated);
            scope.spawn(move || {
                let mut acc = defer_dfs.then(DfAccumulator::default);
                loop {
                    let (i, batch) = {
                        let mut s = source.lock().unwrap_or_else(|p| p.into_inner());
                        let batch: Vec<Exhibit> = s.1.by_ref().take(ANALYSIS_BATCH).collect();
                        s.0 += 1;
                        (s.0 - 1, batch)
                    };
                    if batch.is_empty() {
                        break;
                    }
                    let mut unchanged = 0;
                    let mut docs = Vec::with_capacity(batch.len());
                    for e in batch {
                        let hash = content_hash(&e);
                        if existing.get(&e.id) == Some(&hash) {
                            unchanged += 1;
                            continue;
                        }
                        docs.push(IndexedExhibit {
                            fts: analyze(&e),
                            exhibit: into_row(e),
                            hash,
                        });
                    }
                    // Counted here, not on the writer (the ingest's critical path).
                    let dfs = match &mut acc {
                        Some(acc) => {
                            acc.add(&docs);
                            TermDfs::default()
                        }
                        None => TermDfs::of(&docs),
                    };
                    // The writer has stopped (a write failed): stop too.
                    if tx.send((i, docs, dfs, unchanged)).is_err() {
                        break;
                    }
                }
                // Before this thread's sender goes: the writer reads these once all are gone.
                if let Some(acc) = acc {
                    accumulated
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(acc.finish());
                }
                drop(tx);
            });
        }
        drop(tx);
        // The writer: batches may arrive out of order; they are written in order.
        let mut waiting: BTreeMap<usize, (Vec<IndexedExhibit>, TermDfs)> = BTreeMap::new();
        let mut next_out = 0;
        let mut buf: Vec<IndexedExhibit> = Vec::new();
        let mut dfs = TermDfs::default();
        fn counted(dfs: &TermDfs, defer: bool) -> Option<&TermDfs> {
            (!defer).then_some(dfs)
        }
        for (i, docs, batch_dfs, unchanged) in rx {
            counts.unchanged += unchanged;
            waiting.insert(i, (docs, batch_dfs));
            while let Some((docs, batch_dfs)) = waiting.remove(&next_out) {
                next_out += 1;
                buf.extend(docs);
                dfs.merge(batch_dfs);
                if buf.len() >= WRITE_BATCH {
                    let c = store
                        .upsert_counted(&std::mem::take(&mut buf), counted(&dfs, defer_dfs))?;
                    if !defer_dfs {
                        dfs = TermDfs::default();
                    }
                    counts.inserted += c.inserted;
                    counts.updated += c.updated;
                }
            }
        }
        let c = store.upsert_counted(&buf, counted(&dfs, defer_dfs))?;
        counts.inserted += c.inserted;
        counts.updated += c.updated;
        if defer_dfs {
            let mut all = TermDfs::default();
            let threads =
                std::mem::take(&mut *accumulated.lock().unwrap_or_else(|p| p.into_inner()));
            for d in threads {
                all.merge(d);
            }
            store.finish_term_dfs(&all)?;
        }
        Ok::<_, StoreError>(())
    });
    // The index's merges finish and its writer is let go, whether or not the load failed
    // (what it committed stays); a load that wrote nothing lets it go without a commit (one
    // would rewrite the index's meta file, and the next start would check the index in full).
    let finished = if result.is_ok() && counts.inserted + counts.updated == 0 {
        store.let_go_writer()
    } else {
        store.finish_load()
    };
    result?;
    finished?;
    if trusted && counts.inserted + counts.updated > 0 {
        record_index_stamp(store)?;
    }
    let rows = source.into_inner().unwrap_or_else(|p| p.into_inner()).1;
    Ok((counts, rows))
}

// ---- start-up: the index and the automatically loaded file ----

/// `collection_meta` key of the index fingerprint stored after the last full check.
pub const INDEX_STAMP_KEY: &str = "index_stamp";
/// `collection_meta` key of the analyzer version the index was built with.
pub const ANALYZER_KEY: &str = "analyzer_version";

/// Whether the index can be trusted without a full check: built with this analyzer, and its
/// fingerprint ([`CollectionStore::index_fingerprint`]) is the one stored after the last full
/// check or ingest.
pub fn index_trusted(store: &CollectionStore) -> bool {
    let analyzer = store.collection_meta(ANALYZER_KEY).ok().flatten();
    if analyzer.as_deref() != Some(super::text::ANALYZER_VERSION) {
        return false;
    }
    match (
        store.collection_meta(INDEX_STAMP_KEY),
        store.index_fingerprint(),
    ) {
        (Ok(Some(stored)), Ok(now)) => stored == now,
        _ => false,
    }
}

fn record_index_stamp(store: &CollectionStore) -> Result<(), StoreError> {
    let stamp = store.index_fingerprint()?;
    store.set_collection_meta(INDEX_STAMP_KEY, &stamp)
}

/// Brings the index up to date at start and returns how many rows were re-indexed. With the
/// collection unchanged since the last check or ingest (the fingerprint matches), nothing is
/// read or re-tokenised. Otherwise the full check, with a warning for what it mends: analysed
/// rows (`exhibit_text`) short of the records are analysed again and the index rebuilt; an
/// index that is unreadable, fails a checksum, or holds another generation or number of rows
/// is rebuilt from the analysed rows; an index built by another analyzer version is
/// re-analysed; then the fingerprint is stored. An index built before the table of document
/// frequencies (`exhibit_terms`, migration 0006) gets it filled once, with a log line.
///
/// The check and its repairs run only while this process holds the index's writer, taken
/// without waiting. A load of another process (`museum-agent ingest` beside a starting server
/// or `search`) holds it for its whole run, and until its end its index is behind its rows by
/// design: judged then, the index looked missing, was "rebuilt" from the rows stored so far once
/// the load ended (dropping the rest), and stamped as checked. Now the check is left to the next
/// start, with a warning; questions meanwhile see what that load has committed.
pub fn check_index(store: &CollectionStore) -> Result<usize, StoreError> {
    let trusted = index_trusted(store);
    if trusted && store.term_dfs_ready()? {
        return Ok(0);
    }
    if !writer_or_warn(store)? {
        return Ok(0);
    }
    let out = check_holding_writer(store, trusted);
    // Repairs end their load and let the writer go; a check with nothing to mend lets it go here.
    let gone = store.let_go_writer();
    let n = out?;
    gone?;
    Ok(n)
}

/// [`CollectionStore::try_take_writer`], with the warning when another process holds it.
fn writer_or_warn(store: &CollectionStore) -> Result<bool, StoreError> {
    let free = store.try_take_writer()?;
    if !free {
        tracing::warn!(
            "another process is writing the collection (an ingest?): the search index is not \
             checked now; questions see what that load has committed so far, and the next start \
             checks the index"
        );
    }
    Ok(free)
}

fn check_holding_writer(store: &CollectionStore, trusted: bool) -> Result<usize, StoreError> {
    let n = if trusted { 0 } else { full_check(store)? };
    // A repair let go of the writer at its end: take it again (without waiting) for what
    // follows, or leave the rest to the next start.
    if !writer_or_warn(store)? {
        return Ok(n);
    }
    if !trusted {
        record_index_stamp(store)?;
    }
    if !store.term_dfs_ready()? {
        // An index built before the document-frequency table (migration 0006).
        let started = std::time::Instant::now();
        store.rebuild_term_dfs()?;
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "built the search index's table of document frequencies (once, after an upgrade)"
        );
    }
    Ok(n)
}

fn full_check(store: &CollectionStore) -> Result<usize, StoreError> {
    let text = store
        .text_problem()
        .unwrap_or_else(|e| Some(format!("check failed: {e}")));
    let index = match text {
        Some(_) => None,
        None => store
            .index_problem()
            .unwrap_or_else(|e| Some(format!("index check failed: {e}"))),
    };
    let n = if let Some(reason) = text {
        tracing::warn!(%reason, "the collection's analysed rows are incomplete; analysing the stored records again and rebuilding the search index");
        let n = rebuild_index(store)?;
        tracing::info!(rows = n, "search index rebuilt from the stored records");
        n
    } else if let Some(reason) = index {
        tracing::warn!(%reason, "the collection's search index is corrupt or incomplete; rebuilding it from the stored records");
        let n = store.rebuild_index_from_text()?;
        tracing::info!(rows = n, "search index rebuilt from the stored records");
        n
    } else if store.collection_meta(ANALYZER_KEY)?.as_deref() == Some(super::text::ANALYZER_VERSION)
    {
        0
    } else {
        let all: Vec<Exhibit> = store
            .all_exhibits()?
            .into_iter()
            .map(Exhibit::from)
            .collect();
        let n = all.len();
        // Content hashes include the analyzer version, so every row counts as changed.
        store_rows(store, all)?;
        n
    };
    store.set_collection_meta(ANALYZER_KEY, super::text::ANALYZER_VERSION)?;
    store.recount_exhibits()?;
    Ok(n)
}

/// Recreates the full-text index from the stored records (after corruption), analysing on
/// every core. Returns the number of rows indexed.
pub fn rebuild_index(store: &CollectionStore) -> Result<usize, StoreError> {
    // The writer before the rows (see `CollectionStore::take_writer`).
    store.take_writer()?;
    let rows = store.all_exhibits_with_pk()?;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS);
    let per = rows.len().div_ceil(workers).max(1);
    let docs: Vec<(i64, [String; 7])> = std::thread::scope(|scope| {
        let parts: Vec<_> = rows
            .chunks(per)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(pk, r)| (*pk, analyze(&Exhibit::from(r.clone()))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    drop(rows);
    store.recreate_index(&docs)?;
    Ok(docs.len())
}

/// A file's identity without reading it: size, modification and change times, inode (a copy
/// that keeps the modification time, `cp -p` or `rsync -t`, still changes the change time),
/// and " racy" when it changed in the last two seconds.
pub fn file_stat(path: &Path) -> std::io::Result<String> {
    let m = std::fs::metadata(path)?;
    let nanos = |t: std::io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos())
    };
    #[cfg(unix)]
    let (ctime, ino) = {
        use std::os::unix::fs::MetadataExt;
        (
            i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            m.ino(),
        )
    };
    #[cfg(not(unix))]
    let (ctime, ino) = (0i128, 0u64);
    let mtime = nanos(m.modified());
    // A file changed within the file system's timestamp granularity of this look could change
    // again with the same size and times: such a stat is marked and never trusted (as git does
    // with "racy" index entries), so the next start hashes the file once more.
    let now = nanos(Ok(std::time::SystemTime::now()));
    let recent = now.saturating_sub(mtime) < 2_000_000_000
        || now.saturating_sub(ctime.max(0) as u128) < 2_000_000_000;
    Ok(format!(
        "size {} mtime {mtime} ctime {ctime} ino {ino}{}",
        m.len(),
        if recent { " racy" } else { "" }
    ))
}

/// The size in a [`file_stat`] ("size N mtime …").
fn stat_size(stat: &str) -> Option<&str> {
    stat.strip_prefix("size ")?.split(' ').next()
}

fn stat_key(source: &str) -> String {
    format!("file_stat:{source}")
}

/// Whether the automatically loaded file `path` (recorded as `source`) must be loaded: when the
/// collection is empty, or this file was loaded before and its content changed since. Returns
/// the file's [`file_stat`] (taken before any read, for [`record_source`]) when it must. Cheap
/// when nothing changed: the file's size and times are compared with those stored at its last
/// load, and it is not read at all. When only its times differ for a file loaded before, it is
/// hashed: an unchanged hash (the file was only touched) stores the new times and loads
/// nothing. The load itself streams the file ([`open_rows`]) and hashes it on the way.
pub fn check_source(
    store: &CollectionStore,
    source: &str,
    path: &Path,
) -> Result<Option<String>, String> {
    let stat = file_stat(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let count = store.exhibit_count().map_err(|e| e.to_string())?;
    let last = store.collection_load(source).map_err(|e| e.to_string())?;
    if count > 0 && last.is_none() {
        // A collection loaded by other means (the `ingest` command): not the demo's to replace.
        return Ok(None);
    }
    let stored_stat = store
        .collection_meta(&stat_key(source))
        .map_err(|e| e.to_string())?;
    if let Some(l) = &last
        && count > 0
    {
        if !stat.ends_with(" racy")
            && stored_stat.as_deref() == Some(format!("{stat} sha256 {}", l.sha256).as_str())
        {
            return Ok(None);
        }
        // Another size is another content: load it, without reading it once more to hash it.
        if stat_size(&stat) != stored_stat.as_deref().and_then(stat_size) {
            return Ok(Some(stat));
        }
        let sha256 =
            file_sha256(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if l.sha256 == sha256 {
            store
                .set_collection_meta(&stat_key(source), &format!("{stat} sha256 {sha256}"))
                .map_err(|e| e.to_string())?;
            return Ok(None);
        }
    }
    Ok(Some(stat))
}

/// Records a loaded file (its hash, row count and the [`file_stat`] taken before reading it).
pub fn record_source(
    store: &CollectionStore,
    source: &str,
    load_sha256: &str,
    stat: &str,
    rows: i64,
) -> Result<(), StoreError> {
    store.record_collection_load(source, load_sha256, rows)?;
    store.set_collection_meta(&stat_key(source), &format!("{stat} sha256 {load_sha256}"))
}

/// Counts of one batch of rows written to the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowCounts {
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
}

pub(crate) fn extra_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) if !s.starts_with("http://") && !s.starts_with("https://") => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Array(a) => a.iter().for_each(|x| extra_text(x, out)),
        Value::Object(m) => m.values().for_each(|x| extra_text(x, out)),
        _ => {}
    }
}

/// The analysed FTS columns of an exhibit (order of `store::collection::FTS_COLUMNS`).
pub fn analyze(e: &Exhibit) -> [String; 7] {
    let mut extra = String::new();
    e.extra.values().for_each(|v| extra_text(v, &mut extra));
    [
        text::index_text(&e.title),
        text::index_text(&e.maker),
        text::index_text(&format!("{} {}", e.period, e.date)),
        text::index_text(&e.medium),
        text::index_text(&e.description),
        text::index_text(&extra),
        meta_text(e),
    ]
}

/// The meta column: gallery, dimensions and id, then the record's kind markers
/// ([`super::kinds`]).
fn meta_text(e: &Exhibit) -> String {
    let mut meta = text::index_text(&format!("{} {} {}", e.gallery, e.dimensions, e.id));
    for markers in [
        super::kinds::markers(&e.gallery, &e.medium, &e.title),
        super::kinds::origin_markers(&e.period),
    ] {
        if !markers.is_empty() {
            if !meta.is_empty() {
                meta.push(' ');
            }
            meta.push_str(&markers);
        }
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_jsonl(reader: impl BufRead) -> std::io::Result<Parsed> {
        let mut rows = JsonlRows::new(reader);
        let good = rows.by_ref().collect();
        Ok(Parsed {
            rows: good,
            rejected: rows.finish()?.1,
        })
    }

    fn parse_csv(reader: impl Read) -> std::io::Result<Parsed> {
        let mut rows = CsvRows::new(reader)?;
        let good = rows.by_ref().collect();
        Ok(Parsed {
            rows: good,
            rejected: rows.finish()?.1,
        })
    }

    fn numbered(n: usize) -> Vec<Exhibit> {
        (0..n)
            .map(|i| Exhibit {
                id: format!("x{i:05}"),
                title: format!("Bronze vessel {i}"),
                description: if i % 2 == 0 {
                    format!("青銅器，編號{i}。")
                } else {
                    format!("A vessel numbered {i}.")
                },
                ..Default::default()
            })
            .collect()
    }

    /// The demo collection's records, in file order.
    fn demo_rows() -> Vec<Exhibit> {
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection/exhibits.jsonl");
        parse_file(&demo)
            .unwrap()
            .rows
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    /// Rows as a load writes them (analysed, hashed).
    fn analysed(rows: Vec<Exhibit>) -> Vec<IndexedExhibit> {
        rows.into_iter()
            .map(|e| IndexedExhibit {
                fts: analyze(&e),
                hash: content_hash(&e),
                exhibit: into_row(e),
            })
            .collect()
    }

    fn memory_store() -> CollectionStore {
        crate::store::Store::open_in_memory().unwrap().collection()
    }

    #[test]
    fn a_streamed_file_gives_the_rows_rejections_and_hash_of_a_whole_parse() {
        // JSONL (and CSV below): the rows, rejections and hash of `parse_file`, read as taken.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let mut text = String::new();
        for i in 0..(3 * ANALYSIS_BATCH + 5) {
            text.push_str(&format!("{{\"id\": \"s{i}\", \"title\": \"Jar {i}\"}}\n"));
        }
        text.push_str("{not json\n{\"id\": \"s7\", \"title\": \"again\"}\n\n");
        std::fs::write(&path, &text).unwrap();
        let whole = parse_file(&path).unwrap();
        let s = memory_store();
        let (counts, rows) =
            store_rows_from(&s, open_rows(&path).unwrap().map(|(_, e)| e)).unwrap();
        drop(rows);
        assert_eq!(counts.inserted, whole.rows.len());
        assert_eq!(s.exhibit_count().unwrap(), whole.rows.len() as i64);
        let rejected = streams_as_parsed(&path);
        assert_eq!(
            rejected.len(),
            2,
            "bad JSON and a duplicate id: {rejected:?}"
        );
        // Taken only in part: the hash still covers the whole file.
        let mut part = open_rows(&path).unwrap();
        assert!(part.next().is_some());
        assert_eq!(part.finish().unwrap().1, file_sha256(&path).unwrap());
        // CSV streams the same way.
        let csv = dir.path().join("c.csv");
        let mut text = String::from("id,title,maker\n");
        for i in 0..(2 * ANALYSIS_BATCH + 3) {
            text.push_str(&format!("c{i},\"Bowl, {i}\",Anon\n"));
        }
        text.push_str("c9,dup,x\nc10\n");
        std::fs::write(&csv, &text).unwrap();
        assert_eq!(parse_file(&csv).unwrap().rows.len(), 2 * ANALYSIS_BATCH + 3);
        let rejected = streams_as_parsed(&csv);
        assert_eq!(
            rejected.len(),
            2,
            "a duplicate id and a short record: {rejected:?}"
        );
    }

    /// Checks that `open_rows` gives `parse_file`'s rows (line, id, title), rejections and
    /// the file's SHA-256; returns the rejections.
    fn streams_as_parsed(path: &Path) -> Vec<Rejected> {
        let whole = parse_file(path).unwrap();
        let mut rows = open_rows(path).unwrap();
        let streamed: Vec<(u64, Exhibit)> = rows.by_ref().collect();
        let (rejected, sha) = rows.finish().unwrap();
        assert_eq!(streamed.len(), whole.rows.len());
        assert!(
            streamed
                .iter()
                .zip(&whole.rows)
                .all(|(a, b)| a.0 == b.0 && a.1.id == b.1.id && a.1.title == b.1.title)
        );
        assert_eq!(rejected, whole.rejected);
        assert_eq!(sha, file_sha256(path).unwrap());
        rejected
    }

    #[test]
    fn bulk_rows_keep_file_order_and_skip_unchanged_ones() {
        let s = memory_store();
        check_index(&s).unwrap();
        // Several analysis batches, written in file order whatever thread analysed them.
        let rows = numbered(2 * ANALYSIS_BATCH + 17);
        let c = store_rows(&s, rows.clone()).unwrap();
        assert_eq!((c.inserted, c.updated, c.unchanged), (rows.len(), 0, 0));
        let stored: Vec<String> = s
            .all_exhibits_with_pk()
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.id)
            .collect();
        let ids: Vec<String> = rows.iter().map(|e| e.id.clone()).collect();
        assert_eq!(stored, ids);
        assert_eq!(s.exhibit_count().unwrap(), rows.len() as i64);
        let mut changed = rows.clone();
        changed[1500].title = "Jade disc".into();
        let c = store_rows(&s, changed).unwrap();
        assert_eq!((c.inserted, c.updated, c.unchanged), (0, 1, rows.len() - 1));
        assert_eq!(s.exhibit_count().unwrap(), rows.len() as i64);
        assert_eq!(
            s.exhibit_by_id("x01500").unwrap().unwrap().title,
            "Jade disc"
        );
    }

    #[test]
    fn a_large_load_into_an_empty_collection_writes_the_term_table_once() {
        // More than one transaction: the document frequencies are written at the end; they
        // are FTS5's own, and a later load (not deferred) keeps them in step.
        let s = memory_store();
        check_index(&s).unwrap();
        let rows = numbered(WRITE_BATCH + 1_500);
        store_rows(&s, rows.clone()).unwrap();
        assert!(s.term_dfs_ready().unwrap());
        assert_eq!(s.term_df_mismatches().unwrap(), vec![]);
        assert_eq!(s.doc_freq("bronz", false).unwrap(), rows.len() as i64);
        let mut changed = rows;
        changed[7].title = "Jade disc".into();
        store_rows(&s, changed).unwrap();
        assert_eq!(s.term_df_mismatches().unwrap(), vec![]);
        // A deferred load that stopped before its end leaves the table marked incomplete; the
        // start-up check refills it.
        let t = memory_store();
        check_index(&t).unwrap();
        let docs = analysed(numbered(3));
        t.upsert_counted(&docs, None).unwrap();
        assert!(!t.term_dfs_ready().unwrap());
        // Its rows wait in the index's writer, uncommitted; the end of the load (which
        // `store_rows_from` reaches whether or not it failed) commits them.
        assert_eq!(t.doc_freq("bronz", true).unwrap(), 0);
        t.finish_load().unwrap();
        assert_eq!(t.index_problem().unwrap(), None);
        assert_eq!(t.doc_freq("bronz", true).unwrap(), 3);
        check_index(&t).unwrap();
        assert!(t.term_dfs_ready().unwrap());
        assert_eq!(t.term_df_mismatches().unwrap(), vec![]);
    }

    #[test]
    fn a_start_during_another_process_load_leaves_the_index_to_that_load() {
        // Two stores on one file stand for `museum-agent ingest` and a server (or `search`)
        // started while it runs. Before: the start judged the load's index (behind its rows
        // until the load's end) missing, waited for the writer, then "rebuilt" it from the
        // rows stored when it looked, dropping the rest, and stamped it as checked.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let ingest = crate::store::Store::open(&db).unwrap().collection();
        check_index(&ingest).unwrap();
        let docs = analysed(numbered(3));
        // A bulk load under way: a first transaction in SQLite, its index rows in the writer.
        ingest.upsert_counted(&docs[..2], None).unwrap();
        let serve = crate::store::Store::open(&db).unwrap().collection();
        assert_eq!(check_index(&serve).unwrap(), 0, "nothing re-indexed");
        assert!(!index_trusted(&serve), "and nothing stamped");
        // The load goes on and ends as if alone.
        ingest.upsert_counted(&docs[2..], None).unwrap();
        ingest.finish_term_dfs(&TermDfs::of(&docs)).unwrap();
        ingest.finish_load().unwrap();
        assert_eq!(serve.index_problem().unwrap(), None);
        assert_eq!(serve.doc_freq("bronz", true).unwrap(), 3);
        assert_eq!(serve.term_df_mismatches().unwrap(), vec![]);
        // The next start checks the index and stamps it.
        assert_eq!(check_index(&serve).unwrap(), 0);
        assert!(index_trusted(&serve));
        // A check finding the writer free takes it only while it checks.
        ingest.take_writer().unwrap();
        ingest.let_go_writer().unwrap();
    }

    #[test]
    fn an_unchanged_index_is_trusted_without_a_full_check() {
        let s = memory_store();
        assert_eq!(check_index(&s).unwrap(), 0);
        assert!(index_trusted(&s), "a checked empty index is stamped");
        store_rows(&s, numbered(30)).unwrap();
        assert!(index_trusted(&s), "our own ingest renews the stamp");
        assert_eq!(check_index(&s).unwrap(), 0);
        // Another analyzer built it: not trusted, re-analysed, stamped again.
        s.set_collection_meta(ANALYZER_KEY, "old").unwrap();
        assert!(!index_trusted(&s));
        assert_eq!(check_index(&s).unwrap(), 30);
        assert!(index_trusted(&s));
        // A stamp that does not match (the collection changed behind our back) means the full
        // check; a sound index is then stamped without re-indexing anything.
        s.set_collection_meta(INDEX_STAMP_KEY, "something else")
            .unwrap();
        assert!(!index_trusted(&s));
        assert_eq!(check_index(&s).unwrap(), 0);
        assert!(index_trusted(&s));
        // On disk (the index's files are in the fingerprint), an ingest of the same rows
        // writes nothing and leaves the index as it was: still trusted.
        let dir = tempfile::tempdir().unwrap();
        let f = crate::store::Store::open(&dir.path().join("c.db"))
            .unwrap()
            .collection();
        check_index(&f).unwrap();
        store_rows(&f, numbered(30)).unwrap();
        assert!(index_trusted(&f));
        assert_eq!(store_rows(&f, numbered(30)).unwrap().unchanged, 30);
        assert!(
            index_trusted(&f),
            "an ingest that wrote nothing changed the index"
        );
    }

    #[test]
    fn a_rebuilt_index_has_every_row() {
        let s = memory_store();
        store_rows(&s, numbered(2 * ANALYSIS_BATCH + 3)).unwrap();
        assert_eq!(rebuild_index(&s).unwrap(), 2 * ANALYSIS_BATCH + 3);
        assert_eq!(s.index_problem().unwrap(), None);
        assert_eq!(s.text_problem().unwrap(), None);
        assert_eq!(s.doc_freq("bronz", false).unwrap(), 2003, "every title");
        assert_eq!(
            s.doc_freq("number", false).unwrap(),
            1001,
            "odd descriptions"
        );
    }

    #[test]
    fn the_term_table_matches_the_index() {
        // The demo collection (English and Chinese), then changed rows, then a rebuilt index,
        // then an index of an earlier release (no table): the document frequencies of
        // `exhibit_terms` are the index's own at every step.
        let rows = demo_rows();
        let s = memory_store();
        check_index(&s).unwrap();
        store_rows(&s, rows.clone()).unwrap();
        assert_eq!(s.term_df_mismatches().unwrap(), vec![]);
        assert!(s.doc_freq("bronz", false).unwrap() > 10);
        let mut changed = rows.clone();
        for (i, e) in changed.iter_mut().enumerate().step_by(7) {
            e.description = format!("{} Bronze jar number {i}, 青銅器。", e.title);
            e.title = "Jade".into();
        }
        let c = store_rows(&s, changed).unwrap();
        assert_eq!(c.updated, rows.len().div_ceil(7));
        assert_eq!(s.term_df_mismatches().unwrap(), vec![]);
        rebuild_index(&s).unwrap();
        assert_eq!(s.term_df_mismatches().unwrap(), vec![]);
        // An index built before migration 0006: an empty table and no mark; the start-up
        // check fills it, even when the index itself is trusted.
        check_index(&s).unwrap();
        s.raw_sql("DELETE FROM exhibit_terms; DELETE FROM collection_meta WHERE key = 'term_df'");
        assert!(index_trusted(&s));
        assert!(!s.term_dfs_ready().unwrap());
        assert_eq!(s.doc_freq("bronz", false).unwrap(), 0);
        assert_eq!(check_index(&s).unwrap(), 0);
        assert!(s.term_dfs_ready().unwrap());
        assert_eq!(s.term_df_mismatches().unwrap(), vec![]);
    }

    #[test]
    fn the_index_ranks_as_fts5_does() {
        // The demo collection in the store (the tantivy index) and in SQLite FTS5, the engine
        // it replaced, whose bm25() every fitted constant after the BM25 stage was fitted on.
        // Every BM25 query the search makes for the 200 dev questions (their own words,
        // prefixes, transliterations, translations and synonyms): the same rows in the same
        // order with bit-for-bit the same scores, and the same document frequencies. Then
        // again after a seventh of the rows is replaced.
        use crate::retrieval::embedded::{EmbeddedOptions, WEIGHTS, rank};
        use crate::store::collection::MATCHES_ISSUED;
        use crate::store::lexical::{Fts5Reference, MatchTerm};
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection");
        let rows = demo_rows();
        let s = memory_store();
        check_index(&s).unwrap();
        // Two loads: the index is read over more than one segment.
        store_rows(&s, rows[..1000].to_vec()).unwrap();
        store_rows(&s, rows.clone()).unwrap();
        // The reference gets the words only: the kind markers (`#d:ceram`) are no words, which
        // the index leaves out of a row's length (FTS5 would read `d` and `ceram`).
        let words_only = |rows: Vec<(i64, [String; 7])>| -> Vec<(i64, [String; 7])> {
            rows.into_iter()
                .map(|(pk, cols)| {
                    let cols = cols.map(|c| {
                        c.split(' ')
                            .filter(|t| !crate::retrieval::kinds::is_marker(t))
                            .collect::<Vec<_>>()
                            .join(" ")
                    });
                    (pk, cols)
                })
                .collect()
        };
        let fts = Fts5Reference::new(&words_only(s.indexed_columns().unwrap()));
        let mut questions: Vec<String> = Vec::new();
        for f in ["dev_queries.jsonl", "dev_queries_v2.jsonl"] {
            for line in std::fs::read_to_string(root.join(f)).unwrap().lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                questions.push(v["query"].as_str().unwrap().to_string());
            }
        }
        let compare = |fts: &Fts5Reference, questions: &[String]| {
            let opts = EmbeddedOptions::default();
            let mut queries = 0;
            for q in questions {
                MATCHES_ISSUED.with(|m| m.borrow_mut().clear());
                rank(&s, q, &opts, None).unwrap();
                for terms in MATCHES_ISSUED.with(|m| m.take()) {
                    let terms: Vec<MatchTerm> = terms
                        .iter()
                        .map(|(text, prefix)| {
                            assert_eq!(text.split_ascii_whitespace().count(), 1, "{text:?}");
                            MatchTerm {
                                text,
                                prefix: *prefix,
                            }
                        })
                        .collect();
                    let want = fts.candidates(&terms, &WEIGHTS, 5000);
                    let got = s.candidates(&terms, &WEIGHTS, 5000).unwrap();
                    assert_eq!(got, want, "{q:?}: {terms:?}");
                    for t in &terms {
                        let df = s.doc_freq(t.text, t.prefix).unwrap();
                        assert_eq!(fts.doc_freq(*t) as i64, df, "{t:?}");
                    }
                    queries += 1;
                }
            }
            queries
        };
        assert!(compare(&fts, &questions) > 300);
        let mut changed = rows.clone();
        for (i, e) in changed.iter_mut().enumerate().step_by(7) {
            e.description = format!("{} Bronze jar number {i}, 青銅器。", e.title);
            e.title = "Jade".into();
        }
        store_rows(&s, changed).unwrap();
        let cols = words_only(s.indexed_columns().unwrap());
        fts.replace(&cols.iter().step_by(7).cloned().collect::<Vec<_>>());
        assert!(compare(&fts, &questions[..60]) > 60);
    }

    #[test]
    fn an_unchanged_source_file_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.jsonl");
        let line = |t: &str| format!("{{\"id\": \"d1\", \"title\": \"{t}\"}}\n");
        std::fs::write(&path, line("Jar")).unwrap();
        let s = memory_store();
        let stat = check_source(&s, "demo", &path)
            .unwrap()
            .expect("empty collection: load");
        let (counts, rows) =
            store_rows_from(&s, open_rows(&path).unwrap().map(|(_, e)| e)).unwrap();
        assert_eq!(counts.inserted, 1);
        drop(rows);
        let (rejected, sha) = {
            // The rows were read as they were stored; the file is hashed on the way.
            let mut rows = open_rows(&path).unwrap();
            assert_eq!(rows.by_ref().count(), 1);
            rows.finish().unwrap()
        };
        assert!(rejected.is_empty());
        assert_eq!(sha, file_sha256(&path).unwrap(), "hashed in the same read");
        record_source(&s, "demo", &sha, &stat, 1).unwrap();
        assert!(check_source(&s, "demo", &path).unwrap().is_none());
        // Rewritten with the same bytes: its times changed, its hash did not.
        std::fs::write(&path, line("Jar")).unwrap();
        assert!(check_source(&s, "demo", &path).unwrap().is_none());
        // The same size, other content: loaded.
        std::fs::write(&path, line("Cup")).unwrap();
        assert!(
            check_source(&s, "demo", &path).unwrap().is_some(),
            "changed: load"
        );
        // A collection loaded by other means is not replaced by the demo.
        let other = memory_store();
        store_rows(&other, numbered(1)).unwrap();
        assert!(check_source(&other, "demo", &path).unwrap().is_none());
        assert!(check_source(&s, "demo", &dir.path().join("missing.jsonl")).is_err());
    }

    #[test]
    fn jsonl_keeps_good_rows_and_names_bad_lines() {
        let input = concat!(
            r#"{"id": "a1", "title": "Jar", "artist_or_maker": "Potter", "culture_or_period": "Ming", "aliases": ["vase"]}"#,
            "\n\n",
            "{not json\n",
            "[1, 2]\n",
            r#"{"id": "", "title": "No id"}"#,
            "\n",
            r#"{"id": "a2"}"#,
            "\n",
            r#"{"id": "a3", "title": ["x"]}"#,
            "\n",
            r#"{"id": "a1", "title": "Again"}"#,
            "\n",
            r#"{"id": "a4", "title": "碑", "description": "唐代墓誌", "year": 1990}"#,
        );
        let p = parse_jsonl(input.as_bytes()).unwrap();
        let ids: Vec<_> = p.rows.iter().map(|(l, e)| (*l, e.id.as_str())).collect();
        assert_eq!(ids, vec![(1, "a1"), (9, "a4")]);
        let a1 = &p.rows[0].1;
        assert_eq!((a1.maker.as_str(), a1.period.as_str()), ("Potter", "Ming"));
        assert_eq!(a1.extra["aliases"], serde_json::json!(["vase"]));
        assert_eq!(a1.language, "en");
        assert_eq!(p.rows[1].1.language, "zh");
        assert_eq!(p.rows[1].1.date, "1990", "`year` is a date");
        let bad: Vec<_> = p
            .rejected
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect();
        assert_eq!(bad[0].0, 3);
        assert!(bad[0].1.starts_with("invalid JSON"), "{bad:?}");
        assert_eq!(bad[1], (4, "not a JSON object"));
        assert_eq!(bad[2], (5, "missing `id`"));
        assert_eq!(bad[3], (6, "missing `title`"));
        assert_eq!(bad[4], (7, "field `title` must be a string"));
        assert_eq!(bad[5], (8, "duplicate id `a1` (first on line 1)"));
    }

    #[test]
    fn jsonl_rejects_invalid_utf8_and_huge_lines_and_goes_on() {
        let mut input = b"{\"id\": \"x\", \"title\": \"\xff\"}\n".to_vec();
        input.extend(vec![b' '; MAX_LINE_BYTES + 10]);
        input.extend(b"\n{\"id\": \"ok\", \"title\": \"Fine\"}\n");
        let p = parse_jsonl(&input[..]).unwrap();
        assert_eq!(p.rows.len(), 1);
        assert_eq!(p.rows[0].0, 3);
        assert_eq!(p.rejected[0].line, 1);
        assert_eq!(p.rejected[0].reason, "not valid UTF-8");
        assert_eq!(p.rejected[1].line, 2);
        assert!(p.rejected[1].reason.contains("longer than"));
    }

    #[test]
    fn too_long_fields_are_rejected() {
        let long = "x".repeat(MAX_FIELD_CHARS + 1);
        let line = serde_json::json!({"id": "a", "title": long}).to_string();
        let p = parse_jsonl(line.as_bytes()).unwrap();
        assert!(p.rejected[0].reason.contains("`title` is too long"));
    }

    #[test]
    fn common_csv_headers_map_to_fields() {
        let input = "Object Number,Title,Artist,Date made,Notes,Gallery\n\
                     M-1,Vase,Anon,1750,A blue vase.,Room 3\n";
        let p = parse_csv(input.as_bytes()).unwrap();
        let e = &p.rows[0].1;
        assert_eq!(
            (&*e.id, &*e.maker, &*e.date, &*e.description, &*e.gallery),
            ("M-1", "Anon", "1750", "A blue vase.", "Room 3")
        );
        let p = parse_csv("id,title,Year\nb,Bowl,1900\n".as_bytes()).unwrap();
        assert_eq!(p.rows[0].1.date, "1900");
    }

    #[test]
    fn csv_rows_with_quotes_extra_columns_and_errors() {
        let input = "id,title,maker,description,tags\n\
                     c1,\"Bowl, blue\",Anon,\"A \"\"fine\"\" bowl.\nSecond line.\",ceramic\n\
                     c2,Cup\n\
                     ,Nameless,,,\n\
                     c3,Plate,,,\n";
        let p = parse_csv(input.as_bytes()).unwrap();
        assert_eq!(p.rows.len(), 2, "{:?}", p.rejected);
        let c1 = &p.rows[0].1;
        assert_eq!(c1.title, "Bowl, blue");
        assert_eq!(c1.description, "A \"fine\" bowl.\nSecond line.");
        assert_eq!(c1.extra["tags"], "ceramic");
        assert_eq!(p.rows[0].0, 2);
        assert_eq!(p.rows[1].1.id, "c3");
        assert_eq!(p.rows[1].0, 6);
        assert_eq!(
            p.rejected,
            vec![
                Rejected {
                    line: 4,
                    reason: "expected 5 fields, found 2".into()
                },
                Rejected {
                    line: 5,
                    reason: "missing `id`".into()
                },
            ]
        );
    }

    #[test]
    fn format_by_extension() {
        assert_eq!(Format::for_path(Path::new("a.JSONL")), Ok(Format::Jsonl));
        assert_eq!(Format::for_path(Path::new("a.csv")), Ok(Format::Csv));
        assert!(Format::for_path(Path::new("a.xlsx")).is_err());
    }

    #[test]
    fn content_hash_changes_with_content_only() {
        let e = Exhibit {
            id: "a".into(),
            title: "T".into(),
            ..Default::default()
        };
        let mut f = e.clone();
        assert_eq!(content_hash(&e), content_hash(&f));
        f.description = "new".into();
        assert_ne!(content_hash(&e), content_hash(&f));
        // The same text in another field, or split elsewhere between two, is other content.
        let moved = Exhibit {
            maker: "T".into(),
            ..e.clone()
        };
        let mut g = e.clone();
        g.title = String::new();
        g.maker = "T".into();
        assert_ne!(content_hash(&moved), content_hash(&g));
        let (mut a, mut b) = (e.clone(), e.clone());
        (a.title, a.maker) = ("ab".into(), "c".into());
        (b.title, b.maker) = ("a".into(), "bc".into());
        assert_ne!(content_hash(&a), content_hash(&b));
        // Extra fields count; their absence and an empty object are the same.
        let mut x = e.clone();
        x.extra.insert("tag".into(), Value::from("bronze"));
        assert_ne!(content_hash(&e), content_hash(&x));
        assert_eq!(content_hash(&e).len(), 32);
    }
}
