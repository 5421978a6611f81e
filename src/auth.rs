//! Credentials: API key and password hashing, REGISTER authentication, failed-auth rate limits.
//!
//! - Passwords: Argon2id PHC strings (random salt, default cost), verified on the blocking pool.
//!   An unknown account is verified against a dummy hash so its timing matches a wrong password.
//! - API keys: `mak_` + 43 base64url characters (256 random bits). Only their SHA-256 digest is
//!   stored (docs/protocol.md allows a fast hash for long random tokens: no dictionary to try), and
//!   lookup is by digest, so nothing secret is compared byte by byte in SQL.
//! - Failures are counted per peer address and per account in the user store (shared by every
//!   node with PostgreSQL); past a limit that address or account is refused for a while without
//!   checking anything. The reply never says which part was wrong.
//! - Accounts and keys are read through [`crate::store::UserStore`], either engine.

use std::net::IpAddr;
use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::config::AuthConfig;
use crate::protocol::Auth;
use crate::store::users::{FailKey, FailurePolicy, Lockout};
use crate::store::{Store, StoreError, UserStore};

pub const API_KEY_PREFIX: &str = "mak_";

/// Who a session belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    ApiKey { id: i64, name: String },
    Account { id: i64, name: String },
}

impl Principal {
    pub fn label(&self) -> String {
        match self {
            Principal::ApiKey { name, .. } => format!("key:{name}"),
            Principal::Account { name, .. } => format!("account:{name}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid credentials")]
    Invalid,
    #[error("too many failed attempts from this address; try again later")]
    Locked,
    #[error("authentication unavailable: {0}")]
    Internal(String),
}

/// A freshly created API key. `key` is shown once and never stored.
pub struct NewApiKey {
    pub key: String,
    pub prefix: String,
    pub hash: [u8; 32],
}

pub fn generate_api_key() -> NewApiKey {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let key = format!(
        "{API_KEY_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let prefix = key[..API_KEY_PREFIX.len() + 6].to_string();
    let hash = hash_api_key(&key);
    NewApiKey { key, prefix, hash }
}

pub fn hash_api_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

pub fn hash_password(password: &str) -> String {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).expect("16 bytes is a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 with default params cannot fail")
        .to_string()
}

/// Constant-time verification (argon2 compares digests in constant time).
pub fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// What failures are counted against: the peer address, and for ACCOUNT auth the account name
/// too (so a distributed guesser cannot try one account's password from many addresses). The
/// counters live in the user store, so with PostgreSQL every node sees the same ones.
fn fail_keys(peer: IpAddr, auth: &Auth) -> Vec<FailKey> {
    let mut k = vec![format!("address:{peer}")];
    if let Auth::Account { account, .. } = auth {
        k.push(format!("account:{account}"));
    }
    k
}

/// Checks REGISTER credentials against the user store, with failure limits per address and
/// account.
pub struct Authenticator {
    store: Store,
    users: Arc<dyn UserStore>,
    cfg: AuthConfig,
    dummy_hash: String,
}

impl Authenticator {
    /// Authenticates against `store`'s user store ([`Store::users`]: PostgreSQL when the store
    /// was opened with a `[database] url`, else its SQLite file).
    pub fn new(store: Store, cfg: AuthConfig) -> Self {
        Authenticator {
            users: store.users(),
            store,
            cfg,
            dummy_hash: hash_password("dummy password for timing equalisation"),
        }
    }

    /// The node's SQLite store (collection, hub).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Accounts, API keys, lockouts and revocations (either engine).
    pub fn users(&self) -> &Arc<dyn UserStore> {
        &self.users
    }

    async fn record_failure(&self, keys: &[FailKey]) -> Result<(), StoreError> {
        let keys: Vec<(FailKey, u32)> = keys
            .iter()
            .map(|k| {
                let max = if k.starts_with("account:") {
                    self.cfg.max_failures_per_account
                } else {
                    self.cfg.max_failures_per_address
                };
                (k.clone(), max)
            })
            .collect();
        let policy = FailurePolicy {
            now_ms: crate::util::now_ms(),
            window_ms: self.cfg.failure_window_seconds.saturating_mul(1000) as i64,
            lockout_ms: self.cfg.lockout_seconds.saturating_mul(1000) as i64,
        };
        for key in self.users.record_failure(&keys, policy).await? {
            tracing::warn!(key = %key, "auth failures over the limit; locked out");
        }
        Ok(())
    }

