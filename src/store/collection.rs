//! SQL for the collection: exhibits, their analysed columns (`exhibit_text`, written by the
//! retrieval module) and inverted index ([`super::lexical`], tantivy, kept in step by every
//! write here), document frequencies (`exhibit_terms`, kept in step with the index) and the
//! record of automatic loads (document vectors: [`super::vectors`]).
//!
//! [`CollectionStore`] is the narrow handle retrieval holds: the collection's tables and nothing
//! else of the database. It speaks plain rows ([`ExhibitRow`]: the columns of `exhibits` as
//! stored); the domain type `Exhibit`, text analysis and ranking belong to the retrieval module,
//! which this module never imports. Callers pass analysed columns.
//!
//! # The index and the rows
//! SQLite is the store of record; the index is derived from `exhibit_text`. A write adds its
//! rows to the index before the SQLite transaction commits and commits the index, stamped with
//! the collection's new generation, after it (a failed SQLite commit rolls the index back). A
//! process that dies between the two leaves an index whose generation is not the collection's:
//! the start-up check ([`CollectionStore::index_problem`]) rebuilds it from `exhibit_text`.
//! A question catches the index up to the generation its SQLite snapshot shows (another process
//! may have written), and reads both.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use rustc_hash::{FxHashMap, FxHashSet};

use super::lexical::MatchTerm;
use super::{Store, StoreError, now_ms};
use crate::util::ShortStr;

/// Analysed columns of an exhibit (`exhibit_text`, and the index's fields), in order; BM25
/// weights are given in the same order.
pub const FTS_COLUMNS: [&str; 7] = [
    "title",
    "maker",
    "period",
    "medium",
    "description",
    "extra",
    "meta",
];

#[cfg(test)]
thread_local! {
    /// The terms of every query [`CollectionStore::candidates`] ran on this thread (tests that
    /// look at the queries the search really makes).
    pub(crate) static MATCHES_ISSUED: std::cell::RefCell<Vec<Vec<(String, bool)>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// One row of `exhibits` as stored (without its primary key and content hash).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExhibitRow {
    pub id: String,
    pub title: String,
    pub maker: String,
    pub date: String,
    pub period: String,
    pub medium: String,
    pub dimensions: String,
    pub gallery: String,
    pub description: String,
    pub language: String,
    pub source: String,
    pub license: String,
    /// Free-form extra fields, as JSON object text.
    pub extra: String,
}

/// An exhibit row with its content hash and analysed FTS columns (see [`FTS_COLUMNS`]).
#[derive(Debug, Clone)]
pub struct IndexedExhibit {
    pub exhibit: ExhibitRow,
    pub hash: String,
    pub fts: [String; 7],
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpsertCounts {
    pub inserted: usize,
    pub updated: usize,
}

/// A file loaded automatically at start (the demo collection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionLoad {
    pub source: String,
    pub sha256: String,
    pub rows: i64,
    pub loaded_at: i64,
}

const EXHIBIT_COLS: &str = "id, title, maker, date, period, medium, dimensions, gallery, \
                            description, language, source, license, extra";

fn exhibit_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<ExhibitRow> {
    Ok(ExhibitRow {
        id: r.get(at)?,
        title: r.get(at + 1)?,
        maker: r.get(at + 2)?,
        date: r.get(at + 3)?,
        period: r.get(at + 4)?,
        medium: r.get(at + 5)?,
        dimensions: r.get(at + 6)?,
        gallery: r.get(at + 7)?,
        description: r.get(at + 8)?,
        language: r.get(at + 9)?,
        source: r.get(at + 10)?,
        license: r.get(at + 11)?,
        extra: r.get(at + 12)?,
    })
}

/// Raises the collection's generation in `tx`; returns the new one.
fn bump_generation(tx: &Transaction<'_>) -> rusqlite::Result<i64> {
    tx.execute(
        "INSERT INTO collection_meta (key, value) VALUES ('generation', '1') \
         ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        [],
    )?;
    generation_in(tx)
}

/// The index columns of a row joined by spaces (an SQL expression over `exhibit_text`).
const INDEXED_TEXT: &str = "title || ' ' || maker || ' ' || period || ' ' || medium || ' ' || \
                            description || ' ' || extra || ' ' || meta";

/// Document frequencies of a set of analysed rows (each distinct token of a row once), owned:
/// the bulk ingest counts each batch on its analysis threads ([`TermDfs::of`]) and the writer
/// only merges the batches' counts ([`TermDfs::merge`]) before
/// [`CollectionStore::upsert_counted`] writes them with the rows (counting on the writer was
/// ~10 % of its time).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TermDfs {
    terms: FxHashMap<String, i64>,
}

impl TermDfs {
    /// The document frequencies of these rows' index columns.
    pub fn of(docs: &[IndexedExhibit]) -> TermDfs {
        let mut c = DfAccumulator::default();
        c.add(docs);
        c.finish()
    }

