// Helpers shared by the e2e files: a free loopback port, bounded polling, stopping a server.

import net from 'node:net';

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Polls `cond` (sync or async) every `every` ms until truthy; fails after `ms` naming `what`. */
export async function waitFor(what, cond, ms = 15000, every = 50) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** SIGTERM `child`, and waits (bounded) for its exit code; SIGKILL after 15 s. */
export async function stopProcess(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode;
  const gone = new Promise((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  let timer;
  const code = await Promise.race([gone, new Promise((r) => { timer = setTimeout(() => r('timeout'), 15000); })]);
  clearTimeout(timer);
  if (code === 'timeout') child.kill('SIGKILL');
  return code;
}