    /// Authenticates a REGISTER. Never says which part of the credentials was wrong. When the
    /// user store cannot be reached the answer is [`AuthError::Internal`] (retryable), never a
    /// refusal.
    pub async fn authenticate(&self, peer: IpAddr, auth: &Auth) -> Result<Principal, AuthError> {
        let internal = |e: StoreError| AuthError::Internal(e.to_string());
        let keys = fail_keys(peer, auth);
        let lockout = self
            .users
            .lockout(&keys, crate::util::now_ms())
            .await
            .map_err(internal)?;
        if lockout == Lockout::Locked {
            return Err(AuthError::Locked);
        }
        let principal = match auth {
            Auth::ApiKey { api_key } => {
                let hash = hash_api_key(api_key);
                match self.users.find_api_key(&hash).await.map_err(internal)? {
                    Some(r) if !r.revoked => {
                        self.users.touch_api_key(r.id).await.map_err(internal)?;
                        Some(Principal::ApiKey {
                            id: r.id,
                            name: r.name,
                        })
                    }
                    _ => None,
                }
            }
            Auth::Account { account, password } => {
                let row = self.users.find_account(account).await.map_err(internal)?;
                let (hash, usable) = match &row {
                    Some(r) => (r.password_hash.clone(), !r.disabled),
                    None => (self.dummy_hash.clone(), false),
                };
                // Argon2 is slow on purpose: off the async workers.
                let password = password.clone();
                let verified =
                    tokio::task::spawn_blocking(move || verify_password(&password, &hash))
                        .await
                        .map_err(|e| AuthError::Internal(e.to_string()))?;
                match row {
                    Some(r) if verified && usable => {
                        self.users.touch_account(r.id).await.map_err(internal)?;
                        Some(Principal::Account {
                            id: r.id,
                            name: r.account,
                        })
                    }
                    _ => None,
                }
            }
        };
        match principal {
            Some(p) => {
                if lockout == Lockout::Counting {
                    self.users.clear_failures(&keys).await.map_err(internal)?;
                }
                Ok(p)
            }
            None => {
                self.record_failure(&keys).await.map_err(internal)?;
                Err(AuthError::Invalid)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_are_long_random_and_hash_stably() {
        let a = generate_api_key();
        let b = generate_api_key();
        assert_ne!(a.key, b.key);
        assert!(a.key.starts_with(API_KEY_PREFIX));
        assert_eq!(a.key.len(), API_KEY_PREFIX.len() + 43);
        assert_eq!(hash_api_key(&a.key), a.hash);
        assert!(a.key.starts_with(&a.prefix));
    }

    #[test]
    fn passwords_hash_with_salt_and_verify() {
        let h1 = hash_password("pw");
        let h2 = hash_password("pw");
        assert_ne!(h1, h2, "salted");
        assert!(h1.starts_with("$argon2id$"));
        assert!(verify_password("pw", &h1));
        assert!(!verify_password("pW", &h1));
        assert!(!verify_password("pw", "not a hash"));
    }

    #[tokio::test]
    async fn lockout_after_repeated_failures() {
        let store = Store::open_in_memory().unwrap();
        let k = generate_api_key();
        store.insert_api_key("k", &k.prefix, &k.hash).unwrap();
        let cfg = AuthConfig {
            max_failures_per_address: 3,
            failure_window_seconds: 60,
            lockout_seconds: 60,
            ..Default::default()
        };
        let a = Authenticator::new(store, cfg);
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let bad = Auth::ApiKey {
            api_key: "mak_wrong".into(),
        };
        let good = Auth::ApiKey {
            api_key: k.key.clone(),
        };
        assert!(a.authenticate(peer, &good).await.is_ok());
        for _ in 0..3 {
            assert!(matches!(
                a.authenticate(peer, &bad).await,
                Err(AuthError::Invalid)
            ));
        }
        assert!(matches!(
            a.authenticate(peer, &good).await,
            Err(AuthError::Locked)
        ));
        assert!(
            a.authenticate(other, &good).await.is_ok(),
            "other addresses unaffected"
        );
    }
}
