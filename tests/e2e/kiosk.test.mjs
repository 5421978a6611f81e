// The kiosk as a museum runs it by default (issue 15): the real server binary with the offline
// answerer (no model), no STT and no TTS, a sample of the real demo collection, and Debian's
// Chromium with real fonts. At 1280×800, 1920×1080, 1080×1920 and 390×844, in Chinese and in
// English: the welcome screen with questions drawn from the collection, a typed question
// answered with the matching card from /api/exhibits (and a longer one shown from its first
// line, under the card on a phone), the geometry of the first screen, the
// voice controls hidden; a conversation (greeting, question, follow-up, a question with no
// answer folding the last card to "Earlier", thanks); then the idle
// reset and the "new visitor" button.
//
// Screenshots go to a fresh directory under the system temp dir, printed at the start
// ("# screenshots: ..."); it is kept after the run so a person can look at them.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { freePort, waitFor, stopProcess, writeSampleCollection } from './util.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.MUSEUM_AGENT_BIN ?? path.join(ROOT, 'target/debug/museum-agent');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const SIZES = [[1280, 800], [1920, 1080], [1080, 1920], [390, 844]];

let tmp, shots, server, serverOut = '', baseUrl, apiKey, browser, collection;

function log(line) {
  process.stdout.write(`# ${line}\n`);
}

before(async () => {
  assert.ok(fs.existsSync(BIN), `server binary ${BIN} missing: run \`cargo build\` first`);
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} missing: apt-get install -y chromium fonts-noto-cjk fonts-noto-color-emoji`);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'museum-agent-kiosk-'));
  shots = fs.mkdtempSync(path.join(os.tmpdir(), 'museum-agent-kiosk-shots-'));
  log(`screenshots: ${shots}`);
  const file = writeSampleCollection(ROOT, tmp, ['walters-33094']);
  collection = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const env = {
    ...process.env,
    RUST_LOG: 'info',
    MUSEUM_AGENT__DATABASE__PATH: path.join(tmp, 'kiosk.db'),
  };
  const k = spawnSync(BIN, ['key', 'create', '--name', 'kiosk'], { env, encoding: 'utf8' });
  assert.equal(k.status, 0, k.stderr);
  apiKey = k.stdout.match(/mak_[A-Za-z0-9_-]+/)[0];
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  Object.assign(env, {
    MUSEUM_AGENT__SERVER__BIND: `127.0.0.1:${port}`,
    MUSEUM_AGENT__SERVER__STATIC_DIR: path.join(ROOT, 'static'),
    MUSEUM_AGENT__SRS__DEMO_PATH: file,
    // The defaults a museum gets: offline answerer, no speech.
    MUSEUM_AGENT__LLM__PROVIDER: 'offline',
    MUSEUM_AGENT__STT__PROVIDER: 'none',
    MUSEUM_AGENT__TTS__PROVIDER: 'none',
  });
  server = spawn(BIN, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout.on('data', (d) => { serverOut += d; });
  server.stderr.on('data', (d) => { serverOut += d; });
  await waitFor('the server to be ready', async () => {
    if (server.exitCode !== null) throw new Error(`server exited: ${serverOut}`);
    try { return (await fetch(`${baseUrl}/readyz`)).ok; } catch { return false; }
  }, 30000);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close().catch(() => {});
  await stopProcess(server);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  log(`screenshots kept in ${shots}`);
});

/** A page at `width`×`height` recording the client's frames and request ends. */
async function openKiosk(width, height, lang, extra = '') {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  const errors = [];
  const missing = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('response', (r) => { if (r.status() === 404 && !r.url().includes('/api/')) missing.push(r.url()); });
  await page.addInitScript(() => {
    const r = (window.__e2e = { frames: [], ends: [] });
    window.addEventListener('kiosk:created', (ev) => {
      const c = ev.detail.client;
      c.addEventListener('frame', (e) => r.frames.push({ dir: e.detail.direction, type: e.detail.message.msg_type, payload: e.detail.message.payload }));
      c.addEventListener('request_end', (e) => r.ends.push({ ...e.detail, functionCalls: e.detail.functionCalls.map((f) => f.name) }));
    });
  });
  await page.goto(`${baseUrl}/?key=${encodeURIComponent(apiKey)}&lang=${lang}${extra}`);
  await page.waitForFunction(() => document.getElementById('status').dataset.state === 'ready', null, { timeout: 15000 });
  return { context, page, errors, missing };
}

/** Layout facts of the first screen. */
function geometry(page) {
  return page.evaluate(() => {
    const box = (sel) => {
      const el = document.querySelector(sel);
      if (!el || el.hidden || getComputedStyle(el).display === 'none') return null;
      const r = el.getBoundingClientRect();
      return { top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height, width: r.width };
    };
    const overflowing = [];
    for (const el of document.querySelectorAll('header, main, footer, .card, button, input, .msg')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      // Inside a scrolling area an element may be scrolled out of view: that is not overflow.
      const scroller = el.closest('.conversation, .cards');
      const bound = scroller && scroller !== el ? scroller.getBoundingClientRect() : { left: 0, top: 0, right: innerWidth, bottom: innerHeight };
      const off = scroller && scroller !== el
        ? r.right > bound.right + 1 || r.left < bound.left - 1
        : r.right > innerWidth + 1 || r.bottom > innerHeight + 1 || r.left < -1 || r.top < -1;
      if (off) overflowing.push(`${el.tagName}#${el.id}.${el.className}`);
    }
    return {
      vw: innerWidth, vh: innerHeight,
      scrollW: document.documentElement.scrollWidth, scrollH: document.documentElement.scrollHeight,
      input: box('#question'), send: box('#send'), form: box('#ask'), controls: box('.controls'),
      cards: box('#cards'), conversation: box('.conversation'), overflowing,
    };
  });
}

