// The kiosk page: conversation view, push-to-talk, hands-free mode, barge-in, exhibit cards.
// Everything protocol-related is in museum-agent-client.js; audio in audio.js.
//
// Configuration (never hard-coded here): URL parameters, else a JSON file next to this page
// named by `config=` (e.g. `?config=kiosk-config.json`; no file is requested without it):
//   key=mak_...        API key (taken out of the address bar once read; kept for this tab only)
//   lang=zh|en         interface language (default zh)
//   tts=0|1            spoken replies (default 1; offered only when the server has TTS)
//   handsfree=1        start in hands-free mode (only when the server has STT)
//   idle=90            seconds without input before the page resets for the next visitor (0: never)
//   ws=wss://host/ws/agent/stream   server (default: this page's host)
//
// Cards and gallery directions come from the server's own collection (GET /api/exhibits/{id},
// GET /api/exhibits?q=...), with the same API key.

import { MuseumAgentClient } from './museum-agent-client.js';
import { PcmPlayer, Microphone, Vad } from './audio.js';

const I18N = {
  zh: {
    title: '博物馆智能导览', skip: '跳到提问框', conversation: '对话', question: '您的问题',
    hint: '请按住“按住说话”提问，或在下方输入问题。', hintText: '请在下方输入您的问题。', placeholder: '输入您的问题…', send: '发送',
    ptt: '按住说话', pttListening: '正在听…松开发送', pttHelp: '按住按钮或按住空格键说话，松开即发送。',
    handsfree: '免提模式', speak: '语音回答', stop: '停止', langSwitch: 'English',
    connecting: '正在连接…', registering: '正在登录…', ready: '已连接', reconnecting: '连接中断，正在重连…',
    closed: '未连接', auth_failed: '密钥无效', thinking: '正在思考', interrupted: '已打断',
    voiceQuestion: '🎤 语音提问', voiceTooShort: '录音太短，请按住按钮说话。',
    noKey: '缺少 API 密钥：请用 ?key=mak_… 打开本页。',
    micDenied: '无法使用麦克风：', sessionWarn: '会话即将超时。', shutdown: '服务器结束了会话：',
    maker: '作者', date: '年代', material: '材质', size: '尺寸', gallery: '展区', directions: '前往', galleryHere: '这里的展品：',
    unknownExhibit: '馆藏中没有这件展品的资料。', cardUnavailable: '暂时无法读取展品资料。',
    close: '关闭', exhibits: '展品', earlier: '之前的展品', error: '出错了', errorRetry: '请稍后再试。', noSpeech: '没有听清，请再说一次。',
    welcome: '欢迎！我是本馆的导览助手。', suggest: '您可以问：', newVisitor: '新访客',
    askAbout: (title) => `请介绍一下《${title}》`,
    err: {
      AUTH_FAILED: '本机的访问密钥无效，请联系工作人员。', SESSION_INVALID: '会话已失效，正在重新连接。',
      STREAM_SEQ_ERROR: '语音传输中断，请再说一次。', PAYLOAD_TOO_LARGE: '问题太长了，请说得简短一些。',
      SERVER_BUSY: '服务器正忙，请稍后再试。', MALFORMED_PAYLOAD: '这个请求无法处理。',
      INTERNAL_ERROR: '服务器出了点问题。', REQUEST_TIMEOUT: '回答超时了。',
      noSpeechInput: '本机不支持语音提问，请在下方输入问题。',
    },
    reason: {
      timeout: '会话已超时。', shutdown: '服务器正在维护。', revoked: '本机的访问密钥已被停用。',
      heartbeat: '连接中断。', other: '连接已结束。',
    },
  },
  en: {
    title: 'Museum Guide', skip: 'Skip to the question box', conversation: 'Conversation', question: 'Your question',
    hint: 'Hold “Hold to talk” and ask, or type your question below.', hintText: 'Type your question below.', placeholder: 'Your question…', send: 'Send',
    ptt: 'Hold to talk', pttListening: 'Listening… release to send', pttHelp: 'Hold the button or the space bar while you speak; release to send.',
    handsfree: 'Hands-free', speak: 'Spoken replies', stop: 'Stop', langSwitch: '中文',
    connecting: 'Connecting…', registering: 'Signing in…', ready: 'Connected', reconnecting: 'Connection lost, reconnecting…',
    closed: 'Not connected', auth_failed: 'Invalid key', thinking: 'Thinking', interrupted: 'Interrupted',
    voiceQuestion: '🎤 Spoken question', voiceTooShort: 'Too short: hold the button while you speak.',
    noKey: 'No API key: open this page with ?key=mak_….',
    micDenied: 'Microphone unavailable: ', sessionWarn: 'The session will expire soon.', shutdown: 'The server ended the session: ',
    maker: 'Maker', date: 'Date', material: 'Material', size: 'Size', gallery: 'Gallery', directions: 'Go to', galleryHere: 'On show here:',
    unknownExhibit: 'The collection has no record of this exhibit.', cardUnavailable: 'The exhibit’s details cannot be loaded right now.',
    close: 'Close', exhibits: 'Exhibits', earlier: 'Earlier', error: 'Something went wrong', errorRetry: 'Please try again in a moment.', noSpeech: 'Sorry, I did not catch that. Please say it again.',
    welcome: 'Welcome! I am the museum’s guide.', suggest: 'You could ask:', newVisitor: 'New visitor',
    // Quotes inside the title become single quotes inside the outer double pair.
    askAbout: (title) => `Tell me about “${title.replace(/["“]([^"“”]*)["”]/gu, '‘$1’')}”`,
    err: {
      AUTH_FAILED: 'This kiosk’s access key is not valid; please tell a member of staff.', SESSION_INVALID: 'The session expired; reconnecting.',
      STREAM_SEQ_ERROR: 'The recording was cut off; please say it again.', PAYLOAD_TOO_LARGE: 'That was too long; please ask more briefly.',
      SERVER_BUSY: 'The server is busy; please try again in a moment.', MALFORMED_PAYLOAD: 'That request could not be handled.',
      INTERNAL_ERROR: 'The server ran into a problem.', REQUEST_TIMEOUT: 'The answer took too long.',
      noSpeechInput: 'Spoken questions are not available here; please type your question below.',
    },
    reason: {
      timeout: 'The session timed out.', shutdown: 'The server is being serviced.', revoked: 'This kiosk’s access key was withdrawn.',
      heartbeat: 'The connection was lost.', other: 'The connection ended.',
    },
  },
};

