// A stand-in for `chamber demo` for working on the dashboard alone: serves a bundle directory
// and the REST API of docs/openapi.yaml with synthetic, changing data. Not used by the tests,
// which run against the real server.
//   node test/fixture-server.mjs --dist <bundle dir> [--port 8080] [--gpus 512]
import { createServer } from 'node:http';
import { readFileSync, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    port: { type: 'string', default: '8080' },
    gpus: { type: 'string', default: '512' },
    seed: { type: 'string', default: '1' },
  },
});

let seed = Number(args.seed) || 1;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);

const poolDefs = [
  { name: 'h100-ondemand', model: 'H100', pricing: 'on-demand', price: 4.5, perNode: 8 },
  { name: 'a100-reserved', model: 'A100', pricing: 'reserved', price: 2.1, perNode: 8 },
  { name: 'l4-spot', model: 'L4', pricing: 'spot', price: 0.35, perNode: 4 },
];
const queues = [
  { name: 'research', parent: null, quota: 0, weight: 1 },
  { name: 'vision', parent: 'research', quota: 0.3, weight: 2 },
  { name: 'language', parent: 'research', quota: 0.3, weight: 2 },
  { name: 'production', parent: null, quota: 0.25, weight: 3 },
  { name: 'interns', parent: null, quota: 0.05, weight: 1 },
];
const leafQueues = queues.filter((q) => !queues.some((c) => c.parent === q.name));

const total = Number(args.gpus);
const gpus = [];
{
  let made = 0;
  let nodeNo = 0;
  while (made < total) {
    for (const pool of poolDefs) {
      if (made >= total) break;
      nodeNo++;
      const node = `${pool.model.toLowerCase()}-node-${String(nodeNo).padStart(4, '0')}`;
      for (let i = 0; i < pool.perNode && made < total; i++, made++) {
        gpus.push({
          node, index: i, uuid: `GPU-${String(made).padStart(8, '0')}-fixture`, model: pool.model, pool: pool.name,
          state: 'idle', utilization: 0, memory_used_bytes: 0, memory_total_bytes: 80 * 2 ** 30, workload: null, queue: null,
        });
      }
    }
  }
  gpus.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : a.index - b.index));
}

let now = Date.parse('2026-11-30T08:00:00Z');
const started = now;
const history = { utilization: [], allocation: [], cost_per_hour: [], idle_cost_per_hour: [] };
let workloads = [];
let incidents = [];
let totals = { cost: 0, idle: 0, used: 0, alloc: 0, cap: 0 };

