-- The agent hub (README "Agent hub").
-- A stream per recipient address ("agent/{env}/{id}", "environment/{env}", "human/{id}"): the
-- next sequence number to assign and the highest sequence the client acknowledged. An address
-- with a row is "known": messages to it are kept while it is offline. `tier` is the ClawOS tier
-- it last connected with, so tier rules hold while it is offline.
CREATE TABLE hub_streams (
    address      TEXT    PRIMARY KEY,
    next_seq     INTEGER NOT NULL DEFAULT 1,
    acked_seq    INTEGER NOT NULL DEFAULT 0,
    tier         TEXT,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER
);

-- Messages not yet acknowledged by an offline recipient (the ClawOS blackboard inbox).
-- `seq` is set once the message was written to the recipient at least once (a resume re-sends
-- it with the same seq); `body` is the delivery envelope without its opening brace.
CREATE TABLE hub_inbox (
    id         INTEGER PRIMARY KEY,
    address    TEXT    NOT NULL,
    seq        INTEGER,
    priority   INTEGER NOT NULL,
    expires_at INTEGER,
    created_at INTEGER NOT NULL,
    -- The sender's society role, for the formatted rendering of `format=llm` recipients.
    role       TEXT    NOT NULL DEFAULT '',
    body       TEXT    NOT NULL
);
CREATE INDEX hub_inbox_by_address ON hub_inbox(address, id);

-- Agent society (seed 001): agents known to the society of an environment, with the task
-- brief they were spawned with, and every agent's contact registry in insertion order.
CREATE TABLE hub_agents (
    env        TEXT    NOT NULL,
    agent_id   TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    parent     TEXT,
    task_brief TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (env, agent_id)
);

CREATE TABLE hub_contacts (
    env        TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    contact_id TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    entry      TEXT    NOT NULL,
    PRIMARY KEY (env, owner, contact_id)
);

-- A key may pin the ClawOS tier of the hub connections made with it (`key create --hub-tier`),
-- so the tier rules do not rest on what a client declares.
ALTER TABLE api_keys ADD COLUMN hub_tier TEXT;
