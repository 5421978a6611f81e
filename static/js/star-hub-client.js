// star-hub-client: the JavaScript client of the museum-agent agent hub (Star Protocol envelopes
// with the ClawOS fields; README "Agent hub"). The twin of the Rust `src/hub/client.rs`: same
// concepts, event-style JS. Plain ES module, no dependencies, no DOM: it needs `WebSocket`
// (browsers, Node 22+, Node 20 with `--experimental-websocket`, or one passed in the options).
//
//   import { StarHubClient, to, inner } from './star-hub-client.js';
//   const guide = new StarHubClient({
//     url: 'wss://museum.example', apiKey: 'mak_…',
//     identity: { type: 'agent', env: 'hall_1', id: 'guide_1' },
//     ack: 'manual', autoAck: true,          // ack each delivery once its handlers are done
//   });
//   guide.on('message', async (m) => { … inner.parse(m.payload) … });  // one at a time, in order
//   guide.on('error', (e) => console.warn(e.code, e.message));        // hub errors (HubError)
//   await guide.connect();                   // then it stays connected: reconnects and resumes
//   guide.send(to.environment('hall_1'), inner.action('move', 'a1', { to: 'room 2' }));
//   const { agentId } = await guide.call({ type: 'spawn_agent', roleId: 'guide', taskBrief });
//
// What it does for you: answers the hub's heartbeats; keeps the highest `seq` seen and the
// highest acknowledged; reconnects with backoff and resumes with `last_seq` (the acknowledged
// point in manual mode, so unprocessed messages come again; the seen point in auto mode);
// drops a delivery whose `seq` it already processed; closes a connection the hub has been
// silent on for three heartbeat periods; stops for good when another connection with the same
// identity replaces it (two kiosks with one id would otherwise take turns for ever).
//
// Events (`client.on(name, fn)` returns a function that removes `fn`):
//   message    envelope   every message that is not a reply to call() or the resume report;
//                         handlers run one delivery at a time, and may return a promise
//   error      HubError   hub errors that answer no call() (refused send, forged sender, …)
//   open       {welcome, resume, reconnected}   the welcome heartbeat's payload and the report
//   close      {code, reason, reconnectInMs}    reconnectInMs is null when it will not retry
//   state      {state, previous}   connecting | open | reconnecting | closed | replaced
//   heartbeat  payload    a periodic hub heartbeat (already answered)
//   handler_error {error, envelope}   a message handler threw (the delivery is still acked)
//   envelope   envelope   every frame received, before anything else (debugging)

const DEFAULT_RECONNECT = { initialDelayMs: 500, maxDelayMs: 30000, factor: 2, jitter: 0.3 };
const HUB = Object.freeze({ id: 'hub', type: 'hub' });

/** A refused message: the hub's `error` envelope (Star codes, ClawOS code in `details`). */
export class HubError extends Error {
  /** @param {object} envelope the hub's `error` envelope */
  constructor(envelope) {
    const p = envelope?.payload ?? {};
    super(p.message ?? 'hub error');
    this.name = 'HubError';
    /** @type {string} VALIDATION_ERROR | CONNECTION_ERROR | PERMISSION_DENIED */
    this.code = p.error_code;
    /** @type {object} original_message_id, suggested_action, clawos_code, recoverable, … */
    this.details = p.details ?? {};
    /** @type {string|undefined} E001–E006 */
    this.clawosCode = this.details.clawos_code;
    /** @type {boolean} */
    this.recoverable = this.details.recoverable !== false;
    /** @type {object} */
    this.envelope = envelope;
  }
}

/**
 * Recipients for {@link StarHubClient#send}: `{id, type, env?}`.
 * Agents and environments speak inside their own environment (no `env` needed); humans
 * belong to none and must name it (`agentIn`, `broadcast('agent', env)`).
 */
export const to = Object.freeze({
  /** An agent of the sender's environment. @param {string} id */
  agent: (id) => ({ id, type: 'agent' }),
  /** An agent of environment `env`. @param {string} env @param {string} id */
  agentIn: (env, id) => ({ id, type: 'agent', env }),
  /** An environment (its id is its env). @param {string} env */
  environment: (env) => ({ id: env, type: 'environment' }),
  /** A human. @param {string} id */
  human: (id) => ({ id, type: 'human' }),
  /**
   * Every client of `type` in the environment (never the sender itself).
   * @param {'agent'|'environment'|'human'} type @param {string} [env] required for humans
   */
  broadcast: (type, env) => (env === undefined ? { id: '*', type } : { id: '*', type, env }),
  /** The hub itself (services: ack, presence, spawn_agent, …; prefer call()). */
  hub: () => ({ ...HUB }),
});

