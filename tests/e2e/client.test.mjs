// The web client module in Node against a scripted in-memory socket: the protocol rules the
// real server never exercises (out-of-order chunks, frames after the final one, AUTH_FAILED,
// backoff). The browser e2e (run.mjs) covers the client against the real server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MuseumAgentClient, bytesToBase64, pcm16ToBytes, base64ToPcm16 } from '../../static/js/museum-agent-client.js';

/** A WebSocket stand-in: records what the client sends; the test plays the server. */
class FakeSocket {
  static all = [];
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.all.push(this);
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.();
    });
  }
  send(data) { this.sent.push(typeof data === 'string' ? JSON.parse(data) : data); }
  close(code = 1000) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    queueMicrotask(() => this.onclose?.({ code }));
  }
  serve(msgType, payload, sessionId = 'sess_1') {
    this.onmessage({ data: JSON.stringify({ version: '1.0', msg_type: msgType, session_id: sessionId, payload, timestamp: Date.now() }) });
  }
  last(type) { return [...this.sent].reverse().find((m) => m.msg_type === type); }
}

const tick = () => new Promise((r) => setTimeout(r, 0));

async function registered(opts = {}) {
  FakeSocket.all = [];
  const c = new MuseumAgentClient({ url: 'ws://x/ws/agent/stream', auth: { type: 'API_KEY', api_key: 'k' }, WebSocket: FakeSocket, ...opts });
  const events = [];
  for (const t of ['text', 'voice', 'request_end', 'function_call', 'state', 'shutdown', 'session_warn', 'interrupting', 'error']) {
    c.addEventListener(t, (e) => events.push({ type: t, ...e.detail }));
  }
  c.connect();
  await tick();
  const ws = FakeSocket.all.at(-1);
  ws.serve('REGISTER_ACK', { status: 'SUCCESS', session_id: 'sess_1', session_timeout_seconds: 3600 }, '');
  return { c, ws, events };
}

test('REGISTER has the five envelope fields and the function list; later frames carry the session', async () => {
  const { c, ws } = await registered({ requireTts: true, functions: [{ name: 'show_exhibit', parameters: [{ name: 'exhibit_id', type: 'string' }], handler: () => 1 }] });
  const reg = ws.sent[0];
  assert.deepEqual(Object.keys(reg).sort(), ['msg_type', 'payload', 'session_id', 'timestamp', 'version']);
  assert.equal(reg.session_id, '');
  assert.deepEqual(reg.payload.function_calling, [{ name: 'show_exhibit', parameters: [{ name: 'exhibit_id', type: 'string' }] }]);
  assert.equal(reg.payload.require_tts, true);
  assert.equal(c.state, 'ready');
  c.sendText('hi');
  const req = ws.last('REQUEST');
  assert.equal(req.session_id, 'sess_1');
  assert.deepEqual({ ...req.payload, request_id: 'x' }, { request_id: 'x', data_type: 'TEXT', stream_flag: false, stream_seq: 0, content: { text: 'hi' } });
});

test('text and voice are assembled in seq order; the request ends when both streams sent -1', async () => {
  const { c, ws, events } = await registered({ requireTts: true });
  const { id, done } = c.sendText('q');
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 1, content: { text: 'B' } });
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 0, voice_stream_seq: 0, content: { text: 'A', voice: bytesToBase64(pcm16ToBytes([1, -2])) } });
  // Streamed: the chunks in order are delivered as soon as the gap is filled, not at the end.
  assert.deepEqual(events.filter((e) => e.type === 'text').map((e) => e.text), ['A', 'B']);
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: -1, content: { text: 'C' } });
  assert.equal(events.filter((e) => e.type === 'request_end').length, 0, 'ended before the voice stream closed');
  ws.serve('RESPONSE', { request_id: id, voice_stream_seq: -1, content: {} });
  const end = await done;
  assert.equal(end.text, 'ABC');
  assert.deepEqual(events.filter((e) => e.type === 'text').map((e) => [e.seq, e.text]), [[0, 'A'], [1, 'B'], [2, 'C']]);
  assert.deepEqual([...events.find((e) => e.type === 'voice').pcm], [1, -2]);
});

