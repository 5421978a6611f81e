// Web Audio for the kiosk: gap-free playback of streamed 16 kHz PCM, and microphone capture
// through an AudioWorklet (mic-worklet.js) that delivers 16 kHz s16le frames, with a simple
// energy voice-activity detector for hands-free mode.

export const PCM_RATE = 16000;

/**
 * Plays 16 kHz mono Int16 chunks back to back on the audio clock, so consecutive chunks join
 * without gaps. stop() silences everything scheduled at once.
 */
export class PcmPlayer extends EventTarget {
  constructor(ctx, { leadMs = 120 } = {}) {
    super();
    this.ctx = ctx;
    this.lead = leadMs / 1000;
    this.gain = ctx.createGain();
    this.analyser = ctx.createAnalyser();
    this.analyser.fftSize = 1024;
    this.gain.connect(this.analyser);
    this.analyser.connect(ctx.destination);
    this.sources = new Set();
    this.nextTime = 0;
    this.owner = null; // request id whose audio is playing
    this.stats = { chunks: 0, samples: 0, underruns: 0, stops: 0 };
    this.probe = new Float32Array(this.analyser.fftSize);
  }

  /** True while scheduled audio has not finished. */
  get playing() {
    return this.sources.size > 0;
  }

  /** Seconds of audio scheduled ahead of the clock. */
  get queuedSeconds() {
    return Math.max(0, this.nextTime - this.ctx.currentTime);
  }

  /** Peak level of what is being output right now (0..1). */
  level() {
    this.analyser.getFloatTimeDomainData(this.probe);
    let peak = 0;
    for (const v of this.probe) peak = Math.max(peak, Math.abs(v));
    return peak;
  }

  /** Queues a chunk (Int16Array, 16 kHz) of `owner`'s reply after what is already queued. */
  enqueue(pcm, owner) {
    if (!pcm.length) return;
    if (this.ctx.state === 'suspended') this.ctx.resume();
    const buf = this.ctx.createBuffer(1, pcm.length, PCM_RATE);
    const ch = buf.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
    const src = this.ctx.createBufferSource();
    src.buffer = buf;
    src.connect(this.gain);
    const now = this.ctx.currentTime;
    if (this.nextTime < now + 0.005) {
      // Nothing queued (a new reply) or the stream fell behind: start after a short lead so the
      // next chunks can join on time.
      if (this.sources.size > 0) this.stats.underruns++;
      this.nextTime = now + this.lead;
    }
    src.start(this.nextTime);
    this.nextTime += buf.duration;
    this.sources.add(src);
    this.owner = owner;
    this.stats.chunks++;
    this.stats.samples += pcm.length;
    const wasIdle = this.sources.size === 1;
    src.onended = () => {
      this.sources.delete(src);
      if (this.sources.size === 0) {
        this.owner = null;
        this.dispatchEvent(new CustomEvent('idle'));
      }
    };
    if (wasIdle) this.dispatchEvent(new CustomEvent('start', { detail: { owner } }));
  }

  /** Stops at once: everything playing or scheduled is silenced and dropped. */
  stop() {
    const had = this.sources.size;
    for (const s of this.sources) {
      s.onended = null;
      try { s.stop(); } catch { /* not started */ }
      s.disconnect();
    }
    this.sources.clear();
    this.nextTime = 0;
    this.owner = null;
    if (had) {
      this.stats.stops++;
      this.dispatchEvent(new CustomEvent('idle'));
    }
    return had;
  }
}

/**
 * Microphone capture: getUserMedia -> MediaStreamSource -> AudioWorklet (16 kHz s16le frames).
 * Emits 'frame' {pcm: ArrayBuffer, rms} for every 20 ms frame, and with a VAD attached,
 * 'speechstart' / 'speechend'.
 */
export class Microphone extends EventTarget {
  constructor(ctx) {
    super();
    this.ctx = ctx;
    this.node = null;
    this.stream = null;
    this.frames = 0;
    this.level = 0;
  }

  async open() {
    if (this.node) return;
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    await this.ctx.audioWorklet.addModule(new URL('./mic-worklet.js', import.meta.url));
    const src = this.ctx.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(this.ctx, 'mic-16k', {
      numberOfInputs: 1, numberOfOutputs: 0, channelCount: 1, channelCountMode: 'explicit',
      processorOptions: { frameMs: 20 },
    });
    this.node.port.onmessage = (e) => {
      this.frames++;
      this.level = e.data.rms;
      this.dispatchEvent(new CustomEvent('frame', { detail: e.data }));
    };
    src.connect(this.node);
    if (this.ctx.state === 'suspended') await this.ctx.resume();
  }

  close() {
    if (!this.node) return;
    this.node.port.postMessage('stop');
    this.node.disconnect();
    this.node = null;
    for (const t of this.stream.getTracks()) t.stop();
    this.stream = null;
  }
}

/**
 * Energy voice-activity detector over 20 ms frames, with an adaptive noise floor. Speech starts
 * after `startMs` of frames above the threshold and ends after `endMs` below it. `preRollMs` of
 * audio before the start is kept so the first syllable is not lost.
 */
export class Vad extends EventTarget {
  constructor({ startMs = 100, endMs = 900, preRollMs = 300, minThreshold = 0.02, factor = 3 } = {}) {
    super();
    Object.assign(this, { startMs, endMs, preRollMs, minThreshold, factor });
    this.noise = 0.005;
    this.speaking = false;
    this.above = 0;
    this.below = 0;
    this.preRoll = [];
  }

  reset() {
    this.speaking = false;
    this.above = 0;
    this.below = 0;
    this.preRoll = [];
  }

  /** Feeds one 20 ms frame; returns the pre-roll frames when speech starts. */
  push({ pcm, rms }) {
    const threshold = Math.max(this.minThreshold, this.noise * this.factor);
    const loud = rms > threshold;
    if (!this.speaking) {
      this.preRoll.push(pcm);
      if (this.preRoll.length > this.preRollMs / 20) this.preRoll.shift();
      if (!loud) this.noise = 0.95 * this.noise + 0.05 * rms; // learn the floor in silence
      this.above = loud ? this.above + 20 : 0;
      if (this.above >= this.startMs) {
        this.speaking = true;
        this.below = 0;
        const pre = this.preRoll;
        this.preRoll = [];
        this.dispatchEvent(new CustomEvent('speechstart', { detail: { preRoll: pre } }));
      }
    } else {
      this.below = loud ? 0 : this.below + 20;
      if (this.below >= this.endMs) {
        this.speaking = false;
        this.above = 0;
        this.dispatchEvent(new CustomEvent('speechend'));
      }
    }
  }
}
