// The agent hub through its JavaScript client (static/js/star-hub-client.js), in Node, against
// the real server binary: real WebSockets, a temporary SQLite file, nothing faked.
//
//   npm test --prefix tests/e2e            (after `cargo build`)
//   node --test tests/e2e/hub.test.mjs
//
// Environment: MUSEUM_AGENT_BIN (default target/debug/museum-agent). The server log goes to
// artifacts/e2e/hub-server.log. Every wait is a bounded poll; nothing sleeps for readiness.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, waitFor as waitForShared, stopProcess } from './util.mjs';

// Node 20 has WebSocket only behind a flag: run this file again with it (same stdio and
// environment, so the test runner reads the re-run's results as this file's).
if (typeof globalThis.WebSocket !== 'function') {
  const r = spawnSync(process.execPath, ['--experimental-websocket', '--no-warnings=ExperimentalWarning', ...process.execArgv, fileURLToPath(import.meta.url)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const { StarHubClient, HubError, to, inner } = await import('../../static/js/star-hub-client.js');

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.MUSEUM_AGENT_BIN ?? path.join(ROOT, 'target/debug/museum-agent');
const ARTIFACTS = path.join(ROOT, 'artifacts/e2e');
/** The hub's heartbeat period here: short, so heartbeats are seen and answered in every test. */
const HEARTBEAT_S = 0.5;

let tmp, server, serverLog, httpBase, wsBase, apiKey;
const clients = [];

/** Polls every 20 ms, 10 s at most by default (hub frames are fast). */
const waitFor = (what, cond, ms = 10000) => waitForShared(what, cond, ms, 20);

/** A library client recording what it sees (closed after the test). */
function hubClient(identity, opts = {}) {
  const c = new StarHubClient({ url: wsBase, apiKey, identity, reconnect: { initialDelayMs: 50, maxDelayMs: 1000 }, ...opts });
  const seen = { messages: [], errors: [], opens: [], closes: [], heartbeats: 0, states: [] };
  c.on('message', (m) => { seen.messages.push(m); });
  c.on('error', (e) => { seen.errors.push(e); });
  c.on('open', (o) => { seen.opens.push(o); });
  c.on('close', (x) => { seen.closes.push(x); });
  c.on('heartbeat', () => { seen.heartbeats++; });
  c.on('state', (s) => { seen.states.push(s.state); });
  c.seen = seen;
  clients.push(c);
  return c;
}

const agentId = (env, id) => ({ type: 'agent', env, id });
const environment = (env) => ({ type: 'environment', env });
const payloads = (c) => c.seen.messages.map((m) => m.payload);

/** Waits until `c` has received `n` messages; returns them. */
function messages(c, n, what = `${n} message(s)`) {
  return waitFor(`${c.identity.id ?? c.identity.env} to receive ${what}`, () => c.seen.messages.length >= n && c.seen.messages);
}

/** Waits until `c`'s environment has no agent `id` online (the hub took it out of routing). */
function offline(env, id) {
  return waitFor(`${id} to go offline`, async () => !(await env.call({ type: 'presence' })).online.includes(id));
}

function stopServer() {
  return stopProcess(server);
}

before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  assert.ok(fs.existsSync(BIN), `server binary ${BIN} missing: run \`cargo build\` first`);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'museum-agent-hub-e2e-'));
  const env = {
    ...process.env,
    RUST_LOG: process.env.RUST_LOG ?? 'info',
    MUSEUM_AGENT__DATABASE__PATH: path.join(tmp, 'hub.db'),
  };
  const k = spawnSync(BIN, ['key', 'create', '--name', 'hub-e2e'], { env, encoding: 'utf8' });
  assert.equal(k.status, 0, `key create failed: ${k.stderr}`);
  apiKey = k.stdout.match(/mak_[A-Za-z0-9_-]+/)?.[0];
  assert.ok(apiKey, `no key in: ${k.stdout}`);

  const port = await freePort();
  httpBase = `http://127.0.0.1:${port}`;
  wsBase = `ws://127.0.0.1:${port}`;
  Object.assign(env, {
    MUSEUM_AGENT__SERVER__BIND: `127.0.0.1:${port}`,
    MUSEUM_AGENT__HUB__ENABLED: 'true',
    MUSEUM_AGENT__HUB__HEARTBEAT_INTERVAL_SECONDS: String(HEARTBEAT_S),
    MUSEUM_AGENT__LLM__PROVIDER: 'offline',
    MUSEUM_AGENT__SRS__LOAD_DEMO: 'false',
  });
  serverLog = fs.createWriteStream(path.join(ARTIFACTS, 'hub-server.log'));
  server = spawn(BIN, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout.pipe(serverLog, { end: false });
  server.stderr.pipe(serverLog, { end: false });
  let exited = null;
  server.on('exit', (code) => { exited = code; });
  await waitFor('the server to be ready (/readyz)', async () => {
    if (exited !== null) throw new Error(`server exited with ${exited}; see artifacts/e2e/hub-server.log`);
    try {
      return (await fetch(`${httpBase}/readyz`)).ok;
    } catch {
      return false;
    }
  }, 20000);
});

