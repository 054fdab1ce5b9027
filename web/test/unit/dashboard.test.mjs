// The dashboard's pure parts, in Node: number formatting, the heatmap's layout and hit testing,
// the queue tree, and history ranges.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { loadModule } from '../browser/harness.mjs';

let f;
let heatmap;
let queues;
let history;
let workloads;

before(async () => {
  f = await loadModule('src/format.ts');
  workloads = await loadModule('src/pages/WorkloadsPage.tsx');
  heatmap = await loadModule('src/heatmap.ts');
  queues = await loadModule('src/pages/QueuesPage.tsx');
  history = await loadModule('src/history.ts');
});

describe('format', () => {
  test('numbers, percentages and GPU counts', () => {
    assert.equal(f.formatNumber(1234567), '1,234,567');
    assert.equal(f.formatNumber(-1234.5, 1), '-1,234.5');
    assert.equal(f.formatNumber(-0.04, 1), '0.0');
    assert.equal(f.formatNumber(NaN), '–');
    assert.equal(f.formatPercent(0.4567), '45.7%');
    assert.equal(f.formatPercent(1), '100.0%');
    assert.equal(f.formatGpus(10000), '10,000');
    assert.equal(f.formatGpus(203.83), '203.8');
    assert.equal(f.formatGpuEquivalents(8), '8');
    assert.equal(f.formatGpuEquivalents(0.25), '0.25');
    assert.equal(f.formatGpuEquivalents(0.5), '0.5');
    assert.equal(f.formatGpuEquivalents(1.125), '1.125');
    assert.equal(f.formatGpuEquivalents(1200.5), '1,200.5');
  });

  test('money', () => {
    assert.equal(f.formatMoneyPerHour(12.5), '$12.50/h');
    assert.equal(f.formatMoneyPerHour(1399.4), '$1,399/h');
    assert.equal(f.formatMoney(999.999), '$1,000.00');
    assert.equal(f.formatMoney(-3.2, 'EUR'), '-€3.20');
    assert.equal(f.formatMoney(5, 'CHF'), 'CHF 5.00');
  });

  test('durations, bytes and times', () => {
    assert.equal(f.formatDuration(45), '45s');
    assert.equal(f.formatDuration(725), '12m 05s');
    assert.equal(f.formatDuration(3 * 3600 + 7 * 60 + 59), '3h 07m');
    assert.equal(f.formatDuration(-1), '–');
    assert.equal(f.formatBytes(512), '512 B');
    assert.equal(f.formatBytes(80 * 2 ** 30), '80.0 GiB');
    assert.equal(f.formatTime('2026-11-30T08:00:05Z'), '2026-11-30 08:00:05 UTC');
    assert.equal(f.formatTime('2026-11-30T08:00:05.250Z'), '2026-11-30 08:00:05 UTC');
    assert.equal(f.formatTime(null), '–');
  });

  test('GPU-hours and waits of the last hour', () => {
    assert.equal(f.formatGpuHours(21.683), '21.7');
    assert.equal(f.formatGpuHours(4), '4.0');
    assert.equal(f.formatGpuHours(12345.67), '12,345.7');
    // No workload started in the hour: no percentile, not "0s".
    assert.equal(f.formatWait(0, 0), '–');
    assert.equal(f.formatWait(188.06, 82), '3m 08s');
    assert.equal(f.formatWait(0, 3), '0s');
  });
});

describe('workloads', () => {
  test('a workload\'s API path encodes each part of its name', () => {
    assert.equal(workloads.workloadPath('job-623'), '/api/v1/workloads/job-623');
    assert.equal(workloads.workloadPath('ml team/train #1'), '/api/v1/workloads/ml%20team/train%20%231');
  });

  test('the list shows lost GPU-hours only for preempted workloads', () => {
    assert.equal(workloads.lostText({ preemption_count: 0, gpu_hours_lost: 0 }), '–');
    assert.equal(workloads.lostText({ preemption_count: 2, gpu_hours_lost: 4.25 }), '4.3');
    assert.equal(workloads.lostText({ preemption_count: 1, gpu_hours_lost: 0 }), '0.0');
  });
});

function gpus(nodes, perNode, pool = 'p') {
  const out = [];
  for (let n = 0; n < nodes; n++) {
    for (let i = 0; i < perNode; i++) {
      out.push({ node: `n${String(n).padStart(5, '0')}`, index: i, uuid: `u${n}-${i}`, model: 'H100', pool, state: 'idle',
        utilization: 0, memory_used_bytes: 0, memory_total_bytes: 1, workload: null });
    }
  }
  return out;
}

