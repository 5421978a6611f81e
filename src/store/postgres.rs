//! The PostgreSQL engine of [`UserStore`] (`[database] url = "postgres://…"`): accounts, API
//! keys, lockout counters and revocations shared by every node. tokio-postgres behind a
//! deadpool pool; nothing here blocks a runtime worker.
//!
//! - **Outages**: every operation runs under `[database] timeout_seconds` (pool wait, connect,
//!   statement); a refused connection, a broken one or a timeout is [`StoreError::Unavailable`],
//!   which authentication turns into a retryable error. Broken connections are dropped when they
//!   go back to the pool (deadpool's `is_closed` check), so the pool recovers by itself once the
//!   server is back; nothing is cached that could go stale.
//! - **Revocations**: revoking a key or disabling an account sends `NOTIFY` in the same
//!   transaction; each node keeps one `LISTEN` connection (reconnecting after an outage) that
//!   wakes its revocation watch at once. The poll every `revocation_check_seconds` stays, so a
//!   lost notification only delays a shutdown to the next poll.
//! - **Migrations**: `migrations/postgres/*.sql`, applied in order under an advisory lock (two
//!   nodes starting together do not race), tracked in `schema_migrations`.
//! - No TLS to PostgreSQL yet: `sslmode=require` is refused at start rather than silently sent
//!   in clear.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, NoTls, Row};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::users::{FailKey, FailurePolicy, Lockout, UserStore};
use super::{AccountRow, ApiKeyRow, PRUNE_FAILURES_SQL, RECORD_FAILURE_SQL, StoreError};
use crate::config::DatabaseConfig;

/// Migrations of this engine, in order (version = position + 1).
const MIGRATIONS: &[(&str, &str)] = &[(
    "0001_users",
    include_str!("../../migrations/postgres/0001_users.sql"),
)];

/// The `LISTEN`/`NOTIFY` channel of revocations.
pub const REVOCATION_CHANNEL: &str = "museum_agent_revocations";

/// Serialises migrations of concurrent nodes (`pg_advisory_xact_lock`); any fixed number.
const MIGRATION_LOCK: i64 = 0x6d75_7365_756d; // "museum"

const KEY_COLUMNS: &str = "id, name, prefix, revoked, created_at, last_used_at";
const ACCOUNT_COLUMNS: &str = "id, account, password_hash, disabled, created_at, last_login_at";

pub struct PgUsers {
    pool: Pool,
    pg: tokio_postgres::Config,
    timeout: Duration,
    events: Arc<watch::Sender<u64>>,
    listening: AtomicBool,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// An error with its causes ("error connecting to server: Connection refused"): the pool and the
/// client keep the cause in `source()`. Never contains the URL's password.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !text.contains(&t) {
            text = format!("{text}: {t}");
        }
        cause = c.source();
    }
    text
}

fn pg_error(e: tokio_postgres::Error) -> StoreError {
    // Only a unique violation is the caller's mistake; everything else (connection closed,
    // server shutting down, ...) is transient from here.
    match e.code() {
        Some(c) if *c == SqlState::UNIQUE_VIOLATION => StoreError::Conflict(e.to_string()),
        _ => StoreError::Unavailable(chain(&e)),
    }
}

fn key_row(r: &Row) -> ApiKeyRow {
    ApiKeyRow {
        id: r.get(0),
        name: r.get(1),
        prefix: r.get(2),
        revoked: r.get(3),
        created_at: r.get(4),
        last_used_at: r.get(5),
    }
}

fn account_row(r: &Row) -> AccountRow {
    AccountRow {
        id: r.get(0),
        account: r.get(1),
        password_hash: r.get(2),
        disabled: r.get(3),
        created_at: r.get(4),
        last_login_at: r.get(5),
    }
}