after(async () => {
  for (const c of clients) c.close();
  const code = await stopServer();
  serverLog?.end();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  assert.equal(code, 0, 'the server did not exit cleanly');
});

test('environment and two agents: action → outcome with the typed helpers; events broadcast to the others', { timeout: 30000 }, async () => {
  const world = hubClient(environment('hall_a'));
  const { welcome, resume } = await world.connect();
  assert.equal(welcome.identity.type, 'environment');
  assert.equal(welcome.ack, 'auto');
  assert.equal(resume.complete, true);
  const g1 = hubClient(agentId('hall_a', 'guide_1'));
  const g2 = hubClient(agentId('hall_a', 'guide_2'));
  await Promise.all([g1.connect(), g2.connect()]);
  assert.deepEqual(g1.welcome.identity, { id: 'guide_1', type: 'agent', env: 'hall_a', tier: null, role: 'agent' });

  // Action to the environment, outcome back, the traceId carried through.
  const id = g1.send(to.environment('hall_a'), inner.action('move', 'a1', { to: 'room 2' }), { traceId: 'trace-move-1' });
  const [got] = await messages(world, 1);
  assert.equal(got.id, id);
  assert.deepEqual(got.sender, { id: 'guide_1', type: 'agent', env: 'hall_a' });
  assert.equal(got.seq, 1);
  assert.deepEqual(inner.parse(got.payload), { type: 'action', action: 'move', id: 'a1', parameters: { to: 'room 2' } });
  world.send(to.agent('guide_1'), inner.outcome('a1', 'success', 'moved', { room: 2 }), { traceId: got.traceId });
  const [back] = await messages(g1, 1);
  assert.equal(back.sender.type, 'environment');
  assert.equal(back.traceId, 'trace-move-1');
  const outcome = inner.parse(back.payload);
  assert.equal(outcome.type, 'outcome');
  assert.deepEqual(outcome.outcome, { status: 'success', message: 'moved', data: { room: 2 } });
  assert.equal(inner.parse({ type: 'outcome', id: 'x' }), null, 'an outcome without its body is not one');
  assert.deepEqual(inner.parse(inner.stream('telemetry', 7, { t: 25.5 })), { type: 'stream', stream_type: 'telemetry', sequence: 7, data: { t: 25.5 } });

  // The environment's event reaches both agents.
  world.send(to.broadcast('agent'), inner.event('lights', 'e1', { on: true }));
  for (const g of [g1, g2]) {
    const m = (await waitFor('the event e1', () => g.seen.messages.find((x) => x.payload.id === 'e1')));
    assert.equal(m.recipient.id, '*');
    assert.equal(inner.parse(m.payload).event, 'lights');
  }
  // An agent's event reaches the other agent, not itself: the next thing g1 sees after e1 is
  // the environment's e3, sent after g2 had e2 (so e2 would have been queued for g1 before it).
  g1.send(to.broadcast('agent'), inner.event('hello', 'e2'));
  await waitFor('g2 to receive e2', () => g2.seen.messages.some((x) => x.payload.id === 'e2'));
  world.send(to.broadcast('agent'), inner.event('tick', 'e3'));
  for (const g of [g1, g2]) await waitFor('e3', () => g.seen.messages.some((x) => x.payload.id === 'e3'));
  assert.deepEqual(payloads(g1).map((p) => p.id), ['a1', 'e1', 'e3']);
  assert.deepEqual(payloads(g2).map((p) => p.id), ['e1', 'e2', 'e3']);
  assert.deepEqual(g1.seen.messages.map((m) => m.seq), [1, 2, 3]);
  assert.deepEqual(payloads(world).map((p) => p.id), ['a1'], 'the environment got no agent broadcast');

  // The hub's periodic heartbeats are answered: while the three clients are idle, the frames
  // the hub receives are their answers.
  const received = async () => Number((await (await fetch(`${httpBase}/metrics`)).text()).match(/^hub_messages_received_total (\d+)$/m)?.[1]);
  const [r0, h0] = [await received(), g1.seen.heartbeats];
  await waitFor('two periodic heartbeats', () => g1.seen.heartbeats >= h0 + 2 && world.seen.heartbeats >= 2);
  const r1 = await waitFor('the answers to reach the hub', async () => { const r = await received(); return r - r0 >= 3 && r; }, 3000);
  assert.ok(r1 - r0 >= 3, `the hub received ${r1 - r0} frame(s)`);
  // …and the connections are still the first ones.
  for (const c of [world, g1, g2]) {
    assert.deepEqual([c.stats.opens, c.seen.errors.length, c.stats.duplicates], [1, 0, 0]);
  }
});