const $ = (id) => document.getElementById(id);
const ui = {
  log: $('log'), welcome: $('welcome'), suggestions: $('suggestions'), suggestLabel: $('suggest-label'),
  cards: $('cards'), status: $('status'), statusText: $('status-text'),
  banner: $('banner'), form: $('ask'), input: $('question'), send: $('send'), ptt: $('ptt'),
  handsfree: $('handsfree'), speak: $('speak'), stop: $('stop'), lang: $('lang'), level: $('level'),
  voiceRow: $('voice-row'), newVisitor: $('new-visitor'), hint: $('hint'),
  conversation: document.querySelector('.conversation'),
};

let lang = 'zh';
const t = (k) => I18N[lang][k] ?? k;

// ---- configuration -----------------------------------------------------------------------

async function loadConfig() {
  let file = {};
  const q = new URLSearchParams(location.search);
  const name = q.get('config');
  // Only a plain file name next to the page (no other origin, no path).
  if (name && /^[\w.-]+\.json$/.test(name)) {
    try {
      const r = await fetch(name, { cache: 'no-store' });
      if (r.ok) file = await r.json();
    } catch { /* unreadable config file: URL parameters only */ }
  }
  let key = q.get('key') ?? file.apiKey ?? sessionStorage.getItem('museum-agent-key') ?? '';
  if (q.has('key')) {
    // Keep the key out of the address bar, history and screenshots of the page.
    sessionStorage.setItem('museum-agent-key', key);
    q.delete('key');
    const rest = q.toString();
    history.replaceState(null, '', location.pathname + (rest ? `?${rest}` : '') + location.hash);
  }
  const wsDefault = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws/agent/stream`;
  return {
    key,
    lang: q.get('lang') ?? file.lang ?? 'zh',
    tts: (q.get('tts') ?? String(file.tts ?? '1')) !== '0',
    handsfree: (q.get('handsfree') ?? String(file.handsfree ?? '0')) === '1',
    ws: q.get('ws') ?? file.ws ?? wsDefault,
    idleSeconds: Math.max(0, Number(q.get('idle') ?? file.idleSeconds ?? 90) || 0),
  };
}

// ---- interface text ----------------------------------------------------------------------

function applyLang(l) {
  lang = I18N[l] ? l : 'zh';
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  ui.lang.textContent = t('langSwitch');
  ui.lang.lang = lang === 'zh' ? 'en' : 'zh';
  ui.cards.setAttribute('aria-label', t('exhibits'));
  if (listening) ui.ptt.querySelector('[data-i18n]').textContent = t('pttListening');
  showState(client?.state ?? 'closed');
  for (const card of ui.cards.children) card.render?.();
  if (!ui.welcome.hidden) showSuggestions();
  if (client?.capabilities) applyCapabilities(client.capabilities);
}

function showState(state) {
  ui.status.dataset.state = state;
  ui.statusText.textContent = t(state);
  const ready = state === 'ready';
  ui.send.disabled = !ready;
  ui.ptt.disabled = !ready;
}

function banner(text, kind = 'error') {
  ui.banner.textContent = text;
  ui.banner.className = `banner ${kind}`;
  ui.banner.hidden = !text;
}

/// Visitor bubbles of spoken questions, by request id, until the transcript arrives.
const spokenQuestions = new Map();

/**
 * Keeps a message in view: its end, or its first line when it is taller than the conversation
 * (a long answer on a phone, under an exhibit card, is read from the top; scrolled to its end,
 * its first lines were hidden). A long answer is shown under the visitor's question it answers
 * when that question is just above it and both tops fit: from the answer's own first line the
 * question had scrolled away, and a phone showed an answer to nothing.
 */
function reveal(li) {
  if (!li) return;
  const room = ui.conversation.clientHeight;
  const tall = li.offsetHeight > room;
  if (!tall) {
    li.scrollIntoView({ block: 'end' });
    return;
  }
  const asked = li.previousElementSibling;
  // Room left under the question for the answer's first lines (about three).
  const ANSWER_START = 96;
  const fits = asked?.classList.contains('visitor') && asked.offsetHeight + ANSWER_START < room;
  (fits ? asked : li).scrollIntoView({ block: 'start' });
}

function addMessage(role, text) {
  ui.welcome.hidden = true;
  const li = document.createElement('li');
  li.className = `msg ${role}`;
  const body = document.createElement('span');
  body.className = 'body';
  body.textContent = text;
  li.append(body);
  ui.log.append(li);
  reveal(li);
  return li;
}

function note(li, text) {
  let meta = li.querySelector('.meta');
  if (!meta) {
    meta = document.createElement('span');
    meta.className = 'meta';
    li.append(meta);
  }
  meta.textContent = text;
}

// ---- exhibit cards, from the server's collection -----------------------------------------

let apiKey = '';
const records = new Map(); // "script|id" -> Promise<record | null> (null: not in the collection)

/** GET a collection endpoint with the session's key; resolves with the JSON body or null on 404. */
async function api(path) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${apiKey}` } });
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  return r.json();
}