test('after INTERRUPT the audio is dropped, and nothing after the interrupted final frame is used', async () => {
  const { c, ws, events } = await registered({ requireTts: true });
  const { id, done } = c.sendText('q');
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 0, voice_stream_seq: 0, content: { text: 'A', voice: bytesToBase64(pcm16ToBytes([5])) } });
  c.interrupt(id, 'USER_NEW_INPUT');
  assert.deepEqual(ws.last('INTERRUPT').payload, { reason: 'USER_NEW_INPUT', interrupt_request_id: id });
  assert.deepEqual(events.find((e) => e.type === 'interrupting').requestIds, [id]);
  ws.serve('RESPONSE', { request_id: id, voice_stream_seq: 1, content: { voice: bytesToBase64(pcm16ToBytes([6])) } });
  ws.serve('INTERRUPT_ACK', { interrupted_request_ids: [id], status: 'SUCCESS', message: '' });
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: -1, voice_stream_seq: -1, interrupted: true, interrupt_reason: 'USER_NEW_INPUT', content: {} });
  ws.serve('RESPONSE', { request_id: id, voice_stream_seq: 2, content: { voice: bytesToBase64(pcm16ToBytes([7])) } });
  const end = await done;
  assert.equal(end.interrupted, true);
  assert.equal(end.interruptReason, 'USER_NEW_INPUT');
  assert.equal(events.filter((e) => e.type === 'voice').length, 1, 'voice after the INTERRUPT was played');
  assert.equal(c.stats.droppedVoiceChunks, 1);
  assert.equal(c.stats.lateFrames, 1);
  assert.equal(c.stats.lateVoiceFrames, 1);
});

test('an ERROR with a request_id ends that request; function calls reach their handler', async () => {
  const calls = [];
  const { c, ws, events } = await registered({ functions: [{ name: 'show_exhibit', parameters: [], handler: (p) => { calls.push(p); return 'ok'; } }] });
  const a = c.sendText('a');
  ws.serve('RESPONSE', { request_id: a.id, function_call: { name: 'show_exhibit', parameters: { exhibit_id: '1001' }, call_id: 'c1' } });
  ws.serve('RESPONSE', { request_id: a.id, text_stream_seq: -1, content: {} });
  await a.done;
  await tick();
  assert.deepEqual(calls, [{ exhibit_id: '1001' }]);
  assert.equal(events.find((e) => e.type === 'function_call').result, 'ok');
  const b = c.sendText('b');
  ws.serve('ERROR', { error_code: 'INTERNAL_ERROR', error_msg: 'upstream', error_detail: '', retryable: true, request_id: b.id });
  const end = await b.done;
  assert.equal(end.error.error_code, 'INTERNAL_ERROR');
  assert.deepEqual(c.inFlight, []);
});

test('heartbeats are answered; SESSION_WARN and SHUTDOWN are surfaced', async () => {
  const { c, ws, events } = await registered();
  ws.serve('HEARTBEAT', { remaining_seconds: 3000 });
  assert.deepEqual(ws.last('HEARTBEAT_REPLY').payload, { client_status: 'ONLINE' });
  ws.serve('SESSION_WARN', { warn_type: 'EXPIRE_SOON', remaining_seconds: 300, message: 'm' });
  ws.serve('SHUTDOWN', { reason: '会话超时' });
  assert.equal(events.find((e) => e.type === 'session_warn').remaining_seconds, 300);
  assert.equal(events.find((e) => e.type === 'shutdown').reason, '会话超时');
  c.close();
});

test('a lost connection ends requests in flight and reconnects with growing delays; AUTH_FAILED does not', async () => {
  const { c, ws } = await registered({ reconnect: { initialDelayMs: 1, maxDelayMs: 8, factor: 2, jitter: 0 } });
  const r = c.sendText('q');
  ws.close(1006);
  const end = await r.done;
  assert.equal(end.error.error_code, 'CONNECTION_LOST');
  assert.equal(c.state, 'reconnecting');
  assert.equal(c.nextReconnectMs, 1);
  // Refused three times in a row: the delay doubles up to the cap.
  const delays = [];
  for (let i = 0; i < 4; i++) {
    await new Promise((res) => {
      const on = (e) => {
        if (e.detail.state === 'registering') {
          c.removeEventListener('state', on);
          res();
        }
      };
      c.addEventListener('state', on);
    });
    FakeSocket.all.at(-1).close(1006);
    await tick();
    delays.push(c.nextReconnectMs);
  }
  assert.deepEqual(delays, [2, 4, 8, 8]);
  await new Promise((res) => {
    const on = (e) => {
      if (e.detail.state === 'registering') {
        c.removeEventListener('state', on);
        res();
      }
    };
    c.addEventListener('state', on);
  });
  const ws2 = FakeSocket.all.at(-1);
  ws2.serve('ERROR', { error_code: 'AUTH_FAILED', error_msg: 'invalid credentials', error_detail: '', retryable: true });
  ws2.close(1008);
  await tick();
  await tick();
  assert.equal(c.state, 'auth_failed');
  const sockets = FakeSocket.all.length;
  await new Promise((res) => setTimeout(res, 30));
  assert.equal(FakeSocket.all.length, sockets, 'reconnected after AUTH_FAILED');
  c.close();
});

