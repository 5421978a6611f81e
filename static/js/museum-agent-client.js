// museum-agent client: the museum agent WebSocket protocol (seeds/004 + PROTOCOL-NOTES) for any
// JavaScript app. Plain ES module, no DOM and no build step: it needs only `WebSocket`,
// `EventTarget`, `btoa`/`atob` and `crypto.getRandomValues` (browsers; Node 22+, or Node 20 with
// `--experimental-websocket` or a `WebSocket` passed in the options).
//
//   import { MuseumAgentClient } from './museum-agent-client.js';
//   const client = new MuseumAgentClient({
//     url: 'wss://museum.example/ws/agent/stream',
//     auth: { type: 'API_KEY', api_key: 'mak_...' },
//     platform: 'WEB', requireTts: true,
//     functions: [{ name: 'show_exhibit', description: '...', parameters: [...],
//                   handler: (params, call) => { ... } }],
//   });
//   client.addEventListener('text', (e) => ...);   // e.detail = {requestId, seq, text}
//   client.connect();
//   const req = client.sendText('这件青铜鼎是什么年代的？');
//   const result = await req.done;                  // {text, interrupted, error, ...}
//
// Events (all CustomEvent, data in `event.detail`):
//   state          {state, previous}   connecting | registering | ready | reconnecting | closed | auth_failed
//   registered     REGISTER_ACK payload (session_id, session_timeout_seconds, ...; `resumed` true
//                  when the session was resumed after a dropped connection)
//   request_start  {requestId, kind}   a request was sent ('text' | 'voice' | 'update' | 'function_result')
//   text           {requestId, seq, text}             text chunks, in text_stream_seq order
//   voice          {requestId, seq, pcm: Int16Array}  16 kHz mono chunks, in voice_stream_seq order
//   transcript     {requestId, text}   what the server's speech recognition heard (extension)
//   function_call  {requestId, name, parameters, callId, result?, error?}  after its handler ran
//   request_end    {requestId, text, interrupted, interruptReason, error, notice, voiceChunks}
//   interrupting   {requestIds, reason}   sent INTERRUPT: stop playing these at once
//   interrupt_ack  INTERRUPT_ACK payload
//   heartbeat      {remaining_seconds}   (answered with HEARTBEAT_REPLY automatically)
//   session_warn   SESSION_WARN payload
//   shutdown       {reason, fromServer}
//   error          ERROR payload (also for errors tied to a request, before request_end)
//   frame          {direction: 'in'|'out', message}  every JSON frame (debugging)
//
// Session resume (extension, docs/protocol.md "Session resume"): when the connection drops, the
// client reconnects with backoff and sends REGISTER with `resume` (the last REGISTER_ACK's
// `resume_token` and, per request still streaming, the last text/voice seq and the count of
// unsequenced frames it received). The server answers with the same session and replays what
// was missed; requests in flight carry on as if nothing happened (chunks already seen are
// dropped by seq, so each is shown once). When the session cannot be resumed (expired, refused)
// the requests in flight end with CONNECTION_LOST and a new session is registered.

export const PROTOCOL_VERSION = '1.0';
export const PCM_SAMPLE_RATE = 16000;

/** Largest binary frame sent (server default limit is 64 KiB). */
const MAX_BINARY_FRAME = 32000;
/** Ids of finished requests remembered, so late frames for them are ignored (bounded). */
const FINISHED_MEMORY = 256;

const DEFAULT_RECONNECT = { initialDelayMs: 500, maxDelayMs: 30000, factor: 2, jitter: 0.3 };

function randomId(prefix) {
  const b = new Uint8Array(12);
  globalThis.crypto.getRandomValues(b);
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** Base64 of bytes (chunked, so large buffers do not overflow the call stack). */
export function bytesToBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** 16-bit little-endian PCM from base64 (independent of the platform's byte order). */
export function base64ToPcm16(b64) {
  const bin = atob(b64);
  const n = bin.length >> 1;
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const v = bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8);
    out[i] = v >= 0x8000 ? v - 0x10000 : v;
  }
  return out;
}

/** Little-endian bytes of 16-bit PCM samples. */
export function pcm16ToBytes(samples) {
  const out = new Uint8Array(samples.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < samples.length; i++) dv.setInt16(2 * i, samples[i], true);
  return out;
}