const isStr = (v) => typeof v === 'string';
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The Star inner messages (`payload.type`): action, outcome, event, stream. The hub never
 * reads them; they are for the clients at both ends.
 */
export const inner = Object.freeze({
  /** @param {string} action @param {string} id @param {*} [parameters] */
  action: (action, id, parameters = null) => ({ type: 'action', action, id, parameters }),
  /**
   * @param {string} id the action's id @param {'success'|'error'} status
   * @param {string} [message] @param {*} [data]
   */
  outcome: (id, status, message = '', data = null) =>
    ({ type: 'outcome', id, outcome: { status, message, data }, outcome_type: 'dict' }),
  /** @param {string} event @param {string} id @param {*} [data] */
  event: (event, id, data = null) => ({ type: 'event', id, event, data }),
  /** @param {string} streamType @param {number} sequence @param {*} [data] */
  stream: (streamType, sequence, data = null) => ({ type: 'stream', stream_type: streamType, sequence, data }),
  /**
   * A payload as a typed inner message (missing optional fields filled in), or null when it
   * is not one (the Rust `Envelope::inner`).
   * @param {*} p @returns {object|null}
   */
  parse(p) {
    if (!isObj(p)) return null;
    switch (p.type) {
      case 'action':
        return isStr(p.action) && isStr(p.id) ? { type: 'action', action: p.action, id: p.id, parameters: p.parameters ?? null } : null;
      case 'outcome': {
        const o = p.outcome;
        if (!isStr(p.id) || !isObj(o) || !isStr(o.status)) return null;
        const r = { type: 'outcome', id: p.id, outcome: { status: o.status, message: o.message ?? '', data: o.data ?? null } };
        if (isStr(p.outcome_type)) r.outcome_type = p.outcome_type;
        return r;
      }
      case 'event':
        return isStr(p.id) && isStr(p.event) ? { type: 'event', id: p.id, event: p.event, data: p.data ?? null } : null;
      case 'stream':
        return isStr(p.stream_type) && Number.isInteger(p.sequence) && p.sequence >= 0
          ? { type: 'stream', stream_type: p.stream_type, sequence: p.sequence, data: p.data ?? null } : null;
      default:
        return null;
    }
  },
});