test('resume: after a drop the session is resumed with last_seen, replayed chunks are shown once', async () => {
  FakeSocket.all = [];
  const c = new MuseumAgentClient({ url: 'ws://x', auth: { type: 'API_KEY', api_key: 'k' }, WebSocket: FakeSocket, requireTts: true, reconnect: { initialDelayMs: 1, maxDelayMs: 1, factor: 1, jitter: 0 } });
  const texts = [];
  c.addEventListener('text', (e) => texts.push(e.detail.text));
  const calls = [];
  c.functions.set('show_exhibit', { name: 'show_exhibit', handler: (p) => calls.push(p) });
  c.connect();
  await tick();
  let ws = FakeSocket.all.at(-1);
  ws.serve('REGISTER_ACK', { status: 'SUCCESS', session_id: 'sess_1', session_timeout_seconds: 60, resume_token: 'rt_1' }, '');
  const { id, done } = c.sendText('q');
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 0, voice_stream_seq: 0, content: { text: 'A', voice: bytesToBase64(pcm16ToBytes([1])) } });
  ws.serve('RESPONSE', { request_id: id, function_call: { name: 'show_exhibit', parameters: { exhibit_id: '1' } } });
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 1, content: { text: 'B' } });
  ws.close(1006);
  await tick();
  assert.equal(c.state, 'reconnecting');
  assert.deepEqual(c.inFlight, [id], 'the request waits for the resume');
  await new Promise((res) => { const on = (e) => { if (e.detail.state === 'registering') { c.removeEventListener('state', on); res(); } }; c.addEventListener('state', on); });
  await tick();
  ws = FakeSocket.all.at(-1);
  const reg = ws.last('REGISTER');
  assert.equal(reg.session_id, '');
  assert.deepEqual(reg.payload.resume, { session_id: 'sess_1', resume_token: 'rt_1', last_seen: { [id]: [1, 0, 1] } });
  ws.serve('REGISTER_ACK', { status: 'SUCCESS', session_id: 'sess_1', session_timeout_seconds: 60, resume_token: 'rt_2' });
  assert.equal(c.state, 'ready');
  // A server may replay a chunk the client had: it is dropped by its seq.
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 1, content: { text: 'B' } });
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: 2, content: { text: 'C' } });
  ws.serve('RESPONSE', { request_id: id, text_stream_seq: -1, voice_stream_seq: -1, content: {} });
  const end = await done;
  assert.equal(end.error, undefined);
  assert.equal(end.text, 'ABC');
  assert.deepEqual(texts, ['A', 'B', 'C']);
  assert.equal(c.stats.resumes, 1);
  assert.equal(c.stats.duplicateFrames, 1);
  assert.equal(c.resumeToken, 'rt_2');
  await tick();
  assert.equal(calls.length, 1);

  // The next drop finds the session gone: the request ends, a new session is registered.
  const r2 = c.sendText('again');
  ws.close(1006);
  await new Promise((res) => { const on = (e) => { if (e.detail.state === 'registering') { c.removeEventListener('state', on); res(); } }; c.addEventListener('state', on); });
  await tick();
  ws = FakeSocket.all.at(-1);
  assert.equal(ws.last('REGISTER').payload.resume.resume_token, 'rt_2');
  ws.serve('ERROR', { error_code: 'SESSION_INVALID', error_msg: 'gone', error_detail: '', retryable: false });
  const end2 = await r2.done;
  assert.equal(end2.error.error_code, 'CONNECTION_LOST');
  const plain = ws.last('REGISTER');
  assert.equal(plain.payload.resume, undefined);
  ws.serve('REGISTER_ACK', { status: 'SUCCESS', session_id: 'sess_2', session_timeout_seconds: 60, resume_token: 'rt_3' });
  assert.equal(c.sessionId, 'sess_2');
  c.close();
});

test('base64 PCM helpers are little-endian and round-trip', () => {
  const s = Int16Array.from([0, 1, -1, 32767, -32768, 258]);
  const b = pcm16ToBytes(s);
  assert.deepEqual([...b.slice(10)], [2, 1]);
  assert.deepEqual([...base64ToPcm16(bytesToBase64(b))], [...s]);
});
