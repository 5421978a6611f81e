-- Accounts (ACCOUNT auth) and API keys (API_KEY auth).
-- Passwords are stored only as Argon2id PHC strings (salted, slow).
-- API keys are 256-bit random tokens stored only as SHA-256 digests; the key is shown once.
CREATE TABLE accounts (
    id            INTEGER PRIMARY KEY,
    account       TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    disabled      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    last_login_at INTEGER
);

CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    name         TEXT    NOT NULL UNIQUE,
    prefix       TEXT    NOT NULL,
    key_hash     BLOB    NOT NULL UNIQUE,
    revoked      INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);