test('manual ack: stored messages arrive in order, a dropped socket resumes without the acked ones', { timeout: 30000 }, async () => {
  const world = hubClient(environment('hall_b'));
  await world.connect();
  const robot = hubClient(agentId('hall_b', 'robot_1'), { ack: 'manual', autoAck: false });
  const first = await robot.connect();
  assert.equal(first.welcome.ack, 'manual');
  robot.close();
  await offline(world, 'robot_1');

  for (const n of [1, 2, 3]) world.send(to.agent('robot_1'), { n });
  await world.call({ type: 'presence' }); // a round trip: the three were handled
  assert.deepEqual(world.seen.errors, []);

  // The same client object reconnects, resuming after what it acknowledged (nothing yet).
  const { resume } = await robot.connect();
  assert.equal(resume.complete, true, JSON.stringify(resume));
  assert.equal(resume.pending, 3);
  await messages(robot, 3);
  assert.deepEqual(robot.seen.messages.map((m) => [m.seq, m.payload.n]), [[1, 1], [2, 2], [3, 3]]);

  // Ack the first two, then lose the socket (not robot.close(): the library reconnects by itself).
  robot.ack(2);
  robot.socket.close();
  await waitFor('the automatic reconnect', () => robot.seen.opens.length === 3 && robot.state === 'open');
  assert.equal(robot.seen.opens[2].reconnected, true);
  const again = robot.seen.opens[2].resume;
  assert.deepEqual([again.complete, again.last_seq, again.resent, again.missing], [true, 2, 1, 0], JSON.stringify(again));
  await messages(robot, 4);
  assert.deepEqual(robot.seen.messages.slice(3).map((m) => [m.seq, m.payload.n]), [[3, 3]], 'only the unacked message came again');

  // Ack it; new messages continue the numbering. An ack made while disconnected is not lost:
  // the next connection resumes after it (the hub itself last heard of 3).
  robot.ack(3);
  world.send(to.agent('robot_1'), { n: 4 });
  await messages(robot, 5);
  assert.equal(robot.seen.messages[4].seq, 4);
  robot.close();
  robot.ack(4);
  assert.equal(robot.resumePoint, 4);
  await offline(world, 'robot_1');
  await robot.connect();
  const third = robot.seen.opens[3].resume;
  assert.deepEqual([third.complete, third.last_seq, third.resent, third.pending], [true, 4, 0, 0], JSON.stringify(third));
  const probe = await robot.call({ type: 'ack', seq: 0, reply: true });
  assert.equal(probe.acked, 4, JSON.stringify(probe));
  assert.equal(robot.seen.messages.length, 5, 'nothing was delivered twice');
  assert.equal(robot.stats.duplicates, 0, 'the hub sent nothing already acknowledged');

  // autoAck: the ack goes out once the (async) handler has finished, not before.
  robot.autoAck = true;
  let release;
  const gate = new Promise((r) => { release = r; });
  const off = robot.on('message', (m) => (m.payload.n === 5 ? gate : undefined));
  world.send(to.agent('robot_1'), { n: 5 });
  await messages(robot, 6);
  assert.equal((await robot.call({ type: 'ack', seq: 0, reply: true })).acked, 4, 'acked before the handler finished');
  release();
  await waitFor('the automatic ack', () => robot.ackedSeq === 5);
  assert.equal((await robot.call({ type: 'ack', seq: 0, reply: true })).acked, 5);
  off();
  assert.deepEqual(robot.seen.errors, []);
});

