//! The user store: everything authentication and the admin CLI need, behind one narrow async
//! trait that both engines implement — SQLite ([`SqliteUsers`], the embedded default: one node
//! needs nothing else) and PostgreSQL (`PgUsers` in `postgres.rs`, `[database] url`: every
//! node of a cluster shares accounts, API keys, lockout counters and revocations).
//!
//! A revocation (key revoked, account disabled) is seen by every node through
//! [`UserStore::revoked_principals`], which each node polls every `revocation_check_seconds`;
//! [`UserStore::revocation_events`] wakes that poll at once when the engine can tell (PostgreSQL
//! `LISTEN`/`NOTIFY`, committed with the change; in-process changes on SQLite).

use async_trait::async_trait;
use tokio::sync::watch;

use super::{AccountRow, ApiKeyRow, Store, StoreError};

/// What failed REGISTERs are counted against, as stored: `"address:<ip>"` or `"account:<name>"`.
pub type FailKey = String;

/// The lockout state of a REGISTER's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lockout {
    /// No failures counted against any key.
    Clear,
    /// Failures counted, none locked (a success clears them).
    Counting,
    /// At least one key is locked out.
    Locked,
}

/// Failure-counting parameters of one [`UserStore::record_failure`] call.
#[derive(Debug, Clone, Copy)]
pub struct FailurePolicy {
    /// Unix ms now.
    pub now_ms: i64,
    /// Failures counted within this many ms of the window's first failure.
    pub window_ms: i64,
    /// Once a key reaches its maximum it is refused this long.
    pub lockout_ms: i64,
}

#[async_trait]
pub trait UserStore: Send + Sync {
    /// "sqlite" or "postgres" (logs, readiness).
    fn engine(&self) -> &'static str;
    /// A round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;

    // ---- API keys ----
    /// Stores a new key (only its digest); `hub_tier` pins the tier of hub connections.
    async fn insert_api_key(
        &self,
        name: &str,
        prefix: &str,
        key_hash: &[u8],
        hub_tier: Option<&str>,
    ) -> Result<ApiKeyRow, StoreError>;
    async fn find_api_key(&self, key_hash: &[u8]) -> Result<Option<ApiKeyRow>, StoreError>;
    async fn touch_api_key(&self, id: i64) -> Result<(), StoreError>;
    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRow>, StoreError>;
    /// Revokes the key with this name (or numeric id).
    async fn revoke_api_key(&self, name_or_id: &str) -> Result<ApiKeyRow, StoreError>;
    async fn api_key_hub_tier(&self, id: i64) -> Result<Option<String>, StoreError>;

    // ---- accounts ----
    async fn insert_account(
        &self,
        account: &str,
        password_hash: &str,
    ) -> Result<AccountRow, StoreError>;
    async fn find_account(&self, account: &str) -> Result<Option<AccountRow>, StoreError>;
    async fn list_accounts(&self) -> Result<Vec<AccountRow>, StoreError>;
    async fn set_account_disabled(&self, account: &str, disabled: bool) -> Result<(), StoreError>;
    async fn touch_account(&self, id: i64) -> Result<(), StoreError>;

    // ---- lockout counters ----
    /// Whether any of `keys` is locked out at `now_ms`, or has failures counted.
    async fn lockout(&self, keys: &[FailKey], now_ms: i64) -> Result<Lockout, StoreError>;
    /// Counts one failure against each key (with its maximum; 0 = never locked) and locks the
    /// keys that reach it. Returns the keys locked by this call.
    async fn record_failure(
        &self,
        keys: &[(FailKey, u32)],
        policy: FailurePolicy,
    ) -> Result<Vec<FailKey>, StoreError>;
    /// Forgets the counters of `keys` (after a success).
    async fn clear_failures(&self, keys: &[FailKey]) -> Result<(), StoreError>;

    // ---- revocations ----
    /// Ids of revoked API keys and of disabled accounts.
    async fn revoked_principals(&self) -> Result<(Vec<i64>, Vec<i64>), StoreError>;
    /// Changes whenever this engine learns of a revocation (a wake-up for the poll; the poll's
    /// query stays the truth).
    fn revocation_events(&self) -> watch::Receiver<u64>;
}

