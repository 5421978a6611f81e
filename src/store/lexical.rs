//! The collection's inverted index on tantivy, scored exactly as SQLite FTS5's `bm25()` scored
//! the `exhibits_fts` table it replaced (migration 0007). [`super::collection`] keeps it in
//! step with the rows: see its module docs for the order of the two commits and the start-up
//! check. The test `the_index_ranks_as_fts5_does` (`retrieval::ingest`) holds it to FTS5 itself
//! (`Fts5Reference`, an in-memory FTS5 table of the same rows) on every query the search
//! makes for the 200 dev questions.
//!
//! # Why FTS5's formula, not tantivy's own BM25
//! Everything after the BM25 stage was fitted on FTS5's scores: the coverage re-rank compares a
//! row's BM25 with the best's, and the no-answer model (`retrieval::abstain`) and the fusion
//! constants take the lexical score as an input. tantivy's BM25 scores each field apart with
//! its own length norm (a lossy byte); FTS5's is one BM25 over the weighted sum of a phrase's
//! counts in every column and the row's exact length in all columns. With the same formula the
//! switch changes no ranking and no fitted constant; with tantivy's, every fit would be redone.
//!
//! # The index
//! One text field per FTS column ([`FTS_COLUMNS`]), tokens split at ASCII white space (analysed
//! text is already tokens: the invariant `DfAccumulator` relies on), term frequencies without
//! positions (no phrase query is ever made: every query term is one token), no field norms;
//! `pk` (the `exhibits` row, indexed to delete by it, and a fast field) and `len` (the row's
//! tokens in all columns, FTS5's `xColumnSize(-1)`) as fast fields. The SQLite generation of the
//! collection a commit reflects is the commit's payload ([`LexicalIndex::committed_generation`]),
//! so a start can tell an index behind the rows.
//!
//! # Writers and readers
//! tantivy allows one writer a directory, across processes (a lock file). The writer is created
//! at the first write and let go at the end of each load ([`LexicalIndex::release_writer`]), so
//! `museum-agent ingest` can write while `serve` runs on the same files (a write while the other
//! holds the lock waits for it, at most [`LOCK_WAIT`], then fails with a lexical-index error
//! and writes nothing). A reader is reloaded
//! after each commit of this process and, for another process's commits, when a question's
//! SQLite snapshot shows a later generation than the reader's ([`LexicalIndex::catch_up`]).
//!
//! # Scoring ([`LexicalIndex::candidates`]), as `fts5Bm25Function` in SQLite's `fts5_aux.c`
//! For a query of phrases `q` (a token, or with `prefix` every token starting with it) joined by
//! OR, each matching row `D`:
//! `score = Σ_q idf(q) · f(q,D)·(k1+1) / (f(q,D) + k1·(1 − b + b·|D|/avgdl))`, `k1` 1.2, `b`
//! 0.75, where `f(q,D)` is the sum over the row's occurrences of `q` of its column's weight,
//! `|D|` the row's tokens, `avgdl` all rows' tokens over their number, and
//! `idf(q) = ln((N − n(q) + 0.5) / (n(q) + 0.5))` (1e-6 when not positive) with `n(q)` the rows
//! holding `q` in any column. The sums run in FTS5's order, so the scores are the same doubles.
//! Ties are ordered by `pk`, the order FTS5's full-text scan feeds its sorter in.
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use tantivy::postings::Postings;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TERMINATED, Term};

use super::StoreError;
use super::collection::FTS_COLUMNS;

/// The tokenizer name registered on the index: ASCII white space, nothing else.
const TOKENIZER: &str = "tokens";
/// How long a write waits for another process's writer (its whole load) to let go of the
/// index: a load of 500,000 records holds it ~30 s.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
/// How often the lock is tried meanwhile.
const LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// Indexing memory of the writer (tantivy's floor is 15 MB a thread).
const WRITER_BYTES: usize = 64 << 20;
/// Tokens starting with this are markers (the retrieval's kinds of object, `#d:ceram`), not
/// words: no question term holds it, and a row's length leaves them out, so BM25 scores the
/// words as if the markers were not there.
pub const MARKER: char = '#';
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// One term of a query: an index token, or with `prefix` every token starting with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchTerm<'a> {
    pub text: &'a str,
    pub prefix: bool,
}

