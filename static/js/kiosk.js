// The kiosk page: conversation view, push-to-talk, hands-free mode, barge-in, exhibit cards.
// Everything protocol-related is in museum-agent-client.js; audio in audio.js.
//
// Configuration (never hard-coded here): URL parameters, else the optional file
// `kiosk-config.json` next to this page:
//   key=mak_...        API key (taken out of the address bar once read; kept for this tab only)
//   lang=zh|en         interface language (default zh)
//   tts=0|1            spoken replies (default 1)
//   handsfree=1        start in hands-free mode
//   ws=wss://host/ws/agent/stream   server (default: this page's host)

import { MuseumAgentClient } from './museum-agent-client.js';
import { PcmPlayer, Microphone, Vad } from './audio.js';

const I18N = {
  zh: {
    title: '博物馆智能导览', skip: '跳到提问框', conversation: '对话', question: '您的问题',
    hint: '请按住“按住说话”提问，或在下方输入问题。', placeholder: '输入您的问题…', send: '发送',
    ptt: '按住说话', pttListening: '正在听…松开发送', pttHelp: '按住按钮或按住空格键说话，松开即发送。',
    handsfree: '免提模式', speak: '语音回答', stop: '停止', langSwitch: 'English',
    connecting: '正在连接…', registering: '正在登录…', ready: '已连接', reconnecting: '连接中断，正在重连…',
    closed: '未连接', auth_failed: '密钥无效', thinking: '正在思考', interrupted: '已打断',
    voiceQuestion: '🎤 语音提问', voiceTooShort: '录音太短，请按住按钮说话。',
    noKey: '缺少 API 密钥：请用 ?key=mak_… 打开本页，或提供 kiosk-config.json。',
    micDenied: '无法使用麦克风：', sessionWarn: '会话即将超时。', shutdown: '服务器结束了会话：',
    period: '年代', material: '材质', gallery: '展厅', directions: '前往', unknownExhibit: '本机目录中没有该展品的详情。',
    close: '关闭', exhibits: '展品', error: '出错了', errorRetry: '（可重试）', noSpeech: '没有听清，请再说一次。',
  },
  en: {
    title: 'Museum Guide', skip: 'Skip to the question box', conversation: 'Conversation', question: 'Your question',
    hint: 'Hold “Hold to talk” and ask, or type your question below.', placeholder: 'Type your question…', send: 'Send',
    ptt: 'Hold to talk', pttListening: 'Listening… release to send', pttHelp: 'Hold the button or the space bar while you speak; release to send.',
    handsfree: 'Hands-free', speak: 'Spoken replies', stop: 'Stop', langSwitch: '中文',
    connecting: 'Connecting…', registering: 'Signing in…', ready: 'Connected', reconnecting: 'Connection lost, reconnecting…',
    closed: 'Not connected', auth_failed: 'Invalid key', thinking: 'Thinking', interrupted: 'Interrupted',
    voiceQuestion: '🎤 Spoken question', voiceTooShort: 'Too short: hold the button while you speak.',
    noKey: 'No API key: open this page with ?key=mak_… or provide kiosk-config.json.',
    micDenied: 'Microphone unavailable: ', sessionWarn: 'The session will expire soon.', shutdown: 'The server ended the session: ',
    period: 'Period', material: 'Material', gallery: 'Gallery', directions: 'Go to', unknownExhibit: 'This kiosk’s catalogue has no details for this exhibit.',
    close: 'Close', exhibits: 'Exhibits', error: 'Something went wrong', errorRetry: ' (you can try again)', noSpeech: 'Sorry, I did not catch that. Please say it again.',
  },
};

const $ = (id) => document.getElementById(id);
const ui = {
  log: $('log'), empty: $('empty'), cards: $('cards'), status: $('status'), statusText: $('status-text'),
  banner: $('banner'), form: $('ask'), input: $('question'), send: $('send'), ptt: $('ptt'),
  handsfree: $('handsfree'), speak: $('speak'), stop: $('stop'), lang: $('lang'), level: $('level'),
};

let lang = 'zh';
const t = (k) => I18N[lang][k] ?? k;

// ---- configuration -----------------------------------------------------------------------

async function loadConfig() {
  let file = {};
  try {
    const r = await fetch('kiosk-config.json', { cache: 'no-store' });
    if (r.ok) file = await r.json();
  } catch { /* no config file */ }
  const q = new URLSearchParams(location.search);
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

function addMessage(role, text) {
  ui.empty.hidden = true;
  const li = document.createElement('li');
  li.className = `msg ${role}`;
  const body = document.createElement('span');
  body.className = 'body';
  body.textContent = text;
  li.append(body);
  ui.log.append(li);
  li.scrollIntoView({ block: 'end' });
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

// ---- exhibit cards (the demo function set) -------------------------------------------------

let catalogue = { exhibits: {}, galleries: {} };
const pick = (o) => (o ? o[lang] ?? o.zh ?? o.en ?? '' : '');

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
  }
  card.render = () => {
    render(card);
    card.querySelector('.card-close').setAttribute('aria-label', t('close'));
  };
  card.render();
  ui.cards.prepend(card);
  return card;
}

