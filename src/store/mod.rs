//! The only module that imports rusqlite (and the PostgreSQL client). Users, API keys and the
//! collection live in one SQLite file in WAL mode; migrations come from `migrations/*.sql`
//! (applied in order, tracked by `PRAGMA user_version`, each in its own transaction).
//!
//! Accounts, API keys, lockout counters and revocations are reached through the
//! [`users::UserStore`] trait ([`Store::users`]): the SQLite engine below by default, or
//! PostgreSQL ([`postgres`], `[database] url`) so several nodes share them. The collection and
//! the hub's tables stay in each node's SQLite file whatever the engine.
//!
//! Methods are synchronous and short; async callers run them with [`Store::call`], which moves
//! the work to tokio's blocking pool so no async worker ever waits on SQLite. One connection
//! behind a std `Mutex` is enough here: every statement is a point lookup or a single-row write.
//! The one exception is a visitor's question, dozens of statements (candidates, document
//! frequencies, range scans, point lookups): it runs on a read connection of its own
//! ([`Readers`], [`collection::CollectionStore::reading`]) inside one read transaction, so the
//! question takes SQLite's WAL read lock once instead of once a statement, and concurrent
//! questions (and logins) no longer wait for each other behind the one connection's mutex.
//!
//! The collection's tables are reached through [`collection::CollectionStore`]
//! ([`Store::collection`]), the narrow handle the retrieval module holds; its rows are plain
//! column types, so `store` depends on no module above it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

pub mod collection;
pub mod hub;
pub mod lexical;
pub mod postgres;
pub mod users;

pub mod vectors;

pub use users::UserStore;