/** Function definitions as the protocol carries them (the handler stays local). */
function wireFunctions(defs) {
  return defs.map(({ name, description, parameters }) => {
    const f = { name };
    if (description !== undefined) f.description = description;
    f.parameters = parameters ?? [];
    return f;
  });
}

/** The state of one request's reply while it streams. */
class PendingRequest {
  constructor(id, kind, expectVoice) {
    this.id = id;
    this.kind = kind;
    this.expectVoice = expectVoice;
    this.text = '';
    this.textNext = 0;
    this.textBuf = new Map();
    this.textEnded = false;
    this.voiceNext = 0;
    this.voiceBuf = new Map();
    this.voiceEnded = false;
    this.voiceSeen = false;
    this.voiceChunks = 0;
    /** Highest text / voice seq received (-1: none) and frames with neither seq, for resume. */
    this.textTop = -1;
    this.voiceTop = -1;
    this.unsequenced = 0;
    /** INTERRUPT sent for it: its audio is dropped from now on. */
    this.cancelled = false;
    this.functionCalls = [];
    this.notice = undefined;
    this.done = new Promise((resolve) => { this.resolve = resolve; });
  }
}

export class MuseumAgentClient extends EventTarget {
  /**
   * @param {object} o
   * @param {string} o.url             ws(s)://host/ws/agent/stream
   * @param {object} o.auth            {type:'API_KEY', api_key} or {type:'ACCOUNT', account, password}
   * @param {string} [o.platform]      WEB | APP | MINI_PROGRAM | TV (default WEB)
   * @param {boolean} [o.requireTts]   ask for spoken replies (default false)
   * @param {boolean} [o.enableSrs]    retrieval over the collection (server default when absent)
   * @param {Array}  [o.functions]     [{name, description, parameters, handler?, reportResult?}]
   * @param {object|false} [o.reconnect] {initialDelayMs, maxDelayMs, factor, jitter}, or false
   * @param {Function} [o.WebSocket]   WebSocket constructor (default globalThis.WebSocket)
   */
  constructor(o) {
    super();
    if (!o || !o.url || !o.auth) throw new TypeError('MuseumAgentClient needs {url, auth}');
    this.url = o.url;
    this.auth = o.auth;
    this.platform = o.platform ?? 'WEB';
    this.requireTts = !!o.requireTts;
    this.enableSrs = o.enableSrs;
    this.functions = new Map((o.functions ?? []).map((f) => [f.name, f]));
    this.reconnect = o.reconnect === false ? null : { ...DEFAULT_RECONNECT, ...(o.reconnect ?? {}) };
    this.WebSocketImpl = o.WebSocket ?? globalThis.WebSocket;
    this.state = 'closed';
    this.sessionId = '';
    this.sessionTimeoutSeconds = undefined;
    /** The session that may be resumed after a drop, and its secret (extension). */
    this.resumeToken = null;
    this.resuming = false;
    this.ws = null;
    this.requests = new Map();
    this.finished = [];
    this.finishedSet = new Set();
    this.upload = null;
    this.attempt = 0;
    this.reconnectTimer = null;
    this.wantOpen = false;
    this.waiters = [];
    this.stats = {
      connects: 0, registrations: 0, heartbeats: 0, heartbeatReplies: 0,
      framesIn: 0, framesOut: 0, binaryOut: 0, binaryBytesOut: 0,
      // Frames that arrived for a request after its final frame (ignored; should stay 0).
      lateFrames: 0, lateVoiceFrames: 0,
      // Sessions resumed after a drop; frames received twice (dropped by seq, shown once).
      resumes: 0, duplicateFrames: 0,
      // Voice chunks dropped because the request was being interrupted.
      droppedVoiceChunks: 0,
    };
  }

  // ---- connection ------------------------------------------------------------------------

  /** Opens the connection (and keeps it open, reconnecting with backoff, until close()). */
  connect() {
    this.wantOpen = true;
    if (this.ws) return;
    this.#open();
  }