impl PgUsers {
    /// Connects, applies the migrations, and returns the engine. Fails (naming what is wrong,
    /// never printing the URL's password) when PostgreSQL cannot be reached at start.
    pub async fn connect(config: &DatabaseConfig) -> Result<PgUsers, StoreError> {
        let mut pg = tokio_postgres::Config::from_str(config.url.trim())
            .map_err(|e| StoreError::Config(format!("url: {e}")))?;
        if pg.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(StoreError::Config(
                "sslmode=require: TLS to PostgreSQL is not supported yet (use a private network \
                 or a local TLS tunnel, and sslmode=disable or prefer)"
                    .into(),
            ));
        }
        if !config.password_env.is_empty() {
            match std::env::var(&config.password_env) {
                Ok(p) => {
                    pg.password(p);
                }
                Err(_) => {
                    return Err(StoreError::Config(format!(
                        "password_env names {:?}, which is not set",
                        config.password_env
                    )));
                }
            }
        }
        let timeout = crate::config::secs(config.timeout_seconds.max(0.1));
        pg.connect_timeout(timeout)
            .keepalives_idle(Duration::from_secs(30))
            .application_name("museum-agent");
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let stop = CancellationToken::new();
        let users = PgUsers {
            pool,
            pg,
            timeout,
            events: Arc::new(watch::channel(0).0),
            listening: AtomicBool::new(false),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        };
        users.migrate().await?;
        Ok(users)
    }

    /// Runs `f` under the operation timeout.
    async fn timed<T>(
        &self,
        f: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(unavailable(format!("no answer within {:?}", self.timeout))),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(chain(&e)))
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        self.timed(async {
            let mut c = self.client().await?;
            let tx = c.transaction().await.map_err(pg_error)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(pg_error)?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (\
                   version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
            )
            .await
            .map_err(pg_error)?;
            let applied: Vec<i32> = tx
                .query("SELECT version FROM schema_migrations", &[])
                .await
                .map_err(pg_error)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for (i, (name, sql)) in MIGRATIONS.iter().enumerate() {
                let version = i as i32 + 1;
                if applied.contains(&version) {
                    continue;
                }
                tx.batch_execute(sql).await.map_err(pg_error)?;
                tx.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    &[&version, name, &crate::util::now_ms()],
                )
                .await
                .map_err(pg_error)?;
                tracing::info!(migration = name, "applied PostgreSQL migration");
            }
            tx.commit().await.map_err(pg_error)
        })
        .await
    }

    /// The applied migration versions (tests, diagnostics).
    pub async fn schema_version(&self) -> Result<i32, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let r = c
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                    &[],
                )
                .await
                .map_err(pg_error)?;
            Ok(r.get(0))
        })
        .await
    }

    /// One `LISTEN` connection for the life of this store: each notification (and each
    /// reconnection, since something may have been revoked meanwhile) bumps `events`.
    fn start_listener(&self) {
        if self.listening.swap(true, Ordering::SeqCst) {
            return;
        }
        let (pg, events, stop, timeout) = (
            self.pg.clone(),
            self.events.clone(),
            self.stop.clone(),
            self.timeout,
        );
        tokio::spawn(async move {
            let mut announced_down = false;
            loop {
                let connected = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = tokio::time::timeout(timeout, pg.connect(NoTls)) => r,
                };
                if let Ok(Ok((client, mut conn))) = connected {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
                    let driver = tokio::spawn(async move {
                        let mut messages =
                            futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                        while let Some(Ok(m)) = messages.next().await {
                            if let AsyncMessage::Notification(_) = m
                                && tx.send(()).is_err()
                            {
                                return;
                            }
                        }
                    });
                    let listen = tokio::time::timeout(
                        timeout,
                        client.batch_execute(&format!("LISTEN {REVOCATION_CHANNEL}")),
                    )
                    .await;
                    if let Ok(Ok(())) = listen {
                        if announced_down {
                            tracing::info!("revocation notifications: listening again");
                            announced_down = false;
                        }
                        events.send_modify(|n| *n += 1);
                        loop {
                            tokio::select! {
                                _ = stop.cancelled() => {
                                    driver.abort();
                                    return;
                                }
                                m = rx.recv() => match m {
                                    Some(()) => events.send_modify(|n| *n += 1),
                                    None => break,
                                },
                            }
                        }
                    }
                    driver.abort();
                }
                if !announced_down {
                    tracing::warn!(
                        "revocation notifications: no LISTEN connection to PostgreSQL; \
                         reconnecting (the poll still runs)"
                    );
                    announced_down = true;
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        });
    }
}

#[async_trait]
impl UserStore for PgUsers {
    fn engine(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.timed(async {
            let c = self.client().await?;
            c.simple_query("SELECT 1").await.map_err(pg_error)?;
            Ok(())
        })
        .await
    }

