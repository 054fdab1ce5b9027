// Shared by the browser tests: the server under test, headless Chromium, the dashboard's own
// number formatting, and polling until the screen and the API agree.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';

const webDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `chamber demo` on a free port (CHAMBER_BIN names the binary) with `args` added to its
 * command line, or uses the server at CHAMBER_API_URL when that is set. Returns { url, stop, log,
 * startMs }: startMs is the time from start until /healthz answered.
 */
export async function startServer({ seed = 7, args = [], timeoutMs = 60_000 } = {}) {
  if (process.env.CHAMBER_API_URL) {
    return { url: process.env.CHAMBER_API_URL.replace(/\/$/, ''), stop: async () => {}, log: () => '', startMs: 0 };
  }
  const bin = process.env.CHAMBER_BIN;
  if (!bin) throw new Error('set CHAMBER_BIN to the chamber binary (or CHAMBER_API_URL to a running server)');
  const port = await freePort();
  const started = Date.now();
  const child = spawn(bin, ['demo', '--port', String(port), '--seed', String(seed), '--tick-ms', '2000', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  let exited = null;
  child.on('exit', (code, signal) => (exited = { code, signal }));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited) throw new Error(`chamber demo exited (${JSON.stringify(exited)}):\n${output}`);
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`chamber demo did not answer /healthz within ${timeoutMs / 1000} s:\n${output}`);
    }
    await sleep(100);
  }
  const stop = async () => {
    if (exited) return;
    child.kill('SIGTERM');
    for (let i = 0; i < 50 && !exited; i++) await sleep(100);
    if (!exited) child.kill('SIGKILL');
  };
  return { url, stop, log: () => output, startMs: Date.now() - started };
}