/// The SQLite engine: the [`Store`]'s synchronous methods, run on the blocking pool.
pub struct SqliteUsers {
    store: Store,
}

impl SqliteUsers {
    pub fn new(store: Store) -> Self {
        SqliteUsers { store }
    }
}

/// Runs one statement set on the blocking pool with owned arguments.
macro_rules! blocking {
    ($self:ident, |$s:ident| $body:expr) => {
        $self.store.call(move |$s| $body).await
    };
}

#[async_trait]
impl UserStore for SqliteUsers {
    fn engine(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        blocking!(self, |s| s.ping())
    }

    async fn insert_api_key(
        &self,
        name: &str,
        prefix: &str,
        key_hash: &[u8],
        hub_tier: Option<&str>,
    ) -> Result<ApiKeyRow, StoreError> {
        let (name, prefix, hash) = (name.to_string(), prefix.to_string(), key_hash.to_vec());
        let tier = hub_tier.map(str::to_string);
        blocking!(self, |s| {
            let row = s.insert_api_key(&name, &prefix, &hash)?;
            if let Some(t) = &tier {
                s.set_api_key_hub_tier(row.id, Some(t))?;
            }
            Ok(row)
        })
    }

    async fn find_api_key(&self, key_hash: &[u8]) -> Result<Option<ApiKeyRow>, StoreError> {
        let hash = key_hash.to_vec();
        blocking!(self, |s| s.find_api_key(&hash))
    }

    async fn touch_api_key(&self, id: i64) -> Result<(), StoreError> {
        blocking!(self, |s| s.touch_api_key(id))
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRow>, StoreError> {
        blocking!(self, |s| s.list_api_keys())
    }

    async fn revoke_api_key(&self, name_or_id: &str) -> Result<ApiKeyRow, StoreError> {
        let n = name_or_id.to_string();
        blocking!(self, |s| s.revoke_api_key(&n))
    }

    async fn api_key_hub_tier(&self, id: i64) -> Result<Option<String>, StoreError> {
        blocking!(self, |s| s.api_key_hub_tier(id))
    }

    async fn insert_account(
        &self,
        account: &str,
        password_hash: &str,
    ) -> Result<AccountRow, StoreError> {
        let (a, h) = (account.to_string(), password_hash.to_string());
        blocking!(self, |s| s.insert_account(&a, &h))
    }

    async fn find_account(&self, account: &str) -> Result<Option<AccountRow>, StoreError> {
        let a = account.to_string();
        blocking!(self, |s| s.find_account(&a))
    }

    async fn list_accounts(&self) -> Result<Vec<AccountRow>, StoreError> {
        blocking!(self, |s| s.list_accounts())
    }

    async fn set_account_disabled(&self, account: &str, disabled: bool) -> Result<(), StoreError> {
        let a = account.to_string();
        blocking!(self, |s| s.set_account_disabled(&a, disabled))
    }

    async fn touch_account(&self, id: i64) -> Result<(), StoreError> {
        blocking!(self, |s| s.touch_account(id))
    }

    async fn lockout(&self, keys: &[FailKey], now_ms: i64) -> Result<Lockout, StoreError> {
        let keys = keys.to_vec();
        blocking!(self, |s| s.auth_lockout(&keys, now_ms))
    }

    async fn record_failure(
        &self,
        keys: &[(FailKey, u32)],
        policy: FailurePolicy,
    ) -> Result<Vec<FailKey>, StoreError> {
        let keys = keys.to_vec();
        blocking!(self, |s| s.auth_record_failure(&keys, policy))
    }

    async fn clear_failures(&self, keys: &[FailKey]) -> Result<(), StoreError> {
        let keys = keys.to_vec();
        blocking!(self, |s| s.auth_clear_failures(&keys))
    }

    async fn revoked_principals(&self) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
        blocking!(self, |s| s.revoked_principals())
    }

    fn revocation_events(&self) -> watch::Receiver<u64> {
        self.store.revocations.subscribe()
    }
}