/**
 * The script the page shows Chinese text in: a Simplified page asks the server to convert
 * Traditional records (and an English page shows records as stored).
 */
const SCRIPT = { zh: 'simplified' };
const scriptParam = () => (SCRIPT[lang] ? `script=${SCRIPT[lang]}` : '');

function exhibitRecord(id) {
  const sp = scriptParam();
  const key = `${sp}|${id}`;
  if (!records.has(key)) {
    const p = api(`/api/exhibits/${encodeURIComponent(id)}${sp ? `?${sp}` : ''}`);
    records.set(key, p);
    p.catch(() => records.delete(key)); // a failure is retried next time
  }
  return records.get(key);
}

function openCard(id, className, render) {
  let card = ui.cards.querySelector(`[data-card="${CSS.escape(id)}"]`);
  if (!card) {
    card = ui.cards.ownerDocument.importNode($('card-tpl').content, true).firstElementChild;
    card.dataset.card = id;
    card.classList.add(className);
    card.querySelector('.card-close').addEventListener('click', () => {
      card.remove();
      ui.input.focus();
    });
    // An earlier card, folded to its title, opens again when touched.
    card.querySelector('.card-title').addEventListener('click', () => card.classList.remove('earlier'));
  }
  card.classList.remove('earlier');
  card.render = () => {
    render(card);
    card.querySelector('.card-close').setAttribute('aria-label', t('close'));
    card.querySelector('.card-earlier').textContent = t('earlier');
  };
  card.render();
  ui.cards.prepend(card);
  ui.cards.scrollTop = 0;
  // A card above the conversation (portrait) takes height from it: keep the latest answer in view.
  requestAnimationFrame(() => reveal(ui.log.lastElementChild));
  return card;
}

