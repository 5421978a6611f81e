// Browser end-to-end test of the kiosk page: the real server binary, a real headless Chromium
// (Debian's /usr/bin/chromium driven by playwright-core), real WebSocket, AudioWorklet and Web
// Audio; fakes only at the network boundary (fakes.mjs: LLM, STT, TTS).
//
//   npm test --prefix tests/e2e      (after `cargo build`; scripts/test.sh does both)
//
// Environment: MUSEUM_AGENT_BIN (default target/debug/museum-agent), CHROMIUM
// (default /usr/bin/chromium). Screenshots and logs go to artifacts/e2e/.
// Every wait is a bounded poll of page or server state; nothing sleeps for readiness.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startFakes, writePaddedWav, LONG_EN, LONG_SENTENCE_EN } from './fakes.mjs';
import { freePort, waitFor, stopProcess, writeSampleCollection } from './util.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.MUSEUM_AGENT_BIN ?? path.join(ROOT, 'target/debug/museum-agent');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'artifacts/e2e');
const FIXTURES = path.join(ROOT, 'fixtures/audio');
/** Silence appended to the fixture the fake microphone loops (a pause between repetitions). */
const PAD_MS = 1500;
const MIC_FIXTURE = 'en-lacquer';

let tmp, fakes, server, serverEnv, serverLog, baseUrl, apiKey, browser, context, page;
const consoleLines = [];
const pageErrors = [];

function log(line) {
  process.stdout.write(`# ${line}\n`);
}

/** Waits for a condition evaluated in the page. */
function pageWait(what, fn, arg, ms = 15000) {
  return page.waitForFunction(fn, arg, { timeout: ms, polling: 50 }).catch((e) => {
    throw new Error(`timed out waiting in the page for ${what}: ${e.message.split('\n')[0]}`);
  });
}

