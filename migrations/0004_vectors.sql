-- Embedding vectors keyed by what was embedded, not by the exhibit row (issue 17): the SHA-256 of
-- the exact text sent for a record, and the model fingerprint (configured model name, the model
-- the endpoint reports, the dimension and the query/passage prefixes). An unchanged record keeps
-- its vector across restarts and re-ingests; another model, even under the same configured name,
-- gets its own rows. Vectors are little-endian f32, L2-normalised. (`exhibit_vectors` of 0002 is
-- no longer used.)

CREATE TABLE embedding_vectors (
    fingerprint TEXT    NOT NULL,
    text_hash   TEXT    NOT NULL,
    dim         INTEGER NOT NULL,
    vector      BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, text_hash)
) WITHOUT ROWID;