/** Fills one `dt`/`dd` pair, hiding both when the record has no value. */
function field(card, name, value) {
  card.querySelector(`.l-${name}`).textContent = t(name);
  card.querySelector(`.l-${name}`).hidden = !value;
  const dd = card.querySelector(`.${name}`);
  dd.textContent = value ?? '';
  dd.hidden = !value;
}

function showExhibit({ exhibit_id: raw }) {
  if (typeof raw !== 'string' && typeof raw !== 'number') throw new Error('exhibit_id missing');
  const id = String(raw);
  let state = { loading: true };
  const card = openCard(`exhibit-${id}`, 'exhibit-card', (c) => {
    const ex = state.record;
    c.querySelector('.card-title').textContent = ex?.title ?? (state.loading ? '…' : id);
    field(c, 'maker', ex?.maker);
    field(c, 'date', [ex?.date, ex?.period].filter(Boolean).join(' · '));
    field(c, 'material', ex?.medium);
    field(c, 'size', ex?.display_size);
    field(c, 'gallery', ex?.gallery);
    c.querySelector('.description').textContent = ex
      ? ex.display_description
      : state.loading ? '' : state.failed ? t('cardUnavailable') : t('unknownExhibit');
    c.dataset.state = ex ? 'ready' : state.loading ? 'loading' : 'missing';
    if (!state.loading) requestAnimationFrame(() => reveal(ui.log.lastElementChild));
  });
  const done = exhibitRecord(id).then(
    (record) => { state = { record }; },
    () => { state = { failed: true }; },
  ).then(() => card.render());
  return done.then(() => ({ shown: id, known: !!state.record }));
}

function navigateToGallery({ gallery_id: raw, gallery }) {
  const id = String(raw ?? gallery ?? '');
  if (!id) throw new Error('gallery_id missing');
  let hits = null;
  const card = openCard(`gallery-${id}`, 'gallery-card', (c) => {
    c.querySelector('.card-title').textContent = `${t('directions')}: ${id}`;
    c.querySelector('dl').hidden = true;
    const names = (hits ?? []).map((h) => h.exhibit.title);
    c.querySelector('.description').textContent = names.length ? `${t('galleryHere')} ${names.join(' · ')}` : '';
  });
  const sp = scriptParam();
  return api(`/api/exhibits?q=${encodeURIComponent(id)}&k=3${sp ? `&${sp}` : ''}`).then((r) => {
    hits = r?.hits ?? [];
    card.render();
    return { shown: id, exhibits: hits.map((h) => h.exhibit.id) };
  });
}

const FUNCTIONS = [
  {
    name: 'show_exhibit',
    description: 'Show an exhibit card (title, maker, date, material, gallery, description) on the kiosk screen. 在屏幕上展示展品卡片。',
    parameters: [{ name: 'exhibit_id', type: 'string', description: 'The exhibit id in the collection, as given with the exhibit (e.g. "walters-33094")', required: true }],
    handler: showExhibit,
  },
  {
    name: 'navigate_to_gallery',
    description: 'Show the way to a gallery or department of the museum on the kiosk screen. 显示前往某展区的路线。',
    parameters: [{ name: 'gallery_id', type: 'string', description: 'The gallery or department, as named in the exhibit record', required: true }],
    handler: navigateToGallery,
  },
];

// ---- welcome screen and the reset between visitors ---------------------------------------

/**
 * Suggested questions on the welcome screen, per page language: topics searched in the
 * collection, each shown only when the collection holds something for it. English pages ask
 * about an English record by its title. A Chinese page never shows a record's title: records may
 * be in Traditional script while the page is Simplified (or the reverse), so it asks the topic's
 * question, written in the page's own script, and only when the collection answers it.
 */