    /// Adds another set's counts to these.
    pub fn merge(&mut self, other: TermDfs) {
        if self.terms.is_empty() {
            self.terms = other.terms;
            return;
        }
        for (k, v) in other.terms {
            *self.terms.entry(k).or_default() += v;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Document frequencies counted from analysed text, each distinct token of a row once: of a
/// bulk load, by one analysis thread over all the batches it analyses
/// ([`DfAccumulator::add`]; a term's key is made once per thread and load, not once per batch,
/// and kept in place: `ShortStr`; nothing goes to the writer until the end,
/// [`DfAccumulator::finish`], then [`TermDfs::merge`] of the threads' counts), and of any other
/// set of rows (a transaction's, the rows it replaces, the whole table on a refill). Per-batch
/// counts sent to the writer made and merged 500 maps of ~20,000 keys at 500,000 records.
/// Analysed text is tokens of letters and digits separated by spaces (`retrieval::text`), so
/// splitting on white space gives the index's tokens (the test
/// `the_term_table_matches_the_index` compares both on the demo collection).
#[derive(Default)]
pub struct DfAccumulator {
    /// term → (rows holding it, the last row that counted it: `rows` then). Two `u32`s, not
    /// an `i64` and a `u32`: an entry is 32 bytes, so it never straddles a cache line (an
    /// accumulator counts fewer than 2³² rows).
    terms: FxHashMap<ShortStr, (u32, u32)>,
    /// Rows counted so far.
    rows: u32,
}

impl DfAccumulator {
    /// Counts these rows' index columns.
    pub fn add(&mut self, docs: &[IndexedExhibit]) {
        for d in docs {
            self.count_row(&d.fts.each_ref().map(String::as_str));
        }
    }

    /// Counts one row, given as its analysed columns (or all of them joined): a token's first
    /// occurrence in it adds 1 to its count (one hash lookup a token).
    pub fn count_row(&mut self, cols: &[&str]) {
        self.rows = self.rows.wrapping_add(1);
        let row = self.rows;
        for tok in cols.iter().flat_map(|c| c.split_ascii_whitespace()) {
            match self.terms.get_mut(tok) {
                Some(e) => {
                    if e.1 != row {
                        *e = (e.0 + 1, row);
                    }
                }
                None => {
                    self.terms.insert(ShortStr::new(tok), (1, row));
                }
            }
        }
    }

    /// The counts so far.
    pub fn finish(self) -> TermDfs {
        TermDfs {
            terms: self
                .terms
                .into_iter()
                .map(|(k, (n, _))| (k.as_str().to_string(), i64::from(n)))
                .collect(),
        }
    }
}

/// Applies document-frequency changes to `exhibit_terms`, in term order (B-tree locality).
fn write_term_dfs(
    tx: &Transaction<'_>,
    added: &FxHashMap<String, i64>,
    removed: &FxHashMap<String, i64>,
) -> rusqlite::Result<()> {
    let mut delta: Vec<(&str, i64)> = added.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    delta.extend(removed.iter().map(|(k, v)| (k.as_str(), -*v)));
    delta.sort_unstable();
    let mut up = tx.prepare_cached(
        "INSERT INTO exhibit_terms (term, df) VALUES (?1, ?2) \
         ON CONFLICT(term) DO UPDATE SET df = df + excluded.df",
    )?;
    for (term, d) in delta {
        if d != 0 {
            up.execute(params![term, d])?;
        }
    }
    Ok(())
}

/// `collection_meta` key present when `exhibit_terms` is complete (migration 0006).
pub const TERM_DF_KEY: &str = "term_df";

/// Refills `exhibit_terms` from the analysed rows (`exhibit_text`, read one row at a time: the
/// whole table is ~700 MB at 500,000 exhibits) and marks it complete.
fn fill_term_dfs(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM exhibit_terms", [])?;
    let mut counter = DfAccumulator::default();
    {
        let mut st = tx.prepare(&format!("SELECT {INDEXED_TEXT} FROM exhibit_text"))?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            counter.count_row(&[r.get_ref(0)?.as_str()?]);
        }
    }
    write_term_dfs(tx, &counter.finish().terms, &FxHashMap::default())?;
    tx.execute(
        "INSERT INTO collection_meta (key, value) VALUES ('term_df', '1') \
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [],
    )?;
    Ok(())
}

/// The collection's generation as `tx` sees it.
fn generation_in(c: &Connection) -> rusqlite::Result<i64> {
    Ok(c.query_row(
        "SELECT value FROM collection_meta WHERE key = 'generation'",
        [],
        |r| r.get::<_, String>(0),
    )
    .optional()?
    .and_then(|v| v.parse().ok())
    .unwrap_or(0))
}

/// The collection's part of the database (see the module docs). Cheap to clone: it shares the
/// [`Store`]'s one connection, or, inside [`CollectionStore::reading`], a read connection of its
/// own that every method of the view uses.
#[derive(Clone)]
pub struct CollectionStore {
    store: Store,
    /// Inside [`CollectionStore::reading`]: the read connection, in one read transaction.
    pinned: Option<Arc<Mutex<Connection>>>,
    /// Inside [`CollectionStore::reading`]: the one view of the index the question reads,
    /// taken at its first use.
    searcher: Option<Arc<std::sync::OnceLock<tantivy::Searcher>>>,
}

impl Store {
    /// The collection's tables, for the retrieval module.
    pub fn collection(&self) -> CollectionStore {
        CollectionStore {
            store: self.clone(),
            pinned: None,
            searcher: None,
        }
    }
}

impl CollectionStore {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.pinned {
            Some(c) => f(&mut c.lock().unwrap_or_else(|p| p.into_inner())),
            None => self.store.with(f),
        }
    }

    /// `f` inside one read transaction: a statement outside a transaction takes and drops
    /// SQLite's WAL read lock (`fcntl`, `fstat`) by itself, so a loop of point lookups (the ~50
    /// candidates of a question) takes it once instead of once per row. Reads only. Inside
    /// [`Self::reading`] the question's transaction is already open.
    fn with_read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(c) = &self.pinned {
            return f(&c.lock().unwrap_or_else(|p| p.into_inner()));
        }
        self.with(|c| {
            let tx = c.transaction()?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// Runs `f` (many reads: a visitor's question) on a view of the collection whose every
    /// method reads through one read connection of its own, inside one read transaction
    /// ([`super::Readers`]): one WAL read lock for the whole question and a consistent
    /// snapshot, and no wait behind the main connection's other users. Reads only: a write
    /// through the view happens in the read transaction and is committed with it. Falls back
    /// to `f(self)` for an in-memory database, when every read connection is busy, or when
    /// already inside `reading`.
    pub fn reading<T>(
        &self,
        f: impl FnOnce(&CollectionStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.pinned.is_some() {
            return f(self);
        }
        let Some(conn) = self.store.readers.take() else {
            return f(self);
        };
        if let Err(e) = conn.execute_batch("BEGIN") {
            self.store.readers.give_back(conn);
            return Err(e.into());
        }
        let view = CollectionStore {
            store: self.store.clone(),
            pinned: Some(Arc::new(Mutex::new(conn))),
            searcher: Some(Arc::default()),
        };
        let out = f(&view);
        let Some(pinned) = view.pinned.and_then(|p| Arc::try_unwrap(p).ok()) else {
            // A clone of the view outlived the call (not done by this crate): its connection
            // closes when that clone drops.
            return out;
        };
        let conn = pinned.into_inner().unwrap_or_else(|p| p.into_inner());
        // A read transaction: COMMIT only releases the snapshot (and commits a write made
        // through the view, see above); a failed one leaves the connection in a transaction
        // and `give_back` then closes it.
        let end = conn.execute_batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
        self.store.readers.give_back(conn);
        let v = out?;
        end?;
        Ok(v)
    }

    /// Runs `f` on the blocking pool (see [`Store::call`]).
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&CollectionStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.store.call(move |s| f(&s.collection())).await
    }

    /// `id → content_hash` of every stored exhibit.
    pub fn exhibit_hashes(&self) -> Result<HashMap<String, String>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare("SELECT id, content_hash FROM exhibits")?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok(rows)
        })
    }