test('hub services: spawn_agent returns the new agent, an invalid task brief is refused', { timeout: 30000 }, async () => {
  const brief = {
    objective: 'Guide visitors through the bronze gallery',
    constraints: ['speak Mandarin and English', 'stay in hall C'],
    inputs: 'visitor questions',
    outputs: 'spoken answers and exhibit cards',
    completion_criteria: 'the tour ends at the exit',
  };
  const curator = hubClient(agentId('hall_c', 'curator'), { role: '策展人' });
  await curator.connect();
  const r = await curator.call({ type: 'spawn_agent', roleId: 'guide', agentId: 'guide_kid', taskBrief: brief });
  assert.deepEqual(r, { type: 'spawn_agent_result', agentId: 'guide_kid', roleId: 'guide', endpoint: '/env/hall_c/agent/guide_kid' });

  const { inputs, ...incomplete } = brief;
  const err = await curator.call({ type: 'spawn_agent', roleId: 'guide', taskBrief: incomplete }).then(
    (v) => assert.fail(`accepted: ${JSON.stringify(v)}`),
    (e) => e,
  );
  assert.ok(err instanceof HubError, String(err));
  assert.equal(err.code, 'VALIDATION_ERROR');
  assert.equal(err.details.error, 'invalid_task_brief');
  assert.deepEqual(err.details.missing_fields, ['inputs']);
  assert.deepEqual(curator.seen.errors, [], 'an error answering a call goes to the call only');

  // The spawned agent connects: its task brief is in the welcome, and in get_context.
  const kid = hubClient(agentId('hall_c', 'guide_kid'), { role: 'guide' });
  const { welcome } = await kid.connect();
  assert.deepEqual(welcome.context.taskBrief, brief);
  const ctx = await kid.call({ type: 'get_context' });
  assert.equal(ctx.context.taskBrief.objective, brief.objective);
  const contacts = await kid.call({ type: 'list_contacts' });
  assert.deepEqual(contacts.contacts.map((c) => [c.id, c.source]), [['curator', 'parent']]);

  // Environments cannot use society services.
  const world = hubClient(environment('hall_c'));
  await world.connect();
  await assert.rejects(world.call({ type: 'list_contacts' }), (e) => e instanceof HubError && e.code === 'PERMISSION_DENIED');
});

test('error paths: a forged sender is refused to the error handler and the connection goes on', { timeout: 30000 }, async () => {
  const world = hubClient(environment('hall_d'));
  const g1 = hubClient(agentId('hall_d', 'guide_1'));
  const g2 = hubClient(agentId('hall_d', 'guide_2'));
  await Promise.all([world.connect(), g1.connect(), g2.connect()]);

  g1.sendRaw(JSON.stringify({
    type: 'message', id: 'forged-1', sender: { id: 'guide_2', type: 'agent' },
    recipient: { id: 'hall_d', type: 'environment' }, payload: { text: 'not me' },
  }));
  const e = await waitFor('the PERMISSION_DENIED error', () => g1.seen.errors[0]);
  assert.ok(e instanceof HubError);
  assert.equal(e.code, 'PERMISSION_DENIED');
  assert.equal(e.clawosCode, 'E001');
  assert.equal(e.recoverable, false);
  assert.equal(e.details.original_message_id, 'forged-1');
  assert.ok(e.details.suggested_action);
  // An unknown agent: CONNECTION_ERROR with the society's error object.
  g1.send(to.agent('nobody_here'), {});
  const u = await waitFor('the agent_not_found error', () => g1.seen.errors[1]);
  assert.deepEqual([u.code, u.details.error, u.details.agentId], ['CONNECTION_ERROR', 'agent_not_found', 'nobody_here']);

  // Still the same connection, and it still works.
  g1.send(to.environment('hall_d'), { text: 'me' });
  const [m] = await messages(world, 1);
  assert.deepEqual([m.sender.id, m.payload.text], ['guide_1', 'me']);
  assert.equal(g1.state, 'open');
  assert.equal(g1.stats.opens, 1);
  assert.equal(world.seen.messages.length, 1, 'the forged message was not delivered');

  // A second client with the same identity takes over; the one told it was replaced stops
  // instead of taking the identity back (two kiosks with one id must not take turns for ever).
  // Which one ends up connected is not asserted: the hub sometimes closes the old connection
  // without its "replaced" error (a race in its writer), and then the old one reconnects and
  // replaces the new one in turn, which does get the error.
  const twin = hubClient(agentId('hall_d', 'guide_2'));
  await twin.connect();
  const [live, stopped] = await waitFor('one guide_2 connected and the other replaced', () => {
    const on = [g2, twin].find((c) => c.state === 'open');
    const off = [g2, twin].find((c) => c.state === 'replaced' && c.seen.closes.length > 0);
    return on && off && [on, off];
  });
  assert.match(stopped.seen.errors.at(-1)?.message ?? '', /replaced/);
  assert.equal(stopped.seen.closes.at(-1).reconnectInMs, null, 'the replaced client would reconnect');
  assert.equal(stopped.socket, null);
  const before = live.seen.messages.length;
  g1.send(to.agent('guide_2'), { n: 1 });
  await messages(live, before + 1);
  assert.equal(live.state, 'open');
  assert.equal(stopped.state, 'replaced', 'the replaced client came back');

  // A wrong key: refused before the upgrade; without reconnect, connect() rejects.
  const bad = new StarHubClient({ url: wsBase, apiKey: 'mak_wrong', identity: agentId('hall_d', 'guide_9'), reconnect: false });
  await assert.rejects(bad.connect(), /closed/);
  assert.equal(bad.state, 'closed');
});