const TOPICS = {
  zh: [
    { topic: '书法', ask: '馆藏里有哪些书法作品？' },
    { topic: '瓷器', ask: '有什么瓷器可以看？' },
    { topic: '文献', ask: '介绍一下馆藏的历史文献' },
    { topic: '绘画', ask: '有哪些绘画作品？' },
  ],
  en: [{ topic: 'lacquer box' }, { topic: 'vase' }, { topic: 'armor' }, { topic: 'painting' }],
};
/** Record languages whose titles are in the page's script (Simplified for the `zh` page). */
const TITLE_LANGS = { zh: ['zh-hans', 'zh-cn', 'zh-sg'], en: ['en'] };
const suggestionCache = {};

async function suggestionsFor(l) {
  if (!suggestionCache[l]) {
    suggestionCache[l] = (async () => {
      const out = [];
      const titled = TITLE_LANGS[l] ?? [];
      for (const { topic, ask } of TOPICS[l] ?? []) {
        // A page question is searched as asked: it is suggested only when the server answers it.
        const r = await api(`/api/exhibits?q=${encodeURIComponent(ask ?? topic)}&k=5`).catch(() => null);
        const hits = (r?.hits ?? []).filter((h) => !out.some((o) => o.id === h.exhibit.id));
        const own = hits.find((h) => titled.some((x) => (h.exhibit.language ?? '').toLowerCase().startsWith(x))
          && h.exhibit.title.length <= 60);
        if (own) out.push({ id: own.exhibit.id, text: t('askAbout')(own.exhibit.title) });
        else if (ask && hits.some((h) => (h.exhibit.language ?? '').startsWith(l))) out.push({ id: topic, text: ask });
        if (out.length >= 3) break;
      }
      return out;
    })();
    suggestionCache[l].then((v) => { if (!v.length) delete suggestionCache[l]; });
  }
  return suggestionCache[l];
}

async function showSuggestions() {
  if (!apiKey) return;
  const l = lang;
  const list = await suggestionsFor(l).catch(() => []);
  if (l !== lang) return;
  ui.suggestions.replaceChildren(...list.map(({ text }) => {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = text;
    b.addEventListener('click', () => ask(b.textContent));
    li.append(b);
    return li;
  }));
  ui.suggestLabel.hidden = list.length === 0;
}

/** The next visitor starts afresh: nothing of the last conversation on screen or on the server. */
function resetForNextVisitor() {
  if (client) {
    bargeIn('USER_STOP');
    if (listening) {
      listening.abort('USER_STOP');
      listening = null;
    }
    if (client.state === 'ready') client.updateSession({ clearHistory: true });
  }
  if (handsFree) setHandsFree(false);
  player?.stop();
  bubbles.clear();
  spokenQuestions.clear();
  ui.log.replaceChildren();
  ui.cards.replaceChildren();
  ui.input.value = '';
  banner('');
  ui.welcome.hidden = false;
  showSuggestions();
  ui.conversation?.scrollTo?.(0, 0);
  lastInput = performance.now();
}

let lastInput = performance.now();
let idleSeconds = 90;
const touched = () => { lastInput = performance.now(); };

function idleTick() {
  if (!idleSeconds || !ui.welcome.hidden) return; // nothing to reset
  const busy = replies.size > 0 || player?.playing || listening || pttHeld;
  if (busy) {
    lastInput = Math.max(lastInput, performance.now() - idleSeconds * 500);
    return;
  }
  if (performance.now() - lastInput >= idleSeconds * 1000) resetForNextVisitor();
}

/** Shows or hides the voice controls for what this server offers (REGISTER_ACK capabilities).
 * A voice that reads no Chinese (`speech_output_chinese: false`) is not offered on the Chinese
 * page; spoken replies come back when the visitor switches to English. */
