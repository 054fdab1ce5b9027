// The dashboard at the scale it is built for: `chamber demo --gpus 10000` in headless Chromium.
// The overview shows every figure of the API's fleet answer, the heatmap draws one cell for each
// of the 10,000 GPUs, and pages load and live updates redraw without stalling the browser. It
// prints the figures it measured (demo start, page loads, first heatmap draw, redraws, the
// longest main-thread task) and fails only on pathologies (anything over 10 s). Screenshots go
// to $CHAMBER_SCREENSHOT_DIR as overview-10k.png and heatmap-10k.png.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  eventually,
  expectOverviewMatches,
  expectScreenMatches,
  getJson,
  launchBrowser,
  loadFormat,
  screenshotPath,
  startServer,
} from './harness.mjs';

const wantedGpus = 10_000;
// Generous: a page or a draw this slow is a defect, not a slow machine.
const slowMs = 10_000;

describe(
  'dashboard with 10,000 GPUs',
  { skip: process.env.CHAMBER_API_URL ? 'starts its own 10,000-GPU demo; CHAMBER_API_URL is set' : false },
  () => {
    let server;
    let browser;
    let page;
    let f; // src/format.ts
    const figures = [];
    const figure = (name, ms) => {
      figures.push([name, ms]);
      assert.ok(Number.isFinite(ms), `${name}: ${ms}`);
      assert.ok(ms < slowMs, `${name} took ${Math.round(ms)} ms`);
    };

    before(async () => {
      f = await loadFormat();
      server = await startServer({ seed: 7, args: ['--gpus', String(wantedGpus)], timeoutMs: 120_000 });
      browser = await launchBrowser();
      page = browser.page;
      // Long main-thread tasks (50 ms or more) from the first load of each document on.
      await page.addInitScript(() => {
        window.__longTasks = [];
        new PerformanceObserver((list) => {
          for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, ms: e.duration });
        }).observe({ type: 'longtask', buffered: true });
      });
    });

    after(async () => {
      await browser?.close();
      await server?.stop();
      if (figures.length > 0) {
        const width = Math.max(...figures.map(([name]) => name.length));
        console.log(`dashboard with ${wantedGpus.toLocaleString('en-US')} GPUs, ms:`);
        for (const [name, ms] of figures) console.log(`  ${name.padEnd(width)}  ${ms.toFixed(0).padStart(6)}`);
      }
    });

    async function screenshot(name) {
      await page.screenshot({ path: screenshotPath(name), fullPage: true });
    }

    const longTasks = () => page.evaluate(() => window.__longTasks ?? []);

    test('the demo simulates about 10,000 GPUs, busy, in pools of the same shape', async () => {
      figures.push(['demo start (to /healthz)', server.startMs]);
      const fleet = await getJson(`${server.url}/api/v1/fleet`);
      const capacity = fleet.summary.gpus.capacity;
      assert.ok(Math.abs(capacity - wantedGpus) <= 16, `${capacity} GPUs`);
      assert.equal(server.log().match(/a simulated cluster of (\d+) GPUs/)?.[1], String(capacity));
      assert.deepEqual(
        fleet.pools.map((p) => p.name),
        ['h100', 'a100', 'l40s'],
      );
      assert.equal(
        fleet.pools.reduce((sum, p) => sum + p.gpus.capacity, 0),
        capacity,
      );
      // After the warm-up the fleet is busy and work waits, as in the 264-GPU demo.
      assert.ok(fleet.summary.allocation > 0.5, `allocation ${fleet.summary.allocation}`);
      assert.ok(fleet.summary.queue.pending_workloads > 0, 'workloads wait');
      const list = await getJson(`${server.url}/api/v1/gpus`);
      assert.equal(list.gpus.length, capacity);
    });

    test('the overview shows every figure of /api/v1/fleet', async () => {
      const begin = Date.now();
      await page.goto(`${server.url}/#/`);
      await page.waitForSelector('[data-testid="page-overview"]', { timeout: slowMs });
      figure('overview: load to first data', Date.now() - begin);
      await expectOverviewMatches(page, f, `${server.url}/api/v1/fleet`);
      await eventually(async () => {
        const points = Number(await page.getAttribute('[data-testid="utilization-chart"]', 'data-points'));
        assert.ok(points > 0, `utilization chart has ${points} points`);
      });
      await screenshot('overview-10k');
    });

    test('the heatmap draws a cell for every GPU', async () => {
      const { capacity } = (await getJson(`${server.url}/api/v1/fleet`)).summary.gpus;
      await page.goto('about:blank');
      await page.goto(`${server.url}/#/gpus`);
      await page.waitForFunction(
        (n) => Number(document.querySelector('[data-testid="heatmap-canvas"]')?.getAttribute('data-cells')) === n,
        capacity,
        { timeout: slowMs },
      );
      // Navigation start to the first draw: fetching, parsing and laying out /api/v1/gpus, drawing.
      figure('heatmap: navigation to first draw', await page.evaluate(() => performance.getEntriesByName('heatmap-first-draw')[0]?.startTime ?? NaN));
      figure('heatmap: first draw alone', Number(await page.getAttribute('[data-testid="heatmap-canvas"]', 'data-draw-ms')));

      const list = await expectScreenMatches(page, 'page-heatmap', `${server.url}/api/v1/gpus`, async (list, screen) => {
        const canvas = await page.$('[data-testid="heatmap-canvas"]');
        const counts = { busy: 0, allocated_idle: 0, idle: 0, unhealthy: 0 };
        for (const g of list.gpus) counts[g.state]++;
        assert.deepEqual(
          {
            cells: Number(await canvas.getAttribute('data-cells')),
            nodes: Number(await canvas.getAttribute('data-nodes')),
            total: screen.text['heatmap-total'],
            busy: screen.text['heatmap-count-busy'],
            allocated_idle: screen.text['heatmap-count-allocated_idle'],
            idle: screen.text['heatmap-count-idle'],
            unhealthy: screen.text['heatmap-count-unhealthy'],
          },
          {
            cells: list.gpus.length,
            nodes: new Set(list.gpus.map((g) => g.node)).size,
            total: f.formatNumber(list.gpus.length),
            busy: f.formatNumber(counts.busy),
            allocated_idle: f.formatNumber(counts.allocated_idle),
            idle: f.formatNumber(counts.idle),
            unhealthy: f.formatNumber(counts.unhealthy),
          },
        );
      });
      assert.equal(list.gpus.length, capacity);
      // The canvas is as tall as the layout: every row of nodes is on it, none cut off.
      const box = await (await page.$('[data-testid="heatmap-canvas"]')).boundingBox();
      assert.ok(box.height > 200, `canvas ${box.width}x${box.height}`);
      await screenshot('heatmap-10k');
    });

    test('live updates redraw the heatmap without stalling the page', async () => {
      const first = await page.getAttribute('[data-testid="page-heatmap"]', 'data-time');
      const before = (await longTasks()).length;
      const begin = Date.now();
      // The demo publishes a fleet every 2 s and the heatmap refetches at most every 3 s.
      await eventually(async () => {
        const now = await page.getAttribute('[data-testid="page-heatmap"]', 'data-time');
        assert.notEqual(now, first, 'the heatmap still shows its first snapshot');
      }, 20_000, 50);
      figure('heatmap: live update arrives', Date.now() - begin);
      figure('heatmap: redraw alone', Number(await page.getAttribute('[data-testid="heatmap-canvas"]', 'data-draw-ms')));
      assert.equal(
        Number(await page.getAttribute('[data-testid="heatmap-canvas"]', 'data-cells')),
        (await getJson(`${server.url}/api/v1/fleet`)).summary.gpus.capacity,
      );
      const tasks = (await longTasks()).slice(before);
      figure('heatmap: longest main-thread task in the update', Math.max(0, ...tasks.map((t) => t.ms)));
    });

    test('every page loads its data through the sidebar', async () => {
      await page.goto(`${server.url}/#/`);
      await page.waitForSelector('[data-testid="page-overview"]', { timeout: slowMs });
      const pages = [
        ['nav-gpus', 'page-heatmap', 'heatmap'],
        ['nav-queues', 'page-queues', 'queues'],
        ['nav-workloads', 'page-workloads', 'workloads'],
        ['nav-health', 'page-health', 'health'],
        ['nav-cost', 'page-cost', 'cost'],
        ['nav-overview', 'page-overview', 'overview'],
      ];
      const tasksBefore = (await longTasks()).length;
      for (const [link, pageId, name] of pages) {
        const begin = Date.now();
        await page.click(`[data-testid="${link}"]`);
        await page.waitForSelector(`[data-testid="${pageId}"]:not([data-time=""])`, { timeout: slowMs });
        figure(`navigate: ${name} with data`, Date.now() - begin);
      }
      // The heatmap page again, now from the sidebar: its cells come back within the bound.
      const begin = Date.now();
      await page.click('[data-testid="nav-gpus"]');
      const { capacity } = (await getJson(`${server.url}/api/v1/fleet`)).summary.gpus;
      await page.waitForFunction(
        (n) => Number(document.querySelector('[data-testid="heatmap-canvas"]')?.getAttribute('data-cells')) === n,
        capacity,
        { timeout: slowMs },
      );
      figure('navigate: heatmap drawn again', Date.now() - begin);
      const tasks = (await longTasks()).slice(tasksBefore);
      figure('navigate: longest main-thread task', Math.max(0, ...tasks.map((t) => t.ms)));
    });

    test('no errors in the browser console', () => {
      assert.deepEqual(browser.errors, []);
    });
  },
);