function checkGeometry(g, label) {
  assert.ok(g.input.height < 120, `${label}: the question box is ${g.input.height}px high`);
  assert.ok(g.send.height < 120, `${label}: Send is ${g.send.height}px high`);
  assert.ok(g.scrollW <= g.vw && g.scrollH <= g.vh, `${label}: the page scrolls (${g.scrollW}×${g.scrollH} in ${g.vw}×${g.vh})`);
  assert.deepEqual(g.overflowing, [], `${label}: elements outside the viewport`);
  assert.ok(g.controls.bottom <= g.vh + 1, `${label}: controls below the fold`);
  if (g.cards) {
    const overlap = g.cards.bottom > g.form.top && g.cards.top < g.form.bottom && g.cards.right > g.form.left && g.cards.left < g.form.right;
    assert.ok(!overlap, `${label}: cards cover the input`);
  }
  // The conversation takes the free space: at least a third of the height on every size.
  assert.ok(g.conversation.height >= g.vh / 4, `${label}: conversation only ${g.conversation.height}px high`);
}

/** Common characters only Traditional script writes (a Simplified text never holds them). */
const TRADITIONAL_ONLY = /[們這個麼國畫書說為門問時開關東車來長馬見會還體學點間與從實發經將對頭過當動無錢讓請藝術歷館繪資寶銅紀]/;
/**
 * A Chinese record stored in Traditional script (its title or description holds characters only
 * Traditional writes), as the Simplified page gets it from the server (`script=simplified`).
 */