function step() {
  now += 60_000;
  workloads = [];
  let w = 0;
  for (const g of gpus) {
    if (g.state === 'unhealthy' && random() < 0.9) continue;
    const r = random();
    if (r < 0.002) {
      g.state = 'unhealthy'; g.utilization = 0; g.workload = null; g.queue = null;
      incidents.unshift({ time: new Date(now).toISOString(), node: g.node, gpu_index: g.index, uuid: g.uuid, kind: 'gpu_unhealthy',
        cause: 'xid-hardware', severity: 'fatal',
        message: `GPU ${g.index} on ${g.node}: Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable over PCIe`,
        evidence: [
          { type: 'xid', xid: 79, name: 'GPU has fallen off the bus', meaning: 'the GPU is no longer reachable over PCIe', class: 'hardware', source: 'simulated', count: null },
          { type: 'rule', rule: 'xid-hardware', severity: 'fatal', condition: 'a hardware Xid; severity from the Xid table', threshold: 'Xid 79 is a hardware Xid, fatal in the Xid table' },
          { type: 'action', gpu_fenced: true, taint: null, breaker_held: false, workloads_requeued: [], workloads_requeued_count: 0 },
        ],
        resolved: false, resolved_time: null });
      continue;
    }
    if (g.state === 'unhealthy') {
      const inc = incidents.find((i) => i.uuid === g.uuid && !i.resolved);
      if (inc) { inc.resolved = true; inc.resolved_time = new Date(now).toISOString(); }
    }
    if (r < 0.25) { g.state = 'idle'; g.utilization = 0; g.workload = null; g.queue = null; }
    else {
      const q = leafQueues[Math.floor(random() * leafQueues.length)];
      g.queue = q.name; g.workload = `${q.name}-job-${String(Math.floor(random() * 400)).padStart(4, '0')}`;
      if (r < 0.38) { g.state = 'allocated_idle'; g.utilization = random() * 0.04; }
      else { g.state = 'busy'; g.utilization = 0.3 + random() * 0.7; }
    }
    g.memory_used_bytes = Math.round(g.utilization * g.memory_total_bytes);
  }
  incidents = incidents.slice(0, 200);
  const pending = Math.floor(total / 16);
  for (let i = 0; i < pending; i++) {
    const q = leafQueues[i % leafQueues.length];
    workloads.push({ name: `${q.name}-pending-${String(i).padStart(5, '0')}`, queue: q.name, priority: i % 3, state: 'pending', gpus: 1 + (i % 8), borrowing: false,
      pending_reason: i % 3 === 0 ? 'QuotaExceeded' : 'NoNodeFits', pending_message: i % 3 === 0 ? `queue ${q.name} is at its quota` : `no node has ${1 + (i % 8)} free GPUs of the requested model`,
      queue_position: i + 1, submitted: new Date(now - (i + 1) * 37_000).toISOString(), started: null, nodes: [],
      preemption_count: i % 11 === 0 ? 2 : 0, gpu_hours_lost: i % 11 === 0 ? 3.5 : 0 });
  }
  const running = new Map();
  for (const g of gpus) if (g.workload) running.set(g.workload, g);
  for (const [name, g] of running) {
    workloads.push({ name, queue: g.queue, priority: 1, state: w++ % 40 === 0 ? 'preempting' : 'running', gpus: 1, borrowing: w % 7 === 0, pending_reason: null, pending_message: null,
      queue_position: null, submitted: new Date(now - 3_600_000).toISOString(), started: new Date(now - 3_000_000).toISOString(), nodes: [g.node],
      preemption_count: 0, gpu_hours_lost: 0 });
  }
  const f = fleet();
  const t = Math.floor(now / 1000);
  history.utilization.push([t, f.summary.utilization]);
  history.allocation.push([t, f.summary.allocation]);
  history.cost_per_hour.push([t, f.summary.cost.per_hour]);
  history.idle_cost_per_hour.push([t, f.summary.cost.idle_per_hour]);
  totals.cost += f.summary.cost.per_hour / 60; totals.idle += f.summary.cost.idle_per_hour / 60;
  totals.used += f.summary.gpus.used / 60; totals.alloc += f.summary.gpus.allocated / 60; totals.cap += f.summary.gpus.capacity / 60;
}

// The last hour of a pool or queue, made up from its name so that it stays put between steps.
function recent(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) % 1000;
  const started = h % 40;
  return { started_last_hour: started, wait_p50_seconds: started ? 20 + (h % 300) : 0, wait_p95_seconds: started ? 400 + h * 3 : 0,
    preemptions_last_hour: h % 5, gpu_hours_lost_last_hour: (h % 5) * 1.25 };
}

function lostTotals(name) {
  const r = recent(name);
  const by = { Reclaim: { preemptions: r.preemptions_last_hour, gpu_hours_lost: r.gpu_hours_lost_last_hour },
    Priority: { preemptions: 1, gpu_hours_lost: 0.5 }, HardwareFault: { preemptions: 0, gpu_hours_lost: 0 } };
  return { preemptions_total: r.preemptions_last_hour + 1, gpu_hours_lost_total: r.gpu_hours_lost_last_hour + 0.5, preemptions_by_reason: by };
}

function counts(list) {
  const c = { capacity: list.length, allocated: 0, used: 0, idle: 0, allocated_idle: 0, unhealthy: 0 };
  for (const g of list) {
    if (g.workload) c.allocated++;
    c.used += g.utilization;
    if (g.state === 'idle') c.idle++;
    if (g.state === 'allocated_idle') c.allocated_idle++;
    if (g.state === 'unhealthy') c.unhealthy++;
  }
  c.used = Math.round(c.used * 100) / 100;
  return c;
}

