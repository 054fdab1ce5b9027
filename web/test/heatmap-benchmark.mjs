// Time to first render of the GPU heatmap with many GPUs, in headless Chromium, against the
// fixture server (the demo's fleet is smaller).
//   node test/heatmap-benchmark.mjs --dist <bundle dir> [--gpus 10000] [--runs 5]
// Prints, per run and as medians: ms from navigation start to the first heatmap draw, and the ms
// the draw itself took.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { launchBrowser } from './browser/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    dist: { type: 'string' },
    gpus: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '5' },
    port: { type: 'string', default: '18977' },
  },
});
if (!args.dist) {
  console.error('usage: node test/heatmap-benchmark.mjs --dist <bundle dir> [--gpus N] [--runs N]');
  process.exit(2);
}

const server = spawn(process.execPath, [path.join(here, 'fixture-server.mjs'), '--dist', args.dist, '--port', args.port, '--gpus', args.gpus], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise((resolve) => server.stdout.once('data', resolve));
const url = `http://127.0.0.1:${args.port}`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const browser = await launchBrowser();
const firstDraw = [];
const drawMs = [];
try {
  for (let run = 0; run < Number(args.runs); run++) {
    await browser.page.goto('about:blank');
    await browser.page.goto(`${url}/#/gpus`);
    await browser.page.waitForFunction(
      (n) => Number(document.querySelector('[data-testid="heatmap-canvas"]')?.getAttribute('data-cells')) === n,
      Number(args.gpus),
      { timeout: 60_000 },
    );
    const mark = await browser.page.evaluate(() => performance.getEntriesByName('heatmap-first-draw')[0]?.startTime ?? NaN);
    const draw = Number(await browser.page.getAttribute('[data-testid="heatmap-canvas"]', 'data-draw-ms'));
    firstDraw.push(mark);
    drawMs.push(draw);
    console.log(`run ${run + 1}: first draw at ${mark.toFixed(0)} ms, draw ${draw.toFixed(1)} ms`);
  }
  console.log(`${args.gpus} GPUs: median first draw ${median(firstDraw).toFixed(0)} ms after navigation start, median draw ${median(drawMs).toFixed(1)} ms`);
} finally {
  await browser.close();
  server.kill();
}