#[derive(Clone, Copy)]
struct Fields {
    columns: [Field; 7],
    pk: Field,
    len: Field,
}

/// The inverted index (see the module docs).
pub struct LexicalIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Created at the first write (its indexing threads and memory are not paid by a reader).
    writer: Mutex<Option<IndexWriter>>,
    /// The collection generation the reader was last reloaded at (-1: none).
    reader_generation: AtomicI64,
    /// Why the index found at open could not be used and was started again empty (until the
    /// next commit: the rebuild).
    reset: Mutex<Option<String>>,
    /// The directory (None: in memory).
    dir: Option<std::path::PathBuf>,
    /// See [`LOCK_WAIT`].
    lock_wait: std::time::Duration,
    /// Rows and their tokens of one searcher generation (`avgdl`'s terms: a walk over every
    /// row's `len`, done once a commit instead of once a question).
    totals: Mutex<Option<(u64, Totals)>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Totals {
    rows: u64,
    tokens: u64,
}

/// Commits what `w` holds, stamped with the collection's `generation` (the commit's payload).
fn commit_stamped(w: &mut IndexWriter, generation: i64) -> tantivy::Result<()> {
    let mut c = w.prepare_commit()?;
    c.set_payload(&generation.to_string());
    c.commit().map(|_| ())
}

fn lexical_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Lexical(e.to_string())
}

fn schema() -> (Schema, Fields) {
    let mut sb = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs)
            .set_fieldnorms(false),
    );
    let columns = FTS_COLUMNS.map(|c| sb.add_text_field(c, text.clone()));
    let pk = sb.add_i64_field("pk", INDEXED | FAST);
    let len = sb.add_u64_field("len", FAST);
    (sb.build(), Fields { columns, pk, len })
}

impl LexicalIndex {
    /// An index in memory (tests, and stores opened on `:memory:`).
    pub fn in_memory() -> Result<LexicalIndex, StoreError> {
        let (schema, fields) = schema();
        Self::with_index(Index::create_in_ram(schema), fields)
    }

    /// The index in `dir`, created empty there when it holds none.
    pub fn open(dir: &Path) -> Result<LexicalIndex, StoreError> {
        std::fs::create_dir_all(dir).map_err(lexical_error)?;
        let (schema, fields) = schema();
        let mmap = tantivy::directory::MmapDirectory::open(dir).map_err(lexical_error)?;
        let index = Index::open_or_create(mmap, schema).map_err(lexical_error)?;
        let mut ix = Self::with_index(index, fields)?;
        ix.dir = Some(dir.to_path_buf());
        Ok(ix)
    }