describe('heatmap layout', () => {
  test('places every GPU of 10,000 inside the canvas, without overlaps', () => {
    const list = gpus(1250, 8);
    const layout = heatmap.layoutHeatmap(list, 1000);
    assert.equal(layout.nodeCount, 1250);
    const seen = new Set();
    for (let i = 0; i < list.length; i++) {
      assert.ok(layout.x[i] >= 0 && layout.x[i] + layout.cell <= 1000, `x of ${i}`);
      assert.ok(layout.y[i] >= 0 && layout.y[i] + layout.cell <= layout.height, `y of ${i}`);
      const key = `${layout.x[i]},${layout.y[i]}`;
      assert.ok(!seen.has(key), `GPU ${i} overlaps another`);
      seen.add(key);
    }
  });

  test('hit testing finds the GPU under each cell centre, and nothing between nodes', () => {
    const list = [...gpus(30, 8, 'a'), ...gpus(7, 4, 'b').map((g) => ({ ...g, node: 'b' + g.node }))];
    const layout = heatmap.layoutHeatmap(list, 700);
    for (let i = 0; i < list.length; i++) {
      const c = layout.cell / 2;
      assert.equal(heatmap.hitTest(layout, list, layout.x[i] + c, layout.y[i] + c), i);
    }
    assert.equal(heatmap.hitTest(layout, list, 1, 1), -1);
    // Just right of the first node's last GPU is the gap before the next node.
    assert.equal(heatmap.hitTest(layout, list, layout.x[7] + layout.cell + 1, layout.y[7] + 1), -1);
    assert.equal(layout.sections.map((s) => s.title).join(), 'a,b');
  });

  test('a node strip leaves room for missing device indices', () => {
    const list = gpus(1, 4).filter((g) => g.index !== 1);
    const layout = heatmap.layoutHeatmap(list, 500);
    const pitch = layout.cell + layout.gap;
    assert.equal(layout.x[1] - layout.x[0], 2 * pitch);
  });

  test('cells shrink as the fleet grows', () => {
    assert.ok(heatmap.cellSizeFor(100) > heatmap.cellSizeFor(1000));
    assert.ok(heatmap.cellSizeFor(1000) > heatmap.cellSizeFor(5000));
    assert.ok(heatmap.cellSizeFor(5000) > heatmap.cellSizeFor(10000));
  });
});

describe('queue tree', () => {
  const q = (name, parent) => ({ name, parent, quota: 0, limit: null, weight: 1, allocated: 0, fair_share: 0, borrowed: 0, lent: 0,
    pending_workloads: 0, running_workloads: 0 });
  const list = [q('vision', 'research'), q('prod', null), q('research', null), q('nlp', 'research'), q('orphan', 'gone')];

  test('parents come before their children, siblings by name, depth by level', () => {
    const rows = queues.queueTree(list, new Set());
    assert.deepEqual(rows.map((r) => `${r.queue.name}:${r.depth}`), ['orphan:0', 'prod:0', 'research:0', 'nlp:1', 'vision:1']);
    assert.deepEqual(rows.filter((r) => r.hasChildren).map((r) => r.queue.name), ['research']);
  });

  test('a collapsed queue hides its children', () => {
    const rows = queues.queueTree(list, new Set(['research']));
    assert.deepEqual(rows.map((r) => r.queue.name), ['orphan', 'prod', 'research']);
  });

  test('lost GPU-hours since start, by reason', () => {
    const queue = {
      ...q('nlp', null),
      preemptions_by_reason: {
        Reclaim: { preemptions: 3, gpu_hours_lost: 12.25 },
        Priority: { preemptions: 1, gpu_hours_lost: 0.5 },
        HardwareFault: { preemptions: 0, gpu_hours_lost: 0 },
      },
    };
    assert.equal(queues.lostByReason(queue), 'Reclaim: 3 (12.3 GPU-h), Priority: 1 (0.5 GPU-h), HardwareFault: 0 (0.0 GPU-h)');
  });
});

describe('history', () => {
  test('the range ends at the fleet clock, rounded up to 1/120 of the range', () => {
    const path = history.historyPath('utilization', 'cluster', 3600, 1_000_000);
    const params = new URLSearchParams(path.split('?')[1]);
    assert.equal(params.get('metric'), 'utilization');
    assert.equal(params.get('scope'), 'cluster');
    assert.equal(Number(params.get('to')), 1_000_020);
    assert.equal(Number(params.get('to')) - Number(params.get('from')), 3600);
    assert.equal(history.historyPath(null, 'cluster', 3600, 1), null);
    assert.equal(history.historyPath('utilization', 'cluster', 3600, null), null);
  });

  test('the first stored metric of those wanted is used', () => {
    const catalogue = { metrics: ['allocation', 'cost'], scopes: ['cluster'], resolutions: [] };
    assert.equal(history.pickMetric(catalogue, 'cost_per_hour', 'cost'), 'cost');
    assert.equal(history.pickMetric(catalogue, 'utilization'), null);
    assert.equal(history.pickMetric(null, 'cost'), null);
  });
});

