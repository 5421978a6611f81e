// node:test reporter: one line per test with its time, failures in full, and a closing
// "N passed, M failed" line (what CI greps for).
export default async function* reporter(source) {
  let passed = 0;
  let failed = 0;
  const started = Date.now();
  for await (const ev of source) {
    const d = ev.data;
    if (ev.type === 'test:pass' && d.details?.type !== 'suite' && d.nesting === 0) {
      passed++;
      yield `ok   ${d.name} (${(d.details.duration_ms / 1000).toFixed(1)} s)\n`;
    } else if (ev.type === 'test:fail' && d.details?.type !== 'suite') {
      failed++;
      const err = d.details?.error;
      const cause = err?.cause ?? err;
      yield `FAIL ${d.name} (${((d.details?.duration_ms ?? 0) / 1000).toFixed(1)} s)\n`;
      yield `     ${String(cause?.stack ?? cause?.message ?? cause).split('\n').join('\n     ')}\n`;
    } else if (ev.type === 'test:stderr' || ev.type === 'test:stdout') {
      yield d.message;
    }
  }
  yield `${passed} passed, ${failed} failed (${((Date.now() - started) / 1000).toFixed(1)} s)\n`;
}