function applyCapabilities(caps) {
  const input = caps ? !!caps.speech_input : true;
  const output = (caps ? !!caps.speech_output : true) && !(lang === 'zh' && caps?.speech_output_chinese === false);
  ui.ptt.hidden = !input;
  ui.handsfree.hidden = !input;
  ui.level.hidden = !input;
  ui.speak.hidden = !output;
  ui.voiceRow.hidden = !input && !output;
  ui.hint.dataset.i18n = input ? 'hint' : 'hintText';
  ui.hint.textContent = t(ui.hint.dataset.i18n);
  if (!input && handsFree) setHandsFree(false);
  if (!output && speakReplies) {
    speakReplies = false;
    speakSuspended = true;
    ui.speak.setAttribute('aria-pressed', 'false');
    if (client.state === 'ready') client.updateSession({ requireTts: false });
    else client.requireTts = false;
  } else if (output && speakSuspended) {
    speakSuspended = false;
    speakReplies = true;
    ui.speak.setAttribute('aria-pressed', 'true');
    if (client.state === 'ready') client.updateSession({ requireTts: true });
    else client.requireTts = true;
  }
}

/** What to tell the visitor about a server error, in the page's language. */
function errorText(e) {
  if (!e) return t('error');
  if (/^speech input is not available/i.test(e.error_detail ?? '')) return t('err').noSpeechInput;
  if (e.error_code === 'MALFORMED_PAYLOAD' && /no speech/i.test(e.error_detail ?? '')) return t('noSpeech');
  const base = t('err')[e.error_code] ?? t('error');
  return e.retryable ? `${base} ${t('errorRetry')}` : base;
}

function reasonText(reason = '') {
  const r = t('reason');
  if (/超时|timed? ?out/i.test(reason)) return r.timeout;
  if (/关闭|shutting down/i.test(reason)) return r.shutdown;
  if (/revoked/i.test(reason)) return r.revoked;
  if (/heartbeat/i.test(reason)) return r.heartbeat;
  return r.other;
}

// ---- conversation ----------------------------------------------------------------------------

let client = null;
let audioCtx = null;
let player = null;
let mic = null;
let vad = null;
let speakReplies = true;
/** Spoken replies were on and were turned off because this page's language has no voice. */
let speakSuspended = false;
let handsFree = false;
let listening = null; // the open voice upload while the visitor speaks
const bubbles = new Map(); // request id -> agent bubble
const replies = new Set(); // request ids of replies in flight (not attribute updates)

function agentTalking() {
  return replies.size > 0 || player.playing;
}

/** Barge-in: stop playback at once and interrupt every reply in flight. */
function bargeIn(reason) {
  const stopped = player.stop();
  const ids = [...replies].filter((id) => client.inFlight.includes(id));
  if (client.state === 'ready') {
    for (const id of ids) client.interrupt(id, reason);
  }
  return stopped > 0 || ids.length > 0;
}

/**
 * A new question folds the cards on screen to their titles, marked "Earlier": a card in full is
 * always the current answer's, so a reply that finds nothing does not stand beside the last
 * exhibit as if it were about it. The cards the new reply shows open in full.
 */
function foldCards() {
  for (const card of ui.cards.children) card.classList.add('earlier');
}

function startReply(id) {
  foldCards();
  replies.add(id);
  const li = addMessage('agent', '');
  li.classList.add('thinking');
  li.querySelector('.body').textContent = t('thinking');
  li.dataset.requestId = id;
  li.setAttribute('aria-busy', 'true');
  bubbles.set(id, li);
}

function ask(text) {
  text = text.trim();
  if (!text || client.state !== 'ready') return;
  if (agentTalking()) bargeIn('USER_NEW_INPUT');
  addMessage('visitor', text);
  const { id } = client.sendText(text);
  startReply(id);
}

// ---- voice input -----------------------------------------------------------------------------

async function ensureMic() {
  if (mic?.node) return true;
  try {
    mic = mic ?? new Microphone(audioCtx);
    await mic.open();
  } catch (e) {
    banner(t('micDenied') + (e?.message ?? e));
    return false;
  }
  mic.addEventListener('frame', onMicFrame);
  return true;
}

function onMicFrame(e) {
  ui.level.value = e.detail.rms;
  if (handsFree && !pttHeld) vad.push(e.detail);
  if (listening) listening.write(e.detail.pcm);
}

function beginUtterance(preRoll = []) {
  if (listening || client.state !== 'ready') return;
  if (agentTalking()) bargeIn('USER_NEW_INPUT');
  listening = client.startVoice();
  listening.startedAt = performance.now();
  for (const f of preRoll) listening.write(f);
  ui.ptt.setAttribute('aria-pressed', 'true');
  ui.ptt.querySelector('[data-i18n]').textContent = t('pttListening');
}

