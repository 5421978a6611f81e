// AudioWorkletProcessor: microphone audio at the context's rate -> 16 kHz mono s16le.
//
// The first input channel is low-pass filtered and resampled with a windowed-sinc kernel
// (cutoff just under 8 kHz, so nothing aliases into the 16 kHz signal), converted to 16-bit
// little-endian, and posted to the main thread every `frameMs` milliseconds as
// {pcm: ArrayBuffer (transferred), rms: number (0..1)}.
// At a 16 kHz context the samples pass straight through.

const OUT_RATE = 16000;
const HALF_TAPS = 16; // kernel half-width, in output-rate samples

class MicProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const frameMs = options?.processorOptions?.frameMs ?? 20;
    this.frameLen = Math.round((OUT_RATE * frameMs) / 1000);
    this.ratio = sampleRate / OUT_RATE; // input samples per output sample
    this.passThrough = Math.abs(this.ratio - 1) < 1e-9;
    // Kernel half-width in input samples; history long enough to hold it on both sides.
    this.half = Math.ceil(HALF_TAPS * this.ratio);
    this.cutoff = 0.92 * 0.5 / this.ratio; // cycles per input sample (0.92 x Nyquist of 16 kHz)
    this.hist = new Float32Array(0);
    this.histStart = 0; // absolute index of hist[0]
    this.nextOut = this.half; // absolute input position of the next output sample
    // The kernel tabulated at 1/64 input sample (interpolated linearly when used).
    this.res = 64;
    this.table = new Float32Array(2 * this.half * this.res + 2);
    for (let i = 0; i < this.table.length; i++) this.table[i] = this.kernel(i / this.res - this.half);
    this.frame = new Int16Array(this.frameLen);
    this.fill = 0;
    this.sumSq = 0;
    this.active = true;
    this.port.onmessage = (e) => {
      if (e.data === 'stop') this.active = false;
    };
  }

  kernel(x) {
    // Low-pass sinc at `cutoff`, Blackman window over [-half, half].
    if (Math.abs(x) >= this.half) return 0;
    const c = this.cutoff;
    const s = x === 0 ? 2 * c : Math.sin(2 * Math.PI * c * x) / (Math.PI * x);
    const w = 0.42 + 0.5 * Math.cos((Math.PI * x) / this.half) + 0.08 * Math.cos((2 * Math.PI * x) / this.half);
    return s * w;
  }

  push(v) {
    const s = Math.max(-1, Math.min(1, v));
    this.frame[this.fill++] = s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
    this.sumSq += s * s;
    if (this.fill === this.frameLen) {
      const bytes = new Uint8Array(this.frameLen * 2);
      const dv = new DataView(bytes.buffer);
      for (let i = 0; i < this.frameLen; i++) dv.setInt16(2 * i, this.frame[i], true);
      const rms = Math.sqrt(this.sumSq / this.frameLen);
      this.port.postMessage({ pcm: bytes.buffer, rms }, [bytes.buffer]);
      this.fill = 0;
      this.sumSq = 0;
    }
  }

  process(inputs) {
    if (!this.active) return false;
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true;
    if (this.passThrough) {
      for (let i = 0; i < ch.length; i++) this.push(ch[i]);
      return true;
    }
    // Append to the history.
    const merged = new Float32Array(this.hist.length + ch.length);
    merged.set(this.hist);
    merged.set(ch, this.hist.length);
    this.hist = merged;
    const end = this.histStart + this.hist.length; // absolute index after the last sample
    while (this.nextOut + this.half < end) {
      const center = this.nextOut;
      const lo = Math.max(this.histStart, Math.ceil(center - this.half));
      const hi = Math.floor(center + this.half);
      let acc = 0;
      for (let k = lo; k <= hi; k++) {
        const t = (center - k + this.half) * this.res;
        const i = t | 0;
        const f = t - i;
        acc += this.hist[k - this.histStart] * (this.table[i] * (1 - f) + this.table[i + 1] * f);
      }
      this.push(acc);
      this.nextOut += this.ratio;
    }
    // Drop history no longer needed.
    const keepFrom = Math.floor(this.nextOut - this.half) - 1;
    if (keepFrom > this.histStart) {
      this.hist = this.hist.slice(keepFrom - this.histStart);
      this.histStart = keepFrom;
    }
    return true;
  }
}

registerProcessor('mic-16k', MicProcessor);
