// Local fake upstreams for the browser e2e, on one port, speaking the vendors' wire formats:
// - POST /v1/chat/completions   OpenAI chat completions, `stream: true`, SSE chat.completion.chunk
// - POST /v1/audio/transcriptions OpenAI STT: multipart form with a WAV `file`, answers {"text"}
// - POST /v1/audio/speech       OpenAI TTS: streams raw 24 kHz s16le `pcm`
// - GET  /_fake/state           what the fakes saw (requests, disconnects), for the test's checks
//
// The fake STT does not know in advance what was said: it compares the energy envelope of the
// audio it receives with the envelopes of the committed speech fixtures and answers the
// transcript of the fixture that matches (or "" when none does), so only audio that really
// carries the fixture's speech at the right rate gets its transcript.

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

// ---- WAV and envelopes ------------------------------------------------------------------

/** {rate, channels, bits, samples: Int16Array} of a PCM WAV (streamed lengths tolerated). */
export function parseWav(buf) {
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') {
    throw new Error('not a RIFF/WAVE file');
  }
  let off = 12;
  let fmt = null;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    let size = buf.readUInt32LE(off + 4);
    const body = off + 8;
    if (id === 'fmt ') {
      fmt = { format: buf.readUInt16LE(body), channels: buf.readUInt16LE(body + 2), rate: buf.readUInt32LE(body + 4), bits: buf.readUInt16LE(body + 14) };
    } else if (id === 'data') {
      if (!fmt) throw new Error('data before fmt');
      if (size > buf.length - body) size = buf.length - body; // streamed WAV: length unknown
      const n = Math.floor(size / 2);
      const samples = new Int16Array(n);
      for (let i = 0; i < n; i++) samples[i] = buf.readInt16LE(body + 2 * i);
      return { ...fmt, samples };
    }
    off = body + size + (size & 1);
  }
  throw new Error('no data chunk');
}

export function wavBytes(samples, rate = 16000) {
  const data = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) data.writeInt16LE(samples[i], 2 * i);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

const ENV_FRAME = 160; // 10 ms at 16 kHz

/** Log-energy per 10 ms frame. */
export function envelope(samples) {
  const n = Math.floor(samples.length / ENV_FRAME);
  const env = new Float64Array(n);
  for (let f = 0; f < n; f++) {
    let s = 0;
    for (let i = f * ENV_FRAME; i < (f + 1) * ENV_FRAME; i++) s += samples[i] * samples[i];
    env[f] = Math.log10(1 + s / ENV_FRAME);
  }
  return env;
}

function pearson(a, b) {
  const n = a.length;
  let ma = 0, mb = 0;
  for (let i = 0; i < n; i++) { ma += a[i]; mb += b[i]; }
  ma /= n; mb /= n;
  let num = 0, da = 0, db = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i] - ma, y = b[i] - mb;
    num += x * y; da += x * x; db += y * y;
  }
  return da && db ? num / Math.sqrt(da * db) : 0;
}

/**
 * Best correlation of the received envelope with the fixture's. The browser's fake microphone
 * loops the (padded) file, so a capture may start anywhere in it and wrap around: the received
 * audio (its first period at most) is compared with the looped fixture at every offset.
 */
export function matchScore(received, fixture) {
  const p = fixture.length;
  const n = Math.min(received.length, p);
  const win = received.subarray(0, n);
  const looped = new Float64Array(n);
  let best = -1;
  for (let s = 0; s < p; s++) {
    for (let i = 0; i < n; i++) looped[i] = fixture[(i + s) % p];
    best = Math.max(best, pearson(win, looped));
  }
  return best;
}

// ---- the scripted LLM ---------------------------------------------------------------------
// Its show_exhibit calls name real records of the demo collection (the page reads the card
// from the server's /api/exhibits); util.mjs writeSampleCollection puts them in the test's one.

const EXHIBITS = [
  { re: /鼎|青铜|bronze|ding/i, id: 'walters-38605', zh: '这件兽面纹青铜鼎属于商代晚期，距今三千多年，是祭祀用的礼器。', en: 'This bronze ding dates from the late Shang dynasty, over three thousand years ago; it was a ritual vessel.' },
  { re: /漆|lacquer/i, id: 'walters-33094', zh: '这件剔红漆盒是明代永乐年间官办果园厂的工匠制作的。', en: 'This carved lacquer box was made by craftsmen of the Ming imperial Orchard Workshop in the Yongle reign.' },
  { re: /瓶|vase/i, id: 'walters-13582', zh: '这件青花梅瓶烧造于元代景德镇，出土于江西的一处窖藏。', en: 'This vase was made at Jingdezhen in the Yuan dynasty and found in a hoard in Jiangxi.' },
  { re: /画|painting/i, id: 'walters-13693', zh: '这幅山水画摹自北宋范宽的《溪山行旅图》。', en: 'This landscape copies Fan Kuan’s Travellers among Mountains and Streams, Northern Song.' },
];