/// Migrations, in order. `user_version` = how many have been applied.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_users",
        include_str!("../../migrations/0001_users.sql"),
    ),
    (
        "0002_collection",
        include_str!("../../migrations/0002_collection.sql"),
    ),
    ("0003_hub", include_str!("../../migrations/0003_hub.sql")),
    (
        "0004_vectors",
        include_str!("../../migrations/0004_vectors.sql"),
    ),
    (
        "0005_auth_failures",
        include_str!("../../migrations/0005_auth_failures.sql"),
    ),
    (
        "0006_term_df",
        include_str!("../../migrations/0006_term_df.sql"),
    ),
    (
        "0007_lexical_index",
        include_str!("../../migrations/0007_lexical_index.sql"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Conflict(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("cannot create database directory: {0}")]
    Io(#[from] std::io::Error),
    #[error("database task failed: {0}")]
    Task(String),
    /// PostgreSQL unreachable, a query failed or timed out, or no pooled connection in time:
    /// transient, the caller may retry.
    #[error("shared database unavailable: {0}")]
    Unavailable(String),
    #[error("invalid [database] configuration: {0}")]
    Config(String),
    /// The tantivy index of the collection ([`lexical`]) failed.
    #[error("lexical index error: {0}")]
    Lexical(String),
}

#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    /// Read connections for whole questions (empty for an in-memory database).
    readers: Arc<Readers>,
    /// The PostgreSQL user store when `[database] url` is set ([`Store::open_config`]).
    shared_users: Option<Arc<dyn UserStore>>,
    /// Bumped when this process revokes a key or disables an account in SQLite, so the
    /// revocation watch acts at once ([`UserStore::revocation_events`]).
    revocations: Arc<tokio::sync::watch::Sender<u64>>,
    /// The collection's inverted index ([`lexical`]): `<file>-index/` beside a database file,
    /// in memory beside an in-memory database.
    pub(crate) lexical: Arc<lexical::LexicalIndex>,
    /// Held by each load into the collection ([`collection::CollectionStore::load_guard`]): the
    /// index has one writer, whose uncommitted rows one load must not see another drop.
    loads: Arc<Mutex<()>>,
}

/// The directory of the tantivy index of the database at `path`.
pub fn lexical_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-index");
    PathBuf::from(name)
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyRow {
    pub id: i64,
    pub name: String,
    pub prefix: String,
    pub revoked: bool,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AccountRow {
    pub id: i64,
    pub account: String,
    pub password_hash: String,
    pub disabled: bool,
    pub created_at: i64,
    pub last_login_at: Option<i64>,
}

fn now_ms() -> i64 {
    crate::util::now_ms()
}

impl Store {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        let conn = Connection::open(path)?;
        // SQLite's special names (":memory:", "") are a database private to one connection:
        // no read connections can share it.
        let shared = !matches!(path.to_str(), Some(":memory:" | ""));
        Self::init(conn, shared.then(|| path.to_path_buf()))
    }

    /// An in-memory database (tests and tools).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        Self::init(Connection::open_in_memory()?, None)
    }

    fn init(mut conn: Connection, path: Option<PathBuf>) -> Result<Store, StoreError> {
        configure(&conn)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        migrate(&mut conn)?;
        let lexical = match &path {
            Some(p) => lexical::LexicalIndex::open_or_reset(&lexical_dir(p))?,
            None => lexical::LexicalIndex::in_memory()?,
        };
        Ok(Store {
            lexical: Arc::new(lexical),
            loads: Arc::default(),
            conn: Arc::new(Mutex::new(conn)),
            readers: Arc::new(Readers {
                path,
                idle: Mutex::new(Vec::new()),
                open: std::sync::atomic::AtomicUsize::new(0),
            }),
            shared_users: None,
            revocations: Arc::new(tokio::sync::watch::channel(0).0),
        })
    }

    /// Opens the SQLite file of `config.path` and, when `config.url` is set, connects to
    /// PostgreSQL (applying its migrations) for the user store.
    pub async fn open_config(config: &crate::config::DatabaseConfig) -> Result<Store, StoreError> {
        let path = config.path.clone();
        let mut store = tokio::task::spawn_blocking(move || Store::open(&path))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))??;
        if !config.url.trim().is_empty() {
            store.shared_users = Some(Arc::new(postgres::PgUsers::connect(config).await?));
        }
        Ok(store)
    }

    /// Accounts, API keys, lockout counters and revocations: PostgreSQL when the store was
    /// opened with a `[database] url`, else this SQLite file. Everything that authenticates or
    /// administers credentials goes through this, never the SQLite methods below directly.
    pub fn users(&self) -> Arc<dyn UserStore> {
        match &self.shared_users {
            Some(u) => u.clone(),
            None => Arc::new(users::SqliteUsers::new(self.clone())),
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // A poisoned lock only means another thread panicked mid-statement; SQLite itself rolled
        // back, so the connection is still usable.
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Runs `f` on the blocking pool.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// `SELECT 1`, for readiness checks.
    pub fn ping(&self) -> Result<(), StoreError> {
        self.with(|c| {
            Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                .map(|_| ())?)
        })
    }

    /// `PRAGMA integrity_check`: `Ok(())` when SQLite reports "ok".
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        self.with(|c| {
            let r: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
            if r == "ok" {
                Ok(())
            } else {
                Err(StoreError::Conflict(format!("integrity check failed: {r}")))
            }
        })
    }

    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.with(|c| Ok(c.pragma_query_value(None, "user_version", |r| r.get(0))?))
    }

    // ---- API keys ----

    pub fn insert_api_key(
        &self,
        name: &str,
        prefix: &str,
        key_hash: &[u8],
    ) -> Result<ApiKeyRow, StoreError> {
        self.with(|c| {
            let now = now_ms();
            let res = c.execute(
                "INSERT INTO api_keys (name, prefix, key_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![name, prefix, key_hash, now],
            );
            match res {
                Ok(_) => Ok(ApiKeyRow {
                    id: c.last_insert_rowid(),
                    name: name.into(),
                    prefix: prefix.into(),
                    revoked: false,
                    created_at: now,
                    last_used_at: None,
                }),
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    Err(StoreError::Conflict(format!(
                        "an API key named {name:?} already exists"
                    )))
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyRow> {
        Ok(ApiKeyRow {
            id: r.get(0)?,
            name: r.get(1)?,
            prefix: r.get(2)?,
            revoked: r.get::<_, i64>(3)? != 0,
            created_at: r.get(4)?,
            last_used_at: r.get(5)?,
        })
    }

    pub fn find_api_key(&self, key_hash: &[u8]) -> Result<Option<ApiKeyRow>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT id, name, prefix, revoked, created_at, last_used_at FROM api_keys WHERE key_hash = ?1",
                params![key_hash],
                Self::key_row,
            )
            .optional()?)
        })
    }

    pub fn touch_api_key(&self, id: i64) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE api_keys SET last_used_at = ?1 WHERE id = ?2",
                params![now_ms(), id],
            )?;
            Ok(())
        })
    }

    pub fn list_api_keys(&self) -> Result<Vec<ApiKeyRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, name, prefix, revoked, created_at, last_used_at FROM api_keys ORDER BY id",
            )?;
            let rows = st.query_map([], Self::key_row)?.collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Revokes the key with this name (or numeric id).
    pub fn revoke_api_key(&self, name_or_id: &str) -> Result<ApiKeyRow, StoreError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE api_keys SET revoked = 1 WHERE name = ?1 OR CAST(id AS TEXT) = ?1",
                params![name_or_id],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("API key {name_or_id:?}")));
            }
            self.revocations.send_modify(|n| *n += 1);
            Ok(c.query_row(
                "SELECT id, name, prefix, revoked, created_at, last_used_at FROM api_keys WHERE name = ?1 OR CAST(id AS TEXT) = ?1",
                params![name_or_id],
                Self::key_row,
            )?)
        })
    }

    /// Ids of revoked API keys and of disabled accounts.
    pub fn revoked_principals(&self) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
        self.with(|c| {
            let ids = |sql: &str| -> Result<Vec<i64>, StoreError> {
                let mut st = c.prepare(sql)?;
                let v = st
                    .query_map([], |r| r.get(0))?
                    .collect::<Result<Vec<i64>, _>>()?;
                Ok(v)
            };
            Ok((
                ids("SELECT id FROM api_keys WHERE revoked = 1")?,
                ids("SELECT id FROM accounts WHERE disabled = 1")?,
            ))
        })
    }

    // ---- accounts ----

    pub fn insert_account(
        &self,
        account: &str,
        password_hash: &str,
    ) -> Result<AccountRow, StoreError> {
        self.with(|c| {
            let now = now_ms();
            match c.execute(
                "INSERT INTO accounts (account, password_hash, created_at) VALUES (?1, ?2, ?3)",
                params![account, password_hash, now],
            ) {
                Ok(_) => Ok(AccountRow {
                    id: c.last_insert_rowid(),
                    account: account.into(),
                    password_hash: password_hash.into(),
                    disabled: false,
                    created_at: now,
                    last_login_at: None,
                }),
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    Err(StoreError::Conflict(format!(
                        "account {account:?} already exists"
                    )))
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    fn account_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AccountRow> {
        Ok(AccountRow {
            id: r.get(0)?,
            account: r.get(1)?,
            password_hash: r.get(2)?,
            disabled: r.get::<_, i64>(3)? != 0,
            created_at: r.get(4)?,
            last_login_at: r.get(5)?,
        })
    }

    pub fn find_account(&self, account: &str) -> Result<Option<AccountRow>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT id, account, password_hash, disabled, created_at, last_login_at FROM accounts WHERE account = ?1",
                params![account],
                Self::account_row,
            )
            .optional()?)
        })
    }

    pub fn list_accounts(&self) -> Result<Vec<AccountRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, account, password_hash, disabled, created_at, last_login_at FROM accounts ORDER BY id",
            )?;
            let rows = st.query_map([], Self::account_row)?.collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    pub fn set_account_disabled(&self, account: &str, disabled: bool) -> Result<(), StoreError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE accounts SET disabled = ?1 WHERE account = ?2",
                params![disabled as i64, account],
            )?;
            if n == 0 {
                return Err(StoreError::NotFound(format!("account {account:?}")));
            }
            if disabled {
                self.revocations.send_modify(|n| *n += 1);
            }
            Ok(())
        })
    }

    pub fn touch_account(&self, id: i64) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE accounts SET last_login_at = ?1 WHERE id = ?2",
                params![now_ms(), id],
            )?;
            Ok(())
        })
    }

    // ---- failed-REGISTER counters (the SQLite engine of UserStore's lockouts) ----

    pub fn auth_lockout(&self, keys: &[String], now_ms: i64) -> Result<users::Lockout, StoreError> {
        self.with(|c| {
            let mut st =
                c.prepare_cached("SELECT locked_until FROM auth_failures WHERE key = ?1")?;
            let mut state = users::Lockout::Clear;
            for k in keys {
                match st
                    .query_row(params![k], |r| r.get::<_, Option<i64>>(0))
                    .optional()?
                {
                    Some(Some(until)) if until > now_ms => return Ok(users::Lockout::Locked),
                    Some(_) => state = users::Lockout::Counting,
                    None => {}
                }
            }
            Ok(state)
        })
    }

    /// One failure against each key; returns the keys this locked. Counters older than the
    /// window restart at 1; now and then, stale rows are removed.
    pub fn auth_record_failure(
        &self,
        keys: &[(String, u32)],
        p: users::FailurePolicy,
    ) -> Result<Vec<String>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let mut locked = Vec::new();
            for (key, max) in keys {
                let failures: i64 = tx.query_row(
                    RECORD_FAILURE_SQL,
                    params![key, p.now_ms, p.window_ms],
                    |r| r.get(0),
                )?;
                if *max > 0 && failures >= i64::from(*max) {
                    tx.execute(
                        "UPDATE auth_failures SET locked_until = ?2 WHERE key = ?1",
                        params![key, p.now_ms + p.lockout_ms],
                    )?;
                    locked.push(key.clone());
                }
            }
            if rand::random::<u8>() == 0 {
                tx.execute(PRUNE_FAILURES_SQL, params![p.now_ms, p.window_ms])?;
            }
            tx.commit()?;
            Ok(locked)
        })
    }

    pub fn auth_clear_failures(&self, keys: &[String]) -> Result<(), StoreError> {
        self.with(|c| {
            let mut st = c.prepare_cached("DELETE FROM auth_failures WHERE key = ?1")?;
            for k in keys {
                st.execute(params![k])?;
            }
            Ok(())
        })
    }
}