    /// Inserts new exhibits and replaces changed ones (matched by `id`), with their index rows,
    /// in one transaction.
    pub fn upsert_exhibits(&self, docs: &[IndexedExhibit]) -> Result<UpsertCounts, StoreError> {
        self.upsert_counted(docs, Some(&TermDfs::of(docs)))
    }

    /// Adds the document frequencies of a deferred load ([`Self::upsert_counted`] with
    /// `None`) and marks the table complete, in one transaction. (The load's index rows are
    /// committed by [`Self::finish_load`].)
    pub fn finish_term_dfs(&self, added: &TermDfs) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            write_term_dfs(&tx, &added.terms, &FxHashMap::default())?;
            tx.execute(
                "INSERT INTO collection_meta (key, value) VALUES (?1, '1') \
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![TERM_DF_KEY],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// [`Self::upsert_exhibits`] with the rows' document frequencies counted by the caller:
    /// `added` must be [`TermDfs::of`] these `docs` (or the merge of it over a partition of
    /// them), or the table of document frequencies drifts from the index. `None` defers them
    /// (a bulk load into an empty collection): the table is marked incomplete in this
    /// transaction and [`Self::finish_term_dfs`] writes the load's counts and the mark at the
    /// end; a load that never finishes leaves the mark unset, and the start-up check refills
    /// the table from the analysed rows. Such a deferred load also commits its index rows only
    /// at the end ([`Self::finish_load`], so its writer never waits for a commit): while it runs, questions see the index as it
    /// was before the load (empty), and a load that dies leaves an index of an earlier
    /// generation, which the start-up check rebuilds from the rows the load did commit.
    pub fn upsert_counted(
        &self,
        docs: &[IndexedExhibit],
        added: Option<&TermDfs>,
    ) -> Result<UpsertCounts, StoreError> {
        if docs.is_empty() {
            return Ok(UpsertCounts::default());
        }
        // The index's writer before SQLite's write lock (see `LexicalIndex::ready_writer`).
        self.take_writer()?;
        self.with(|c| {
            let tx = c.transaction()?;
            let mut counts = UpsertCounts::default();
            // Old index text of the rows replaced (its tokens leave the document frequencies).
            let mut old_texts: Vec<String> = Vec::new();
            let mut indexed: Vec<(i64, [&str; 7])> = Vec::with_capacity(docs.len());
            // Rows replaced: their old index rows go first.
            let mut replaced: Vec<i64> = Vec::new();
            {
                let mut find = tx.prepare_cached("SELECT pk FROM exhibits WHERE id = ?1")?;
                let mut old_text = tx.prepare_cached(&format!(
                    "SELECT {INDEXED_TEXT} FROM exhibit_text WHERE pk = ?1"
                ))?;
                let mut insert = tx.prepare_cached(
                    "INSERT INTO exhibits (id, title, maker, date, period, medium, dimensions, gallery, \
                     description, language, source, license, extra, content_hash, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                )?;
                let mut update = tx.prepare_cached(
                    "UPDATE exhibits SET title = ?2, maker = ?3, date = ?4, period = ?5, medium = ?6, \
                     dimensions = ?7, gallery = ?8, description = ?9, language = ?10, source = ?11, \
                     license = ?12, extra = ?13, content_hash = ?14, updated_at = ?15 WHERE pk = ?1",
                )?;
                let mut text_write = tx.prepare_cached(
                    "INSERT OR REPLACE INTO exhibit_text \
                     (pk, title, maker, period, medium, description, extra, meta) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                let now = now_ms();
                for d in docs {
                    let e = &d.exhibit;
                    let existing: Option<i64> =
                        find.query_row(params![e.id], |r| r.get(0)).optional()?;
                    let pk = match existing {
                        Some(pk) => {
                            update.execute(params![
                                pk,
                                e.title,
                                e.maker,
                                e.date,
                                e.period,
                                e.medium,
                                e.dimensions,
                                e.gallery,
                                e.description,
                                e.language,
                                e.source,
                                e.license,
                                e.extra,
                                d.hash,
                                now
                            ])?;
                            let old: Option<String> =
                                old_text.query_row(params![pk], |r| r.get(0)).optional()?;
                            old_texts.extend(old);
                            replaced.push(pk);
                            counts.updated += 1;
                            pk
                        }
                        None => {
                            insert.execute(params![
                                e.id,
                                e.title,
                                e.maker,
                                e.date,
                                e.period,
                                e.medium,
                                e.dimensions,
                                e.gallery,
                                e.description,
                                e.language,
                                e.source,
                                e.license,
                                e.extra,
                                d.hash,
                                now
                            ])?;
                            counts.inserted += 1;
                            tx.last_insert_rowid()
                        }
                    };
                    let f = &d.fts;
                    text_write.execute(params![pk, f[0], f[1], f[2], f[3], f[4], f[5], f[6]])?;
                    indexed.push((pk, f.each_ref().map(String::as_str)));
                }
            }
            let mut removed = DfAccumulator::default();
            for t in &old_texts {
                removed.count_row(&[t.as_str()]);
            }
            let removed = removed.finish().terms;
            match added {
                Some(added) => write_term_dfs(&tx, &added.terms, &removed)?,
                None => {
                    write_term_dfs(&tx, &FxHashMap::default(), &removed)?;
                    tx.execute(
                        "DELETE FROM collection_meta WHERE key = ?1",
                        params![TERM_DF_KEY],
                    )?;
                }
            }
            if counts.inserted > 0 {
                tx.execute(
                    "UPDATE collection_meta SET value = CAST(value AS INTEGER) + ?1 \
                     WHERE key = 'exhibit_count'",
                    params![counts.inserted as i64],
                )?;
            }
            let generation = bump_generation(&tx)?;
            self.store.lexical.delete(&replaced)?;
            match added {
                Some(_) => self.commit_with_index(tx, &indexed, generation)?,
                None => {
                    // Deferred: the index is committed by `finish_load` at the end of the load,
                    // failed or not. Earlier transactions' rows wait in the writer too, so a
                    // failed commit takes back only this one's.
                    self.store.lexical.add(&indexed)?;
                    if let Err(e) = tx.commit() {
                        let pks: Vec<i64> = indexed.iter().map(|r| r.0).collect();
                        self.store.lexical.delete(&pks)?;
                        return Err(e.into());
                    }
                }
            }
            Ok(counts)
        })
    }

    /// Commits `tx` with these rows added to the index (see the module docs for the order;
    /// rows the index holds are deleted from it first by the caller).
    fn commit_with_index(
        &self,
        tx: Transaction<'_>,
        rows: &[(i64, [&str; 7])],
        generation: i64,
    ) -> Result<(), StoreError> {
        let lexical = &self.store.lexical;
        lexical.add(rows)?;
        if let Err(e) = tx.commit() {
            lexical.rollback()?;
            return Err(e.into());
        }
        lexical.commit(generation)
    }

    /// Held for the whole of a load (the bulk ingest, a rebuild): loads in one process take
    /// turns, so one never lets go of the index's writer while another's rows wait in it
    /// uncommitted (a deferred load commits them only at its end).
    pub fn load_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.store.loads.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the index's writer, waiting as any write does for another process's load to
    /// end: a rebuild takes it before it reads the rows it rebuilds from.
    pub fn take_writer(&self) -> Result<(), StoreError> {
        self.store.lexical.ready_writer()
    }

    /// Takes the index's writer if no other process holds it, without waiting
    /// ([`super::lexical::LexicalIndex::try_writer`]): false while another process's load runs.
    pub fn try_take_writer(&self) -> Result<bool, StoreError> {
        self.store.lexical.try_writer()
    }

    /// Lets go of the index's writer without committing (after [`Self::try_take_writer`] when
    /// there was nothing to write; a load ends with [`Self::finish_load`]).
    pub fn let_go_writer(&self) -> Result<(), StoreError> {
        self.store.lexical.let_go()
    }

    /// Ends a load, whether it succeeded or not: what waits in the index's writer (the rows of
    /// a deferred load, all committed to SQLite) is committed with the
    /// collection's generation, the merges finish, and the writer (and its lock on the index's
    /// directory) is let go, so another process can write next.
    pub fn finish_load(&self) -> Result<(), StoreError> {
        let generation = self.collection_generation()?;
        self.store.lexical.release_writer(generation)
    }

    /// Every exhibit (for re-indexing after the analyzer changed).
    pub fn all_exhibits(&self) -> Result<Vec<ExhibitRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!("SELECT {EXHIBIT_COLS} FROM exhibits ORDER BY pk"))?;
            let rows = st
                .query_map([], |r| exhibit_row(r, 0))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Every exhibit with its primary key, in key order (for rebuilding the index).
    pub fn all_exhibits_with_pk(&self) -> Result<Vec<(i64, ExhibitRow)>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT pk, {EXHIBIT_COLS} FROM exhibits ORDER BY pk"
            ))?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, exhibit_row(r, 1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Why the analysed rows cannot be trusted, or None: `exhibit_text` holds another number
    /// of rows than `exhibits` (the index is then rebuilt by analysing every record again).
    pub fn text_problem(&self) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            let (text, rows): (i64, i64) = c.query_row(
                "SELECT (SELECT count(*) FROM exhibit_text), (SELECT count(*) FROM exhibits)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok((text != rows).then(|| format!("analysed rows: {text} for {rows} exhibits")))
        })
    }

    /// Why the inverted index cannot be trusted, or None when it is sound: it could not be
    /// opened (and was started again empty), a file's checksum fails, its generation is not the collection's (a write
    /// that died between the two commits, or an index of an earlier release), or it holds
    /// another number of rows than `exhibits`.
    pub fn index_problem(&self) -> Result<Option<String>, StoreError> {
        let lexical = &self.store.lexical;
        if let Some(why) = lexical.reset_reason() {
            return Ok(Some(format!("index unreadable: {why}")));
        }
        if let Some(why) = lexical.damaged_files()? {
            return Ok(Some(why));
        }
        let (generation, rows) = self.with(|c| {
            let rows: i64 = c.query_row("SELECT count(*) FROM exhibits", [], |r| r.get(0))?;
            Ok((generation_in(c)?, rows))
        })?;
        let committed = lexical.committed_generation()?;
        match committed {
            // Never written, and nothing to hold: a new database.
            None if rows == 0 => return Ok(None),
            None => {
                return Ok(Some(format!(
                    "no index for the {rows} exhibits (a database of a release before the \
                     tantivy index, or the index's directory was removed)"
                )));
            }
            Some(g) if g != generation => {
                return Ok(Some(format!(
                    "index at generation {g}, the collection at {generation}"
                )));
            }
            Some(_) => {}
        }
        lexical.catch_up(generation)?;
        let n = lexical.num_rows() as i64;
        Ok((n != rows).then(|| format!("index holds {n} rows, the collection {rows}")))
    }

    /// Replaces the analysed rows and the index with these rows, and the document
    /// frequencies with theirs; bumps the generation.
    pub fn recreate_index(&self, rows: &[(i64, [String; 7])]) -> Result<(), StoreError> {
        let _load = self.load_guard();
        self.take_writer()?;
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute("DELETE FROM exhibit_text", [])?;
            {
                let mut ins = tx.prepare(
                    "INSERT INTO exhibit_text (pk, title, maker, period, medium, description, extra, meta) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for (pk, f) in rows {
                    ins.execute(params![pk, f[0], f[1], f[2], f[3], f[4], f[5], f[6]])?;
                }
            }
            fill_term_dfs(&tx)?;
            let generation = bump_generation(&tx)?;
            self.store.lexical.clear()?;
            let rows: Vec<(i64, [&str; 7])> = rows
                .iter()
                .map(|(pk, f)| (*pk, f.each_ref().map(String::as_str)))
                .collect();
            self.commit_with_index(tx, &rows, generation)
        })?;
        self.finish_load()
    }

    /// Builds the index again from the analysed rows (`exhibit_text`, trusted: see
    /// [`Self::text_problem`]), stamped with the collection's generation. Returns the rows.
    pub fn rebuild_index_from_text(&self) -> Result<usize, StoreError> {
        let _load = self.load_guard();
        // The writer first, then the rows: a load of another process, which holds the writer
        // for its whole run, has then ended and its rows are all read.
        self.take_writer()?;
        let rows = self.indexed_columns()?;
        let lexical = &self.store.lexical;
        lexical.clear()?;
        for part in rows.chunks(10_000) {
            lexical.add(part)?;
        }
        // Committed with the collection's generation, merged and let go.
        self.finish_load()?;
        Ok(rows.len())
    }

    /// Every distinct `gallery` field with its number of exhibits (one scan of the table: the
    /// caller keeps the result per [`Self::collection_generation`]).
    pub fn gallery_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.with_read(|c| {
            let mut st =
                c.prepare_cached("SELECT gallery, count(*) FROM exhibits GROUP BY gallery")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Every exhibit's pk with its `maker` field, for those that have one (one scan of the
    /// table: "Who painted the most works here?").
    pub fn makers(&self) -> Result<Vec<(i64, String)>, StoreError> {
        self.with_read(|c| {
            let mut st = c.prepare_cached("SELECT pk, maker FROM exhibits WHERE maker <> ''")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// The `gallery` fields of the rows `pks` with their numbers of exhibits (where a kind is
    /// kept: "Where are the Egyptian exhibits?").
    pub fn gallery_counts_of(&self, pks: &[i64]) -> Result<Vec<(String, i64)>, StoreError> {
        self.with_read(|c| {
            let mut st = c.prepare_cached("SELECT gallery FROM exhibits WHERE pk = ?1")?;
            let mut by: HashMap<String, i64> = HashMap::new();
            for &pk in pks {
                if let Some(g) = st
                    .query_row(params![pk], |r| r.get::<_, String>(0))
                    .optional()?
                {
                    *by.entry(g).or_default() += 1;
                }
            }
            Ok(by.into_iter().collect())
        })
    }

    /// Every exhibit's pk with its `date` and `period` fields (one scan of the table: the caller
    /// keeps what it derives per [`Self::collection_generation`], as `retrieval::dating` does).
    pub fn dates(&self) -> Result<Vec<(i64, String, String)>, StoreError> {
        self.with_read(|c| {
            let mut st = c.prepare_cached("SELECT pk, date, period FROM exhibits")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Every exhibit's pk with its `dimensions` field (one scan of the table, kept per
    /// generation as [`Self::dates`] is, by `retrieval::sizing`'s caller).
    pub fn dimensions(&self) -> Result<Vec<(i64, String)>, StoreError> {
        self.with_read(|c| {
            let mut st = c.prepare_cached("SELECT pk, dimensions FROM exhibits")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Number of exhibits. Read on every question (IDF), so it is kept in `collection_meta`
    /// (`exhibit_count`, raised in the transaction that inserts rows) instead of counting 500,000
    /// rows each time; a database without the key counts once and stores it, in one statement.
    pub fn exhibit_count(&self) -> Result<i64, StoreError> {
        self.with(|c| {
            let stored: Option<String> = c
                .prepare_cached("SELECT value FROM collection_meta WHERE key = 'exhibit_count'")?
                .query_row([], |r| r.get(0))
                .optional()?;
            if let Some(n) = stored.and_then(|v| v.parse().ok()) {
                return Ok(n);
            }
            c.execute(
                "INSERT OR IGNORE INTO collection_meta (key, value) \
                 SELECT 'exhibit_count', count(*) FROM exhibits",
                [],
            )?;
            Ok(c.query_row(
                "SELECT CAST(value AS INTEGER) FROM collection_meta WHERE key = 'exhibit_count'",
                [],
                |r| r.get(0),
            )?)
        })
    }

    /// Counts the exhibits (a scan) and stores the count (see [`Self::exhibit_count`]).
    pub fn recount_exhibits(&self) -> Result<i64, StoreError> {
        self.with(|c| {
            let n: i64 = c.query_row("SELECT count(*) FROM exhibits", [], |r| r.get(0))?;
            c.execute(
                "INSERT INTO collection_meta (key, value) VALUES ('exhibit_count', ?1) \
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![n.to_string()],
            )?;
            Ok(n)
        })
    }

    /// A cheap fingerprint of the stored collection and its index: schema version, generation,
    /// exhibit rows and largest key, the analysed rows' largest key, and the index's
    /// generation, rows, and number and total size of its files. Any write through this module
    /// bumps the generation; damage behind its back (index files lost, truncated or left from
    /// another commit) changes the index's part. Start-up compares it with the one stored after
    /// the last full check ([`Self::set_collection_meta`] `index_stamp`) instead of running the
    /// full check, which reads every analysed row (seconds at 500,000 exhibits).
    pub fn index_fingerprint(&self) -> Result<String, StoreError> {
        let (schema, generation, rows, max_pk, text_max) = self.with(|c| {
            let schema: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0))?;
            let (rows, max_pk): (i64, i64) = c.query_row(
                "SELECT count(*), coalesce(max(pk), 0) FROM exhibits",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let text_max: i64 =
                c.query_row("SELECT coalesce(max(pk), 0) FROM exhibit_text", [], |r| {
                    r.get(0)
                })?;
            Ok((schema, generation_in(c)?, rows, max_pk, text_max))
        })?;
        let lexical = &self.store.lexical;
        let committed = lexical.committed_generation()?;
        lexical.catch_up(generation)?;
        let (files, bytes) = lexical.files();
        Ok(format!(
            "schema {schema}; generation {generation}; exhibits {rows} max {max_pk}; \
             analysed max {text_max}; index generation {committed:?} rows {} files {files} \
             bytes {bytes}",
            lexical.num_rows()
        ))
    }

    /// Changes whenever the collection changes (any process).
    pub fn collection_generation(&self) -> Result<i64, StoreError> {
        self.with(|c| Ok(generation_in(c)?))
    }

    pub fn collection_meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            Ok(
                c.prepare_cached("SELECT value FROM collection_meta WHERE key = ?1")?
                    .query_row(params![key], |r| r.get(0))
                    .optional()?,
            )
        })
    }

    pub fn set_collection_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO collection_meta (key, value) VALUES (?1, ?2) \
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )?;
            Ok(())
        })
    }

    pub fn exhibit_by_id(&self, id: &str) -> Result<Option<ExhibitRow>, StoreError> {
        self.with(|c| {
            Ok(c.prepare_cached(&format!(
                "SELECT {EXHIBIT_COLS} FROM exhibits WHERE id = ?1"
            ))?
            .query_row(params![id], |r| exhibit_row(r, 0))
            .optional()?)
        })
    }

    /// Exhibits by primary key, in the order asked (unknown keys are skipped).
    pub fn exhibits_by_pk(&self, pks: &[i64]) -> Result<Vec<(i64, ExhibitRow)>, StoreError> {
        self.with_read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {EXHIBIT_COLS} FROM exhibits WHERE pk = ?1"
            ))?;
            let mut out = Vec::with_capacity(pks.len());
            for &pk in pks {
                if let Some(e) = st
                    .query_row(params![pk], |r| exhibit_row(r, 0))
                    .optional()?
                {
                    out.push((pk, e));
                }
            }
            Ok(out)
        })
    }

    /// The rows matching any of `terms`, best first, at most `limit`, with their BM25 score as
    /// FTS5's `bm25()` gives it (sign flipped: higher is better; [`super::lexical`]). `weights`
    /// follow [`FTS_COLUMNS`]. The index is first caught up to the generation this view reads.
    pub fn candidates(
        &self,
        terms: &[MatchTerm<'_>],
        weights: &[f64; 7],
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        #[cfg(test)]
        MATCHES_ISSUED.with(|m| {
            m.borrow_mut().push(
                terms
                    .iter()
                    .map(|t| (t.text.to_string(), t.prefix))
                    .collect(),
            )
        });
        let searcher = self.lexical_searcher()?;
        self.store
            .lexical
            .candidates(&searcher, terms, weights, limit)
    }

    /// The rows holding the exact index token `token` (a kind marker), as `(pk, length in
    /// tokens)`, in no particular order.
    pub fn rows_holding(&self, token: &str) -> Result<Vec<(i64, u64)>, StoreError> {
        let searcher = self.lexical_searcher()?;
        self.store.lexical.rows_holding(&searcher, token)
    }

    /// The rows whose title holds the exact index token `token` ("vase": a kind the catalogue
    /// names only in its titles), as [`Self::rows_holding`] gives them.
    pub fn rows_titled(&self, token: &str) -> Result<Vec<(i64, u64)>, StoreError> {
        let searcher = self.lexical_searcher()?;
        let title = FTS_COLUMNS.iter().position(|c| *c == "title");
        self.store.lexical.rows_holding_in(&searcher, token, title)
    }

    /// The index as this view reads it: caught up to the generation the view's SQLite
    /// snapshot shows, and inside [`Self::reading`] the same one for the whole question (a
    /// write committed meanwhile is not half seen). It may be newer than the snapshot: a row
    /// it holds that the snapshot lacks is dropped when its record is read.
    fn lexical_searcher(&self) -> Result<tantivy::Searcher, StoreError> {
        let lexical = &self.store.lexical;
        if let Some(s) = self.searcher.as_ref().and_then(|s| s.get()) {
            return Ok(s.clone());
        }
        lexical.catch_up(self.collection_generation()?)?;
        Ok(match &self.searcher {
            Some(once) => once.get_or_init(|| lexical.searcher()).clone(),
            None => lexical.searcher(),
        })
    }

    /// Whether `exhibit_terms` is complete (false for an index built by a release before
    /// migration 0006, until [`Self::rebuild_term_dfs`]).
    pub fn term_dfs_ready(&self) -> Result<bool, StoreError> {
        Ok(self.collection_meta(TERM_DF_KEY)?.is_some())
    }

    /// Tokens whose document frequency in `exhibit_terms` is not the index's:
    /// `(term, table, index)`. A diagnostic that asks the index for every term (tests, tools).
    pub fn term_df_mismatches(&self) -> Result<Vec<(String, i64, i64)>, StoreError> {
        let table: Vec<(String, i64)> = self.with(|c| {
            Ok(c.prepare("SELECT term, df FROM exhibit_terms")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?)
        })?;
        let lexical = &self.store.lexical;
        lexical.catch_up(self.collection_generation()?)?;
        let mut out = Vec::new();
        let mut listed = FxHashSet::default();
        for (term, df) in table {
            let n = lexical.doc_freq(MatchTerm {
                text: &term,
                prefix: false,
            })? as i64;
            if n != df {
                out.push((term.clone(), df, n));
            }
            listed.insert(term);
        }
        for (term, n) in lexical.all_terms()? {
            if !listed.contains(&term) {
                out.push((term, 0, n as i64));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Runs SQL on the collection's tables behind this module's back (tests of recovery).
    #[cfg(test)]
    pub(crate) fn raw_sql(&self, sql: &str) {
        self.with(|c| Ok(c.execute_batch(sql)?)).unwrap();
    }

    /// Refills the document-frequency table from the index, in one transaction.
    pub fn rebuild_term_dfs(&self) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            fill_term_dfs(&tx)?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Number of exhibits containing the index token `term` (or, with `prefix`, any token that
    /// starts with it). An exact token is one lookup in `exhibit_terms` (kept in step with the
    /// index); a prefix (a lone CJK character of a question) counts the matching rows.
    pub fn doc_freq(&self, term: &str, prefix: bool) -> Result<i64, StoreError> {
        if prefix {
            let searcher = self.lexical_searcher()?;
            let term = MatchTerm { text: term, prefix };
            return Ok(self.store.lexical.doc_freq_in(&searcher, term)? as i64);
        }
        self.with(|c| {
            Ok(
                c.prepare_cached("SELECT df FROM exhibit_terms WHERE term = ?1")?
                    .query_row(params![term], |r| r.get(0))
                    .optional()?
                    .unwrap_or(0),
            )
        })
    }

    /// An upper bound of the number of exhibits holding a token that starts with `prefix`: the
    /// sum of those tokens' document frequencies in `exhibit_terms` (one range scan of the
    /// table; an exhibit holding several such tokens counts once per token). [`Self::doc_freq`]
    /// with `prefix` counts the matching rows exactly, which walks every one of those tokens'
    /// doclists: tens of milliseconds for a common character in a large collection.
    pub fn prefix_doc_freq_bound(&self, prefix: &str) -> Result<i64, StoreError> {
        let Some(hi) = prefix_end(prefix) else {
            return self.exhibit_count();
        };
        self.with(|c| {
            Ok(c.prepare_cached(
                "SELECT coalesce(sum(df), 0) FROM exhibit_terms WHERE term >= ?1 AND term < ?2",
            )?
            .query_row(params![prefix, hi], |r| r.get(0))?)
        })
    }

    /// Index tokens that start with `c` and their document frequency (at most `limit`, most
    /// frequent first): the two-character words a transliterated name may be written with
    /// (`retrieval::translit`).
    pub fn terms_starting_with(
        &self,
        c: char,
        limit: usize,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let lo = c.to_string();
        let Some(hi) = prefix_end(&lo) else {
            return Ok(Vec::new());
        };
        self.with(|conn| {
            // The limit in the text, not bound: SQLite plans with a bound LIMIT's value, so
            // binding one expires the statement and every call would compile it again.
            let mut st = conn.prepare_cached(&format!(
                "SELECT term, df FROM exhibit_terms WHERE term >= ?1 AND term < ?2 AND df > 0 \
                 ORDER BY df DESC LIMIT {limit}"
            ))?;
            let rows = st
                .query_map(params![lo, hi], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Every row of the full-text index: its `pk` and analysed columns ([`FTS_COLUMNS`]), in
    /// `pk` order (the rows a rebuild of another index starts from).
    pub fn indexed_columns(&self) -> Result<Vec<(i64, [String; 7])>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT pk, title, maker, period, medium, description, extra, meta \
                 FROM exhibit_text ORDER BY pk",
            )?;
            let rows = st
                .query_map([], |r| {
                    Ok((
                        r.get(0)?,
                        [
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                            r.get(7)?,
                        ],
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// The analysed text of these exhibits (all FTS columns joined by spaces).
    pub fn indexed_text(&self, pks: &[i64]) -> Result<Vec<(i64, String)>, StoreError> {
        self.with_read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {INDEXED_TEXT} FROM exhibit_text WHERE pk = ?1"
            ))?;
            let mut out = Vec::with_capacity(pks.len());
            for &pk in pks {
                if let Some(t) = st.query_row(params![pk], |r| r.get(0)).optional()? {
                    out.push((pk, t));
                }
            }
            Ok(out)
        })
    }

    pub fn collection_load(&self, source: &str) -> Result<Option<CollectionLoad>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT source, sha256, rows, loaded_at FROM collection_loads WHERE source = ?1",
                params![source],
                |r| {
                    Ok(CollectionLoad {
                        source: r.get(0)?,
                        sha256: r.get(1)?,
                        rows: r.get(2)?,
                        loaded_at: r.get(3)?,
                    })
                },
            )
            .optional()?)
        })
    }

    pub fn record_collection_load(
        &self,
        source: &str,
        sha256: &str,
        rows: i64,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO collection_loads (source, sha256, rows, loaded_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT(source) DO UPDATE SET sha256 = excluded.sha256, rows = excluded.rows, \
                 loaded_at = excluded.loaded_at",
                params![source, sha256, rows, now_ms()],
            )?;
            Ok(())
        })
    }
}

