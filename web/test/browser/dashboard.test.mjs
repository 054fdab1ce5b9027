// The dashboard in headless Chromium against a running `chamber demo`: every page shows the
// API's values (formatted as the dashboard formats them), the heatmap draws one cell per GPU,
// navigation works, and live updates arrive. A screenshot of each page goes to
// $CHAMBER_SCREENSHOT_DIR.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  eventually,
  expectOverviewMatches,
  expectScreenMatches,
  getJson,
  launchBrowser,
  loadFormat,
  loadModule,
  readScreen,
  screenshotPath,
  startServer,
} from './harness.mjs';

describe('dashboard', () => {
  let server;
  let browser;
  let page;
  let f; // src/format.ts

  before(async () => {
    f = await loadFormat();
    server = await startServer({ seed: 7 });
    browser = await launchBrowser();
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function open(route, pageId) {
    await page.goto(`${server.url}/#${route}`);
    await page.waitForSelector(`[data-testid="${pageId}"]`, { timeout: 20_000 });
  }

  async function screenshot(name) {
    await page.screenshot({ path: screenshotPath(name), fullPage: true });
  }

  test('the server serves the bundle and answers unknown paths with index.html', async () => {
    const index = await fetch(`${server.url}/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get('content-type'), /^text\/html/);
    const html = await index.text();
    assert.match(html, /<div id="app"><\/div>/);
    const scriptPath = html.match(/src="(\/assets\/app-[A-Z0-9]+\.js)"/)?.[1];
    assert.ok(scriptPath, 'index.html names the script');
    const script = await fetch(`${server.url}${scriptPath}`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type'), /javascript/);
    const deep = await fetch(`${server.url}/some/client/route`);
    assert.equal(deep.status, 200);
    assert.equal(await deep.text(), html);
  });

  test('fleet overview shows the fleet summary', async () => {
    await open('/', 'page-overview');
    const fleet = await expectOverviewMatches(page, f, `${server.url}/api/v1/fleet`);
    assert.ok(fleet.summary.gpus.capacity > 0, 'the demo has GPUs');
    assert.ok(fleet.pools.length > 0, 'the demo has pools');
    // After the warm-up work has started in the last hour, so pools show waits, not "–".
    assert.ok(fleet.pools.some((p) => p.started_last_hour > 0), 'work started in some pool in the last hour');
    assert.equal(((await readScreen(page, 'page-overview')).text['mode'] ?? '').startsWith('Demo'), fleet.mode === 'demo');
    // The utilization chart holds the history the API returns for the cluster.
    await eventually(async () => {
      const points = Number(await page.getAttribute('[data-testid="utilization-chart"]', 'data-points'));
      assert.ok(points > 0, `utilization chart has ${points} points`);
    });
    await screenshot('overview');
  });

  test('live updates from the event stream change the values on screen', async () => {
    await open('/', 'page-overview');
    await eventually(async () => {
      assert.equal((await readScreen(page, 'page-overview')).text['connection-status'], 'Live');
    });
    const first = (await readScreen(page, 'page-overview')).time;
    // The demo runs in accelerated time: within seconds the fleet's clock moves and the page
    // follows without a reload.
    const next = await eventually(async () => {
      const now = (await readScreen(page, 'page-overview')).time;
      assert.notEqual(now, first, 'the overview still shows the first snapshot');
      return now;
    }, 30_000);
    assert.ok(Date.parse(next) > Date.parse(first), `${next} is after ${first}`);
    // And the new values are the API's.
    await expectScreenMatches(page, 'page-overview', `${server.url}/api/v1/fleet`, (fleet, screen) => {
      assert.equal(screen.text['overview-utilization'], f.formatPercent(fleet.summary.utilization));
      assert.equal(screen.text['gpus-allocated'], f.formatGpus(fleet.summary.gpus.allocated));
    });
  });

  test('without the event stream the dashboard polls, and reconnects when the stream is back', async () => {
    await page.route('**/api/v1/events', (route) => route.abort());
    const errorsBefore = browser.errors.length;
    try {
      await page.goto('about:blank');
      await open('/', 'page-overview');
      await eventually(async () => {
        assert.equal((await readScreen(page, 'page-overview')).text['connection-status'], 'Polling');
      });
      const first = (await readScreen(page, 'page-overview')).time;
      await eventually(async () => {
        assert.notEqual((await readScreen(page, 'page-overview')).time, first, 'polling brought no new snapshot');
      }, 20_000);
    } finally {
      await page.unroute('**/api/v1/events');
    }
    // The blocked requests are logged as failed loads; nothing else may be.
    const blocked = browser.errors.splice(errorsBefore);
    for (const message of blocked) assert.match(message, /net::ERR_FAILED/);
    await eventually(async () => {
      assert.equal((await readScreen(page, 'page-overview')).text['connection-status'], 'Live');
    }, 40_000);
  });

  test('GPU heatmap draws one cell per GPU and shows a GPU on hover and by keyboard', async () => {
    await open('/gpus', 'page-heatmap');
    const list = await expectScreenMatches(page, 'page-heatmap', `${server.url}/api/v1/gpus`, async (list, screen) => {
      const counts = { busy: 0, allocated_idle: 0, idle: 0, unhealthy: 0 };
      for (const g of list.gpus) counts[g.state]++;
      const canvas = await page.$('[data-testid="heatmap-canvas"]');
      assert.equal(Number(await canvas.getAttribute('data-cells')), list.gpus.length, 'cells drawn');
      assert.equal(Number(await canvas.getAttribute('data-nodes')), new Set(list.gpus.map((g) => g.node)).size, 'nodes');
      assert.deepEqual(
        {
          total: screen.text['heatmap-total'],
          busy: screen.text['heatmap-count-busy'],
          allocated_idle: screen.text['heatmap-count-allocated_idle'],
          idle: screen.text['heatmap-count-idle'],
          unhealthy: screen.text['heatmap-count-unhealthy'],
        },
        {
          total: f.formatNumber(list.gpus.length),
          busy: f.formatNumber(counts.busy),
          allocated_idle: f.formatNumber(counts.allocated_idle),
          idle: f.formatNumber(counts.idle),
          unhealthy: f.formatNumber(counts.unhealthy),
        },
      );
    });
    assert.ok(list.gpus.length > 0);

    // Hovering over the first cell shows the first GPU.
    const canvas = await page.$('[data-testid="heatmap-canvas"]');
    const [x, y, size] = (await canvas.getAttribute('data-first-cell')).split(',').map(Number);
    const box = await canvas.boundingBox();
    await page.mouse.move(box.x + x + size / 2, box.y + y + size / 2);
    const tooltip = await page.waitForSelector('[data-testid="heatmap-tooltip"]', { timeout: 5000 });
    const first = list.gpus[0];
    assert.equal(
      await tooltip.$eval('[data-testid="gpu-details-name"]', (e) => e.textContent.trim()),
      `${first.node} / ${first.index}`,
    );
    await screenshot('heatmap');
    await page.mouse.move(0, 0);

    // The keyboard selects GPUs one after another.
    await canvas.focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    const second = list.gpus[1];
    const details = page.locator('.heat-side [data-testid="gpu-details"]');
    assert.equal(await details.getAttribute('data-uuid'), second.uuid);
    assert.equal(
      (await details.locator('[data-testid="gpu-details-name"]').textContent()).trim(),
      `${second.node} / ${second.index}`,
    );
  });

  // On the heatmap of `pool`: selects a GPU the API's answer says is `wanted` (whenever the
  // selected one is not, or no longer: the demo's work comes and goes) and runs `check` on it and
  // on what the page shows of it for the same snapshot: its details, and the colours of its cell
  // at the top, at the bottom, and in its top-right corner.
  async function checkSelectedGpu(pool, what, wanted, check) {
    await open('/gpus', 'page-heatmap');
    await page.selectOption('[data-testid="heatmap-pool"]', pool);
    const canvas = page.locator('[data-testid="heatmap-canvas"]');
    const readSelected = () =>
      page.evaluate(() => {
        const side = document.querySelector('.heat-side [data-testid="gpu-details"]');
        const canvas = document.querySelector('[data-testid="heatmap-canvas"]');
        const cell = canvas.getAttribute('data-selected-cell');
        const colour = (px, py) => {
          const r = window.devicePixelRatio || 1;
          const d = canvas.getContext('2d').getImageData(Math.floor(px * r), Math.floor(py * r), 1, 1).data;
          return '#' + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, '0')).join('');
        };
        const texts = (id) => [...(side?.querySelectorAll(`[data-testid="${id}"]`) ?? [])].map((e) => e.textContent.trim());
        const [x, y, size] = cell ? cell.split(',').map(Number) : [0, 0, 0];
        return {
          time: document.querySelector('[data-testid="page-heatmap"]').getAttribute('data-time'),
          uuid: side?.getAttribute('data-uuid') ?? null,
          held: side?.querySelector('[data-testid="gpu-details-held"]')?.textContent.trim(),
          shares: texts('gpu-details-share'),
          mig: texts('gpu-details-mig-device'),
          top: cell ? colour(x + 1, y + 1) : null,
          bottom: cell ? colour(x + size / 2, y + size - 2) : null,
          corner: cell ? colour(x + size - 1, y + 1) : null,
        };
      });
    await eventually(async () => {
      const list = await getJson(`${server.url}/api/v1/gpus`);
      const screen = await readSelected();
      if (screen.time !== list.time) throw new Error(`screen ${screen.time}, API ${list.time}`);
      const shown = list.gpus.filter((g) => (g.pool ?? g.model) === pool);
      const gpu = shown.find((g) => g.uuid === screen.uuid);
      if (!gpu || !wanted(gpu)) {
        const i = shown.findIndex(wanted);
        assert.ok(i >= 0, what);
        await canvas.focus();
        await page.keyboard.press('Home');
        for (let k = 0; k < i; k++) await page.keyboard.press('ArrowRight');
        throw new Error(`selected ${shown[i].uuid}; it is checked next`);
      }
      await check(gpu, screen);
    }, 60_000);
  }

  test('a GPU that shares divide lists each share, and its cell shows the part they hold', async () => {
    const { stateColors } = await loadModule('src/components/StateBar.tsx');
    const sharedNotFull = (g) => g.shares.length > 0 && g.allocated < 1 && g.state !== 'unhealthy';
    await checkSelectedGpu('l40s', 'an L40S GPU that shares divide', sharedNotFull, (gpu, screen) => {
      const sum = gpu.shares.reduce((a, sh) => a + Math.round(sh.gpu_fraction * 1000), 0);
      assert.equal(Math.round(gpu.allocated * 1000), sum, 'allocated is the shares sum');
      assert.equal(gpu.workload, null);
      assert.equal(gpu.mig, false);
      assert.equal(screen.held, `${f.formatPercent(gpu.allocated)} held`);
      assert.deepEqual(
        screen.shares,
        gpu.shares.map((sh) => `${sh.workload} (${sh.queue}): ${f.formatPercent(sh.gpu_fraction)}`),
      );
      // The cell: the free part at the top in the idle colour, the held part below in the state's,
      // and no MIG mark.
      assert.equal(screen.top, stateColors.idle, 'free part');
      assert.equal(screen.bottom, stateColors[gpu.state], 'held part');
      assert.equal(screen.corner, stateColors.idle, 'no MIG mark');
    });
    await screenshot('heatmap-shares');
  });

  test('a GPU in MIG mode lists its devices and the servers on them, and its cell is marked', async () => {
    const { stateColors } = await loadModule('src/components/StateBar.tsx');
    const { migMarkColor } = await loadModule('src/heatmap.ts');
    const migHeld = (g) => g.mig && g.shares.length > 0 && g.state !== 'unhealthy';
    await checkSelectedGpu('a100', 'an A100 GPU in MIG mode holding servers', migHeld, (gpu, screen) => {
      // The demo's layout of each MIG GPU, as the API lists it: 2 x 1g.10gb, a 2g.20gb, a 3g.40gb.
      assert.deepEqual(gpu.mig_devices.map((d) => d.profile).sort(), ['1g.10gb', '1g.10gb', '2g.20gb', '3g.40gb']);
      assert.deepEqual(screen.mig, gpu.mig_devices.map((d) => `${d.profile}: free`), 'the demo has no pods to name');
      const charge = { '1g.10gb': 142, '2g.20gb': 285, '3g.40gb': 428 };
      const sum = gpu.shares.reduce((a, sh) => a + charge[sh.mig_profile], 0);
      assert.equal(Math.round(gpu.allocated * 1000), sum, 'allocated is the devices charges sum');
      assert.equal(gpu.state, 'busy', 'held MIG devices are busy: NVML measures no MIG utilization');
      assert.deepEqual(
        screen.shares,
        gpu.shares.map((sh) => `${sh.workload} (${sh.queue}): MIG ${sh.mig_profile}, ${f.formatPercent(sh.gpu_fraction)}`),
      );
      assert.equal(screen.corner, migMarkColor, 'the MIG mark');
      assert.equal(screen.bottom, stateColors.busy, 'held part');
    });
    const legend = Number((await page.locator('[data-testid="heatmap-count-mig"]').textContent()).replace(/,/g, ''));
    const list = await getJson(`${server.url}/api/v1/gpus`);
    assert.equal(legend, list.gpus.filter((g) => (g.pool ?? g.model) === 'a100' && g.mig).length);
    await screenshot('heatmap-mig');
  });

  test('queues and teams show quota, usage, borrowed, lent, fair share, waits and lost work per queue', async () => {
    await open('/queues', 'page-queues');
    const answer = await expectScreenMatches(page, 'page-queues', `${server.url}/api/v1/queues`, (answer, screen) => {
      const expected = {};
      const shown = {};
      for (const q of answer.queues) {
        const row = {
          quota: f.formatGpus(q.quota),
          allocated: f.formatGpus(q.allocated),
          'fair-share': f.formatGpus(q.fair_share),
          borrowed: f.formatGpus(q.borrowed),
          lent: f.formatGpus(q.lent),
          pending: f.formatNumber(q.pending_workloads),
          'wait-p50': f.formatWait(q.wait_p50_seconds, q.started_last_hour),
          'wait-p95': f.formatWait(q.wait_p95_seconds, q.started_last_hour),
          preemptions: f.formatNumber(q.preemptions_last_hour),
          lost: f.formatGpuHours(q.gpu_hours_lost_last_hour),
          started: f.formatNumber(q.started_last_hour),
          'preemptions-total': f.formatNumber(q.preemptions_total),
          'lost-total': f.formatGpuHours(q.gpu_hours_lost_total),
          'lost-Reclaim': f.formatGpuHours(q.preemptions_by_reason.Reclaim.gpu_hours_lost),
          'lost-Priority': f.formatGpuHours(q.preemptions_by_reason.Priority.gpu_hours_lost),
          'lost-HardwareFault': f.formatGpuHours(q.preemptions_by_reason.HardwareFault.gpu_hours_lost),
        };
        expected[q.name] = row;
        shown[q.name] = Object.fromEntries(Object.keys(row).map((k) => [k, screen.text[`queue-${q.name}-${k}`]]));
      }
      assert.deepEqual(shown, expected);
      assert.equal(screen.text['queues-count'], f.formatNumber(answer.queues.length));
      const leaves = answer.queues.filter((q) => !answer.queues.some((c) => c.parent === q.name));
      assert.equal(screen.text['queues-lost'], f.formatGpuHours(leaves.reduce((s, q) => s + q.gpu_hours_lost_last_hour, 0)));
    });
    assert.ok(answer.queues.length > 1, 'the demo has several queues');
    // The demo's teams wait and get preempted: each shows its own waits, and some lost work.
    assert.ok(answer.queues.every((q) => q.started_last_hour > 0), 'every team started work in the last hour');
    assert.ok(answer.queues.some((q) => q.gpu_hours_lost_total > 0), 'some team lost work to preemption');
    assert.notEqual(
      await page.getAttribute(`[data-testid="queue-${answer.queues[0].name}-lost-total"]`, 'title'),
      null,
      'the total has its reasons in a tooltip',
    );
    // Children come right after their parent.
    const order = await page.$$eval('[data-testid="queues-table"] tbody tr', (rows) =>
      rows.map((r) => r.getAttribute('data-testid').replace(/^queue-/, '')),
    );
    const parentOf = Object.fromEntries(answer.queues.map((q) => [q.name, q.parent]));
    for (const [i, name] of order.entries()) {
      const parent = parentOf[name];
      if (parent && order.includes(parent)) assert.ok(order.indexOf(parent) < i, `${parent} before ${name}`);
    }
    await screenshot('queues');
  });

  test('workloads list state, pending reasons and queue positions, and filter by state', async () => {
    await open('/workloads', 'page-workloads');
    const check = (answer, screen) => {
      assert.equal(screen.text['workloads-total'], f.formatNumber(answer.total));
      const rows = Math.min(answer.workloads.length, screen.all['wl-name']?.length ?? 0);
      assert.ok(rows > 0 || answer.workloads.length === 0, 'rows are shown');
      for (let i = 0; i < rows; i++) {
        const w = answer.workloads[i];
        assert.deepEqual(
          {
            name: screen.all['wl-name'][i],
            queue: screen.all['wl-queue'][i],
            state: screen.all['wl-state'][i],
            position: screen.all['wl-position'][i],
            reason: screen.all['wl-reason'][i],
            gpus: screen.all['wl-gpus'][i],
          },
          {
            name: w.name,
            queue: w.queue,
            state: w.state,
            position: w.queue_position === null ? '–' : f.formatNumber(w.queue_position),
            reason: w.pending_reason ?? '–',
            gpus: f.formatGpuEquivalents(w.gpus),
          },
        );
      }
    };
    const all = await expectScreenMatches(page, 'page-workloads', `${server.url}/api/v1/workloads?limit=5000`, check);
    assert.ok(all.total > 0, 'the demo has workloads');
    // Notebooks ask for a quarter or a half of a GPU, inference servers for a MIG device charged
    // its compute slices over 7, and say so.
    const shares = new Set(all.workloads.filter((w) => !Number.isInteger(w.gpus)).map((w) => w.gpus));
    const parts = [0.25, 0.5, 0.142, 0.285, 0.428];
    assert.ok([...shares].every((g) => parts.includes(g)) && shares.size > 0, [...shares].join());
    await screenshot('workloads');

    // Filter by the state of the first workload listed (pending ones come first when there are
    // any; a young demo may have none yet).
    const state = all.workloads[0].state;
    await page.selectOption('[data-testid="filter-state"]', state);
    await eventually(async () =>
      assert.match(await page.evaluate(() => window.location.hash), new RegExp(`state=${state}`)),
    );
    const filtered = await expectScreenMatches(
      page,
      'page-workloads',
      `${server.url}/api/v1/workloads?limit=5000&state=${state}`,
      (answer, screen) => {
        check(answer, screen);
        assert.ok((screen.all['wl-state'] ?? []).length > 0, 'rows are shown');
        for (const shown of screen.all['wl-state']) assert.equal(shown, state);
      },
    );
    assert.ok(filtered.total > 0, `${filtered.total} ${state} workloads`);
    for (const w of filtered.workloads) {
      if (w.state === 'pending') assert.ok(w.pending_reason, `pending workload ${w.name} says why`);
    }
  });

  test('a preempted workload shows the GPU-hours it lost and its preemptions', async () => {
    const list = await getJson(`${server.url}/api/v1/workloads?limit=5000`);
    const preempted = list.workloads.find((w) => w.preemption_count > 0);
    assert.ok(preempted, 'the demo has a workload that was preempted');
    await open('/workloads', 'page-workloads');
    await page.fill('[data-testid="filter-name"]', preempted.name);
    // The list shows what it lost, and its name opens it.
    await eventually(async () => {
      const screen = await readScreen(page, 'page-workloads');
      const i = (screen.all['wl-name'] ?? []).indexOf(preempted.name);
      assert.ok(i >= 0, `${preempted.name} is listed`);
      assert.notEqual(screen.all['wl-lost'][i], '–');
    });
    await page.click(`[data-testid="wl-name"]:text-is("${preempted.name}")`);
    await eventually(async () =>
      assert.match(await page.evaluate(() => window.location.hash), new RegExp(`workload=${encodeURIComponent(preempted.name)}`)),
    );
    const path = `${server.url}/api/v1/workloads/${preempted.name.split('/').map(encodeURIComponent).join('/')}`;
    const detail = await expectScreenMatches(page, 'workload-detail', path, (answer, screen) => {
      const w = answer.workload;
      assert.deepEqual(
        {
          state: screen.text['wd-state'],
          queue: screen.text['wd-queue'],
          preemptions: screen.text['wd-preemptions'],
          lost: screen.text['wd-lost'],
          times: screen.all['wd-history-time'],
          reasons: screen.all['wd-history-reason'],
          lostEach: screen.all['wd-history-lost'],
        },
        {
          state: w.state,
          queue: w.queue,
          preemptions: f.formatNumber(w.preemption_count),
          lost: f.formatGpuHours(w.gpu_hours_lost),
          times: w.preemption_history.map((p) => f.formatTime(p.time)),
          reasons: w.preemption_history.map((p) => p.reason),
          lostEach: w.preemption_history.map((p) => f.formatGpuHours(p.gpu_hours_lost)),
        },
      );
    });
    assert.ok(detail.workload.preemption_history.length > 0, 'it has a preemption history');
    const sum = detail.workload.preemption_history.reduce((s, p) => s + p.gpu_hours_lost, 0);
    if (detail.workload.preemption_count === detail.workload.preemption_history.length) {
      assert.ok(Math.abs(sum - detail.workload.gpu_hours_lost) < 1e-9, 'the history adds up to the total');
    }
    await screenshot('workload-detail');
    await page.click('[data-testid="workload-close"]');
    await page.waitForSelector('[data-testid="workload-detail"]', { state: 'detached', timeout: 5000 });
    assert.doesNotMatch(await page.evaluate(() => window.location.hash), /workload=/);
  });

  test('health shows incidents, their evidence and what is fenced', async () => {
    await open('/health', 'page-health');
    const answer = await expectScreenMatches(page, 'page-health', `${server.url}/api/v1/health`, (answer, screen) => {
      assert.deepEqual(
        {
          open: screen.text['health-open'],
          listed: screen.text['health-incidents'],
          nodes: screen.text['health-fenced-nodes'],
          gpus: screen.text['health-fenced-gpus'],
          rows: (screen.all['incident-row'] ?? []).length,
          firstNode: screen.all['incident-node']?.[0],
          messages: screen.all['incident-message'] ?? [],
          severities: screen.all['incident-severity'] ?? [],
          evidence: screen.all['evidence-text'] ?? [],
        },
        {
          open: f.formatNumber(answer.incidents.filter((i) => !i.resolved).length),
          listed: f.formatNumber(answer.incidents.length),
          nodes: f.formatNumber(answer.fenced_nodes.length),
          gpus: f.formatNumber(answer.fenced_gpus.length),
          rows: answer.incidents.length,
          firstNode: answer.incidents[0]?.node,
          messages: answer.incidents.map((i) => i.message),
          severities: answer.incidents.filter((i) => i.severity).map((i) => i.severity),
          evidence: answer.incidents.flatMap((i) => i.evidence.map((e) => f.formatEvidence(e))),
        },
      );
    });
    // The demo's simulated faults come with the evidence a real agent reports: the Xid or the
    // readings, the rule that fired, and what was done.
    assert.ok(answer.incidents.length > 0, 'the demo has GPU faults by now');
    for (const i of answer.incidents) {
      assert.ok(['xid-hardware', 'thermal-critical'].includes(i.cause), `${i.node}/${i.gpu_index}: cause ${i.cause}`);
      const types = i.evidence.map((e) => e.type);
      assert.ok(types[0] === 'xid' || types[0] === 'thermal', `first item: ${types[0]}`);
      assert.deepEqual(types.slice(-2), ['rule', 'action']);
      assert.equal(i.evidence.at(-2).rule, i.cause);
      assert.equal(i.evidence.at(-1).gpu_fenced, true);
      assert.ok(!i.message.includes('failed its health checks'), i.message);
    }
    await screenshot('health');
  });

  test('cost shows the cost now, since start, per pool and per queue, and its history', async () => {
    await open('/cost', 'page-cost');
    await expectScreenMatches(page, 'page-cost', `${server.url}/api/v1/cost`, (cost, screen) => {
      const c = cost.currency;
      const expected = {
        'cost-per-hour': f.formatMoneyPerHour(cost.per_hour, c),
        'cost-idle-per-hour': f.formatMoneyPerHour(cost.idle_per_hour, c),
        'cost-unallocated': f.formatMoneyPerHour(cost.unallocated_per_hour, c),
        'cost-allocated-idle': f.formatMoneyPerHour(cost.allocated_idle_per_hour, c),
        'cost-backfill-per-hour': f.formatMoneyPerHour(cost.backfill_savings_per_hour, c),
        'cost-total': f.formatMoney(cost.totals.cost, c),
        'cost-idle-total': f.formatMoney(cost.totals.idle_cost, c),
        'cost-backfill-total': f.formatMoney(cost.totals.backfill_savings, c),
      };
      for (const p of cost.pools) {
        expected[`cost-pool-${p.name}-per-hour`] = f.formatMoneyPerHour(p.per_hour, c);
        expected[`cost-pool-${p.name}-idle`] = f.formatMoneyPerHour(p.idle_per_hour, c);
      }
      for (const q of cost.queues) expected[`cost-queue-${q.name}-per-hour`] = f.formatMoneyPerHour(q.per_hour, c);
      const shown = Object.fromEntries(Object.keys(expected).map((k) => [k, screen.text[k]]));
      assert.deepEqual(shown, expected);
    });
    await eventually(async () => {
      const points = Number(await page.getAttribute('[data-testid="cost-chart"]', 'data-points'));
      assert.ok(points > 0, `cost chart has ${points} points`);
    });
    await screenshot('cost');
  });

  test('navigation reaches every page through the sidebar and the history', async () => {
    await open('/', 'page-overview');
    const pages = [
      ['nav-gpus', 'page-heatmap', '#/gpus', 'GPU heatmap'],
      ['nav-queues', 'page-queues', '#/queues', 'Queues and teams'],
      ['nav-workloads', 'page-workloads', '#/workloads', 'Workloads'],
      ['nav-health', 'page-health', '#/health', 'Health'],
      ['nav-cost', 'page-cost', '#/cost', 'Cost'],
      ['nav-overview', 'page-overview', '#/', 'Fleet overview'],
    ];
    for (const [link, pageId, hash, title] of pages) {
      await page.click(`[data-testid="${link}"]`);
      await page.waitForSelector(`[data-testid="${pageId}"]`, { timeout: 10_000 });
      assert.equal(await page.evaluate(() => window.location.hash), hash);
      assert.equal((await page.textContent('[data-testid="page-title"]')).trim(), title);
      assert.equal(await page.getAttribute(`[data-testid="${link}"]`, 'aria-current'), 'page');
    }
    await page.goBack();
    await page.waitForSelector('[data-testid="page-cost"]', { timeout: 10_000 });
    // The keyboard reaches the navigation: on a fresh load, Tab focuses the skip link, then the
    // first page link.
    await open('/cost', 'page-cost');
    await page.reload();
    await page.waitForSelector('[data-testid="page-cost"]', { timeout: 10_000 });
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-testid')), 'nav-overview');
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid="page-overview"]', { timeout: 10_000 });
    // An unknown route says so.
    await page.goto(`${server.url}/#/nowhere`);
    assert.equal((await page.textContent('[data-testid="page-title"]')).trim(), 'Not found');
  });

  test('no errors in the browser console', () => {
    assert.deepEqual(browser.errors, []);
  });
});