/// Counts one failure for key ?1 at time ?2 with window ?3 (ms) and returns the count. The same
/// statement for both engines (`$n` parameters in PostgreSQL are written `?n` here). SET
/// expressions see the row as it was, so both CASEs test the old window.
const RECORD_FAILURE_SQL: &str = "INSERT INTO auth_failures AS f (key, window_start, failures) \
     VALUES (?1, CAST(?2 AS BIGINT), 1) \
     ON CONFLICT (key) DO UPDATE SET \
       failures = CASE WHEN f.window_start <= CAST(?2 AS BIGINT) - CAST(?3 AS BIGINT) \
                  THEN 1 ELSE f.failures + 1 END, \
       window_start = CASE WHEN f.window_start <= CAST(?2 AS BIGINT) - CAST(?3 AS BIGINT) \
                      THEN CAST(?2 AS BIGINT) ELSE f.window_start END \
     RETURNING failures";

/// Removes counters whose window is over and that lock nothing any more (?1 now, ?2 window).
const PRUNE_FAILURES_SQL: &str = "DELETE FROM auth_failures \
     WHERE window_start <= CAST(?1 AS BIGINT) - CAST(?2 AS BIGINT) \
       AND (locked_until IS NULL OR locked_until <= CAST(?1 AS BIGINT))";