/// The first string after every string starting with `prefix`, for a range scan
/// `term >= prefix AND term < end` (its last character plus one); None for an empty prefix or
/// one whose last character has no successor.
fn prefix_end(prefix: &str) -> Option<String> {
    let last = prefix.chars().last()?;
    let next = char::from_u32(last as u32 + 1)?;
    Some(format!(
        "{}{next}",
        &prefix[..prefix.len() - last.len_utf8()]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(text: &str) -> MatchTerm<'_> {
        MatchTerm {
            text,
            prefix: false,
        }
    }

    fn doc(id: &str, title: &str, hash: &str) -> IndexedExhibit {
        IndexedExhibit {
            exhibit: ExhibitRow {
                id: id.into(),
                title: title.into(),
                extra: "{}".into(),
                ..Default::default()
            },
            hash: hash.into(),
            fts: [
                title.to_lowercase(),
                String::new(),
                String::new(),
                String::new(),
                "bronz vessel".into(),
                String::new(),
                String::new(),
            ],
        }
    }

    #[test]
    fn upsert_is_idempotent_and_keeps_the_index_in_step() {
        let s = Store::open_in_memory().unwrap().collection();
        assert_eq!(s.collection_generation().unwrap(), 0);
        let c = s
            .upsert_exhibits(&[doc("a", "Ding", "h1"), doc("b", "Jar", "h1")])
            .unwrap();
        assert_eq!(
            c,
            UpsertCounts {
                inserted: 2,
                updated: 0
            }
        );
        let g1 = s.collection_generation().unwrap();
        assert!(g1 > 0);
        let c = s.upsert_exhibits(&[doc("a", "Gui", "h2")]).unwrap();
        assert_eq!(
            c,
            UpsertCounts {
                inserted: 0,
                updated: 1
            }
        );
        assert!(s.collection_generation().unwrap() > g1);
        assert_eq!(s.exhibit_count().unwrap(), 2);
        assert_eq!(s.exhibit_by_id("a").unwrap().unwrap().title, "Gui");
        assert_eq!(s.exhibit_hashes().unwrap()["a"], "h2");
        // The old index row is gone, the new one is there, the other exhibit untouched.
        let w = [1.0; 7];
        assert!(s.candidates(&[term("ding")], &w, 10).unwrap().is_empty());
        assert_eq!(s.candidates(&[term("gui")], &w, 10).unwrap().len(), 1);
        assert_eq!(s.doc_freq("bronz", false).unwrap(), 2);
        assert_eq!(s.doc_freq("bro", true).unwrap(), 2);
        assert_eq!(s.doc_freq("nothing", false).unwrap(), 0);
    }

    #[test]
    fn a_question_reads_one_snapshot_on_a_read_connection_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db")).unwrap();
        let s = store.collection();
        s.upsert_exhibits(&[doc("a", "Ding", "h1")]).unwrap();
        let w = [1.0; 7];
        let seen = s
            .reading(|view| {
                assert!(
                    view.pinned.is_some(),
                    "a file database gives a read connection"
                );
                let before = view.candidates(&[term("jar")], &w, 10)?.len();
                // Another writer (the main connection) commits while the question runs...
                s.upsert_exhibits(&[doc("b", "Jar", "h1")])?;
                // ...and the question still reads the snapshot it started with.
                let after = view.candidates(&[term("jar")], &w, 10)?.len();
                // Nested: the same connection, no second one.
                let nested = view.reading(|v| {
                    Ok(Arc::ptr_eq(
                        v.pinned.as_ref().unwrap(),
                        view.pinned.as_ref().unwrap(),
                    ))
                })?;
                assert!(nested);
                Ok((before, after))
            })
            .unwrap();
        assert_eq!(seen, (0, 0));
        // The next question sees the commit, on the connection given back (none opened anew).
        let next = s
            .reading(|view| Ok(view.candidates(&[term("jar")], &w, 10)?.len()))
            .unwrap();
        assert_eq!(next, 1);
        let open = store
            .readers
            .open
            .load(std::sync::atomic::Ordering::Acquire);
        assert_eq!(open, 1);
        // A failing question gives its connection back out of any transaction.
        let err = s.reading(|view| {
            view.candidates(&[term("jar")], &w, 10)?;
            Err::<(), _>(StoreError::Conflict("the question failed".into()))
        });
        assert!(err.is_err());
        let idle = store.readers.idle.lock().unwrap();
        assert_eq!(idle.len(), 1);
        assert!(idle[0].is_autocommit());
    }

    #[test]
    fn read_connections_are_bounded_and_memory_databases_read_through_the_main_one() {
        for mem in [
            Store::open_in_memory().unwrap(),
            Store::open(std::path::Path::new(":memory:")).unwrap(),
        ] {
            mem.collection()
                .reading(|view| {
                    assert!(view.pinned.is_none());
                    Ok(())
                })
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db")).unwrap();
        let taken: Vec<Connection> = (0..super::super::Readers::MAX)
            .map(|_| store.readers.take().unwrap())
            .collect();
        // Every read connection busy: the question runs on the main connection.
        store
            .collection()
            .reading(|view| {
                assert!(view.pinned.is_none());
                Ok(())
            })
            .unwrap();
        for c in taken {
            store.readers.give_back(c);
        }
        assert!(store.readers.take().is_some());
    }

    #[test]
    fn the_prefix_bound_sums_the_tokens_it_covers() {
        let s = Store::open_in_memory().unwrap().collection();
        // "bronz" and "bronze" in one exhibit: the exact count is 1 row, the bound 2 tokens.
        let mut a = doc("a", "Bronze", "h1");
        a.fts[1] = "bronzeag".into();
        s.upsert_exhibits(&[a, doc("b", "Jar", "h1"), doc("c", "Brush", "h1")])
            .unwrap();
        assert_eq!(s.doc_freq("bronz", true).unwrap(), 3);
        // bronz (3 exhibits) + bronze (1) + bronzeag (1).
        assert_eq!(s.prefix_doc_freq_bound("bronz").unwrap(), 5);
        assert!(s.prefix_doc_freq_bound("br").unwrap() >= s.doc_freq("br", true).unwrap());
        assert_eq!(s.prefix_doc_freq_bound("zz").unwrap(), 0);
        assert_eq!(
            s.prefix_doc_freq_bound("").unwrap(),
            3,
            "empty: every exhibit"
        );
    }

    #[test]
    fn the_fingerprint_sees_writes_behind_our_back_and_the_count_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let s = Store::open(&db).unwrap().collection();
        assert_eq!(s.exhibit_count().unwrap(), 0);
        s.upsert_exhibits(&[
            doc("a", "Ding", "h1"),
            doc("b", "Jar", "h1"),
            doc("c", "Cup", "h1"),
        ])
        .unwrap();
        s.finish_load().unwrap();
        assert_eq!(s.exhibit_count().unwrap(), 3, "kept in step by the insert");
        let before = s.index_fingerprint().unwrap();
        assert_eq!(
            s.index_fingerprint().unwrap(),
            before,
            "stable when nothing changed"
        );
        s.set_collection_meta("something", "else").unwrap();
        assert_eq!(
            s.index_fingerprint().unwrap(),
            before,
            "metadata is not the collection"
        );
        let raw = |sql: &str| {
            s.with(|c| {
                c.execute_batch(sql)?;
                Ok(())
            })
            .unwrap()
        };
        // Analysed rows dropped, index files lost, or an index of another generation, without
        // a generation bump.
        raw("DELETE FROM exhibit_text WHERE pk = 3");
        let dropped = s.index_fingerprint().unwrap();
        assert_ne!(dropped, before);
        let index_dir = crate::store::lexical_dir(&db);
        let segment = std::fs::read_dir(&index_dir)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".idx"))
            .unwrap();
        std::fs::remove_file(segment.path()).unwrap();
        let lost = s.index_fingerprint().unwrap();
        assert_ne!(lost, dropped);
        s.store.lexical.commit(99).unwrap();
        assert_ne!(s.index_fingerprint().unwrap(), lost);
        // A count lost or wrong is recounted.
        raw("DELETE FROM collection_meta WHERE key = 'exhibit_count'");
        assert_eq!(s.exhibit_count().unwrap(), 3);
        raw("UPDATE collection_meta SET value = '7' WHERE key = 'exhibit_count'");
        assert_eq!(s.recount_exhibits().unwrap(), 3);
        assert_eq!(s.exhibit_count().unwrap(), 3);
    }

    #[test]
    fn two_processes_take_turns_to_write_and_read_each_others_rows() {
        // Two stores on one file stand for `serve` and `museum-agent ingest` beside it.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let serve = Store::open(&db).unwrap().collection();
        let ingest = Store::open(&db).unwrap().collection();
        let w = [1.0; 7];
        serve.upsert_exhibits(&[doc("a", "Ding", "h1")]).unwrap();
        // The server's load holds the index's writer: the other's write waits for the end of
        // that load (a write that waits too long fails whole: `lexical`'s tests).
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let ingest = ingest.clone();
            std::thread::spawn(move || {
                tx.send(()).unwrap();
                ingest.upsert_exhibits(&[doc("b", "Jar", "h1")]).unwrap();
                ingest.finish_load().unwrap();
            })
        };
        rx.recv().unwrap();
        serve.finish_load().unwrap();
        writer.join().unwrap();
        // The server's next question sees the other's row (its reader catches up).
        assert_eq!(serve.candidates(&[term("jar")], &w, 10).unwrap().len(), 1);
        assert_eq!(serve.index_problem().unwrap(), None);
    }

    #[test]
    fn a_database_indexed_by_fts5_keeps_its_rows_and_gets_its_index_built() {
        // A file as a release before migration 0007 left it: the FTS5 table holds the
        // analysed columns.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        {
            let mut c = Connection::open(&db).unwrap();
            for (i, (_, sql)) in super::super::MIGRATIONS[..6].iter().enumerate() {
                let tx = c.transaction().unwrap();
                tx.execute_batch(sql).unwrap();
                tx.pragma_update(None, "user_version", (i + 1) as i64)
                    .unwrap();
                tx.commit().unwrap();
            }
            c.execute_batch(
                "INSERT INTO exhibits (pk, id, title, maker, date, period, medium, dimensions, \
                 gallery, description, language, source, license, extra, content_hash, updated_at) \
                 VALUES (1, 'a', 'Ding', '', '', '', '', '', '', '', 'en', '', '', '{}', 'h', 0);
                 INSERT INTO exhibits_fts (rowid, title, maker, period, medium, description, extra, meta) \
                 VALUES (1, 'ding', '', '', '', 'bronz vessel', '', '');
                 INSERT INTO collection_meta (key, value) VALUES ('generation', '3');",
            )
            .unwrap();
        }
        let s = Store::open(&db).unwrap().collection();
        assert_eq!(
            s.text_problem().unwrap(),
            None,
            "the analysed rows were kept"
        );
        let problem = s.index_problem().unwrap().unwrap();
        assert!(problem.contains("no index"), "{problem}");
        assert_eq!(s.rebuild_index_from_text().unwrap(), 1);
        assert_eq!(s.index_problem().unwrap(), None);
        assert_eq!(
            s.candidates(&[term("bronz")], &[1.0; 7], 10).unwrap().len(),
            1
        );
    }

    #[test]
    fn loads_are_recorded() {
        let s = Store::open_in_memory().unwrap().collection();
        assert!(s.collection_load("demo").unwrap().is_none());
        s.record_collection_load("demo", "abc", 3).unwrap();
        s.record_collection_load("demo", "def", 4).unwrap();
        let l = s.collection_load("demo").unwrap().unwrap();
        assert_eq!((l.sha256.as_str(), l.rows), ("def", 4));
    }
}
