// Helpers shared by the e2e files: a free loopback port, bounded polling, stopping a server.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

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

/** Ids the scripted LLM (fakes.mjs) shows; they must be in the test server's collection. */
export const SCRIPTED_EXHIBITS = ['walters-38605', 'walters-33094', 'walters-13582', 'walters-13693'];

/**
 * Writes a small collection for a test server into `dir`: the records named by `ids` plus the
 * first `n` English and `n` Chinese records of the demo collection (loading all 2,700 would
 * take most of a debug server's start). Returns the file's path.
 */
export function writeSampleCollection(root, dir, ids = SCRIPTED_EXHIBITS, n = 40) {
  const lines = fs.readFileSync(path.join(root, 'fixtures/collection/exhibits.jsonl'), 'utf8').split('\n').filter(Boolean);
  const rows = lines.map((l) => JSON.parse(l));
  const keep = new Set(ids);
  const out = rows.filter((r) => keep.has(r.id));
  for (const lang of ['en', 'zh']) out.push(...rows.filter((r) => r.language === lang && !keep.has(r.id)).slice(0, n));
  const file = path.join(dir, 'collection.jsonl');
  fs.writeFileSync(file, out.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
}