    /// The number and total size of the index's files (locks left out; 0, 0 in memory): part
    /// of the collection's fingerprint, so files lost or truncated behind its back are seen.
    pub fn files(&self) -> (u64, u64) {
        let Some(dir) = &self.dir else {
            return (0, 0);
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return (0, 0);
        };
        let mut out = (0, 0);
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().ends_with(".lock") {
                continue;
            }
            if let Ok(m) = e.metadata() {
                out.0 += 1;
                out.1 += m.len();
            }
        }
        out
    }

    /// [`Self::open`], or, when the directory holds an index that cannot be opened (damaged,
    /// or of another schema), that index removed and an empty one in its place: it has no
    /// generation, so the start-up check rebuilds it from the stored rows
    /// ([`Self::reset_reason`] says why, for its log line).
    pub fn open_or_reset(dir: &Path) -> Result<LexicalIndex, StoreError> {
        match Self::open(dir) {
            Ok(ix) => Ok(ix),
            Err(e) => {
                std::fs::remove_dir_all(dir).map_err(lexical_error)?;
                let ix = Self::open(dir)?;
                *ix.reset.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                Ok(ix)
            }
        }
    }

    /// The index's files whose checksum does not match their contents (reads every file:
    /// the full check's business, not a start's), as one line, or None.
    pub fn damaged_files(&self) -> Result<Option<String>, StoreError> {
        let bad = self.index.validate_checksum().map_err(lexical_error)?;
        if bad.is_empty() {
            return Ok(None);
        }
        let mut names: Vec<String> = bad.iter().map(|p| p.display().to_string()).collect();
        names.sort();
        Ok(Some(format!("damaged files: {}", names.join(", "))))
    }

    /// Why the index found at open was replaced by an empty one.
    pub fn reset_reason(&self) -> Option<String> {
        self.reset.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn with_index(index: Index, fields: Fields) -> Result<LexicalIndex, StoreError> {
        index.tokenizers().register(
            TOKENIZER,
            TextAnalyzer::from(WhitespaceTokenizer::default()),
        );
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(lexical_error)?;
        Ok(LexicalIndex {
            index,
            reader,
            fields,
            writer: Mutex::new(None),
            reader_generation: AtomicI64::new(-1),
            reset: Mutex::new(None),
            dir: None,
            lock_wait: LOCK_WAIT,
            totals: Mutex::new(None),
        })
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&mut IndexWriter, Fields) -> tantivy::Result<T>,
    ) -> Result<T, StoreError> {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(self.new_writer()?);
        }
        let writer = guard.as_mut().expect("created above");
        f(writer, self.fields).map_err(lexical_error)
    }

    /// A writer, once another process's load lets go of the directory's lock: polled every
    /// [`LOCK_POLL`] for at most the index's lock wait ([`LOCK_WAIT`] unless set), then the
    /// lock error.
    fn new_writer(&self) -> Result<IndexWriter, StoreError> {
        let deadline = std::time::Instant::now() + self.lock_wait;
        loop {
            match self.index.writer_with_num_threads(1, WRITER_BYTES) {
                Err(tantivy::TantivyError::LockFailure(
                    tantivy::directory::error::LockError::LockBusy,
                    _,
                )) if std::time::Instant::now() < deadline => std::thread::sleep(LOCK_POLL),
                Err(tantivy::TantivyError::LockFailure(..)) => {
                    return Err(StoreError::Lexical(format!(
                        "the collection's index is being written by another process (an \
                         ingest?) and was not let go within {} s; try again when it ends",
                        self.lock_wait.as_secs()
                    )));
                }
                other => return other.map_err(lexical_error),
            }
        }
    }

    /// Takes the index's writer now (waiting, as any write does, for another process's to
    /// let go): a caller about to open a SQLite write transaction calls this first, so it
    /// never holds SQLite's write lock while it waits for this one (the other process's load
    /// needs SQLite's to go on).
    pub fn ready_writer(&self) -> Result<(), StoreError> {
        self.write(|_, _| Ok(()))
    }

    /// Takes the index's writer now if no other process holds it, without waiting: true when
    /// this index holds it after the call (it may have already), false when another process
    /// does (a load of its own is under way there). A start-up check that finds the index
    /// not matching the collection asks this before judging it: a load of another process
    /// holds the writer for its whole run, and its index is behind its rows until its end.
    pub fn try_writer(&self) -> Result<bool, StoreError> {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_some() {
            return Ok(true);
        }
        match self.index.writer_with_num_threads(1, WRITER_BYTES) {
            Ok(w) => {
                *guard = Some(w);
                Ok(true)
            }
            Err(tantivy::TantivyError::LockFailure(
                tantivy::directory::error::LockError::LockBusy,
                _,
            )) => Ok(false),
            Err(e) => Err(lexical_error(e)),
        }
    }

    /// Lets go of the writer, and of tantivy's lock on the directory, without committing:
    /// what it took since the last commit is dropped (rolled back first, so its indexing
    /// thread does not write those rows into segment files nothing refers to). Nothing to do
    /// without a writer.
    pub fn let_go(&self) -> Result<(), StoreError> {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut w) = writer {
            w.rollback().map_err(lexical_error)?;
        }
        Ok(())
    }

    /// How long a write waits for another process's writer to let go (tests shorten it).
    pub fn set_lock_wait(&mut self, wait: std::time::Duration) {
        self.lock_wait = wait;
    }

    /// Adds rows `(pk, analysed columns)` whose `pk` the index does not hold (a row it holds
    /// is first [`Self::delete`]d: a delete costs memory until the commit and a lookup in
    /// every segment at it, so new rows are not deleted first). Seen by queries after
    /// [`Self::commit`].
    pub fn add<S: AsRef<str>>(&self, rows: &[(i64, [S; 7])]) -> Result<(), StoreError> {
        self.write(|w, f| {
            for (pk, cols) in rows {
                let mut doc = tantivy::TantivyDocument::default();
                let mut len = 0u64;
                for (field, text) in f.columns.iter().zip(cols) {
                    let text = text.as_ref();
                    len += text
                        .split_ascii_whitespace()
                        .filter(|t| !t.starts_with(MARKER))
                        .count() as u64;
                    doc.add_text(*field, text);
                }
                doc.add_i64(f.pk, *pk);
                doc.add_u64(f.len, len);
                w.add_document(doc)?;
            }
            Ok(())
        })
    }

    /// Removes the rows of these primary keys (after [`Self::commit`]).
    pub fn delete(&self, pks: &[i64]) -> Result<(), StoreError> {
        self.write(|w, f| {
            for pk in pks {
                w.delete_term(Term::from_field_i64(f.pk, *pk));
            }
            Ok(())
        })
    }

    /// Removes every row, and drops any write not yet committed (after [`Self::commit`]).
    pub fn clear(&self) -> Result<(), StoreError> {
        self.write(|w, _| {
            // tantivy's delete-all leaves the adds of the open batch in place.
            w.rollback()?;
            w.delete_all_documents().map(|_| ())
        })
    }

    /// Makes the writes so far durable and visible, recording that they reflect the
    /// collection's `generation`.
    pub fn commit(&self, generation: i64) -> Result<(), StoreError> {
        self.write(|w, _| commit_stamped(w, generation))?;
        self.committed(generation)
    }

    /// After a commit of `generation`: the reader sees it, and an index found unusable at
    /// open is no longer reported (the commit holds its rebuild).
    fn committed(&self, generation: i64) -> Result<(), StoreError> {
        self.reader.reload().map_err(lexical_error)?;
        self.reader_generation
            .fetch_max(generation, Ordering::AcqRel);
        *self.reset.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }

    /// Drops the writes since the last commit (the SQLite transaction they went with failed).
    pub fn rollback(&self) -> Result<(), StoreError> {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = guard.as_mut() {
            w.rollback().map_err(lexical_error)?;
        }
        Ok(())
    }

    /// Ends a load: commits what the writer holds as the collection's `generation` (the
    /// caller's rows are all in SQLite), waits for the segment merges and lets go of the
    /// writer (and of tantivy's lock on the directory, so another process, `museum-agent
    /// ingest` beside a running server, can write next). Nothing to do without a writer.
    pub fn release_writer(&self, generation: i64) -> Result<(), StoreError> {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(mut w) = guard.take() else {
            return Ok(());
        };
        commit_stamped(&mut w, generation).map_err(lexical_error)?;
        w.wait_merging_threads().map_err(lexical_error)?;
        drop(guard);
        self.committed(generation)
    }

    /// Makes sure the reader sees at least the collection's `generation` when the index has
    /// it: another process (an `ingest` beside the server) may have committed since the last
    /// reload. A no-op when the reader is already there.
    pub fn catch_up(&self, generation: i64) -> Result<(), StoreError> {
        if self.reader_generation.load(Ordering::Acquire) >= generation {
            return Ok(());
        }
        // The generation read before the reload: the reader then holds at least it.
        let committed = self.committed_generation()?.unwrap_or(-1);
        self.reader.reload().map_err(lexical_error)?;
        self.reader_generation
            .fetch_max(committed, Ordering::AcqRel);
        Ok(())
    }

    /// The collection generation of the last commit (None: never committed).
    pub fn committed_generation(&self) -> Result<Option<i64>, StoreError> {
        let metas = self.index.load_metas().map_err(lexical_error)?;
        Ok(metas.payload.and_then(|p| p.parse().ok()))
    }

    /// Rows in the index (as of the last commit).
    pub fn num_rows(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The index as of the last reload: a question reads one ([`Self::candidates`]).
    pub fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }

    /// Rows holding `term` in any column (as [`super::collection::CollectionStore::doc_freq`]).
    pub fn doc_freq(&self, term: MatchTerm<'_>) -> Result<u64, StoreError> {
        self.doc_freq_in(&self.reader.searcher(), term)
    }

    /// [`Self::doc_freq`] in `searcher`'s view of the index.
    pub fn doc_freq_in(&self, searcher: &Searcher, term: MatchTerm<'_>) -> Result<u64, StoreError> {
        let mut n = 0u64;
        for seg in searcher.segment_readers() {
            let mut hit = vec![false; seg.max_doc() as usize];
            self.each_posting(seg, term, |doc, _, _| hit[doc as usize] = true)?;
            n += hit.iter().filter(|h| **h).count() as u64;
        }
        Ok(n)
    }

    /// Every token of the index with the number of rows holding it (a diagnostic: walks
    /// every term of every field).
    pub fn all_terms(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let searcher = self.reader.searcher();
        let mut tokens = std::collections::BTreeSet::new();
        for seg in searcher.segment_readers() {
            for field in self.fields.columns {
                let inverted = seg.inverted_index(field).map_err(lexical_error)?;
                let mut stream = inverted.terms().stream().map_err(lexical_error)?;
                while stream.advance() {
                    tokens.insert(String::from_utf8_lossy(stream.key()).into_owned());
                }
            }
        }
        let mut out = Vec::with_capacity(tokens.len());
        for t in tokens {
            let n = self.doc_freq_in(
                &searcher,
                MatchTerm {
                    text: &t,
                    prefix: false,
                },
            )?;
            if n > 0 {
                out.push((t, n));
            }
        }
        Ok(out)
    }

    /// Calls `f(doc, column, term frequency)` for every live posting of `term` in `seg`.
    fn each_posting(
        &self,
        seg: &tantivy::SegmentReader,
        term: MatchTerm<'_>,
        mut f: impl FnMut(u32, usize, u32),
    ) -> Result<(), StoreError> {
        let alive = seg.alive_bitset();
        for (col, field) in self.fields.columns.iter().enumerate() {
            let inverted = seg.inverted_index(*field).map_err(lexical_error)?;
            let mut infos = Vec::new();
            if term.prefix {
                let mut range = inverted.terms().range().ge(term.text.as_bytes());
                if let Some(end) = prefix_end(term.text.as_bytes()) {
                    range = range.lt(end);
                }
                let mut stream = range.into_stream().map_err(lexical_error)?;
                while stream.advance() {
                    infos.push(stream.value().clone());
                }
            } else if let Some(info) = inverted
                .terms()
                .get(term.text.as_bytes())
                .map_err(lexical_error)?
            {
                infos.push(info);
            }
            for info in infos {
                let mut postings = inverted
                    .read_postings_from_terminfo(&info, IndexRecordOption::WithFreqs)
                    .map_err(lexical_error)?;
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if alive.is_none_or(|a| a.is_alive(doc)) {
                        f(doc, col, postings.term_freq());
                    }
                    doc = postings.advance();
                }
            }
        }
        Ok(())
    }

    /// Every row holding the exact token `token` in any column, as `(pk, length in tokens)`,
    /// in no particular order (a kind's members: see [`MARKER`]).
    pub fn rows_holding(
        &self,
        searcher: &Searcher,
        token: &str,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        self.rows_holding_in(searcher, token, None)
    }

    /// [`Self::rows_holding`] in one column only (by its place in [`FTS_COLUMNS`]), or any.
    pub fn rows_holding_in(
        &self,
        searcher: &Searcher,
        token: &str,
        column: Option<usize>,
    ) -> Result<Vec<(i64, u64)>, StoreError> {
        let mut out = Vec::new();
        for seg in searcher.segment_readers() {
            let ff = seg.fast_fields();
            let lens = ff
                .u64("len")
                .map_err(lexical_error)?
                .first_or_default_col(0);
            let pks = ff.i64("pk").map_err(lexical_error)?.first_or_default_col(0);
            let mut docs: Vec<u32> = Vec::new();
            self.each_posting(
                seg,
                MatchTerm {
                    text: token,
                    prefix: false,
                },
                |doc, col, _| {
                    if column.is_none_or(|c| c == col) {
                        docs.push(doc);
                    }
                },
            )?;
            docs.sort_unstable();
            docs.dedup();
            out.extend(docs.into_iter().map(|d| (pks.get_val(d), lens.get_val(d))));
        }
        Ok(out)
    }

    /// The rows matching any of `terms` in `searcher`'s view of the index, best first, at
    /// most `limit`, with FTS5's `bm25()` score (sign flipped: higher is better); `weights`
    /// follow [`FTS_COLUMNS`].
    pub fn candidates(
        &self,
        searcher: &Searcher,
        terms: &[MatchTerm<'_>],
        weights: &[f64; 7],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let n_phrases = terms.len();
        if n_phrases == 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let segments = searcher.segment_readers();
        let totals = self.totals(searcher)?;
        // Each matching row: its segment and doc, and f(q, D) of every phrase.
        let mut rows: Vec<(usize, u32)> = Vec::new();
        let mut freqs: Vec<f64> = Vec::new();
        // Whether the row holds the phrase (a weight may be 0: f(q, D) cannot tell).
        let mut holds: Vec<bool> = Vec::new();
        let mut hits = vec![0u64; n_phrases];
        for (s, seg) in segments.iter().enumerate() {
            // A segment's docs to their row (u32::MAX: none yet).
            let mut slot = vec![u32::MAX; seg.max_doc() as usize];
            for (q, term) in terms.iter().enumerate() {
                self.each_posting(seg, *term, |doc, col, tf| {
                    let at = &mut slot[doc as usize];
                    if *at == u32::MAX {
                        *at = rows.len() as u32;
                        rows.push((s, doc));
                        freqs.resize(freqs.len() + n_phrases, 0.0);
                        holds.resize(holds.len() + n_phrases, false);
                    }
                    let i = *at as usize * n_phrases + q;
                    if !holds[i] {
                        holds[i] = true;
                        hits[q] += 1;
                    }
                    freqs[i] += weights[col] * f64::from(tf);
                })?;
            }
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let avgdl = totals.tokens as f64 / totals.rows as f64;
        let idf: Vec<f64> = hits
            .iter()
            .map(|&n| {
                let idf = ((totals.rows as i64 - n as i64) as f64 + 0.5) / (n as f64 + 0.5);
                let idf = idf.ln();
                if idf <= 0.0 { 1e-6 } else { idf }
            })
            .collect();
        let mut lens = Vec::with_capacity(segments.len());
        let mut pks = Vec::with_capacity(segments.len());
        for seg in segments {
            let ff = seg.fast_fields();
            lens.push(
                ff.u64("len")
                    .map_err(lexical_error)?
                    .first_or_default_col(0),
            );
            pks.push(ff.i64("pk").map_err(lexical_error)?.first_or_default_col(0));
        }
        let mut scored: Vec<(i64, f64)> = rows
            .iter()
            .enumerate()
            .map(|(r, &(s, doc))| {
                let d = lens[s].get_val(doc) as f64;
                let mut score = 0.0;
                for (q, idf) in idf.iter().enumerate() {
                    let f = freqs[r * n_phrases + q];
                    score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl)));
                }
                (pks[s].get_val(doc), score)
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        Ok(scored)
    }
}

