-- Failed-REGISTER counters per peer address and per account (auth.rs), kept in the database like
-- the PostgreSQL engine's (migrations/postgres/0001_users.sql) so both engines behave alike: a
-- lockout outlives a restart. key: "address:<ip>" or "account:<name>"; times in Unix ms.
CREATE TABLE auth_failures (
    key          TEXT    PRIMARY KEY,
    window_start INTEGER NOT NULL,
    failures     INTEGER NOT NULL,
    locked_until INTEGER
);
CREATE INDEX auth_failures_by_window ON auth_failures(window_start);