  /** Ends the session (SHUTDOWN) and stops reconnecting. */
  close(reason = 'client closed') {
    this.wantOpen = false;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    if (this.ws && this.state === 'ready') this.#send('SHUTDOWN', { reason });
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      try { ws.close(1000, 'bye'); } catch { /* already closed */ }
    }
    this.#forgetSession();
    this.#lost('closed');
    this.#setState('closed');
  }

  /** Resolves when the session is registered (or rejects after timeoutMs). */
  ready(timeoutMs = 15000) {
    if (this.state === 'ready') return Promise.resolve(this.sessionId);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('not registered in time')), timeoutMs);
      const on = () => {
        if (this.state === 'ready') {
          clearTimeout(t);
          this.removeEventListener('state', on);
          resolve(this.sessionId);
        }
      };
      this.addEventListener('state', on);
    });
  }

  #open() {
    this.#setState(this.attempt === 0 ? 'connecting' : 'reconnecting');
    let ws;
    try {
      ws = new this.WebSocketImpl(this.url);
    } catch (e) {
      this.#emit('error', { error_code: 'CONNECTION_FAILED', error_msg: String(e), retryable: true });
      this.#scheduleReconnect();
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.stats.connects++;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      this.#setState('registering');
      this.#register();
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      if (typeof ev.data !== 'string') return; // the server sends no binary frames
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        this.#emit('error', { error_code: 'CLIENT_DECODE', error_msg: 'server sent a non-JSON frame' });
        return;
      }
      this.stats.framesIn++;
      this.#emit('frame', { direction: 'in', message: msg });
      this.#dispatch(msg);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (ev.code === 4001) {
        // Another connection resumed this session: it is not ours any more.
        this.wantOpen = false;
        this.#forgetSession();
      }
      this.#lost(`connection closed (${ev.code})`);
      if (this.state === 'auth_failed' || !this.wantOpen) {
        if (this.state !== 'auth_failed') this.#setState('closed');
        return;
      }
      this.#scheduleReconnect();
    };
    ws.onerror = () => { /* onclose follows with the details */ };
  }

  #scheduleReconnect() {
    if (!this.wantOpen || !this.reconnect) {
      this.#setState('closed');
      return;
    }
    const r = this.reconnect;
    const base = Math.min(r.maxDelayMs, r.initialDelayMs * r.factor ** this.attempt);
    const delay = Math.round(base * (1 - r.jitter + 2 * r.jitter * Math.random()));
    this.attempt++;
    this.#setState('reconnecting');
    this.nextReconnectMs = delay;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.wantOpen && !this.ws) this.#open();
    }, delay);
  }

  /** REGISTER: a new session, or (extension) the resume of the one that dropped. */
  #register() {
    const payload = {
      auth: this.auth,
      platform: this.platform,
      require_tts: this.requireTts,
      function_calling: wireFunctions([...this.functions.values()]),
    };
    if (this.enableSrs !== undefined) payload.enable_srs = this.enableSrs;
    this.resuming = !!(this.sessionId && this.resumeToken);
    if (this.resuming) {
      const lastSeen = {};
      for (const req of this.requests.values()) lastSeen[req.id] = [req.textTop, req.voiceTop, req.unsequenced];
      payload.resume = { session_id: this.sessionId, resume_token: this.resumeToken, last_seen: lastSeen };
    }
    this.#send('REGISTER', payload, '');
  }

  /** The session cannot be resumed any more: what was in flight ends. */
  #forgetSession(why = 'session ended') {
    this.sessionId = '';
    this.resumeToken = null;
    for (const req of [...this.requests.values()]) {
      this.#finish(req, { error: { error_code: 'CONNECTION_LOST', error_msg: why, retryable: true } });
    }
  }

  /**
   * The connection is gone. With a resumable session the requests in flight wait for the resume
   * (an open voice upload cannot go on: the server ends it); otherwise they end with an error.
   */
  #lost(why) {
    if (this.upload) this.upload.open = false;
    this.upload = null;
    const resumable = this.sessionId && this.resumeToken && this.wantOpen && this.reconnect;
    if (!resumable) this.#forgetSession(why);
    for (const w of this.waiters.splice(0)) w.reject(new Error(why));
  }

  #setState(state) {
    if (state === this.state) return;
    const previous = this.state;
    this.state = state;
    this.#emit('state', { state, previous });
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  #send(msgType, payload, sessionId = this.sessionId) {
    const ws = this.ws;
    if (!ws || ws.readyState !== 1) throw new Error(`not connected (state ${this.state})`);
    const message = {
      version: PROTOCOL_VERSION,
      msg_type: msgType,
      session_id: sessionId,
      payload,
      timestamp: Date.now(),
    };
    ws.send(JSON.stringify(message));
    this.stats.framesOut++;
    this.#emit('frame', { direction: 'out', message });
  }

  #requireReady() {
    if (this.state !== 'ready') throw new Error(`not ready (state ${this.state})`);
  }

  // ---- requests ---------------------------------------------------------------------------

  /** Requests in flight (ids). */
  get inFlight() {
    return [...this.requests.keys()];
  }

  #track(id, kind) {
    const req = new PendingRequest(id, kind, this.requireTts && kind !== 'update');
    this.requests.set(id, req);
    this.#emit('request_start', { requestId: id, kind });
    return req;
  }

  /** Session attribute fields for a REQUEST from an options object. */
  #attributes(opts, payload) {
    if (opts.requireTts !== undefined) {
      payload.require_tts = !!opts.requireTts;
      this.requireTts = !!opts.requireTts;
    }
    if (opts.enableSrs !== undefined) payload.enable_srs = !!opts.enableSrs;
    // Extension (README "Kiosk capabilities / visitor reset"): a new conversation history.
    if (opts.clearHistory) payload.clear_history = true;
    if (opts.functionsOp) {
      payload.function_calling_op = opts.functionsOp;
      payload.function_calling = wireFunctions(opts.functions ?? []);
      this.#applyFunctions(opts.functionsOp, opts.functions ?? []);
    }
    return payload;
  }

  #applyFunctions(op, defs) {
    if (op === 'REPLACE') this.functions = new Map();
    for (const f of defs) {
      if (op === 'DELETE') this.functions.delete(f.name);
      else this.functions.set(f.name, { ...(this.functions.get(f.name) ?? {}), ...f });
    }
  }

  /**
   * Sends a text question. Returns {id, done}; `done` resolves with the request's end
   * ({text, interrupted, error, ...}). opts: {requireTts, enableSrs, functionsOp, functions}.
   */
  sendText(text, opts = {}) {
    this.#requireReady();
    const id = opts.requestId ?? randomId('req_');
    const payload = this.#attributes(opts, {
      request_id: id, data_type: 'TEXT', stream_flag: false, stream_seq: 0, content: { text },
    });
    const req = this.#track(id, text.trim() === '' ? 'update' : 'text');
    this.#send('REQUEST', payload);
    return { id, done: req.done };
  }

  /** Updates session attributes only (spec 4.3.4); resolves when the server confirms. */
  updateSession(opts) {
    return this.sendText('', opts);
  }

  /** Registers (or replaces) a local function handler and tells the server (ADD or UPDATE). */
  registerFunction(def) {
    const op = this.functions.has(def.name) ? 'UPDATE' : 'ADD';
    if (this.state === 'ready') return this.updateSession({ functionsOp: op, functions: [def] });
    this.functions.set(def.name, def);
    return null;
  }

  /** Extension: reports what a function call returned; the model continues with it. */
  sendFunctionResult(name, callId, result, text) {
    this.#requireReady();
    const id = randomId('req_');
    const content = { function_result: { name, call_id: callId, result } };
    if (text) content.text = text;
    const req = this.#track(id, 'function_result');
    this.#send('REQUEST', {
      request_id: id, data_type: 'TEXT', stream_flag: false, stream_seq: 0, content,
    });
    return { id, done: req.done };
  }

  /** A whole utterance at once (spec 4.3.2): 16 kHz s16le mono samples (Int16Array). */
  sendVoice(samples, opts = {}) {
    this.#requireReady();
    const id = opts.requestId ?? randomId('req_');
    const payload = this.#attributes(opts, {
      request_id: id, data_type: 'VOICE', stream_flag: false, stream_seq: 0,
      content: { voice_mode: 'BASE64', voice: bytesToBase64(pcm16ToBytes(samples)) },
    });
    const req = this.#track(id, 'voice');
    this.#send('REQUEST', payload);
    return { id, done: req.done };
  }

  /**
   * Starts a streamed voice upload (spec 4.3.3, BINARY). Returns {id, done, write(bytes), end(),
   * abort()}. `write` takes 16 kHz s16le mono bytes (ArrayBuffer or Uint8Array, even length).
   * One upload may be open per session.
   */
  startVoice(opts = {}) {
    this.#requireReady();
    if (this.upload) throw new Error('a voice upload is already open');
    const id = opts.requestId ?? randomId('req_');
    const payload = this.#attributes(opts, {
      request_id: id, data_type: 'VOICE', stream_flag: true, stream_seq: 0,
      content: { voice_mode: 'BINARY' },
    });
    const req = this.#track(id, 'voice');
    this.#send('REQUEST', payload);
    const ws = this.ws;
    const upload = { id, done: req.done, bytes: 0, open: true };
    this.upload = upload;
    upload.write = (data) => {
      if (!upload.open || this.ws !== ws || this.upload !== upload) return false;
      let bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
      for (let i = 0; i < bytes.length; i += MAX_BINARY_FRAME) {
        const part = bytes.subarray(i, Math.min(bytes.length, i + MAX_BINARY_FRAME));
        ws.send(part);
        upload.bytes += part.length;
        this.stats.binaryOut++;
        this.stats.binaryBytesOut += part.length;
      }
      return true;
    };
    upload.end = () => {
      if (!upload.open) return;
      upload.open = false;
      if (this.upload === upload) this.upload = null;
      if (this.ws !== ws || !this.requests.has(id)) return;
      this.#send('REQUEST', {
        request_id: id, data_type: 'VOICE', stream_flag: true, stream_seq: -1,
        content: { voice_mode: 'BINARY' },
      });
    };
    upload.abort = (reason = 'USER_STOP') => {
      if (!upload.open) return;
      upload.open = false;
      if (this.upload === upload) this.upload = null;
      if (this.ws === ws && this.requests.has(id)) this.interrupt(id, reason);
    };
    return upload;
  }

  /**
   * INTERRUPT (spec 4.4). With no id every request in flight is interrupted. The `interrupting`
   * event fires at once so the app stops playback before the server even answers; voice that
   * still arrives for these requests is dropped. Returns the ids concerned.
   */
  interrupt(requestId, reason = 'USER_STOP') {
    this.#requireReady();
    const ids = requestId ? [requestId] : this.inFlight;
    for (const id of ids) {
      const req = this.requests.get(id);
      if (req) req.cancelled = true;
    }
    if (this.upload && (!requestId || this.upload.id === requestId)) {
      this.upload.open = false;
      this.upload = null;
    }
    this.#emit('interrupting', { requestIds: ids, reason });
    const payload = { reason };
    if (requestId) payload.interrupt_request_id = requestId;
    this.#send('INTERRUPT', payload);
    return ids;
  }

  /** SESSION_QUERY; resolves with session_data. */
  querySession(fields) {
    this.#requireReady();
    return this.#ask('SESSION_INFO', 'SESSION_QUERY', fields ? { query_fields: fields } : {});
  }

  /** HEALTH_CHECK (works before registration too); resolves with health_status. */
  healthCheck(fields) {
    return this.#ask('HEALTH_CHECK_ACK', 'HEALTH_CHECK', fields ? { check_fields: fields } : {});
  }

  #ask(replyType, msgType, payload) {
    return new Promise((resolve, reject) => {
      this.waiters.push({ type: replyType, resolve, reject });
      try {
        this.#send(msgType, payload);
      } catch (e) {
        this.waiters = this.waiters.filter((w) => w.resolve !== resolve);
        reject(e);
      }
    });
  }

  // ---- incoming ---------------------------------------------------------------------------

  #dispatch(msg) {
    const p = msg.payload ?? {};
    switch (msg.msg_type) {
      case 'REGISTER_ACK': {
        const resumed = this.resuming && (p.session_id || msg.session_id) === this.sessionId;
        this.resuming = false;
        if (!resumed) this.#forgetSession('a new session was registered');
        this.sessionId = p.session_id || msg.session_id;
        // Extension: absent from servers without resume (or with it off).
        this.resumeToken = p.resume_token ?? null;
        if (resumed) this.stats.resumes++;
        this.sessionTimeoutSeconds = p.session_timeout_seconds;
        // Extension: {speech_input, speech_output, speech_output_chinese}; null from a server
        // that does not send it.
        this.capabilities = p.capabilities ?? null;
        this.attempt = 0;
        this.stats.registrations++;
        this.#setState('ready');
        this.#emit('registered', { ...p, resumed });
        break;
      }
      case 'RESPONSE':
        this.#response(p);
        break;
      case 'INTERRUPT_ACK':
        this.#emit('interrupt_ack', p);
        break;
      case 'HEARTBEAT':
        this.stats.heartbeats++;
        this.#emit('heartbeat', p);
        try {
          this.#send('HEARTBEAT_REPLY', { client_status: 'ONLINE' });
          this.stats.heartbeatReplies++;
        } catch { /* connection going away */ }
        break;
      case 'SESSION_WARN':
        this.#emit('session_warn', p);
        break;
      case 'SHUTDOWN':
        // The session ends: the next connection registers a new one.
        this.resumeToken = null;
        this.#emit('shutdown', { reason: p.reason, fromServer: true });
        break;
      case 'SESSION_INFO':
      case 'HEALTH_CHECK_ACK': {
        const i = this.waiters.findIndex((w) => w.type === msg.msg_type);
        if (i >= 0) {
          const [w] = this.waiters.splice(i, 1);
          w.resolve(msg.msg_type === 'SESSION_INFO' ? p.session_data : p.health_status);
        }
        break;
      }
      case 'ERROR':
        this.#error(p);
        break;
      default:
        // A newer 1.x server may send message types this client does not know: ignore them.
        break;
    }
  }

  #error(p) {
    if (this.resuming && !p.request_id && ['SESSION_INVALID', 'AUTH_FAILED'].includes(p.error_code)) {
      // The session is gone (expired, or refused): what was in flight is lost; register anew.
      this.resuming = false;
      this.#emit('error', p);
      this.#forgetSession(`the session could not be resumed (${p.error_code})`);
      // After SESSION_INVALID the socket stays open; after AUTH_FAILED the server closes it and
      // the reconnect registers without `resume` (a revoked key then gets AUTH_FAILED again).
      if (p.error_code === 'SESSION_INVALID' && this.ws?.readyState === 1) this.#register();
      return;
    }
    this.#emit('error', p);
    if (p.error_code === 'AUTH_FAILED') {
      // The server closes the socket; retrying the same credentials only leads to a lockout.
      this.#setState('auth_failed');
      return;
    }
    const req = p.request_id ? this.requests.get(p.request_id) : undefined;
    if (req) {
      // An ERROR with a request_id ends that request (PROTOCOL-NOTES).
      if (this.upload && this.upload.id === req.id) {
        this.upload.open = false;
        this.upload = null;
      }
      this.#finish(req, { error: p });
      return;
    }
    // A SESSION_INFO / HEALTH_CHECK waiter gets the error if it is the oldest question.
    if (!p.request_id && this.waiters.length && ['SESSION_INVALID', 'MALFORMED_PAYLOAD'].includes(p.error_code)) {
      this.waiters.shift().reject(Object.assign(new Error(p.error_msg), { payload: p }));
    }
  }

  #response(p) {
    const id = p.request_id;
    const req = this.requests.get(id);
    if (!req) {
      // After the final (or interrupted) frame nothing more for it is used (PROTOCOL-NOTES).
      if (this.finishedSet.has(id)) {
        this.stats.lateFrames++;
        if (p.voice_stream_seq !== undefined && p.content?.voice) this.stats.lateVoiceFrames++;
      }
      return;
    }
    if (p.interrupted) {
      this.#finish(req, { interrupted: true, interruptReason: p.interrupt_reason });
      return;
    }
    const hasText = p.text_stream_seq !== undefined && p.text_stream_seq !== null;
    const hasVoice = p.voice_stream_seq !== undefined && p.voice_stream_seq !== null;
    if (!hasText && !hasVoice) {
      // Transcript or function call: counted, so a resume names what was received.
      req.unsequenced++;
    }
    if (hasText && p.text_stream_seq >= 0) req.textTop = Math.max(req.textTop, p.text_stream_seq);
    if (hasVoice && p.voice_stream_seq >= 0) req.voiceTop = Math.max(req.voiceTop, p.voice_stream_seq);
    if (p.notice) req.notice = p.notice;
    if (typeof p.transcript === 'string') {
      req.transcript = p.transcript;
      this.#emit('transcript', { requestId: id, text: p.transcript });
    }
    const content = p.content ?? {};
    if (p.function_call) this.#functionCall(req, p.function_call);
    if (p.text_stream_seq !== undefined && p.text_stream_seq !== null) {
      this.#textPart(req, p.text_stream_seq, content.text ?? '');
    }
    if (p.voice_stream_seq !== undefined && p.voice_stream_seq !== null) {
      this.#voicePart(req, p.voice_stream_seq, content.voice ?? '');
    }
    const voiceDone = req.voiceEnded || (!req.voiceSeen && !req.expectVoice);
    if (req.textEnded && voiceDone) this.#finish(req, {});
  }

  #textPart(req, seq, text) {
    if (req.textEnded) return;
    if (seq === -1) {
      if (text) req.textBuf.set(Number.MAX_SAFE_INTEGER, text);
      // Anything still buffered past a gap is delivered in order; a gap is reported.
      const keys = [...req.textBuf.keys()].sort((a, b) => a - b);
      for (const k of keys) {
        if (k !== Number.MAX_SAFE_INTEGER && k !== req.textNext) {
          this.#emit('error', { error_code: 'CLIENT_STREAM_GAP', request_id: req.id, error_msg: `text chunk ${req.textNext} missing` });
        }
        this.#deliverText(req, k === Number.MAX_SAFE_INTEGER ? req.textNext : k, req.textBuf.get(k));
      }
      req.textBuf.clear();
      req.textEnded = true;
      return;
    }
    if (seq < req.textNext || req.textBuf.has(seq)) {
      this.stats.duplicateFrames++;
      return;
    }
    req.textBuf.set(seq, text);
    while (req.textBuf.has(req.textNext)) {
      const t = req.textBuf.get(req.textNext);
      req.textBuf.delete(req.textNext);
      this.#deliverText(req, req.textNext, t);
    }
  }

  #deliverText(req, seq, text) {
    req.textNext = seq + 1;
    if (!text) return;
    req.text += text;
    this.#emit('text', { requestId: req.id, seq, text });
  }

  #voicePart(req, seq, b64) {
    if (req.voiceEnded) return;
    req.voiceSeen = true;
    if (seq === -1) {
      if (b64) req.voiceBuf.set(Number.MAX_SAFE_INTEGER, b64);
      const keys = [...req.voiceBuf.keys()].sort((a, b) => a - b);
      for (const k of keys) this.#deliverVoice(req, k === Number.MAX_SAFE_INTEGER ? req.voiceNext : k, req.voiceBuf.get(k));
      req.voiceBuf.clear();
      req.voiceEnded = true;
      return;
    }
    if (seq < req.voiceNext || req.voiceBuf.has(seq)) {
      this.stats.duplicateFrames++;
      return;
    }
    req.voiceBuf.set(seq, b64);
    while (req.voiceBuf.has(req.voiceNext)) {
      const v = req.voiceBuf.get(req.voiceNext);
      req.voiceBuf.delete(req.voiceNext);
      this.#deliverVoice(req, req.voiceNext, v);
    }
  }

  #deliverVoice(req, seq, b64) {
    req.voiceNext = seq + 1;
    if (!b64) return;
    if (req.cancelled) {
      this.stats.droppedVoiceChunks++;
      return;
    }
    req.voiceChunks++;
    this.#emit('voice', { requestId: req.id, seq, pcm: base64ToPcm16(b64) });
  }

  async #functionCall(req, call) {
    const entry = { requestId: req.id, name: call.name, parameters: call.parameters ?? {}, callId: call.call_id };
    req.functionCalls.push(entry);
    const f = this.functions.get(call.name);
    if (!f || typeof f.handler !== 'function') {
      entry.error = `no handler for ${call.name}`;
      this.#emit('function_call', entry);
      return;
    }
    try {
      entry.result = await f.handler(entry.parameters, entry);
    } catch (e) {
      entry.error = String(e?.message ?? e);
    }
    this.#emit('function_call', entry);
    if (f.reportResult && entry.callId && this.state === 'ready') {
      this.sendFunctionResult(call.name, entry.callId, entry.error ? { error: entry.error } : entry.result ?? null);
    }
  }

  #finish(req, how) {
    if (!this.requests.delete(req.id)) return;
    this.finished.push(req.id);
    this.finishedSet.add(req.id);
    while (this.finished.length > FINISHED_MEMORY) this.finishedSet.delete(this.finished.shift());
    const end = {
      requestId: req.id,
      kind: req.kind,
      text: req.text,
      interrupted: !!how.interrupted,
      interruptReason: how.interruptReason,
      error: how.error,
      notice: req.notice,
      voiceChunks: req.voiceChunks,
      functionCalls: req.functionCalls,
    };
    req.resolve(end);
    this.#emit('request_end', end);
  }
}