const priceOf = (g) => poolDefs.find((p) => p.name === g.pool).price;
function rate(list) {
  let per = 0, idle = 0;
  for (const g of list) { per += priceOf(g); if (g.state === 'idle' || g.state === 'allocated_idle') idle += priceOf(g); }
  return { per_hour: Math.round(per * 100) / 100, idle_per_hour: Math.round(idle * 100) / 100, currency: 'USD' };
}

function fleet() {
  const c = counts(gpus);
  const pending = workloads.filter((w) => w.state === 'pending');
  return {
    time: new Date(now).toISOString(), mode: 'demo', simulated: true,
    summary: {
      gpus: c, utilization: c.used / c.capacity, allocation: c.allocated / c.capacity, idle_fraction: (c.idle + c.allocated_idle) / c.capacity,
      efficiency: { used_over_capacity: totals.cap ? totals.used / totals.cap : 0, used_over_allocated: totals.alloc ? totals.used / totals.alloc : 0 },
      cost: rate(gpus),
      queue: { pending_workloads: pending.length, pending_gpus: pending.reduce((s, w) => s + w.gpus, 0), started_last_hour: 57, wait_p50_seconds: 312, wait_p95_seconds: 2710 },
      preemptions_last_hour: workloads.filter((w) => w.state === 'preempting').length,
      gpu_hours_lost_last_hour: workloads.filter((w) => w.state === 'preempting').length * 1.5,
      nodes: new Set(gpus.map((g) => g.node)).size, running_workloads: workloads.filter((w) => w.state === 'running').length, cycle_ms: 3.2,
    },
    pools: poolDefs.map((p) => {
      const list = gpus.filter((g) => g.pool === p.name);
      const pc = counts(list);
      return { name: p.name, model: p.model, pricing: p.pricing, price_per_gpu_hour: p.price, nodes: new Set(list.map((g) => g.node)).size,
        gpus: pc, utilization: pc.used / (pc.capacity || 1), allocation: pc.allocated / (pc.capacity || 1), cost: rate(list), ...recent(p.name) };
    }),
  };
}

function queueList() {
  const cap = gpus.length;
  const out = queues.map((q) => {
    const held = gpus.filter((g) => g.queue === q.name || queues.some((c) => c.parent === q.name && c.name === g.queue));
    const quota = q.parent === null && q.quota === 0 ? queues.filter((c) => c.parent === q.name).reduce((s, c) => s + Math.round(c.quota * cap), 0) : Math.round(q.quota * cap);
    const allocated = held.length;
    const pend = workloads.filter((w) => w.state === 'pending' && (w.queue === q.name || queues.some((c) => c.parent === q.name && c.name === w.queue)));
    return { name: q.name, parent: q.parent, quota, limit: q.name === 'interns' ? Math.round(cap * 0.1) : null, weight: q.weight, allocated,
      used: Math.round(held.reduce((s, g) => s + g.utilization, 0) * 10) / 10, fair_share: Math.round(quota * 1.1), borrowed: Math.max(0, allocated - quota),
      lent: Math.max(0, quota - allocated), pending_workloads: pend.length, pending_gpus: pend.reduce((s, w) => s + w.gpus, 0),
      running_workloads: new Set(held.map((g) => g.workload)).size, cost_per_hour: Math.round(held.reduce((s, g) => s + priceOf(g), 0) * 100) / 100,
      ...recent(q.name), ...lostTotals(q.name), error: null };
  });
  return { time: new Date(now).toISOString(), queues: out };
}

function cost() {
  const f = fleet();
  const unalloc = rate(gpus.filter((g) => g.state === 'idle')).per_hour;
  const t = { since: new Date(started).toISOString(), capacity_gpu_hours: totals.cap, allocated_gpu_hours: totals.alloc, used_gpu_hours: totals.used,
    cost: totals.cost, idle_cost: totals.idle, backfill_gpu_hours: totals.alloc * 0.08, backfill_savings: totals.cost * 0.05 };
  return { time: f.time, currency: 'USD', per_hour: f.summary.cost.per_hour, idle_per_hour: f.summary.cost.idle_per_hour,
    unallocated_per_hour: unalloc, allocated_idle_per_hour: Math.round((f.summary.cost.idle_per_hour - unalloc) * 100) / 100,
    backfill_savings_per_hour: Math.round(f.summary.cost.per_hour * 0.04 * 100) / 100, totals: t,
    pools: f.pools.map((p) => ({ name: p.name, model: p.model, pricing: p.pricing, price_per_gpu_hour: p.price_per_gpu_hour, per_hour: p.cost.per_hour, idle_per_hour: p.cost.idle_per_hour })),
    queues: queueList().queues.filter((q) => !queues.some((c) => c.parent === q.name)).map((q) => ({ name: q.name, per_hour: q.cost_per_hour, backfill_per_hour: Math.round(q.borrowed * 2 * 100) / 100 })) };
}