function showExhibit({ exhibit_id: id }) {
  if (typeof id !== 'string' && typeof id !== 'number') throw new Error('exhibit_id missing');
  const ex = catalogue.exhibits[String(id)];
  openCard(`exhibit-${id}`, 'exhibit-card', (card) => {
    const g = ex && catalogue.galleries[ex.gallery];
    card.querySelector('.card-title').textContent = ex ? pick(ex.title) : `#${id}`;
    card.querySelector('.l-period').textContent = t('period');
    card.querySelector('.period').textContent = ex ? pick(ex.period) : '—';
    card.querySelector('.l-material').textContent = t('material');
    card.querySelector('.material').textContent = ex ? pick(ex.material) : '—';
    card.querySelector('.l-gallery').textContent = t('gallery');
    card.querySelector('.gallery').textContent = g ? `${pick(g.name)} · ${pick(g.directions)}` : '—';
    card.querySelector('.description').textContent = ex ? pick(ex.description) : t('unknownExhibit');
  });
  return { shown: String(id), known: !!ex };
}

function navigateToGallery({ gallery_id: id }) {
  if (typeof id !== 'string') throw new Error('gallery_id missing');
  const g = catalogue.galleries[id];
  openCard(`gallery-${id}`, 'gallery-card', (card) => {
    card.querySelector('.card-title').textContent = `${t('directions')}: ${g ? pick(g.name) : id}`;
    card.querySelector('dl').hidden = true;
    card.querySelector('.description').textContent = g ? pick(g.directions) : '—';
  });
  return { shown: id, known: !!g };
}

const FUNCTIONS = [
  {
    name: 'show_exhibit',
    description: 'Show an exhibit card (title, period, material, gallery, description) on the kiosk screen. 在屏幕上展示展品卡片。',
    parameters: [{ name: 'exhibit_id', type: 'string', description: 'The exhibit id in the collection, e.g. "1001"', required: true }],
    handler: showExhibit,
  },
  {
    name: 'navigate_to_gallery',
    description: 'Show directions to a gallery on the kiosk screen. 显示前往某展厅的路线。',
    parameters: [{ name: 'gallery_id', type: 'string', description: 'bronze | lacquer | ceramics | painting', required: true }],
    handler: navigateToGallery,
  },
];

// ---- conversation ----------------------------------------------------------------------------

let client = null;
let audioCtx = null;
let player = null;
let mic = null;
let vad = null;
let speakReplies = true;
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

function startReply(id) {
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
    li.scrollIntoView({ block: 'end' });
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
      const noSpeech = d.error.error_code === 'MALFORMED_PAYLOAD' && /no speech/i.test(d.error.error_detail ?? '');
      li.querySelector('.body').textContent ||= noSpeech ? t('noSpeech') : t('error');
      if (!noSpeech) note(li, `${d.error.error_code}: ${d.error.error_msg ?? ''}${d.error.retryable ? t('errorRetry') : ''}`);
    } else if (!d.text && d.functionCalls.length === 0) {
      li.remove();
    }
  });
  client.addEventListener('error', (e) => {
    const p = e.detail;
    if (p.request_id && bubbles.has(p.request_id)) return; // shown in its bubble
    if (p.error_code === 'AUTH_FAILED') return;
    banner(`${p.error_code}: ${p.error_msg ?? ''} ${p.error_detail ?? ''}`.trim());
  });
  client.addEventListener('session_warn', () => banner(t('sessionWarn'), 'info'));
  client.addEventListener('shutdown', (e) => banner(t('shutdown') + (e.detail.reason ?? ''), 'info'));
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
  ui.speak.setAttribute('aria-pressed', String(speakReplies));
  applyLang(cfg.lang);
  try {
    catalogue = await (await fetch('data/exhibits.json')).json();
  } catch { /* cards then show ids only */ }
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
  window.kiosk = { client, player, get mic() { return mic; }, vad, get listening() { return listening; }, replies };
  // Lets an embedding page (analytics, the e2e test) attach listeners before the first frame.
  window.dispatchEvent(new CustomEvent('kiosk:created', { detail: window.kiosk }));
  client.connect();
  if (cfg.handsfree) setHandsFree(true);
}

main();