async function shot(name) {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

function fixture(name) {
  return {
    name,
    wavPath: path.join(FIXTURES, `${name}.wav`),
    transcript: fs.readFileSync(path.join(FIXTURES, `${name}.txt`), 'utf8').trim(),
    padMs: name === MIC_FIXTURE ? PAD_MS : 0,
  };
}

/** Starts the server binary with `serverEnv` and waits (bounded) for /readyz. */
async function startServer() {
  server = spawn(BIN, ['serve'], { env: serverEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout.pipe(serverLog, { end: false });
  server.stderr.pipe(serverLog, { end: false });
  let exited = null;
  server.on('exit', (code) => { exited = code; });
  await waitFor('the server to be ready (/readyz)', async () => {
    if (exited !== null) throw new Error(`server exited with ${exited}; see artifacts/e2e/server.log`);
    try {
      return (await fetch(`${baseUrl}/readyz`)).ok;
    } catch {
      return false;
    }
  }, 20000);
}

function stopServer() {
  return stopProcess(server);
}

before(async () => {
  const t0 = Date.now();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  assert.ok(fs.existsSync(BIN), `server binary ${BIN} missing: run \`cargo build\` first`);
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} missing: apt-get install -y chromium`);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'museum-agent-e2e-'));

  const names = fs.readdirSync(FIXTURES).filter((f) => f.endsWith('.wav')).map((f) => f.slice(0, -4));
  fakes = await startFakes({ fixtures: names.map(fixture) });

  const env = {
    ...process.env,
    RUST_LOG: process.env.RUST_LOG ?? 'info',
    MUSEUM_AGENT__DATABASE__PATH: path.join(tmp, 'e2e.db'),
  };
  // The key is printed once on stdout.
  const k = spawnSync(BIN, ['key', 'create', '--name', 'e2e'], { env, encoding: 'utf8' });
  assert.equal(k.status, 0, `key create failed: ${k.stderr}`);
  apiKey = k.stdout.match(/mak_[A-Za-z0-9_-]+/)?.[0];
  assert.ok(apiKey, `no key in: ${k.stdout}`);

  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  Object.assign(env, {
    MUSEUM_AGENT__SERVER__BIND: `127.0.0.1:${port}`,
    MUSEUM_AGENT__SERVER__STATIC_DIR: path.join(ROOT, 'static'),
    MUSEUM_AGENT__SRS__DEMO_PATH: writeSampleCollection(ROOT, tmp),
    MUSEUM_AGENT__SESSION__HEARTBEAT_INTERVAL_SECONDS: '1',
    MUSEUM_AGENT__LLM__PROVIDER: 'openai',
    MUSEUM_AGENT__LLM__BASE_URL: fakes.baseUrl,
    MUSEUM_AGENT__LLM__MODEL: 'fake',
    MUSEUM_AGENT__LLM__API_KEY_ENV: '""',
    MUSEUM_AGENT__STT__PROVIDER: 'openai',
    MUSEUM_AGENT__STT__BASE_URL: fakes.baseUrl,
    MUSEUM_AGENT__STT__API_KEY_ENV: '""',
    MUSEUM_AGENT__TTS__PROVIDER: 'openai',
    MUSEUM_AGENT__TTS__BASE_URL: fakes.baseUrl,
    MUSEUM_AGENT__TTS__API_KEY_ENV: '""',
  });
  serverEnv = env;
  serverLog = fs.createWriteStream(path.join(ARTIFACTS, 'server.log'));
  await startServer();

  const micWav = path.join(tmp, `${MIC_FIXTURE}-padded.wav`);
  writePaddedWav(path.join(FIXTURES, `${MIC_FIXTURE}.wav`), PAD_MS, micWav);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${micWav}`,
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // Record every frame and reply event the page's client sees, from the first one.
  await page.addInitScript(() => {
    const r = (window.__e2e = { frames: [], ends: [], texts: [], interrupting: [], voice: [], states: [] });
    const at = () => performance.now();
    window.addEventListener('kiosk:created', (ev) => {
      const c = ev.detail.client;
      c.addEventListener('frame', (e) => r.frames.push({ dir: e.detail.direction, t: at(), type: e.detail.message.msg_type, payload: e.detail.message.payload }));
      c.addEventListener('request_end', (e) => r.ends.push({ ...e.detail, functionCalls: e.detail.functionCalls.map((f) => f.name), t: at() }));
      c.addEventListener('text', (e) => r.texts.push({ id: e.detail.requestId, seq: e.detail.seq }));
      c.addEventListener('voice', (e) => r.voice.push({ id: e.detail.requestId, seq: e.detail.seq, n: e.detail.pcm.length, t: at() }));
      c.addEventListener('interrupting', (e) => r.interrupting.push({ ...e.detail, t: at() }));
      c.addEventListener('state', (e) => r.states.push(e.detail.state));
      // Whether a "thinking" bubble was ever shown.
      new MutationObserver(() => {
        if (document.querySelector('.msg.agent.thinking')) r.sawThinking = true;
      }).observe(document.getElementById('log'), { subtree: true, childList: true, attributes: true });
    });
  });
  await page.goto(`${baseUrl}/?key=${encodeURIComponent(apiKey)}&lang=en`);
  await pageWait('window.kiosk', () => !!window.kiosk && !!window.__e2e);
  log(`ready: server, fakes and browser up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

after(async () => {
  const t0 = Date.now();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  fs.writeFileSync(path.join(ARTIFACTS, 'browser-console.log'), consoleLines.join('\n') + '\n');
  if (fakes) fs.writeFileSync(path.join(ARTIFACTS, 'fakes-state.json'), JSON.stringify(fakes.state, null, 2));
  await browser?.close().catch(() => {});
  await stopServer();
  await fakes?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  log(`teardown in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

test('kiosk connects, registers its functions and keeps the key out of the address bar', { timeout: 30000 }, async () => {
  await pageWait('status "ready"', () => document.getElementById('status').dataset.state === 'ready');
  assert.ok(!page.url().includes('mak_'), `the key stays in the URL: ${page.url()}`);
  assert.ok(!(await page.content()).includes(apiKey), 'the key appears in the page');
  const reg = await page.evaluate(() => window.__e2e.frames.find((f) => f.type === 'REGISTER')?.payload);
  assert.equal(reg.platform, 'WEB');
  assert.deepEqual(reg.function_calling.map((f) => f.name).sort(), ['navigate_to_gallery', 'show_exhibit']);
  // This server has STT and TTS (the fakes): the voice controls are offered.
  const ack = await page.evaluate(() => window.__e2e.frames.find((f) => f.type === 'REGISTER_ACK')?.payload);
  assert.deepEqual(ack.capabilities, { speech_input: true, speech_output: true, speech_output_chinese: true });
  for (const id of ['ptt', 'handsfree', 'speak']) assert.ok(await page.isVisible(`#${id}`), `#${id} hidden with STT and TTS`);
  // Heartbeats are answered (the server sends one a second here).
  await pageWait('a HEARTBEAT_REPLY', () => window.kiosk.client.stats.heartbeatReplies >= 1, undefined, 5000);
  // Kiosk basics: large text, readable contrast.
  const a11y = await page.evaluate(() => {
    const lum = (c) => {
      const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map(Number).map((v) => {
        v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const contrast = (fg, bg) => {
      const [l1, l2] = [lum(fg), lum(bg)].sort((x, y) => y - x);
      return (l1 + 0.05) / (l2 + 0.05);
    };
    const body = getComputedStyle(document.body);
    const send = getComputedStyle(document.getElementById('send'));
    const ptt = document.getElementById('ptt').getBoundingClientRect();
    return {
      bodyPx: parseFloat(body.fontSize),
      bodyContrast: contrast(body.color, body.backgroundColor),
      sendContrast: contrast(send.color, send.backgroundColor),
      pttHeight: ptt.height,
    };
  });
  assert.ok(a11y.bodyPx >= 20, `body text ${a11y.bodyPx}px`);
  assert.ok(a11y.bodyContrast >= 7, `body contrast ${a11y.bodyContrast}`);
  assert.ok(a11y.sendContrast >= 4.5, `send button contrast ${a11y.sendContrast}`);
  assert.ok(a11y.pttHeight >= 64, `push-to-talk button ${a11y.pttHeight}px high`);
  await shot('01-connected');
});

test('typed question: streamed answer, spoken reply and an exhibit card', { timeout: 30000 }, async () => {
  const question = 'Tell me about the bronze ding';
  // Keyboard only: focus the question box, type, Enter.
  await page.focus('#question');
  await page.keyboard.type(question);
  await page.keyboard.press('Enter');
  const end = await pageWait('the reply to end', () => window.__e2e.ends.find((e) => e.kind === 'text'), undefined, 15000).then((h) => h.jsonValue());
  assert.equal(end.error, undefined, `reply failed: ${JSON.stringify(end.error)}`);
  assert.ok(!end.interrupted);
  assert.match(end.text, /late Shang dynasty/);
  assert.deepEqual(end.functionCalls, ['show_exhibit']);
  const chunks = await page.evaluate((id) => window.__e2e.texts.filter((x) => x.id === id).map((x) => x.seq), end.requestId);
  assert.ok(chunks.length > 3, `the answer arrived in ${chunks.length} chunk(s), not streamed`);
  assert.deepEqual(chunks, chunks.map((_, i) => i), 'text chunks out of order');
  assert.ok(await page.evaluate(() => window.__e2e.sawThinking), 'no "thinking" bubble was shown');
  // On screen: the visitor's question, the answer, the card with the catalogue's details.
  await page.locator('.msg.visitor', { hasText: question }).waitFor({ timeout: 5000 });
  await page.locator('.msg.agent', { hasText: 'late Shang dynasty' }).waitFor({ timeout: 5000 });
  // The card is the collection's record, read from /api/exhibits by the page.
  const card = page.locator('[data-card="exhibit-walters-38605"][data-state="ready"]');
  await card.waitFor({ state: 'visible', timeout: 5000 });
  assert.match(await card.innerText(), /Vase in the Form of an Ancient Bronze "Gu"/);
  assert.match(await card.innerText(), /Ceramics/);
  // The LLM saw the question and the page's functions.
  const llm = fakes.state.llm.at(-1);
  assert.equal(llm.lastUser, question);
  assert.ok(llm.tools.includes('show_exhibit') && llm.tools.includes('navigate_to_gallery'), `tools: ${llm.tools}`);
  // The spoken reply arrived and was played through Web Audio (the output level rose).
  assert.ok(end.voiceChunks > 0, 'no voice chunks');
  await pageWait('audible playback', () => window.kiosk.player.stats.samples > 0 && (window.__peak = Math.max(window.__peak ?? 0, window.kiosk.player.level())) > 0.05, undefined, 10000);
  await shot('02-typed-answer-and-card');
  await pageWait('playback to finish', () => !window.kiosk.player.playing, undefined, 30000);
  assert.equal(await page.evaluate(() => window.kiosk.player.stats.underruns), 0, 'playback had gaps (underruns)');
});

test('push-to-talk: the fake microphone question travels through the AudioWorklet and is answered', { timeout: 45000 }, async () => {
  const fx = fixture(MIC_FIXTURE);
  const periodBytes = Math.ceil(((fs.statSync(fx.wavPath).size - 44) / 2 / 16000 + PAD_MS / 1000 + 0.5) * 32000);
  const sttBefore = fakes.state.stt.length;
  // Keyboard push-to-talk: hold the space bar on the focused button.
  await page.focus('#ptt');
  await page.keyboard.down('Space');
  await pageWait('the upload to start', () => !!window.kiosk.listening, undefined, 10000);
  await shot('03-listening');
  // Hold until a whole repetition of the looped fixture has been captured.
  await pageWait(`${periodBytes} bytes of speech uploaded`, (n) => (window.kiosk.listening?.bytes ?? 0) >= n, periodBytes, 20000);
  await page.keyboard.up('Space');
  const end = await pageWait('the voice reply to end', () => window.__e2e.ends.find((e) => e.kind === 'voice'), undefined, 20000).then((h) => h.jsonValue());
  const stt = fakes.state.stt[sttBefore];
  assert.ok(stt, 'the STT was not called');
  assert.equal(stt.rate, 16000);
  assert.equal(stt.channels, 1);
  assert.equal(stt.bits, 16);
  assert.equal(stt.matched, MIC_FIXTURE, `the audio did not match the fixture: ${JSON.stringify(stt.scores)}`);
  assert.equal(end.error, undefined, `voice reply failed: ${JSON.stringify(end.error)}`);
  // The transcript is what the LLM was asked, and the answer is about it.
  assert.equal(fakes.state.llm.at(-1).lastUser, fx.transcript);
  assert.match(end.text, /lacquer box/);
  assert.deepEqual(end.functionCalls, ['show_exhibit']);
  const frames = await page.evaluate(() => window.__e2e.frames.filter((f) => f.type === 'REQUEST' && f.payload?.data_type === 'VOICE').map((f) => f.payload));
  assert.deepEqual(frames.map((p) => [p.stream_flag, p.stream_seq, p.content.voice_mode]), [[true, 0, 'BINARY'], [true, -1, 'BINARY']]);
  await page.locator('[data-card="exhibit-walters-33094"]').waitFor({ state: 'visible', timeout: 5000 });
  await page.locator('.msg.agent', { hasText: 'lacquer box' }).waitFor({ timeout: 5000 });
  // The visitor's bubble shows what the server heard (transcript extension).
  await page.locator('.msg.visitor', { hasText: fx.transcript }).waitFor({ timeout: 5000 });
  await shot('04-voice-answer-and-card');
  await pageWait('playback to finish', () => !window.kiosk.player.playing, undefined, 30000);
});

test('barge-in: typing while the agent talks stops playback at once and interrupts the reply', { timeout: 60000 }, async () => {
  await page.fill('#question', 'Tell me the long story of the museum');
  await page.press('#question', 'Enter');
  const id = await pageWait('the long reply to start', () => [...window.kiosk.replies][0], undefined, 5000).then((h) => h.jsonValue());
  await pageWait('audible playback of the long reply', (rid) => window.kiosk.player.owner === rid && window.kiosk.player.level() > 0.05, id, 15000);
  await shot('05-long-answer-playing');
  const before = await page.evaluate(() => ({ chunks: window.kiosk.player.stats.chunks }));

  // The visitor starts typing: the first keystroke is the barge-in.
  await page.focus('#question');
  await page.keyboard.type('W');
  const cut = await page.evaluate(() => ({ playing: window.kiosk.player.playing, chunks: window.kiosk.player.stats.chunks, interrupting: window.__e2e.interrupting.at(-1) }));
  assert.equal(cut.playing, false, 'playback did not stop at the keystroke');
  assert.deepEqual(cut.interrupting?.requestIds, [id]);
  assert.equal(cut.interrupting?.reason, 'USER_NEW_INPUT');
  await pageWait('the output to fall silent', () => window.kiosk.player.level() === 0, undefined, 2000);

  // INTERRUPT went out with the id; ACK, then the interrupted final frame.
  const sent = await page.evaluate(() => window.__e2e.frames.filter((f) => f.type === 'INTERRUPT').map((f) => f.payload));
  assert.deepEqual(sent.at(-1), { reason: 'USER_NEW_INPUT', interrupt_request_id: id });
  const end = await pageWait('the interrupted final frame', (rid) => window.__e2e.ends.find((e) => e.requestId === rid), id, 10000).then((h) => h.jsonValue());
  assert.equal(end.interrupted, true);
  assert.equal(end.interruptReason, 'USER_NEW_INPUT');
  assert.ok(await page.evaluate(() => window.__e2e.frames.some((f) => f.type === 'INTERRUPT_ACK')), 'no INTERRUPT_ACK');
  // The server dropped the upstream LLM stream.
  await waitFor('the fake LLM to see the long reply dropped', () => fakes.state.llm.find((r) => r.kind === 'long')?.disconnected, 10000);
  // A round trip after the final frame: anything the server still had for the request would
  // have arrived before this answer.
  await page.evaluate(() => window.kiosk.client.healthCheck());
  const after = await page.evaluate((rid) => ({
    late: window.kiosk.client.stats.lateFrames,
    lateVoice: window.kiosk.client.stats.lateVoiceFrames,
    chunks: window.kiosk.player.stats.chunks,
    playing: window.kiosk.player.playing,
    voiceAfterEnd: window.__e2e.voice.filter((v) => v.id === rid && v.t > window.__e2e.ends.find((e) => e.requestId === rid).t).length,
  }), id);
  assert.equal(after.late, 0, 'frames of the interrupted request arrived after its final frame');
  assert.equal(after.lateVoice, 0);
  assert.equal(after.voiceAfterEnd, 0);
  assert.equal(after.chunks, cut.chunks, 'audio was queued after the barge-in');
  assert.equal(after.playing, false);
  assert.ok(cut.chunks >= before.chunks);
  await page.locator(`.msg.agent.interrupted[data-request-id="${id}"]`).waitFor({ timeout: 5000 });
  await shot('06-interrupted');

  // The conversation goes on: finish the new question.
  await page.keyboard.type('hen was this vase made?');
  await page.keyboard.press('Enter');
  await page.locator('[data-card="exhibit-walters-13582"]').waitFor({ state: 'visible', timeout: 10000 });
  const next = await pageWait('the next reply to end', () => window.__e2e.ends.find((e) => e.kind === 'text' && /vase/.test(e.text)), undefined, 15000).then((h) => h.jsonValue());
  assert.equal(next.interrupted, false);
  await shot('07-after-interrupt');
  assert.deepEqual(pageErrors, [], 'errors in the page');
});

test('hands-free: speech while the agent talks barges in, and the utterance is answered', { timeout: 60000 }, async () => {
  // A long reply is playing when hands-free mode is switched on; the looped fixture's speech
  // is then the visitor talking over the agent.
  await page.fill('#question', 'Tell me the long story of the museum');
  await page.press('#question', 'Enter');
  const id = await pageWait('the long reply to start', () => [...window.kiosk.replies][0], undefined, 5000).then((h) => h.jsonValue());
  await pageWait('audible playback of the long reply', (rid) => window.kiosk.player.owner === rid && window.kiosk.player.level() > 0.05, id, 15000);
  const sttBefore = fakes.state.stt.length;
  const framesBefore = await page.evaluate(() => window.__e2e.frames.length);
  await page.click('#handsfree');
  try {
    assert.equal(await page.getAttribute('#handsfree', 'aria-pressed'), 'true');
    const end = await pageWait('the long reply to be interrupted by speech', (rid) => window.__e2e.ends.find((e) => e.requestId === rid), id, 10000).then((h) => h.jsonValue());
    assert.equal(end.interrupted, true);
    assert.equal(end.interruptReason, 'USER_NEW_INPUT');
    const info = await page.evaluate(([rid, n]) => {
      const frames = window.__e2e.frames.slice(n);
      const interrupting = window.__e2e.interrupting.find((i) => i.requestIds.includes(rid));
      return {
        interrupting,
        playing: window.kiosk.player.owner === rid,
        firstUpload: frames.find((f) => f.type === 'REQUEST' && f.payload.data_type === 'VOICE' && f.payload.stream_seq === 0),
        voiceAfterEnd: window.__e2e.voice.filter((v) => v.id === rid && v.t > window.__e2e.ends.find((e) => e.requestId === rid).t).length,
      };
    }, [id, framesBefore]);
    // The VAD's speech start did it: the INTERRUPT and the upload of what is being said.
    assert.ok(info.firstUpload && Math.abs(info.firstUpload.t - info.interrupting.t) < 100, 'the barge-in did not come from a speech start');
    assert.equal(info.playing, false, 'the interrupted reply is still playing');
    assert.equal(info.voiceAfterEnd, 0);
    await shot('08-handsfree-barge-in');
    // The VAD cuts a whole repetition at its pause; it is recognised and answered.
    await waitFor('a hands-free utterance recognised as the fixture', () => fakes.state.stt.slice(sttBefore).some((r) => r.matched === MIC_FIXTURE), 20000);
    await pageWait('an answered hands-free question', () => window.__e2e.ends.some((e) => e.kind === 'voice' && /lacquer box/.test(e.text)), undefined, 10000);
    await shot('09-handsfree-answer');
  } finally {
    await page.click('#handsfree');
  }
  assert.equal(await page.getAttribute('#handsfree', 'aria-pressed'), 'false');
  // Everything settles once hands-free is off.
  await pageWait('all replies to end', () => window.kiosk.replies.size === 0 && !window.kiosk.listening, undefined, 20000);
  await pageWait('playback to finish', () => !window.kiosk.player.playing, undefined, 30000);
});

test('a connection cut twice mid-answer is resumed: the whole answer, text and voice, is shown once', { timeout: 60000 }, async () => {
  await pageWait('status "ready"', () => window.kiosk.client.state === 'ready' && window.kiosk.replies.size === 0);
  const before = await page.evaluate(() => ({ sid: window.kiosk.client.sessionId, resumes: window.kiosk.client.stats.resumes, states: window.__e2e.states.length }));
  const llmCalls = fakes.state.llm.length;
  await page.fill('#question', 'Tell me the history of the museum');
  await page.press('#question', 'Enter');
  const id = await pageWait('the reply to start', () => [...window.kiosk.replies][0], undefined, 5000).then((h) => h.jsonValue());
  const cut = () => page.evaluate(() => window.kiosk.client.ws.close(4000, 'e2e: connection cut'));
  // First cut: text and voice both streaming.
  await pageWait('text and voice streaming', (rid) => window.__e2e.texts.filter((x) => x.id === rid).length >= 4 && window.__e2e.voice.filter((v) => v.id === rid).length >= 2, id, 15000);
  await cut();
  await pageWait('the session resumed', (n) => window.kiosk.client.stats.resumes > n && window.kiosk.client.state === 'ready', before.resumes, 15000);
  // Second cut, further into the same answer (when it is still streaming).
  const more = await page.evaluate((rid) => window.__e2e.texts.filter((x) => x.id === rid).length + 8, id);
  await pageWait('more of the answer', ([rid, n]) => window.__e2e.ends.some((e) => e.requestId === rid) || window.__e2e.texts.filter((x) => x.id === rid).length >= n, [id, more], 15000);
  const cutTwice = await page.evaluate((rid) => !window.__e2e.ends.some((e) => e.requestId === rid), id);
  if (cutTwice) {
    await cut();
    await pageWait('the session resumed again', (n) => window.kiosk.client.stats.resumes > n + 1 && window.kiosk.client.state === 'ready', before.resumes, 15000);
  }
  const end = await pageWait('the reply to end', (rid) => window.__e2e.ends.find((e) => e.requestId === rid), id, 30000).then((h) => h.jsonValue());
  assert.equal(end.error, undefined, `reply failed: ${JSON.stringify(end.error)}`);
  assert.equal(end.interrupted, false);
  // The whole answer, once: every chunk of both streams exactly once, in order.
  const expected = (LONG_EN + LONG_SENTENCE_EN.repeat(4)).trim();
  assert.equal(end.text.trim(), expected);
  const seqs = await page.evaluate((rid) => ({
    text: window.__e2e.texts.filter((x) => x.id === rid).map((x) => x.seq),
    voice: window.__e2e.voice.filter((v) => v.id === rid).map((v) => v.seq),
    states: window.__e2e.states,
    sid: window.kiosk.client.sessionId,
    resumes: window.kiosk.client.stats.resumes,
    duplicates: window.kiosk.client.stats.duplicateFrames,
    bubble: document.querySelector(`.msg.agent[data-request-id="${rid}"] .body`).textContent,
  }), id);
  assert.deepEqual(seqs.text, seqs.text.map((_, i) => i), 'text chunks lost, repeated or out of order');
  assert.ok(seqs.voice.length > 2, `only ${seqs.voice.length} voice chunks`);
  assert.deepEqual(seqs.voice, seqs.voice.map((_, i) => i), 'voice chunks lost, repeated or out of order');
  assert.equal(seqs.bubble.trim(), expected, 'the bubble does not show the answer exactly once');
  // Same session, resumed (not a new one), and the question was asked upstream only once.
  assert.equal(seqs.sid, before.sid);
  assert.equal(seqs.resumes, before.resumes + (cutTwice ? 2 : 1));
  assert.ok(seqs.states.slice(before.states).includes('reconnecting'), `states: ${seqs.states}`);
  assert.equal(fakes.state.llm.slice(llmCalls).filter((r) => r.kind === 'medium').length, 1);
  log(`resume e2e: cut ${cutTwice ? 2 : 1}×, ${seqs.text.length} text and ${seqs.voice.length} voice chunks, ${seqs.duplicates} duplicate frame(s) dropped by the client`);
  await shot('12-after-resume');
  await pageWait('playback to finish', () => !window.kiosk.player.playing, undefined, 30000);
  assert.deepEqual(pageErrors, [], 'errors in the page');
});

test('server shutdown is shown, and the page reconnects by itself when the server is back', { timeout: 60000 }, async () => {
  const regs = await page.evaluate(() => window.kiosk.client.stats.registrations);
  const code = await stopServer();
  assert.equal(code, 0, 'the server did not exit cleanly');
  await pageWait('the SHUTDOWN banner', () => !document.getElementById('banner').hidden && /ended the session/.test(document.getElementById('banner').textContent), undefined, 5000);
  await pageWait('status "reconnecting"', () => document.getElementById('status').dataset.state === 'reconnecting', undefined, 5000);
  assert.ok(await page.evaluate(() => window.__e2e.frames.some((f) => f.type === 'SHUTDOWN' && f.dir === 'in')));
  await shot('10-reconnecting');
  await startServer();
  await pageWait('a new session', (n) => window.kiosk.client.stats.registrations > n && window.kiosk.client.state === 'ready', regs, 20000);
  await page.fill('#question', 'What is in the painting gallery?');
  await page.press('#question', 'Enter');
  await page.locator('[data-card="exhibit-walters-13693"]').waitFor({ state: 'visible', timeout: 10000 });
  await shot('11-reconnected');
  assert.deepEqual(pageErrors, [], 'errors in the page');
});