describe('incident evidence', () => {
  // The same items, and the same lines, as EvidenceTextTest.OneLinePerItem in
  // src/common/test/gpu_evidence_test.cc: the dashboard and `chamber health` say the same.
  const items = [
    { type: 'xid', xid: 79, name: 'GPU has fallen off the bus', meaning: 'the GPU is no longer reachable over PCIe', class: 'hardware', source: 'nvml-event', count: null },
    { type: 'ecc', volatile_single_bit: 12, volatile_double_bit: 4, aggregate_single_bit: 17, aggregate_double_bit: 4 },
    { type: 'row_remap', single_bit_rows: 1, double_bit_rows: 2, pending: true, failed: false },
    { type: 'nvlink', links: [{ link: 1, active: true, replay_errors: 40, recovery_errors: 0, crc_flit_errors: 3, crc_data_errors: 0 }], links_down: [2] },
    { type: 'pcie', replays: 7, width_current: 8, width_max: 16, gen_current: 5, gen_max: 5 },
    { type: 'thermal', temperature_c: 93, slowdown_c: 90, shutdown_c: 95, clock_event_reasons: ['hw_thermal_slowdown'] },
    { type: 'power', power_watts: 612.5, clock_event_reasons: ['hw_power_brake_slowdown'] },
    { type: 'recovery_action', action: 2, name: 'node reboot' },
    { type: 'rule', rule: 'xid-hardware', severity: 'fatal', condition: 'a hardware Xid; severity from the Xid table', threshold: 'Xid 79 is a hardware Xid, fatal in the Xid table' },
    { type: 'action', gpu_fenced: true, taint: 'NoSchedule', breaker_held: false, workloads_requeued: ['team-a/train'], workloads_requeued_count: 3 },
  ];

  test('one line per item, as chamber health writes it', () => {
    assert.deepEqual(items.map((e) => f.formatEvidence(e)), [
      'Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable over PCIe',
      'ECC double-bit 4 volatile, 4 aggregate; single-bit 12 volatile, 17 aggregate',
      'row remap pending until a GPU reset; rows remapped: 2 for double-bit, 1 for single-bit errors',
      'NVLink 1: replay 40, recovery 0, CRC flit 3, CRC data 0; NVLink links down: 2',
      'PCIe x8 of x16, Gen5 of Gen5, 7 replays',
      'temperature 93 C (slowdown at 90 C, shutdown at 95 C); clocks held by hw_thermal_slowdown',
      'power 613 W; clocks held by hw_power_brake_slowdown',
      'driver recovery action: node reboot (2)',
      'rule xid-hardware (fatal): Xid 79 is a hardware Xid, fatal in the Xid table',
      'GPU fenced, node tainted NoSchedule, 3 workloads requeued (team-a/train and 2 more)',
    ]);
    assert.deepEqual(items.map((e) => f.evidenceLabel(e.type)), ['Xid', 'ECC', 'Row remap', 'NVLink', 'PCIe', 'Thermal', 'Power', 'Recovery', 'Rule', 'Action']);
  });

  test('unknown readings and other outcomes', () => {
    assert.equal(f.formatEvidence({ type: 'ecc', volatile_single_bit: null, volatile_double_bit: 3, aggregate_single_bit: null, aggregate_double_bit: null }),
      'ECC double-bit 3 volatile, - aggregate; single-bit - volatile, - aggregate');
    assert.equal(f.formatEvidence({ type: 'action', gpu_fenced: false, taint: null, breaker_held: true, workloads_requeued: [], workloads_requeued_count: 0 }),
      'not fenced: the fleet circuit breaker held the fence back');
    assert.equal(f.formatEvidence({ type: 'action', gpu_fenced: true, taint: null, breaker_held: false, workloads_requeued: ['job-7'], workloads_requeued_count: 1 }),
      'GPU fenced, 1 workload requeued (job-7)');
    assert.equal(f.formatEvidence({ type: 'thermal', temperature_c: 91, slowdown_c: null, shutdown_c: null, clock_event_reasons: [] }), 'temperature 91 C');
  });
});