/// [`RECORD_FAILURE_SQL`] and [`PRUNE_FAILURES_SQL`] with PostgreSQL's `$n` placeholders.
pub(crate) fn pg_placeholders(sql: &str) -> String {
    sql.replace('?', "$")
}

/// What every connection to the file is opened with (the writer and the [`Readers`]).
fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

/// Extra connections to the same file for reads that run many statements (a visitor's
/// question): at most [`Readers::MAX`] open, kept between questions (each keeps its prepared
/// statements and page cache). WAL mode lets them read while the main connection writes; each
/// read transaction sees the last commit when it starts. An in-memory database has none (its
/// data lives in the one connection), nor has a file when all are in use: the caller then reads
/// through the main connection as before.
pub(crate) struct Readers {
    path: Option<PathBuf>,
    idle: Mutex<Vec<Connection>>,
    open: std::sync::atomic::AtomicUsize,
}

impl Readers {
    /// Read connections open at most: one a core is what SQLite can use, and a few more keep
    /// short questions from waiting on long ones.
    const MAX: usize = 4;

    /// An idle read connection, or a new one while fewer than [`Self::MAX`] are open.
    fn take(&self) -> Option<Connection> {
        use std::sync::atomic::Ordering;
        let path = self.path.as_ref()?;
        if let Some(c) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Some(c);
        }
        if self.open.fetch_add(1, Ordering::AcqRel) >= Self::MAX {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let opened = Connection::open(path)
            .map_err(StoreError::from)
            .and_then(|c| configure(&c).map(|()| c));
        match opened {
            Ok(c) => Some(c),
            Err(e) => {
                self.open.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!(error = %e, "cannot open a read connection; reading through the main one");
                None
            }
        }
    }

    /// Back to the idle list (a connection left inside a transaction is closed instead).
    fn give_back(&self, c: Connection) {
        if c.is_autocommit() {
            self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(c);
        } else {
            self.open.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let applied: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(applied.max(0) as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
        tracing::info!(migration = name, "applied database migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_keys_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.db");
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let row = s.insert_api_key("kiosk", "mak_abcd", &[1, 2, 3]).unwrap();
        assert!(matches!(
            s.insert_api_key("kiosk", "mak_x", &[9]),
            Err(StoreError::Conflict(_))
        ));
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.find_api_key(&[1, 2, 3]).unwrap().unwrap().id, row.id);
        assert!(s.find_api_key(&[4]).unwrap().is_none());
        assert!(s.revoke_api_key("kiosk").unwrap().revoked);
        assert!(s.find_api_key(&[1, 2, 3]).unwrap().unwrap().revoked);
        assert!(matches!(
            s.revoke_api_key("nope"),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn accounts() {
        let s = Store::open_in_memory().unwrap();
        s.insert_account("alice", "$argon2id$x").unwrap();
        assert!(s.insert_account("alice", "y").is_err());
        s.set_account_disabled("alice", true).unwrap();
        assert!(s.find_account("alice").unwrap().unwrap().disabled);
        assert!(s.set_account_disabled("bob", true).is_err());
        assert_eq!(s.list_accounts().unwrap().len(), 1);
    }
}
