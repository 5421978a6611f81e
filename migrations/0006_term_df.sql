-- Document frequency of every index token of `exhibits_fts` (issue 17, a museum-sized
-- collection): how many exhibits hold the token in any column, the figure `exhibits_vocab`
-- (fts5vocab 'row') gives, but one B-tree lookup instead of a walk over the token's whole
-- doclist (tens of milliseconds for a common token at 500,000 exhibits). Kept in step by the
-- writes of `store/collection.rs` (in the transaction that writes the index rows) and rebuilt
-- from `exhibits_vocab` with the index. A row may hold 0 (every exhibit with the token changed).
CREATE TABLE exhibit_terms (
    term TEXT    PRIMARY KEY,
    df   INTEGER NOT NULL
) WITHOUT ROWID;

-- An empty collection's table is complete as it is; a collection indexed by an earlier release
-- has no `term_df` mark, and the start-up check fills the table once from `exhibits_vocab`.
INSERT INTO collection_meta (key, value)
SELECT 'term_df', '1' WHERE NOT EXISTS (SELECT 1 FROM exhibits);

-- FTS5 keeps up to `hashsize` bytes of new index data in memory before it writes a segment
-- (default 1 MiB: a bulk transaction of 10,000 exhibits wrote several small segments, each
-- merged again later). 16 MiB: one segment a bulk transaction. Set again when the index is
-- rebuilt (`store/collection.rs`, `recreate_fts`).
INSERT INTO exhibits_fts (exhibits_fts, rank) VALUES ('hashsize', 16777216);