export const LONG_EN = 'Let me tell you the long story of our museum. ';
export const LONG_SENTENCE_EN = 'Room after room, the collection grew over a century, gift by gift and find by find. ';

function chunk(delta, finish = null) {
  return { id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }] };
}

/** The reply to a chat-completions request: {chunks, delayMs, kind}. */
function script(body) {
  const msgs = body.messages ?? [];
  const last = msgs[msgs.length - 1] ?? {};
  const text = typeof last.content === 'string' ? last.content : JSON.stringify(last.content ?? '');
  const tools = (body.tools ?? []).map((t) => t.function?.name);
  const zh = /[\u4e00-\u9fff]/.test(text);
  const pieces = (s) => s.match(/.{1,8}/gsu) ?? [];
  if (last.role === 'tool') {
    return { kind: 'tool-followup', delayMs: 20, chunks: [chunk({ role: 'assistant', content: '' }), ...pieces(zh ? '好的。' : 'Done.').map((c) => chunk({ content: c })), chunk({}, 'stop')] };
  }
  if (/history of the museum/i.test(text)) {
    // A medium reply (about 4 s of text, with speech) for the resume test to cut twice.
    const words = (LONG_EN + LONG_SENTENCE_EN.repeat(4)).split(/(?<= )/);
    return { kind: 'medium', delayMs: 50, chunks: [chunk({ role: 'assistant', content: '' }), ...words.map((w) => chunk({ content: w })), chunk({}, 'stop')] };
  }
  if (/long story|故事/i.test(text)) {
    // A long, slow reply (about 30 s of text) to be interrupted.
    const words = (LONG_EN + LONG_SENTENCE_EN.repeat(20)).split(/(?<= )/);
    return { kind: 'long', delayMs: 150, chunks: [chunk({ role: 'assistant', content: '' }), ...words.map((w) => chunk({ content: w })), chunk({}, 'stop')] };
  }
  const ex = EXHIBITS.find((e) => e.re.test(text));
  if (ex) {
    const chunks = [chunk({ role: 'assistant', content: '' }), ...pieces(zh ? ex.zh : ex.en).map((c) => chunk({ content: c }))];
    if (tools.includes('show_exhibit')) {
      chunks.push(chunk({ tool_calls: [{ index: 0, id: `call_${ex.id}`, type: 'function', function: { name: 'show_exhibit', arguments: '' } }] }));
      chunks.push(chunk({ tool_calls: [{ index: 0, function: { arguments: `{"exhibit_id": "${ex.id}"}` } }] }));
      chunks.push(chunk({}, 'tool_calls'));
    } else {
      chunks.push(chunk({}, 'stop'));
    }
    return { kind: `exhibit-${ex.id}`, delayMs: 30, chunks };
  }
  const generic = zh ? '我可以为您介绍青铜器、漆器、陶瓷和书画。' : 'I can tell you about our bronzes, lacquer, ceramics and paintings.';
  return { kind: 'generic', delayMs: 30, chunks: [chunk({ role: 'assistant', content: '' }), ...pieces(generic).map((c) => chunk({ content: c })), chunk({}, 'stop')] };
}

// ---- TTS audio ----------------------------------------------------------------------------

/** 24 kHz s16le: 30 ms of a 440 Hz tone per input character (the length is known). */
export const TTS_SAMPLES_PER_CHAR = 720;
function ttsAudio(text) {
  const n = [...text].length * TTS_SAMPLES_PER_CHAR;
  const b = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(Math.sin((i * 440 * 2 * Math.PI) / 24000) * 8000), 2 * i);
  return b;
}

// ---- multipart ----------------------------------------------------------------------------

function parseMultipart(contentType, body) {
  const m = /boundary="?([^";]+)"?/.exec(contentType ?? '');
  if (!m) throw new Error('no multipart boundary');
  const delim = Buffer.from(`--${m[1]}`);
  const parts = {};
  let at = body.indexOf(delim);
  while (at >= 0) {
    let start = at + delim.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    start += 2; // CRLF
    const headEnd = body.indexOf('\r\n\r\n', start);
    const head = body.subarray(start, headEnd).toString();
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    const data = body.subarray(headEnd + 4, next);
    const name = /name="([^"]*)"/.exec(head)?.[1];
    const filename = /filename="([^"]*)"/.exec(head)?.[1];
    if (name) parts[name] = { filename, data };
    at = next >= 0 ? next + 2 : -1;
  }
  return parts;
}

// ---- the server ---------------------------------------------------------------------------

/**
 * Starts the fakes. `fixtures`: [{name, wavPath, transcript, padMs}] known to the STT (padMs of
 * silence is appended, as in the file the browser's fake microphone loops).
 */