function endUtterance() {
  const up = listening;
  if (!up) return;
  listening = null;
  ui.ptt.setAttribute('aria-pressed', 'false');
  ui.ptt.querySelector('[data-i18n]').textContent = t('ptt');
  if (up.bytes < 16000 * 2 * 0.3) {
    // Under 0.3 s: a tap, not a question.
    up.abort('USER_STOP');
    if (!handsFree) note(addMessage('error', t('voiceTooShort')), '');
    return;
  }
  up.end();
  spokenQuestions.set(up.id, addMessage('visitor', t('voiceQuestion')));
  startReply(up.id);
}

let pttHeld = false;
async function pttDown() {
  if (pttHeld || ui.ptt.disabled) return;
  pttHeld = true;
  // Stop the agent before the microphone is even ready: the visitor wants to speak.
  if (agentTalking()) bargeIn('USER_NEW_INPUT');
  if (!(await ensureMic())) {
    pttHeld = false;
    return;
  }
  if (pttHeld) beginUtterance();
}
function pttUp() {
  if (!pttHeld) return;
  pttHeld = false;
  endUtterance();
}

async function setHandsFree(on) {
  if (on && !(await ensureMic())) on = false;
  handsFree = on;
  ui.handsfree.setAttribute('aria-pressed', String(on));
  vad.reset();
  if (!on && listening && !pttHeld) {
    // Switched off mid-sentence: the fragment is dropped, not sent as a question.
    listening.abort('USER_STOP');
    listening = null;
    ui.ptt.setAttribute('aria-pressed', 'false');
    ui.ptt.querySelector('[data-i18n]').textContent = t('ptt');
  }
}

// ---- wiring ----------------------------------------------------------------------------------

function wireClient() {
  client.addEventListener('state', (e) => {
    showState(e.detail.state);
    if (e.detail.state === 'ready') banner('');
    if (e.detail.state === 'auth_failed') banner(t('auth_failed'));
    if (e.detail.state !== 'ready' && listening) {
      listening = null;
      ui.ptt.setAttribute('aria-pressed', 'false');
    }
  });
  client.addEventListener('transcript', (e) => {
    const li = spokenQuestions.get(e.detail.requestId);
    if (!li) return;
    spokenQuestions.delete(e.detail.requestId);
    li.querySelector('.body').textContent = `🎤 ${e.detail.text}`;
  });
  client.addEventListener('text', (e) => {
    const li = bubbles.get(e.detail.requestId);
    if (!li) return;
    if (li.classList.contains('thinking')) {
      li.classList.remove('thinking');
      li.querySelector('.body').textContent = '';
    }
    li.querySelector('.body').textContent += e.detail.text;
    reveal(li);
  });
  client.addEventListener('voice', (e) => {
    if (!speakReplies || !replies.has(e.detail.requestId)) return;
    player.enqueue(e.detail.pcm, e.detail.requestId);
  });
  client.addEventListener('interrupting', (e) => {
    // Drop queued audio of these requests at once (the server's final frame follows).
    if (e.detail.requestIds.includes(player.owner) || e.detail.requestIds.length === 0) player.stop();
  });
  client.addEventListener('request_end', (e) => {
    const d = e.detail;
    replies.delete(d.requestId);
    const li = bubbles.get(d.requestId);
    bubbles.delete(d.requestId);
    if (d.interrupted && player.owner === d.requestId) player.stop();
    if (!li) return;
    li.removeAttribute('aria-busy');
    if (li.classList.contains('thinking')) {
      li.classList.remove('thinking');
      li.querySelector('.body').textContent = '';
    }
    if (d.interrupted) {
      li.classList.add('interrupted');
      note(li, t('interrupted'));
    } else if (d.error) {
      li.classList.add('error');
      li.querySelector('.body').textContent ||= errorText(d.error);
      note(li, d.error.error_code); // for staff; the sentence above is the visitor's
    } else if (!d.text && d.functionCalls.length === 0) {
      li.remove();
    }
  });
  client.addEventListener('error', (e) => {
    const p = e.detail;
    if (p.request_id && bubbles.has(p.request_id)) return; // shown in its bubble
    if (p.error_code === 'AUTH_FAILED') return;
    banner(errorText(p));
  });
  client.addEventListener('registered', () => applyCapabilities(client.capabilities));
  client.addEventListener('session_warn', () => banner(t('sessionWarn'), 'info'));
  client.addEventListener('shutdown', (e) => banner(t('shutdown') + reasonText(e.detail.reason), 'info'));
}

