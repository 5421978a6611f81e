-- The museum's collection (issue 5): exhibits, their full-text index, optional embedding vectors,
-- and a record of the files loaded at start (so an unchanged demo file is not re-ingested).

CREATE TABLE exhibits (
    pk           INTEGER PRIMARY KEY,          -- rowid of exhibits_fts and exhibit_vectors
    id           TEXT    NOT NULL UNIQUE,      -- the museum's id, e.g. walters-33094
    title        TEXT    NOT NULL,
    maker        TEXT    NOT NULL DEFAULT '',
    date         TEXT    NOT NULL DEFAULT '',
    period       TEXT    NOT NULL DEFAULT '',  -- period, culture, dynasty
    medium       TEXT    NOT NULL DEFAULT '',
    dimensions   TEXT    NOT NULL DEFAULT '',
    gallery      TEXT    NOT NULL DEFAULT '',
    description  TEXT    NOT NULL DEFAULT '',
    language     TEXT    NOT NULL DEFAULT '',
    source       TEXT    NOT NULL DEFAULT '',
    license      TEXT    NOT NULL DEFAULT '',
    extra        TEXT    NOT NULL DEFAULT '{}', -- JSON object: aliases, tags, any other field
    content_hash TEXT    NOT NULL,              -- of the row and the analyzer version
    updated_at   INTEGER NOT NULL
);

-- Analysed text (normalised, segmented tokens separated by spaces; see providers/srs/text.rs),
-- one column per field group so BM25 can weight them. unicode61 keeps each token whole.
CREATE VIRTUAL TABLE exhibits_fts USING fts5(
    title, maker, period, medium, description, extra, meta,
    tokenize = 'unicode61 remove_diacritics 0'
);

-- Document frequencies, for the query-coverage score.
CREATE VIRTUAL TABLE exhibits_vocab USING fts5vocab(exhibits_fts, 'row');

-- Embedding vectors (little-endian f32, L2-normalised), when an embeddings endpoint is configured.
CREATE TABLE exhibit_vectors (
    pk           INTEGER PRIMARY KEY REFERENCES exhibits(pk) ON DELETE CASCADE,
    model        TEXT    NOT NULL,
    content_hash TEXT    NOT NULL,
    dim          INTEGER NOT NULL,
    vector       BLOB    NOT NULL
);

-- Files loaded automatically (the demo collection) and what they held.
CREATE TABLE collection_loads (
    source    TEXT    PRIMARY KEY,
    sha256    TEXT    NOT NULL,
    rows      INTEGER NOT NULL,
    loaded_at INTEGER NOT NULL
);

-- Key/value state: `generation` (bumped by every change), `analyzer_version`.
CREATE TABLE collection_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