    async fn insert_api_key(
        &self,
        name: &str,
        prefix: &str,
        key_hash: &[u8],
        hub_tier: Option<&str>,
    ) -> Result<ApiKeyRow, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let sql = format!(
                "INSERT INTO api_keys (name, prefix, key_hash, created_at, hub_tier) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING {KEY_COLUMNS}"
            );
            match c
                .query_one(
                    &sql,
                    &[&name, &prefix, &key_hash, &crate::util::now_ms(), &hub_tier],
                )
                .await
                .map_err(pg_error)
            {
                Ok(r) => Ok(key_row(&r)),
                Err(StoreError::Conflict(_)) => Err(StoreError::Conflict(format!(
                    "an API key named {name:?} already exists"
                ))),
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn find_api_key(&self, key_hash: &[u8]) -> Result<Option<ApiKeyRow>, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let st = c
                .prepare_cached(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = $1"
                ))
                .await
                .map_err(pg_error)?;
            let r = c.query_opt(&st, &[&key_hash]).await.map_err(pg_error)?;
            Ok(r.as_ref().map(key_row))
        })
        .await
    }

    async fn touch_api_key(&self, id: i64) -> Result<(), StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let st = c
                .prepare_cached("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                .await
                .map_err(pg_error)?;
            c.execute(&st, &[&crate::util::now_ms(), &id])
                .await
                .map_err(pg_error)?;
            Ok(())
        })
        .await
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRow>, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let rows = c
                .query(
                    &format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id"),
                    &[],
                )
                .await
                .map_err(pg_error)?;
            Ok(rows.iter().map(key_row).collect())
        })
        .await
    }

    async fn revoke_api_key(&self, name_or_id: &str) -> Result<ApiKeyRow, StoreError> {
        self.timed(async {
            let mut c = self.client().await?;
            let tx = c.transaction().await.map_err(pg_error)?;
            let row = tx
                .query_opt(
                    &format!(
                        "UPDATE api_keys SET revoked = TRUE \
                         WHERE name = $1 OR id::text = $1 RETURNING {KEY_COLUMNS}"
                    ),
                    &[&name_or_id],
                )
                .await
                .map_err(pg_error)?
                .ok_or_else(|| StoreError::NotFound(format!("API key {name_or_id:?}")))?;
            let row = key_row(&row);
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[&REVOCATION_CHANNEL, &format!("key:{}", row.id)],
            )
            .await
            .map_err(pg_error)?;
            tx.commit().await.map_err(pg_error)?;
            Ok(row)
        })
        .await
    }

    async fn api_key_hub_tier(&self, id: i64) -> Result<Option<String>, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let r = c
                .query_opt("SELECT hub_tier FROM api_keys WHERE id = $1", &[&id])
                .await
                .map_err(pg_error)?;
            Ok(r.and_then(|r| r.get(0)))
        })
        .await
    }

    async fn insert_account(
        &self,
        account: &str,
        password_hash: &str,
    ) -> Result<AccountRow, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let sql = format!(
                "INSERT INTO accounts (account, password_hash, created_at) \
                 VALUES ($1, $2, $3) RETURNING {ACCOUNT_COLUMNS}"
            );
            match c
                .query_one(&sql, &[&account, &password_hash, &crate::util::now_ms()])
                .await
                .map_err(pg_error)
            {
                Ok(r) => Ok(account_row(&r)),
                Err(StoreError::Conflict(_)) => Err(StoreError::Conflict(format!(
                    "account {account:?} already exists"
                ))),
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn find_account(&self, account: &str) -> Result<Option<AccountRow>, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let st = c
                .prepare_cached(&format!(
                    "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE account = $1"
                ))
                .await
                .map_err(pg_error)?;
            let r = c.query_opt(&st, &[&account]).await.map_err(pg_error)?;
            Ok(r.as_ref().map(account_row))
        })
        .await
    }

    async fn list_accounts(&self) -> Result<Vec<AccountRow>, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let rows = c
                .query(
                    &format!("SELECT {ACCOUNT_COLUMNS} FROM accounts ORDER BY id"),
                    &[],
                )
                .await
                .map_err(pg_error)?;
            Ok(rows.iter().map(account_row).collect())
        })
        .await
    }

    async fn set_account_disabled(&self, account: &str, disabled: bool) -> Result<(), StoreError> {
        self.timed(async {
            let mut c = self.client().await?;
            let tx = c.transaction().await.map_err(pg_error)?;
            let r = tx
                .query_opt(
                    "UPDATE accounts SET disabled = $1 WHERE account = $2 RETURNING id",
                    &[&disabled, &account],
                )
                .await
                .map_err(pg_error)?
                .ok_or_else(|| StoreError::NotFound(format!("account {account:?}")))?;
            if disabled {
                let id: i64 = r.get(0);
                tx.execute(
                    "SELECT pg_notify($1, $2)",
                    &[&REVOCATION_CHANNEL, &format!("account:{id}")],
                )
                .await
                .map_err(pg_error)?;
            }
            tx.commit().await.map_err(pg_error)
        })
        .await
    }

    async fn touch_account(&self, id: i64) -> Result<(), StoreError> {
        self.timed(async {
            let c = self.client().await?;
            c.execute(
                "UPDATE accounts SET last_login_at = $1 WHERE id = $2",
                &[&crate::util::now_ms(), &id],
            )
            .await
            .map_err(pg_error)?;
            Ok(())
        })
        .await
    }

    async fn lockout(&self, keys: &[FailKey], now_ms: i64) -> Result<Lockout, StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let st = c
                .prepare_cached(
                    "SELECT COUNT(*), COALESCE(BOOL_OR(locked_until > $2), FALSE) \
                     FROM auth_failures WHERE key = ANY($1)",
                )
                .await
                .map_err(pg_error)?;
            let r = c
                .query_one(&st, &[&keys, &now_ms])
                .await
                .map_err(pg_error)?;
            let (rows, locked): (i64, bool) = (r.get(0), r.get(1));
            Ok(match (rows, locked) {
                (_, true) => Lockout::Locked,
                (0, _) => Lockout::Clear,
                _ => Lockout::Counting,
            })
        })
        .await
    }

    async fn record_failure(
        &self,
        keys: &[(FailKey, u32)],
        p: FailurePolicy,
    ) -> Result<Vec<FailKey>, StoreError> {
        self.timed(async {
            let mut c = self.client().await?;
            let tx = c.transaction().await.map_err(pg_error)?;
            let count = tx
                .prepare_cached(&super::pg_placeholders(RECORD_FAILURE_SQL))
                .await
                .map_err(pg_error)?;
            let mut locked = Vec::new();
            for (key, max) in keys {
                let r = tx
                    .query_one(&count, &[key, &p.now_ms, &p.window_ms])
                    .await
                    .map_err(pg_error)?;
                let failures: i32 = r.get(0);
                if *max > 0 && i64::from(failures) >= i64::from(*max) {
                    tx.execute(
                        "UPDATE auth_failures SET locked_until = $2 WHERE key = $1",
                        &[key, &(p.now_ms + p.lockout_ms)],
                    )
                    .await
                    .map_err(pg_error)?;
                    locked.push(key.clone());
                }
            }
            if rand::random::<u8>() == 0 {
                tx.execute(
                    &super::pg_placeholders(PRUNE_FAILURES_SQL),
                    &[&p.now_ms, &p.window_ms],
                )
                .await
                .map_err(pg_error)?;
            }
            tx.commit().await.map_err(pg_error)?;
            Ok(locked)
        })
        .await
    }

    async fn clear_failures(&self, keys: &[FailKey]) -> Result<(), StoreError> {
        self.timed(async {
            let c = self.client().await?;
            let st = c
                .prepare_cached("DELETE FROM auth_failures WHERE key = ANY($1)")
                .await
                .map_err(pg_error)?;
            c.execute(&st, &[&keys]).await.map_err(pg_error)?;
            Ok(())
        })
        .await
    }

    async fn revoked_principals(&self) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
        self.timed(async {
            let c = self.client().await?;
            // One cached statement, one round trip: every cross-node resume asks this.
            let st = c
                .prepare_cached(
                    "SELECT FALSE, id FROM api_keys WHERE revoked \
                     UNION ALL SELECT TRUE, id FROM accounts WHERE disabled",
                )
                .await
                .map_err(pg_error)?;
            let rows = c.query(&st, &[]).await.map_err(pg_error)?;
            let (mut keys, mut accounts) = (Vec::new(), Vec::new());
            for r in &rows {
                let account: bool = r.get(0);
                let id: i64 = r.get(1);
                if account {
                    accounts.push(id)
                } else {
                    keys.push(id)
                }
            }
            Ok((keys, accounts))
        })
        .await
    }

    fn revocation_events(&self) -> watch::Receiver<u64> {
        if tokio::runtime::Handle::try_current().is_ok() {
            self.start_listener();
        }
        self.events.subscribe()
    }
}
