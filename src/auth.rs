//! Credentials: API key and password hashing, REGISTER authentication, failed-auth rate limits.
//!
//! - Passwords: Argon2id PHC strings (random salt, default cost), verified on the blocking pool.
//!   An unknown account is verified against a dummy hash so its timing matches a wrong password.
//! - API keys: `mak_` + 43 base64url characters (256 random bits). Only their SHA-256 digest is
//!   stored (docs/protocol.md allows a fast hash for long random tokens: no dictionary to try), and
//!   lookup is by digest, so nothing secret is compared byte by byte in SQL.
//! - Failures are counted per peer address and per account; past a limit that address or account
//!   is refused for a while without checking anything. The reply never says which part was wrong.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::config::AuthConfig;
use crate::protocol::Auth;
use crate::store::{Store, StoreError};

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

#[derive(Debug, Clone, Copy)]
struct FailState {
    window_start: Instant,
    failures: u32,
    locked_until: Option<Instant>,
}

/// What failures are counted against: the peer address, and for ACCOUNT auth the account name
/// too (so a distributed guesser cannot try one account's password from many addresses).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FailKey {
    Address(IpAddr),
    Account(String),
}

/// Checks REGISTER credentials against the store, with failure limits per address and account.
pub struct Authenticator {
    store: Store,
    cfg: AuthConfig,
    failures: Mutex<HashMap<FailKey, FailState>>,
    dummy_hash: String,
}

impl Authenticator {
    pub fn new(store: Store, cfg: AuthConfig) -> Self {
        Authenticator {
            store,
            cfg,
            failures: Mutex::new(HashMap::new()),
            dummy_hash: hash_password("dummy password for timing equalisation"),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn keys(peer: IpAddr, auth: &Auth) -> Vec<FailKey> {
        let mut k = vec![FailKey::Address(peer)];
        if let Auth::Account { account, .. } = auth {
            k.push(FailKey::Account(account.clone()));
        }
        k
    }

    fn locked(&self, keys: &[FailKey], now: Instant) -> bool {
        let map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        keys.iter().any(|k| {
            map.get(k)
                .and_then(|s| s.locked_until)
                .is_some_and(|until| now < until)
        })
    }

    fn record_failure(&self, keys: &[FailKey], now: Instant) {
        let window = Duration::from_secs(self.cfg.failure_window_seconds);
        let lockout = Duration::from_secs(self.cfg.lockout_seconds);
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 100_000 {
            map.retain(|_, s| {
                now.duration_since(s.window_start) < window
                    || s.locked_until.is_some_and(|u| now < u)
            });
        }
        for key in keys {
            let max = match key {
                FailKey::Address(_) => self.cfg.max_failures_per_address,
                FailKey::Account(_) => self.cfg.max_failures_per_account,
            };
            let st = map.entry(key.clone()).or_insert(FailState {
                window_start: now,
                failures: 0,
                locked_until: None,
            });
            if now.duration_since(st.window_start) >= window {
                st.window_start = now;
                st.failures = 0;
            }
            st.failures += 1;
            if max > 0 && st.failures >= max {
                st.locked_until = Some(now + lockout);
                tracing::warn!(key = ?key, failures = st.failures, "auth failures over the limit; locked out");
            }
        }
    }

    fn record_success(&self, keys: &[FailKey]) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            map.remove(k);
        }
    }

    /// Authenticates a REGISTER. Never says which part of the credentials was wrong.
    pub async fn authenticate(&self, peer: IpAddr, auth: &Auth) -> Result<Principal, AuthError> {
        let keys = Self::keys(peer, auth);
        if self.locked(&keys, Instant::now()) {
            return Err(AuthError::Locked);
        }
        let store = self.store.clone();
        let result = match auth.clone() {
            Auth::ApiKey { api_key } => {
                let hash = hash_api_key(&api_key);
                store
                    .call(move |s| {
                        let row = s.find_api_key(&hash)?;
                        match row {
                            Some(r) if !r.revoked => {
                                s.touch_api_key(r.id)?;
                                Ok(Some(Principal::ApiKey {
                                    id: r.id,
                                    name: r.name,
                                }))
                            }
                            _ => Ok(None),
                        }
                    })
                    .await
            }
            Auth::Account { account, password } => {
                let dummy = self.dummy_hash.clone();
                store
                    .call(move |s| {
                        let row = s.find_account(&account)?;
                        let (hash, usable) = match &row {
                            Some(r) => (r.password_hash.as_str(), !r.disabled),
                            None => (dummy.as_str(), false),
                        };
                        let ok = verify_password(&password, hash) && usable;
                        match row {
                            Some(r) if ok => {
                                s.touch_account(r.id)?;
                                Ok(Some(Principal::Account {
                                    id: r.id,
                                    name: r.account,
                                }))
                            }
                            _ => Ok(None),
                        }
                    })
                    .await
            }
        };
        match result {
            Ok(Some(p)) => {
                self.record_success(&keys);
                Ok(p)
            }
            Ok(None) => {
                self.record_failure(&keys, Instant::now());
                Err(AuthError::Invalid)
            }
            Err(e @ StoreError::Task(_)) | Err(e @ StoreError::Sqlite(_)) => {
                Err(AuthError::Internal(e.to_string()))
            }
            Err(e) => Err(AuthError::Internal(e.to_string())),
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