async function zhRecordSimplified() {
  const rec = collection.find((r) => r.language === 'zh' && r.title.length <= 30
    && TRADITIONAL_ONLY.test(r.title + r.description));
  assert.ok(rec, 'the sample holds a Traditional record');
  const r = await fetch(`${baseUrl}/api/exhibits/${encodeURIComponent(rec.id)}?script=simplified`, { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(r.status, 200);
  const simp = await r.json();
  assert.doesNotMatch(simp.title + simp.description, TRADITIONAL_ONLY);
  return simp;
}
const enRecord = () => collection.find((r) => r.id === 'walters-33094');

for (const [w, h] of SIZES) {
  for (const lang of ['zh', 'en']) {
    test(`${w}×${h} ${lang}: welcome, a typed question answered with its card, no voice controls`, { timeout: 60000 }, async () => {
      const label = `${w}x${h}-${lang}`;
      const { context, page, errors, missing } = await openKiosk(w, h, lang, '&idle=0');
      try {
        // Real fonts: a CJK face and the page's language.
        assert.equal(await page.evaluate(() => document.documentElement.lang), lang === 'zh' ? 'zh-CN' : 'en');
        assert.ok(await page.evaluate(() => document.fonts.check('24px "Noto Sans CJK SC"', '博物馆')), 'no CJK font');
        // The welcome screen with questions drawn from the collection, in the page's language.
        await page.waitForFunction(() => document.querySelectorAll('#suggestions button').length >= 1, null, { timeout: 10000 });
        const suggestions = await page.$$eval('#suggestions button', (bs) => bs.map((b) => b.textContent));
        for (const s of suggestions) {
          if (lang === 'zh') {
            // The Simplified page never shows a Traditional record title: its own questions.
            assert.doesNotMatch(s, TRADITIONAL_ONLY, `suggestion mixes scripts: ${s}`);
            assert.match(s, /^[\u4e00-\u9fff，？]+$/, s);
            continue;
          }
          assert.match(s, /^Tell me about “.+”$/, s);
          const title = s.replace(/^Tell me about “|”$/g, '');
          // A title's own double quotes are shown as single ones inside the outer pair.
          const shown = (t) => t.replace(/["“]([^"“”]*)["”]/gu, '‘$1’');
          const rec = collection.find((r) => shown(r.title) === title);
          assert.ok(rec, `suggestion not from the collection: ${s}`);
          assert.equal(rec.language, lang, `suggestion in another language: ${s}`);
        }
        // No speech on this server: the voice controls are not offered.
        const ack = await page.evaluate(() => window.__e2e.frames.find((f) => f.type === 'REGISTER_ACK').payload);
        assert.deepEqual(ack.capabilities, { speech_input: false, speech_output: false, speech_output_chinese: false });
        for (const id of ['ptt', 'handsfree', 'speak', 'voice-row']) assert.equal(await page.isVisible(`#${id}`), false, `#${id} visible without STT/TTS`);
        checkGeometry(await geometry(page), `${label} welcome`);
        await page.screenshot({ path: path.join(shots, `${label}-1-welcome.png`) });

        // A typed question about a record of the collection, answered by the offline answerer
        // with the record's card beside it.
        const rec = lang === 'zh' ? await zhRecordSimplified() : enRecord();
        // (Chinese: the page is Simplified and so is its visitor's question; the record is stored
        // in Traditional: the answer quotes it and the card shows it in Simplified.)
        const question = lang === 'zh' ? `这件《${rec.title}》是什么？` : `Who made the ${rec.title}?`;
        await page.fill('#question', question);
        await page.press('#question', 'Enter');
        const end = await page.waitForFunction(() => window.__e2e.ends.find((e) => e.kind === 'text'), null, { timeout: 15000 }).then((x) => x.jsonValue());
        assert.equal(end.error, undefined, JSON.stringify(end.error));
        assert.deepEqual(end.functionCalls, ['show_exhibit']);
        assert.ok(end.text.includes(rec.title.trim()), end.text);
        // "Who made": the record's maker field. The Chinese question names the title: the
        // visitor's exhibit, not "the closest match" (馆藏中最相关的是).
        if (lang === 'zh') assert.ok(end.text.startsWith(`《${rec.title.trim()}》`), end.text);
        else assert.match(end.text, /” is by Jokasai/);
        const card = page.locator(`[data-card="exhibit-${rec.id}"][data-state="ready"]`);
        await card.waitFor({ state: 'visible', timeout: 10000 });
        const cardText = await card.innerText();
        assert.ok(cardText.includes(rec.title.trim()), cardText);
        // Its size as the API gives it ('7.4 × 4.4 × 2.5 cm', not the raw dimensions text),
        // under the page's label; no row at all for a record with no measurements.
        const shown = await (await fetch(`${baseUrl}/api/exhibits/${encodeURIComponent(rec.id)}`, { headers: { Authorization: `Bearer ${apiKey}` } })).json();
        if (shown.display_size) {
          assert.equal(await card.locator('dd.size').innerText(), shown.display_size);
          assert.equal(await card.locator('.l-size').innerText(), lang === 'zh' ? '尺寸' : 'Size');
        } else {
          assert.equal(await card.locator('dd.size').isVisible(), false, 'an empty size row');
          assert.equal(await card.locator('.l-size').isVisible(), false, 'a size label with no size');
        }
        if (lang === 'zh') {
          assert.doesNotMatch(cardText, TRADITIONAL_ONLY, `a Traditional card on the Simplified page: ${cardText}`);
          assert.doesNotMatch(end.text, TRADITIONAL_ONLY, `a Traditional answer to a Simplified question: ${end.text}`);
        }
        assert.equal(await page.isVisible('#welcome'), false);
        checkGeometry(await geometry(page), `${label} answer`);
        await page.screenshot({ path: path.join(shots, `${label}-2-answer.png`) });

        // A longer answer (the record's passage): its first line is in view, the card beside or
        // above it. On a phone it is taller than the conversation under the card and is shown
        // from its start; scrolled to its end, its first lines were hidden.
        await page.fill('#question', lang === 'zh' ? `介绍一下《${rec.title}》` : `Tell me about the ${rec.title}`);
        await page.press('#question', 'Enter');
        await page.waitForFunction(() => window.__e2e.ends.filter((e) => e.kind === 'text').length >= 2, null, { timeout: 15000 });
        await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
        const seen = await page.evaluate(() => {
          const msgs = [...document.querySelectorAll('#log .msg')];
          const li = msgs.pop().getBoundingClientRect();
          const asked = msgs.pop().getBoundingClientRect();
          const box = document.querySelector('.conversation').getBoundingClientRect();
          return { top: li.top, height: li.height, askedTop: asked.top, from: box.top, to: box.bottom };
        });
        assert.ok(seen.top >= seen.from - 1 && seen.top + 20 <= seen.to, `${label}: the answer's first line is out of view ${JSON.stringify(seen)}`);
        // An answer taller than the conversation is shown under the question it answers (on a
        // phone the question had scrolled away, and the answer stood alone); a shorter one is
        // shown whole, its end at the bottom.
        if (seen.height > seen.to - seen.from) {
          assert.ok(seen.askedTop >= seen.from - 1, `${label}: the visitor's question is out of view above the answer ${JSON.stringify(seen)}`);
        } else {
          assert.ok(seen.top + seen.height <= seen.to + 1, `${label}: the end of a short answer is out of view ${JSON.stringify(seen)}`);
        }
        await page.screenshot({ path: path.join(shots, `${label}-3-longer-answer.png`) });
        assert.deepEqual(errors, [], 'errors in the page');
        assert.deepEqual(missing, [], 'requests for files that do not exist');
      } finally {
        await context.close();
      }
    });
  }
}

test('a conversation: a greeting, a question, a follow-up about the same exhibit, thanks', { timeout: 60000 }, async () => {
  const { context, page, errors } = await openKiosk(1280, 800, 'en', '&idle=0');
  try {
    const rec = enRecord();
    // Asks `q` and returns its request end (the n-th text request of the page).
    let n = 0;
    const ask = async (q) => {
      n += 1;
      await page.fill('#question', q);
      await page.press('#question', 'Enter');
      await page.waitForFunction((k) => window.__e2e.ends.filter((e) => e.kind === 'text').length >= k, n, { timeout: 15000 });
      return page.evaluate((k) => window.__e2e.ends.filter((e) => e.kind === 'text')[k - 1], n);
    };
    // A greeting is answered as one: no search, no card.
    const hello = await ask('Hello!');
    assert.match(hello.text, /^Hello! I'm the museum's guide\./);
    assert.deepEqual(hello.functionCalls, []);
    assert.equal(await page.$$eval('#cards > *', (x) => x.length), 0, 'a card for a greeting');
    // A question about a record, then a follow-up that only says "it".
    const first = await ask(`Who made the ${rec.title}?`);
    assert.deepEqual(first.functionCalls, ['show_exhibit']);
    const when = await ask('When was it made?');
    assert.deepEqual(when.functionCalls, ['show_exhibit']);
    assert.ok(when.text.includes(rec.title.trim()), when.text);
    assert.ok(when.text.includes(`is dated ${rec.date}`), when.text);
    const card = page.locator(`[data-card="exhibit-${rec.id}"][data-state="ready"]`);
    await card.waitFor({ timeout: 10000 });
    const folded = () => card.evaluate((c) => c.classList.contains('earlier'));
    assert.equal(await folded(), false, 'the current answer\'s card is folded');
    // A question the collection cannot answer: the last exhibit's card folds to its title,
    // marked "Earlier", so the refusal does not stand beside it as if it were about it.
    const none = await ask('Do you have the Mona Lisa?');
    assert.match(none.text, /^Sorry, I don't know/);
    assert.deepEqual(none.functionCalls, []);
    assert.equal(await folded(), true, 'the last card still open beside a refusal');
    assert.equal(await card.locator('.description').isVisible(), false);
    assert.equal(await card.locator('.card-earlier').innerText(), 'Earlier');
    await page.screenshot({ path: path.join(shots, 'refusal-after-card.png') });
    // Touched, it opens again.
    await card.locator('.card-title').click();
    assert.equal(await folded(), false);
    assert.ok((await card.locator('.description').innerText()).length > 0);
    const thanks = await ask('Thanks!');
    assert.equal(thanks.text, "You're welcome! Ask me about anything else in the collection.");
    await page.screenshot({ path: path.join(shots, 'conversation.png') });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('a voice request sent anyway gets a non-retryable error shown in the page language', { timeout: 30000 }, async () => {
  const { context, page } = await openKiosk(1280, 800, 'en', '&idle=0');
  try {
    const e = await page.evaluate(() => window.kiosk.client.sendVoice(new Int16Array(8000)).done.then((d) => d.error));
    assert.equal(e.error_code, 'MALFORMED_PAYLOAD');
    assert.equal(e.retryable, false);
    assert.match(e.error_detail, /^speech input is not available/);
    // The page's own words for it.
    const text = await page.evaluate((err) => {
      window.kiosk.client.dispatchEvent(new CustomEvent('error', { detail: { ...err, request_id: undefined } }));
      return document.getElementById('banner').textContent;
    }, e);
    assert.equal(text, 'Spoken questions are not available here; please type your question below.');
  } finally {
    await context.close();
  }
});

test('a voice that reads no Chinese is not offered on the Chinese page, and comes back in English', { timeout: 30000 }, async () => {
  // This server has no speech; the REGISTER_ACK is rewritten on its way to the page to say it
  // has STT and an English-only voice (`[tts] reads_cjk = false`).
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.routeWebSocket(/\/ws\/agent\/stream/, (ws) => {
    const server = ws.connectToServer();
    server.onMessage((m) => {
      const f = JSON.parse(m);
      if (f.msg_type === 'REGISTER_ACK') {
        f.payload.capabilities = { speech_input: true, speech_output: true, speech_output_chinese: false };
      }
      ws.send(JSON.stringify(f));
    });
  });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  try {
    await page.goto(`${baseUrl}/?key=${encodeURIComponent(apiKey)}&lang=zh&idle=0`);
    await page.waitForFunction(() => document.getElementById('status').dataset.state === 'ready', null, { timeout: 15000 });
    assert.equal(await page.isVisible('#speak'), false, 'spoken replies offered on the Chinese page');
    assert.equal(await page.isVisible('#ptt'), true);
    assert.equal(await page.evaluate(() => window.kiosk.client.requireTts), false);
    await page.click('#lang');
    await page.waitForFunction(() => !document.getElementById('speak').hidden && window.kiosk.client.requireTts === true, null, { timeout: 5000 });
    assert.equal(await page.getAttribute('#speak', 'aria-pressed'), 'true');
    await page.click('#lang');
    await page.waitForFunction(() => document.getElementById('speak').hidden && window.kiosk.client.requireTts === false, null, { timeout: 5000 });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test('idle reset and the "new visitor" button: welcome screen, nothing left on screen or in the server history', { timeout: 60000 }, async () => {
  const { context, page, errors } = await openKiosk(1280, 800, 'zh', '&idle=2');
  try {
    assert.equal(await page.evaluate(() => window.kiosk.idleSeconds), 2);
    const rec = enRecord();
    await page.fill('#question', `Who made the ${rec.title}?`);
    await page.press('#question', 'Enter');
    await page.locator(`[data-card="exhibit-${rec.id}"][data-state="ready"]`).waitFor({ timeout: 10000 });
    await page.screenshot({ path: path.join(shots, 'idle-1-before.png') });
    // Nothing is touched: after 2 s the page is back at its welcome screen.
    await page.waitForFunction(() => !document.getElementById('welcome').hidden, null, { timeout: 10000 });
    assert.equal(await page.$$eval('#log > *', (x) => x.length), 0, 'the conversation is still on screen');
    assert.equal(await page.$$eval('#cards > *', (x) => x.length), 0, 'cards are still on screen');
    await page.waitForFunction(() => document.querySelectorAll('#suggestions button').length >= 1, null, { timeout: 10000 });
    // The server was asked to forget the conversation, and confirmed.
    const clear = await page.waitForFunction(() => window.__e2e.frames.find((f) => f.dir === 'out' && f.type === 'REQUEST' && f.payload.clear_history === true), null, { timeout: 5000 }).then((x) => x.jsonValue());
    await page.waitForFunction((id) => window.__e2e.frames.some((f) => f.dir === 'in' && f.type === 'RESPONSE' && f.payload.request_id === id && f.payload.text_stream_seq === -1), clear.payload.request_id, { timeout: 5000 });
    await page.screenshot({ path: path.join(shots, 'idle-2-after-reset.png') });

    // A suggested question works, and "new visitor" resets at once.
    await page.click('#suggestions button');
    await page.waitForFunction(() => window.__e2e.ends.filter((e) => e.kind === 'text').length >= 2, null, { timeout: 10000 });
    await page.waitForFunction(() => document.querySelector('#cards .card[data-state="ready"]'), null, { timeout: 10000 });
    const clears = () => page.evaluate(() => window.__e2e.frames.filter((f) => f.dir === 'out' && f.payload?.clear_history).length);
    const before = await clears();
    await page.click('#new-visitor');
    assert.equal(await page.isVisible('#welcome'), true);
    assert.equal(await page.$$eval('#log > *', (x) => x.length), 0);
    assert.equal(await clears(), before + 1);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