impl LexicalIndex {
    /// The rows and tokens of `searcher`'s generation (cached until the next commit).
    fn totals(&self, searcher: &tantivy::Searcher) -> Result<Totals, StoreError> {
        let generation = searcher.generation().generation_id();
        let mut cached = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, t)) = *cached
            && g == generation
        {
            return Ok(t);
        }
        let mut t = Totals { rows: 0, tokens: 0 };
        for seg in searcher.segment_readers() {
            let lens = seg
                .fast_fields()
                .u64("len")
                .map_err(lexical_error)?
                .first_or_default_col(0);
            let alive = seg.alive_bitset();
            for doc in 0..seg.max_doc() {
                if alive.is_none_or(|a| a.is_alive(doc)) {
                    t.rows += 1;
                    t.tokens += lens.get_val(doc);
                }
            }
        }
        *cached = Some((generation, t));
        Ok(t)
    }
}

/// The smallest byte string greater than every string starting with `prefix` (None: no such
/// bound, every byte 0xff).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// SQLite FTS5 over the same rows, for tests that hold [`LexicalIndex`] to the engine it
/// replaced: its `bm25()` and its count of matching rows.
#[cfg(test)]
pub(crate) struct Fts5Reference(rusqlite::Connection);

#[cfg(test)]
impl Fts5Reference {
    pub(crate) fn new<S: AsRef<str>>(rows: &[(i64, [S; 7])]) -> Fts5Reference {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE exhibits_fts USING fts5(
                 title, maker, period, medium, description, extra, meta,
                 tokenize = 'unicode61 remove_diacritics 0');",
        )
        .unwrap();
        let mut ins = c
            .prepare("INSERT INTO exhibits_fts (rowid, title, maker, period, medium, description, extra, meta) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            .unwrap();
        for (pk, f) in rows {
            let f = f.each_ref().map(|x| x.as_ref());
            ins.execute(rusqlite::params![
                pk, f[0], f[1], f[2], f[3], f[4], f[5], f[6]
            ])
            .unwrap();
        }
        drop(ins);
        Fts5Reference(c)
    }