let counter = 0;
function messageId() {
  const b = new Uint8Array(4);
  globalThis.crypto.getRandomValues(b);
  return `m${++counter}-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/** The endpoint path of an identity. */
function endpointPath(me) {
  const e = encodeURIComponent;
  switch (me?.type) {
    case 'agent': if (me.env && me.id) return `/env/${e(me.env)}/agent/${e(me.id)}`; break;
    case 'environment': if (me.env ?? me.id) return `/env/${e(me.env ?? me.id)}`; break;
    case 'human': if (me.id) return `/human/${e(me.id)}`; break;
  }
  throw new TypeError('identity must be {type:"agent", env, id}, {type:"environment", env} or {type:"human", id}');
}

/**
 * One hub identity (agent, environment or human) over one WebSocket at a time: connects,
 * answers heartbeats, delivers messages to `on('message')` handlers in order, acknowledges,
 * reconnects and resumes. See the module comment for the events.
 */
export class StarHubClient {
  /**
   * @param {object} o
   * @param {string} o.url        the hub's base address, ws(s)://host:port
   * @param {{type:'agent'|'environment'|'human', env?:string, id?:string}} o.identity
   * @param {string} o.apiKey     sent as `?api_key=` (browsers cannot set WebSocket headers)
   * @param {'auto'|'manual'} [o.ack]   auto (default): written = acknowledged; manual: ack()
   * @param {boolean} [o.autoAck] manual mode: ack each delivery after its handlers return
   *                              (default true; false: call ack(seq) yourself)
   * @param {string} [o.tier]     ClawOS tier: command | pm | worker
   * @param {string} [o.role]     society role (agents)
   * @param {boolean} [o.llmFormat] deliveries carry the seed-001 `formatted` text
   * @param {number} [o.lastSeq]  resume point saved from an earlier run (see `resumePoint`)
   * @param {object|false} [o.reconnect] {initialDelayMs, maxDelayMs, factor, jitter}, or false
   * @param {number} [o.callTimeoutMs] how long call() waits for the hub (default 15000)
   * @param {Function} [o.WebSocket] WebSocket constructor (default globalThis.WebSocket)
   */
  constructor(o) {
    if (!o?.url || !o.apiKey) throw new TypeError('StarHubClient needs {url, identity, apiKey}');
    this.path = endpointPath(o.identity);
    /** @type {object} who this client is */
    this.identity = { ...o.identity };
    this.url = o.url.replace(/\/+$/, '');
    this.apiKey = o.apiKey;
    this.manualAck = o.ack === 'manual';
    if (o.ack !== undefined && o.ack !== 'auto' && o.ack !== 'manual') throw new TypeError('ack must be "auto" or "manual"');
    this.autoAck = o.autoAck ?? true;
    this.query = { tier: o.tier, role: o.role, format: o.llmFormat ? 'llm' : undefined };
    this.reconnect = o.reconnect === false ? null : { ...DEFAULT_RECONNECT, ...(o.reconnect ?? {}) };
    this.callTimeoutMs = o.callTimeoutMs ?? 15000;
    this.WebSocketImpl = o.WebSocket ?? globalThis.WebSocket;
    if (typeof this.WebSocketImpl !== 'function') throw new TypeError('no WebSocket: pass {WebSocket} (Node 20: --experimental-websocket)');
    /** @type {string} connecting | open | reconnecting | closed | replaced */
    this.state = 'closed';
    /** @type {number} highest `seq` received */
    this.lastSeq = o.lastSeq ?? 0;
    /** @type {number} highest `seq` acknowledged (manual mode) */
    this.ackedSeq = o.lastSeq ?? 0;
    this.known = o.lastSeq !== undefined; // whether the resume point is ours or the hub's
    /** @type {object|null} the last welcome heartbeat's payload (identity, ack, context) */
    this.welcome = null;
    /** @type {object|null} the last resume report (complete, missing, resent, pending, …) */
    this.resume = null;
    /** Counters, for monitoring. */
    this.stats = { connects: 0, opens: 0, received: 0, delivered: 0, acksSent: 0, heartbeatsAnswered: 0, duplicates: 0, handlerErrors: 0 };
    this.ws = null;
    this.gen = 0;
    this.listeners = new Map();
    this.calls = new Map();
    this.chain = Promise.resolve();
    this.opening = null;
    this.attempt = 0;
    this.timer = null;
    this.watchdog = null;
    this.lastInbound = 0;
    this.wantOpen = false;
  }

  /** The `last_seq` the next connection resumes from. */
  get resumePoint() {
    return this.manualAck ? this.ackedSeq : this.lastSeq;
  }

  /** The current WebSocket (null while disconnected); closing it forces a reconnect. */
  get socket() {
    return this.ws;
  }

  /**
   * Subscribes to an event (see the module comment); returns the unsubscribe function.
   * @param {string} name @param {Function} fn @returns {() => void}
   */
  on(name, fn) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(fn);
    return () => this.listeners.get(name)?.delete(fn);
  }

  /**
   * Connects, and keeps connected (reconnecting with backoff) until close(). Resolves with
   * `{welcome, resume}` once the hub has greeted this connection; rejects only if the client
   * is closed (or, with `reconnect: false`, the attempt fails) first.
   * @returns {Promise<{welcome: object, resume: object}>}
   */
  connect() {
    this.wantOpen = true;
    if (this.state === 'open') return Promise.resolve({ welcome: this.welcome, resume: this.resume });
    const p = this.#whenOpen();
    if (!this.ws && !this.timer) this.#open();
    return p;
  }

  /** Closes the connection and stops reconnecting; pending calls are rejected. */
  close() {
    this.wantOpen = false;
    clearTimeout(this.timer);
    this.timer = null;
    this.attempt = 0;
    const ws = this.ws;
    this.#drop('closed by the client');
    try { ws?.close(1000); } catch { /* already closed */ }
    this.#setState('closed');
    this.#settleOpening(new Error('hub connection closed by the client'));
  }

  /**
   * Sends a message; returns its id. Throws when not connected (messages are not queued:
   * the caller knows best whether one is still worth sending after a reconnect).
   * @param {{id:string, type:string, env?:string}} recipient see `to`
   * @param {*} payload the business content (see `inner`)
   * @param {{id?:string, priority?:'low'|'normal'|'high'|'critical', ttl?:number,
   *          kind?:'request'|'response'|'notification'|'error', requestId?:string,
   *          traceId?:string, metadata?:object}} [opts] the ClawOS fields
   * @returns {string}
   */
  send(recipient, payload, opts = {}) {
    const id = opts.id ?? messageId();
    const env = { type: 'message', id, recipient, payload };
    for (const k of ['priority', 'ttl', 'kind', 'requestId', 'traceId', 'metadata']) {
      if (opts[k] !== undefined) env[k] = opts[k];
    }
    this.sendRaw(JSON.stringify(env));
    return id;
  }

  /** Sends a text frame as is (tests use it for hostile input). @param {string} text */
  sendRaw(text) {
    if (this.state !== 'open' || !this.ws) throw new Error(`not connected (${this.state})`);
    this.ws.send(text);
  }

  /**
   * Acknowledges everything up to `seq` (manual mode). Remembered when disconnected: the next
   * connection resumes after it.
   * @param {number} seq
   */
  ack(seq) {
    if (!(seq > this.ackedSeq)) return;
    this.ackedSeq = seq;
    if (this.state === 'open') {
      this.send(to.hub(), { type: 'ack', seq });
      this.stats.acksSent++;
    }
  }

  /**
   * Calls a hub service (presence, spawn_agent, send_message, list_contacts, is_contact_known,
   * get_context, ack with reply) and resolves with the reply's payload; rejects with a
   * HubError when the hub refuses it, or an Error on timeout or disconnection.
   * @param {{type: string}} payload @param {{timeoutMs?: number}} [opts]
   * @returns {Promise<object>}
   */
  call(payload, opts = {}) {
    const id = messageId();
    return new Promise((resolve, reject) => {
      const ms = opts.timeoutMs ?? this.callTimeoutMs;
      const timer = setTimeout(() => {
        this.calls.delete(id);
        reject(new Error(`no answer from the hub to ${payload?.type} within ${ms} ms`));
      }, ms);
      this.calls.set(id, { resolve, reject, timer });
      try {
        this.send(to.hub(), payload, { id });
      } catch (e) {
        clearTimeout(timer);
        this.calls.delete(id);
        reject(e);
      }
    });
  }

  // ---- internals ---------------------------------------------------------------------------

  #emit(name, value) {
    for (const fn of [...(this.listeners.get(name) ?? [])]) {
      try { fn(value); } catch (e) { queueMicrotask(() => { throw e; }); }
    }
  }

  #setState(state) {
    if (state === this.state) return;
    const previous = this.state;
    this.state = state;
    this.#emit('state', { state, previous });
  }

  #whenOpen() {
    if (!this.opening) {
      let resolve, reject;
      const promise = new Promise((a, b) => { resolve = a; reject = b; });
      promise.catch(() => {}); // callers that do not await it get no unhandled rejection
      this.opening = { promise, resolve, reject };
    }
    return this.opening.promise;
  }

  #settleOpening(err) {
    const o = this.opening;
    this.opening = null;
    if (o && err) o.reject(err);
    else o?.resolve({ welcome: this.welcome, resume: this.resume });
  }

  #url() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(this.query)) if (v) q.set(k, v);
    if (this.manualAck) q.set('ack', 'manual');
    if (this.known) q.set('last_seq', String(this.resumePoint));
    q.set('api_key', this.apiKey);
    return `${this.url}${this.path}?${q}`;
  }

  #open() {
    this.#setState(this.attempt === 0 ? 'connecting' : 'reconnecting');
    let ws;
    try {
      ws = new this.WebSocketImpl(this.#url());
    } catch (e) {
      this.#retry(1006, String(e?.message ?? e));
      return;
    }
    const gen = ++this.gen;
    this.ws = ws;
    this.welcome = null;
    this.stats.connects++;
    this.lastInbound = Date.now();
    ws.onmessage = (ev) => {
      if (this.ws === ws && typeof ev.data === 'string') this.#frame(ev.data, gen);
    };
    let opened = false;
    const lost = (code, reason) => {
      if (this.ws !== ws) return;
      this.#drop(`connection closed (${code})`);
      this.#retry(code, reason);
    };
    ws.onopen = () => { opened = true; };
    ws.onclose = (ev) => lost(ev.code, ev.reason ?? '');
    // A refused handshake (bad key, server down): browsers follow with close, Node 20's
    // WebSocket does not.
    ws.onerror = () => { if (!opened) lost(1006, 'connection failed'); };
  }

  /** Forgets the current socket: pending calls fail, the watchdog stops. */
  #drop(why) {
    this.ws = null;
    this.gen++;
    clearInterval(this.watchdog);
    this.watchdog = null;
    for (const [id, c] of this.calls) {
      clearTimeout(c.timer);
      c.reject(new Error(`${why} before the hub answered`));
      this.calls.delete(id);
    }
  }

  #retry(code, reason) {
    if (code === 4001) this.#setState('replaced'); // the hub's close code for "replaced"
    const again = this.wantOpen && this.reconnect && this.state !== 'replaced';
    let delay = null;
    if (again) {
      const r = this.reconnect;
      const base = Math.min(r.maxDelayMs, r.initialDelayMs * r.factor ** this.attempt);
      delay = Math.round(base * (1 - r.jitter + 2 * r.jitter * Math.random()));
      this.attempt++;
      this.#setState('reconnecting');
      this.timer = setTimeout(() => {
        this.timer = null;
        if (this.wantOpen && !this.ws) this.#open();
      }, delay);
    } else if (this.state !== 'replaced') {
      this.#setState('closed');
    }
    this.#emit('close', { code, reason, reconnectInMs: delay });
    if (!again) this.#settleOpening(new Error(`hub connection ${this.state}: ${reason || code}`));
  }

  #frame(text, gen) {
    this.lastInbound = Date.now();
    this.stats.received++;
    let e;
    try {
      e = JSON.parse(text);
    } catch {
      return; // the hub sends JSON only
    }
    this.#emit('envelope', e);
    if (e.type === 'heartbeat') {
      this.ws.send('{"type":"heartbeat"}');
      this.stats.heartbeatsAnswered++;
      if (this.welcome) this.#emit('heartbeat', e.payload);
      else this.welcome = e.payload ?? {};
      return;
    }
    const fromHub = e.sender?.type === 'hub';
    if (fromHub && e.requestId === 'resume' && e.payload?.type === 'resume' && this.state !== 'open') {
      this.#opened(e.payload);
      return;
    }
    if (e.type === 'error') {
      const err = new HubError(e);
      const c = this.calls.get(err.details.original_message_id);
      if (c) {
        this.calls.delete(err.details.original_message_id);
        clearTimeout(c.timer);
        c.reject(err);
        return;
      }
      // Another connection took over this identity: do not take it back (it would flap).
      if (err.details.reason === 'replaced') {
        this.#setState('replaced');
      }
      this.#emit('error', err);
      return;
    }
    if (fromHub && e.kind === 'response' && this.calls.has(e.requestId)) {
      const c = this.calls.get(e.requestId);
      this.calls.delete(e.requestId);
      clearTimeout(c.timer);
      c.resolve(e.payload);
      return;
    }
    if (Number.isInteger(e.seq)) {
      if (e.seq <= (this.manualAck ? this.ackedSeq : this.lastSeq)) {
        this.stats.duplicates++;
        return;
      }
      this.lastSeq = Math.max(this.lastSeq, e.seq);
    }
    this.chain = this.chain.then(() => this.#deliver(e, gen));
  }

  #opened(report) {
    this.resume = report;
    // The report's resume point is ours from now on (on a first connection without lastSeq
    // it is what the hub last saw acknowledged).
    const from = Number.isInteger(report.last_seq) ? report.last_seq : 0;
    this.lastSeq = Math.max(this.lastSeq, from);
    this.ackedSeq = Math.max(this.ackedSeq, from);
    this.known = true;
    const reconnected = this.stats.opens > 0;
    this.stats.opens++;
    this.attempt = 0;
    this.#setState('open');
    const periodMs = (this.welcome?.interval_seconds ?? 15) * 1000;
    this.watchdog = setInterval(() => {
      if (Date.now() - this.lastInbound > 3 * periodMs + 2000) {
        const ws = this.ws;
        this.#drop('the hub went silent');
        try { ws?.close(4000, 'hub silent'); } catch { /* already closed */ }
        this.#retry(4000, 'the hub went silent');
      }
    }, Math.max(250, periodMs / 2));
    this.#emit('open', { welcome: this.welcome, resume: report, reconnected });
    this.#settleOpening();
  }

  async #deliver(e, gen) {
    const seq = Number.isInteger(e.seq) ? e.seq : null;
    if (seq !== null && this.manualAck) {
      // Lost with its connection before its turn came: the hub sends it again.
      if (gen !== this.gen) return;
      if (seq <= this.ackedSeq) { this.stats.duplicates++; return; }
    }
    this.stats.delivered++;
    const results = [];
    for (const fn of [...(this.listeners.get('message') ?? [])]) {
      try { results.push(fn(e)); } catch (error) { results.push(Promise.reject(error)); }
    }
    for (const r of await Promise.allSettled(results)) {
      if (r.status === 'rejected') {
        this.stats.handlerErrors++;
        if (this.listeners.get('handler_error')?.size) this.#emit('handler_error', { error: r.reason, envelope: e });
        else console.error('star-hub-client: a message handler failed', r.reason);
      }
    }
    if (seq !== null && this.manualAck && this.autoAck) this.ack(seq);
  }
}