function wireUi() {
  ui.form.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = ui.input.value;
    ui.input.value = '';
    ask(text);
  });
  // Barge-in by typing: the first keystroke while the agent talks stops it.
  ui.input.addEventListener('input', () => {
    if (ui.input.value && agentTalking()) bargeIn('USER_NEW_INPUT');
  });
  ui.ptt.addEventListener('pointerdown', (e) => {
    e.preventDefault();
    ui.ptt.setPointerCapture?.(e.pointerId);
    pttDown();
  });
  for (const ev of ['pointerup', 'pointercancel', 'lostpointercapture']) ui.ptt.addEventListener(ev, pttUp);
  ui.ptt.addEventListener('keydown', (e) => {
    if ((e.key === ' ' || e.key === 'Enter') && !e.repeat) {
      e.preventDefault();
      pttDown();
    }
  });
  ui.ptt.addEventListener('keyup', (e) => {
    if (e.key === ' ' || e.key === 'Enter') {
      e.preventDefault();
      pttUp();
    }
  });
  ui.ptt.addEventListener('blur', pttUp);
  ui.handsfree.addEventListener('click', () => setHandsFree(!handsFree));
  ui.speak.addEventListener('click', () => {
    speakReplies = !speakReplies;
    ui.speak.setAttribute('aria-pressed', String(speakReplies));
    if (!speakReplies) player.stop();
    if (client.state === 'ready') client.updateSession({ requireTts: speakReplies });
    else client.requireTts = speakReplies;
  });
  ui.stop.addEventListener('click', () => {
    bargeIn('USER_STOP');
    if (listening) {
      listening.abort('USER_STOP');
      listening = null;
      ui.ptt.setAttribute('aria-pressed', 'false');
    }
  });
  ui.lang.addEventListener('click', () => applyLang(lang === 'zh' ? 'en' : 'zh'));
  ui.newVisitor.addEventListener('click', () => resetForNextVisitor());
  for (const ev of ['pointerdown', 'keydown', 'input', 'wheel', 'touchstart']) {
    document.addEventListener(ev, touched, { capture: true, passive: true });
  }
  setInterval(idleTick, 1000);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') ui.stop.click();
  });
  // Browsers start audio only after a gesture (kiosks usually allow autoplay).
  const resume = () => audioCtx.state === 'suspended' && audioCtx.resume();
  document.addEventListener('pointerdown', resume, { capture: true });
  document.addEventListener('keydown', resume, { capture: true });
}

async function main() {
  const cfg = await loadConfig();
  speakReplies = cfg.tts;
  idleSeconds = cfg.idleSeconds;
  apiKey = cfg.key;
  ui.speak.setAttribute('aria-pressed', String(speakReplies));
  applyLang(cfg.lang);
  audioCtx = new AudioContext({ latencyHint: 'interactive' });
  player = new PcmPlayer(audioCtx);
  vad = new Vad();
  vad.addEventListener('speechstart', (e) => beginUtterance(e.detail.preRoll));
  vad.addEventListener('speechend', () => endUtterance());
  wireUi();
  if (!cfg.key) {
    showState('closed');
    banner(t('noKey'));
    return;
  }
  client = new MuseumAgentClient({
    url: cfg.ws,
    auth: { type: 'API_KEY', api_key: cfg.key },
    platform: 'WEB',
    requireTts: speakReplies,
    functions: FUNCTIONS,
  });
  wireClient();
  // Diagnostics for the e2e test and for support staff.
  window.kiosk = { client, player, get mic() { return mic; }, vad, get listening() { return listening; }, replies, reset: resetForNextVisitor, get idleSeconds() { return idleSeconds; } };
  // Lets an embedding page (analytics, the e2e test) attach listeners before the first frame.
  window.dispatchEvent(new CustomEvent('kiosk:created', { detail: window.kiosk }));
  client.connect();
  if (cfg.handsfree) {
    await client.ready().catch(() => {});
    if (client.capabilities?.speech_input !== false) setHandsFree(true);
  }
}

main();