/** Headless Chromium (Debian's, or CHAMBER_CHROMIUM) with a fresh profile. */
export async function launchBrowser() {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'chamber-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHAMBER_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1440, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const errors = [];
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  return {
    context,
    page,
    errors,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A module of the dashboard (path relative to web/), compiled on the fly with esbuild. */
export async function loadModule(relativePath) {
  const result = await esbuild.build({
    entryPoints: [path.join(webDir, relativePath)],
    bundle: true,
    format: 'esm',
    write: false,
    platform: 'neutral',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'silent',
  });
  const code = result.outputFiles[0].text;
  return import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`);
}

/** The dashboard's src/format.ts, so that the tests format values as the UI does. */
export function loadFormat() {
  return loadModule('src/format.ts');
}

export async function getJson(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`GET ${url}: ${response.status} ${await response.text()}`);
  return response.json();
}

/** Runs check until it stops throwing, for at most timeoutMs; then throws its last error. */
export async function eventually(check, timeoutMs = 20_000, intervalMs = 150) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw last;
    await sleep(intervalMs);
  }
}

/**
 * What the page shows, read in one go (so from one render): the data-time of the element
 * [data-testid=pageId], and the text of every [data-testid] element (`text`: the first one of
 * each id; `all`: every one, in document order).
 */
export async function readScreen(page, pageId) {
  return page.evaluate((pageId) => {
    const text = {};
    const all = {};
    for (const element of document.querySelectorAll('[data-testid]')) {
      const id = element.getAttribute('data-testid');
      const value = element.textContent.trim();
      if (!(id in text)) text[id] = value;
      (all[id] ??= []).push(value);
    }
    const root = document.querySelector(`[data-testid="${pageId}"]`);
    return { time: root ? root.getAttribute('data-time') : null, text, all };
  }, pageId);
}

/**
 * Waits until the page [data-testid=pageId] shows a snapshot the API's answer at apiUrl was for
 * (equal `time`), then runs compare(answer, screen). Both go on changing while the server runs,
 * so this retries with fresh answers. The answers of the last few snapshots are kept: on a busy
 * machine the page's own fetch and render may take longer than a tick, so that the screen is
 * always a snapshot behind the newest answer, and it is then compared with the answer for the
 * snapshot it shows.
 */
export async function expectScreenMatches(page, pageId, apiUrl, compare, timeoutMs = 30_000) {
  const answers = new Map(); // time -> answer, oldest first
  return eventually(async () => {
    const answer = await getJson(apiUrl);
    answers.set(answer.time, answer);
    while (answers.size > 4) answers.delete(answers.keys().next().value);
    const screen = await readScreen(page, pageId);
    const shown = answers.get(screen.time);
    if (shown === undefined) {
      throw new Error(`screen shows the snapshot of ${screen.time}, the API ${answer.time}`);
    }
    await compare(shown, screen);
    return shown;
  }, timeoutMs);
}

export function screenshotPath(name) {
  const dir = process.env.CHAMBER_SCREENSHOT_DIR ?? path.join(os.tmpdir(), 'chamber-screenshots');
  mkdirSync(dir, { recursive: true });
  return path.join(dir, `${name}.png`);
}

/**
 * Waits until the overview shows the fleet answer's snapshot and checks every figure it shows:
 * utilization, allocation, idle, costs, efficiency, GPU counts, the queue, preemptions and the
 * GPU-hours they lost, the snapshot time and each pool's row with its waits and preemptions,
 * formatted by the dashboard's own src/format.ts (`f`).
 * Returns the answer.
 */
export async function expectOverviewMatches(page, f, apiUrl) {
  return expectScreenMatches(page, 'page-overview', apiUrl, (fleet, screen) => {
    const s = fleet.summary;
    const c = s.cost.currency;
    const expected = {
      'overview-utilization': f.formatPercent(s.utilization),
      'overview-allocation': f.formatPercent(s.allocation),
      'overview-idle': f.formatPercent(s.idle_fraction),
      'overview-idle-cost': f.formatMoneyPerHour(s.cost.idle_per_hour, c),
      'overview-cost': f.formatMoneyPerHour(s.cost.per_hour, c),
      'overview-efficiency': f.formatPercent(s.efficiency.used_over_capacity),
      'overview-efficiency-allocated': f.formatPercent(s.efficiency.used_over_allocated),
      'gpus-capacity': f.formatGpus(s.gpus.capacity),
      'gpus-allocated': f.formatGpus(s.gpus.allocated),
      'gpus-allocated-idle': f.formatGpus(s.gpus.allocated_idle),
      'gpus-idle': f.formatGpus(s.gpus.idle),
      'gpus-unhealthy': f.formatGpus(s.gpus.unhealthy),
      'gpus-used': f.formatGpus(s.gpus.used),
      'queue-pending-workloads': f.formatNumber(s.queue.pending_workloads),
      'queue-pending-gpus': f.formatGpus(s.queue.pending_gpus),
      'queue-wait-p50': f.formatWait(s.queue.wait_p50_seconds, s.queue.started_last_hour),
      'queue-wait-p95': f.formatWait(s.queue.wait_p95_seconds, s.queue.started_last_hour),
      preemptions: f.formatNumber(s.preemptions_last_hour),
      'gpu-hours-lost': f.formatGpuHours(s.gpu_hours_lost_last_hour),
      'fleet-time': f.formatTime(fleet.time),
    };
    for (const pool of fleet.pools) {
      expected[`pool-${pool.name}-capacity`] = f.formatGpus(pool.gpus.capacity);
      expected[`pool-${pool.name}-allocated`] = f.formatGpus(pool.gpus.allocated);
      expected[`pool-${pool.name}-utilization`] = f.formatPercent(pool.utilization);
      expected[`pool-${pool.name}-cost`] = f.formatMoneyPerHour(pool.cost.per_hour, pool.cost.currency);
      expected[`pool-${pool.name}-wait-p50`] = f.formatWait(pool.wait_p50_seconds, pool.started_last_hour);
      expected[`pool-${pool.name}-wait-p95`] = f.formatWait(pool.wait_p95_seconds, pool.started_last_hour);
      expected[`pool-${pool.name}-preemptions`] = f.formatNumber(pool.preemptions_last_hour);
      expected[`pool-${pool.name}-started`] = f.formatNumber(pool.started_last_hour);
      expected[`pool-${pool.name}-lost`] = f.formatGpuHours(pool.gpu_hours_lost_last_hour);
    }
    const shown = Object.fromEntries(Object.keys(expected).map((k) => [k, screen.text[k]]));
    assert.deepEqual(shown, expected);
  });
}
