//! Embedding vectors (migration `0004_vectors`), keyed by `(fingerprint, text_hash)`: the model
//! fingerprint and the SHA-256 of the exact text embedded for a record. Independent of the
//! exhibit rows, so a re-ingest, a re-index or a restart re-embeds nothing unchanged, and a
//! collection loaded into another database (the `eval` command's in-memory one) can reuse the
//! vectors stored here.

use std::collections::{HashMap, HashSet};

use rusqlite::params;

use super::{Store, StoreError};

/// The vectors' part of the database. Cheap to clone: it shares the [`Store`]'s connection.
#[derive(Clone)]
pub struct VectorStore {
    store: Store,
}

impl Store {
    /// The embedding vectors' table, for the retrieval module.
    pub fn vectors(&self) -> VectorStore {
        VectorStore {
            store: self.clone(),
        }
    }
}

impl VectorStore {
    /// Runs `f` on the blocking pool (see [`Store::call`]).
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&VectorStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.store.call(move |s| f(&s.vectors())).await
    }

    /// The text hashes that have a vector of this fingerprint.
    pub fn hashes(&self, fingerprint: &str) -> Result<HashSet<String>, StoreError> {
        self.store.with(|c| {
            let mut st =
                c.prepare_cached("SELECT text_hash FROM embedding_vectors WHERE fingerprint = ?1")?;
            let rows = st.query_map([fingerprint], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<Result<HashSet<_>, _>>()?)
        })
    }

    /// Stores vectors (replacing any of the same key), in one transaction.
    pub fn put(&self, fingerprint: &str, rows: &[(String, Vec<f32>)]) -> Result<(), StoreError> {
        let now = crate::util::now_ms();
        self.store.with(|c| {
            let tx = c.transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT OR REPLACE INTO embedding_vectors (fingerprint, text_hash, dim, vector, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?;
                for (hash, v) in rows {
                    st.execute(params![fingerprint, hash, v.len() as i64, vector_to_blob(v), now])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Every vector of this fingerprint, by text hash.
    pub fn load(&self, fingerprint: &str) -> Result<HashMap<String, Vec<f32>>, StoreError> {
        self.store.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT text_hash, vector FROM embedding_vectors WHERE fingerprint = ?1",
            )?;
            let rows = st.query_map([fingerprint], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    blob_to_vector(&r.get::<_, Vec<u8>>(1)?),
                ))
            })?;
            Ok(rows.collect::<Result<HashMap<_, _>, _>>()?)
        })
    }

    /// Deletes the vectors of this fingerprint whose text is no longer in the collection;
    /// returns how many. (Vectors of other fingerprints are kept: switching back reuses them.)
    pub fn prune(&self, fingerprint: &str, keep: &HashSet<String>) -> Result<usize, StoreError> {
        let stale: Vec<String> = self
            .hashes(fingerprint)?
            .into_iter()
            .filter(|h| !keep.contains(h))
            .collect();
        if stale.is_empty() {
            return Ok(0);
        }
        self.store.with(|c| {
            let tx = c.transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "DELETE FROM embedding_vectors WHERE fingerprint = ?1 AND text_hash = ?2",
                )?;
                for h in &stale {
                    st.execute(params![fingerprint, h])?;
                }
            }
            tx.commit()?;
            Ok(stale.len())
        })
    }

    /// How many vectors are stored per fingerprint.
    pub fn counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.store.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT fingerprint, COUNT(*) FROM embedding_vectors GROUP BY fingerprint ORDER BY fingerprint",
            )?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }
}

/// Encodes a vector as little-endian f32 bytes.
fn vector_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Decodes little-endian f32 bytes (a trailing partial value is ignored).
fn blob_to_vector(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_keyed_by_fingerprint_and_text_hash() {
        let s = Store::open_in_memory().unwrap().vectors();
        s.put(
            "m|a|2",
            &[("h1".into(), vec![0.6, 0.8]), ("h2".into(), vec![1.0, 0.0])],
        )
        .unwrap();
        s.put("m|b|2", &[("h1".into(), vec![0.0, 1.0])]).unwrap();
        assert_eq!(s.load("m|a|2").unwrap()["h1"], vec![0.6, 0.8]);
        assert_eq!(s.load("m|b|2").unwrap()["h1"], vec![0.0, 1.0]);
        assert_eq!(s.hashes("m|a|2").unwrap().len(), 2);
        let keep: HashSet<String> = ["h2".to_string()].into();
        assert_eq!(s.prune("m|a|2", &keep).unwrap(), 1);
        assert_eq!(s.prune("m|a|2", &keep).unwrap(), 0);
        assert_eq!(
            s.counts().unwrap(),
            vec![("m|a|2".to_string(), 1), ("m|b|2".to_string(), 1)]
        );
    }
}