    /// Replaces rows.
    pub(crate) fn replace(&self, rows: &[(i64, [String; 7])]) {
        for (pk, f) in rows {
            self.0
                .execute("DELETE FROM exhibits_fts WHERE rowid = ?1", [pk])
                .unwrap();
            self.0
                .execute(
                    "INSERT INTO exhibits_fts (rowid, title, maker, period, medium, description, extra, meta) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    rusqlite::params![pk, f[0], f[1], f[2], f[3], f[4], f[5], f[6]],
                )
                .unwrap();
        }
    }

    fn expression(terms: &[MatchTerm<'_>]) -> String {
        terms
            .iter()
            .map(|t| {
                let q = format!("\"{}\"", t.text.replace('"', "\"\""));
                if t.prefix { format!("{q}*") } else { q }
            })
            .collect::<Vec<_>>()
            .join(" OR ")
    }

    pub(crate) fn candidates(
        &self,
        terms: &[MatchTerm<'_>],
        weights: &[f64; 7],
        limit: usize,
    ) -> Vec<(i64, f64)> {
        let w = weights.map(|x| x.to_string()).join(", ");
        let mut st = self
            .0
            .prepare(&format!(
                "SELECT rowid, bm25(exhibits_fts, {w}) AS s FROM exhibits_fts \
                 WHERE exhibits_fts MATCH ?1 ORDER BY s LIMIT {limit}"
            ))
            .unwrap();
        st.query_map([Self::expression(terms)], |r| {
            Ok((r.get(0)?, -r.get::<_, f64>(1)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    pub(crate) fn doc_freq(&self, term: MatchTerm<'_>) -> u64 {
        self.0
            .query_row(
                "SELECT count(*) FROM exhibits_fts WHERE exhibits_fts MATCH ?1",
                [Self::expression(&[term])],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pk: i64, title: &str, description: &str) -> (i64, [String; 7]) {
        let mut cols: [String; 7] = Default::default();
        cols[0] = title.to_string();
        cols[4] = description.to_string();
        (pk, cols)
    }

    #[test]
    fn markers_are_found_but_leave_the_ranking_of_words_alone() {
        let with = LexicalIndex::in_memory().unwrap();
        let without = LexicalIndex::in_memory().unwrap();
        let mut marked = row(1, "bronz vessel", "ritual wine");
        marked.1[6] = "walter 12 #d:ceram #m:bronz".into();
        let mut plain = marked.clone();
        plain.1[6] = "walter 12".into();
        let other = row(2, "jade bowl", "bronz age ritual");
        with.add(&[marked, other.clone()]).unwrap();
        without.add(&[plain, other]).unwrap();
        with.commit(1).unwrap();
        without.commit(1).unwrap();
        let terms = [
            MatchTerm {
                text: "bronz",
                prefix: false,
            },
            MatchTerm {
                text: "ritual",
                prefix: false,
            },
        ];
        let w = [4.0, 3.0, 2.0, 2.0, 1.0, 3.0, 0.5];
        assert_eq!(
            with.candidates(&with.searcher(), &terms, &w, 10).unwrap(),
            without
                .candidates(&without.searcher(), &terms, &w, 10)
                .unwrap()
        );
        assert_eq!(
            with.rows_holding(&with.searcher(), "#d:ceram").unwrap(),
            [(1, 6)],
            "pk and length in words (markers left out)"
        );
        assert!(
            with.rows_holding(&with.searcher(), "#d:jade")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn rows_are_found_replaced_and_deleted_after_a_commit() {
        let ix = LexicalIndex::in_memory().unwrap();
        assert_eq!(ix.committed_generation().unwrap(), None);
        ix.add(&[
            row(1, "bronz vessel", "ritual"),
            row(2, "jade", "bronz age"),
        ])
        .unwrap();
        let t = |text| MatchTerm {
            text,
            prefix: false,
        };
        assert_eq!(ix.doc_freq(t("bronz")).unwrap(), 0, "not before the commit");
        ix.commit(7).unwrap();
        assert_eq!(ix.committed_generation().unwrap(), Some(7));
        assert_eq!(ix.doc_freq(t("bronz")).unwrap(), 2);
        let weights = [4.0, 3.0, 2.0, 2.0, 1.0, 3.0, 0.5];
        let got = ix.candidates(&ix.searcher(), &[t("bronz")], &weights, 10);
        let got: Vec<i64> = got.unwrap().iter().map(|r| r.0).collect();
        assert_eq!(got, [1, 2], "the title weighs more than the description");

        ix.delete(&[1, 2]).unwrap();
        ix.add(&[row(1, "jade disc", "")]).unwrap();
        ix.commit(8).unwrap();
        assert_eq!(ix.doc_freq(t("bronz")).unwrap(), 0);
        assert_eq!(ix.num_rows(), 1);
        let prefix = MatchTerm {
            text: "ja",
            prefix: true,
        };
        assert_eq!(ix.doc_freq(prefix).unwrap(), 1);
        ix.clear().unwrap();
        ix.commit(9).unwrap();
        assert_eq!(ix.num_rows(), 0);
    }

    #[test]
    fn a_second_writer_waits_for_the_first_then_gives_up() {
        // Two indexes on one directory stand for two processes.
        let dir = tempfile::tempdir().unwrap();
        let first = LexicalIndex::open(dir.path()).unwrap();
        let mut second = LexicalIndex::open(dir.path()).unwrap();
        second.set_lock_wait(std::time::Duration::from_millis(200));
        first.add(&[row(1, "jade", "")]).unwrap();
        let err = second.add(&[row(2, "jar", "")]).unwrap_err();
        assert!(err.to_string().contains("another process"), "{err}");
        first.release_writer(1).unwrap();
        second.add(&[row(2, "jar", "")]).unwrap();
        second.commit(2).unwrap();
        first.catch_up(2).unwrap();
        assert_eq!(first.num_rows(), 2);
    }

    #[test]
    fn the_prefix_bound_is_the_next_string() {
        assert_eq!(prefix_end(b"ab").unwrap(), b"ac");
        assert_eq!(prefix_end(&[0x61, 0xff]).unwrap(), [0x62]);
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