export async function startFakes({ fixtures, matchThreshold = 0.75 }) {
  const known = fixtures.map((f) => {
    const w = parseWav(fs.readFileSync(f.wavPath));
    const padded = new Int16Array(w.samples.length + Math.round((16 * (f.padMs ?? 0))));
    padded.set(w.samples);
    return { ...f, env: envelope(padded), speechFrames: Math.floor(w.samples.length / ENV_FRAME) };
  });
  const state = { llm: [], llmDisconnects: 0, llmCompleted: 0, stt: [], tts: [], ttsDisconnects: 0 };

  const server = http.createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      try {
        route(req, res, body);
      } catch (e) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`fake failed: ${e.message}`);
      }
    });
  });

  function route(req, res, body) {
    const url = new URL(req.url, 'http://x');
    if (req.method === 'GET' && url.pathname === '/_fake/state') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(state));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/v1/chat/completions') return chat(req, res, JSON.parse(body.toString()));
    if (req.method === 'POST' && url.pathname === '/v1/audio/transcriptions') return transcribe(req, res, body);
    if (req.method === 'POST' && url.pathname === '/v1/audio/speech') return speech(req, res, JSON.parse(body.toString()));
    res.writeHead(404);
    res.end();
  }

  function chat(req, res, body) {
    const s = script(body);
    const msgs = body.messages ?? [];
    const rec = {
      kind: s.kind, stream: body.stream, model: body.model,
      lastUser: [...msgs].reverse().find((m) => m.role === 'user')?.content ?? null,
      tools: (body.tools ?? []).map((t) => t.function?.name), done: false, disconnected: false,
    };
    state.llm.push(rec);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let i = 0;
    let timer = null;
    const finish = () => {
      clearTimeout(timer);
      if (!rec.done && !rec.disconnected) {
        rec.disconnected = true;
        state.llmDisconnects++;
      }
    };
    res.on('close', finish);
    const step = () => {
      if (rec.disconnected) return;
      if (i < s.chunks.length) {
        res.write(`data: ${JSON.stringify(s.chunks[i++])}\n\n`);
        timer = setTimeout(step, s.delayMs);
      } else {
        rec.done = true;
        state.llmCompleted++;
        res.end('data: [DONE]\n\n');
      }
    };
    step();
  }

  function transcribe(req, res, body) {
    const parts = parseMultipart(req.headers['content-type'], body);
    const rec = { model: parts.model?.data.toString(), filename: parts.file?.filename };
    state.stt.push(rec);
    let wav;
    try {
      wav = parseWav(parts.file.data);
    } catch (e) {
      rec.error = e.message;
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('bad audio');
      return;
    }
    Object.assign(rec, { rate: wav.rate, channels: wav.channels, bits: wav.bits, seconds: wav.samples.length / wav.rate });
    let peak = 0;
    for (const v of wav.samples) peak = Math.max(peak, Math.abs(v));
    rec.peak = peak;
    let text = '';
    if (wav.rate === 16000 && wav.channels === 1 && wav.bits === 16) {
      const env = envelope(wav.samples);
      // A fragment much shorter than the question matches somewhere in anything: not a match.
      const scores = known.map((k) => ({ name: k.name, score: env.length >= 0.7 * k.speechFrames ? matchScore(env, k.env) : -1 }));
      scores.sort((a, b) => b.score - a.score);
      rec.scores = scores.map((s) => ({ name: s.name, score: Number(s.score.toFixed(3)) }));
      if (scores.length && scores[0].score >= matchThreshold) {
        rec.matched = scores[0].name;
        text = known.find((k) => k.name === scores[0].name).transcript;
      }
    }
    rec.text = text;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ text }));
  }

  function speech(req, res, body) {
    const rec = { input: body.input, response_format: body.response_format, done: false, disconnected: false };
    state.tts.push(rec);
    const audio = ttsAudio(body.input ?? '');
    res.writeHead(200, { 'content-type': 'audio/pcm' });
    const piece = 9600; // 200 ms of 24 kHz audio, every 40 ms: faster than real time, still streamed
    let off = 0;
    let timer = null;
    res.on('close', () => {
      clearTimeout(timer);
      if (!rec.done) {
        rec.disconnected = true;
        state.ttsDisconnects++;
      }
    });
    const step = () => {
      if (rec.disconnected) return;
      if (off < audio.length) {
        res.write(audio.subarray(off, off + piece));
        off += piece;
        timer = setTimeout(step, 40);
      } else {
        rec.done = true;
        res.end();
      }
    };
    step();
  }

  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    state,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

/** Writes `wavPath` with `padMs` of silence appended (what the fake microphone loops). */
export function writePaddedWav(wavPath, padMs, out) {
  const w = parseWav(fs.readFileSync(wavPath));
  const padded = new Int16Array(w.samples.length + Math.round(16 * padMs));
  padded.set(w.samples);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, wavBytes(padded, w.rate));
}