for (let i = 0; i < 120; i++) step();

const sse = new Set();
setInterval(() => {
  step();
  const body = `event: fleet\ndata: ${JSON.stringify(fleet())}\n\n`;
  for (const res of sse) res.write(body);
}, 1000);

const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  const json = (body, status = 200) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
  const p = url.pathname;
  if (p === '/healthz') return res.end('ok\n');
  if (p === '/api/v1/fleet') return json(fleet());
  if (p === '/api/v1/gpus') return json({ time: new Date(now).toISOString(), gpus });
  if (p === '/api/v1/queues') return json(queueList());
  if (p === '/api/v1/health') {
    const fencedGpus = gpus.filter((g) => g.state === 'unhealthy').map((g) => ({ node: g.node, index: g.index, uuid: g.uuid }));
    return json({ time: new Date(now).toISOString(), incidents, fenced_nodes: Array.from(new Set(fencedGpus.map((g) => g.node))).slice(0, 3), fenced_gpus: fencedGpus });
  }
  if (p === '/api/v1/cost') return json(cost());
  if (p === '/api/v1/workloads') {
    const limit = Number(url.searchParams.get('limit') ?? 1000);
    const list = workloads.filter((w) => (!url.searchParams.get('queue') || w.queue === url.searchParams.get('queue')) && (!url.searchParams.get('state') || w.state === url.searchParams.get('state')));
    return json({ time: new Date(now).toISOString(), total: list.length, workloads: list.slice(0, limit) });
  }
  if (p.startsWith('/api/v1/workloads/')) {
    const name = p.slice('/api/v1/workloads/'.length).split('/').map(decodeURIComponent).join('/');
    const w = workloads.find((x) => x.name === name);
    if (!w) return json({ error: `no workload or pod named "${name}"` }, 404);
    const history = Array.from({ length: w.preemption_count }, (_, i) => ({
      time: new Date(now - (i + 1) * 600_000).toISOString(), reason: i % 2 ? 'Priority' : 'Reclaim', gpu_hours_lost: w.gpu_hours_lost / w.preemption_count })).reverse();
    return json({ time: new Date(now).toISOString(), workload: { ...w, reserved: false, pods: [], pending_details: [], preemptions: history.map((h) => h.time),
      preemption_history: history }, pod: null, queue: queueList().queues.find((q) => q.name === w.queue) ?? null });
  }
  if (p === '/api/v1/history') {
    const metric = url.searchParams.get('metric');
    if (!metric) return json({ metrics: Object.keys(history), scopes: ['cluster'], resolutions: [{ step: 60, retention: 172800 }] });
    if (!history[metric]) return json({ error: `unknown metric ${metric}` }, 400);
    const to = Number(url.searchParams.get('to') ?? Math.floor(now / 1000));
    const from = Number(url.searchParams.get('from') ?? to - 3600);
    return json({ metric, scope: 'cluster', from, to, step: 60, points: history[metric].filter(([t]) => t >= from && t <= to) });
  }
  if (p === '/api/v1/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(`event: fleet\ndata: ${JSON.stringify(fleet())}\n\n`);
    sse.add(res);
    req.on('close', () => sse.delete(res));
    return;
  }
  if (p.startsWith('/api/')) return json({ error: 'not found' }, 404);
  let file = path.join(args.dist, p === '/' ? 'index.html' : p);
  if (!existsSync(file) || !statSync(file).isFile()) file = path.join(args.dist, 'index.html');
  res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' });
  res.end(readFileSync(file));
}).listen(Number(args.port), '127.0.0.1', () => console.log(`fixture API on http://127.0.0.1:${args.port}/ with ${gpus.length} GPUs`));
