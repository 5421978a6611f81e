-- The collection's inverted index moves from FTS5 to tantivy (`store/lexical.rs`, a directory
-- beside the database file, `<file>-index`), which scores candidates exactly as FTS5's bm25()
-- did. SQLite keeps the analysed columns of each exhibit (what FTS5's content table held): the
-- coverage stage reads them for the candidates of a question, a rebuild of the index reads them
-- instead of analysing every record again, and `exhibit_terms` is counted from them.
CREATE TABLE exhibit_text (
    pk          INTEGER PRIMARY KEY REFERENCES exhibits(pk) ON DELETE CASCADE,
    title       TEXT NOT NULL,
    maker       TEXT NOT NULL,
    period      TEXT NOT NULL,
    medium      TEXT NOT NULL,
    description TEXT NOT NULL,
    extra       TEXT NOT NULL,
    meta        TEXT NOT NULL
);

-- A database indexed by an earlier release: its analysed rows are kept; the tantivy index does
-- not exist yet, so the start-up check (its generation is not the collection's) builds it from
-- them.
INSERT INTO exhibit_text (pk, title, maker, period, medium, description, extra, meta)
SELECT rowid, coalesce(title, ''), coalesce(maker, ''), coalesce(period, ''), coalesce(medium, ''),
       coalesce(description, ''), coalesce(extra, ''), coalesce(meta, '')
FROM exhibits_fts WHERE rowid IN (SELECT pk FROM exhibits);

DROP TABLE exhibits_vocab;
DROP TABLE exhibits_fts;
