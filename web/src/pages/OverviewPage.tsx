import { useState } from 'preact/hooks';
import { useLive } from '../api';
import { Card, Panel, Status } from '../components/Card';
import { Chart, type ChartSeries } from '../components/Chart';
import { RangePicker } from '../components/RangePicker';
import { StateBar, stateColors } from '../components/StateBar';
import { formatGpuHours, formatGpus, formatMoneyPerHour, formatNumber, formatPercent, formatWait } from '../format';
import { pickMetric, ranges, useCatalogue, useSeries } from '../history';
import type { Fleet } from '../types';

function UtilizationChart() {
  const [range, setRange] = useState(ranges[0]);
  const catalogue = useCatalogue();
  const utilization = useSeries(pickMetric(catalogue.data, 'utilization'), 'cluster', range.seconds);
  const allocation = useSeries(pickMetric(catalogue.data, 'allocation'), 'cluster', range.seconds);
  const series: ChartSeries[] = [];
  if (allocation.data) series.push({ label: 'Allocated', color: '#8a63d2', points: allocation.data.points });
  if (utilization.data) series.push({ label: 'Utilization', color: '#2f7de1', points: utilization.data.points, fill: true });
  return (
    <Panel
      title="Utilization over time"
      actions={
        <RangePicker value={range} onChange={setRange} />
      }
    >
      <Status loading={catalogue.loading && !catalogue.data} error={catalogue.error ?? utilization.error} />
      {catalogue.data && !pickMetric(catalogue.data, 'utilization') ? (
        <div class="notice">The server stores no utilization history.</div>
      ) : (
        <Chart series={series} formatValue={(v) => formatPercent(v)} formatAxis={(v) => `${Math.round(v * 100)}%`}
          testid="utilization-chart" yMax={1} height={300} />
      )}
    </Panel>
  );
}

function PoolTable({ fleet }: { fleet: Fleet }) {
  const currency = fleet.summary.cost.currency;
  return (
    <Panel title="Pools" class="span-3">
      <div class="table-wrap">
        <table class="compact" data-testid="pools-table">
          <thead>
            <tr>
              <th scope="col">Pool</th>
              <th scope="col">Model</th>
              <th scope="col" class="num">Nodes</th>
              <th scope="col" class="num">GPUs</th>
              <th scope="col" class="num">Allocated</th>
              <th scope="col" class="num">Idle</th>
              <th scope="col" class="num">Alloc. idle</th>
              <th scope="col" class="num">Unhealthy</th>
              <th scope="col" class="num">Utilization</th>
              <th scope="col" class="num">Per GPU</th>
              <th scope="col" class="num">Cost</th>
              <th scope="col" class="num">Idle cost</th>
            </tr>
          </thead>
          <tbody>
            {fleet.pools.map((p) => (
              <tr key={p.name} data-testid={`pool-${p.name}`}>
                <th scope="row">{p.name}</th>
                <td>
                  {p.model} <span class="muted">{p.pricing}</span>
                </td>
                <td class="num">{formatNumber(p.nodes)}</td>
                <td class="num" data-testid={`pool-${p.name}-capacity`}>{formatGpus(p.gpus.capacity)}</td>
                <td class="num" data-testid={`pool-${p.name}-allocated`}>{formatGpus(p.gpus.allocated)}</td>
                <td class="num">{formatGpus(p.gpus.idle)}</td>
                <td class="num">{formatGpus(p.gpus.allocated_idle)}</td>
                <td class="num">{formatGpus(p.gpus.unhealthy)}</td>
                <td class="num" data-testid={`pool-${p.name}-utilization`}>{formatPercent(p.utilization)}</td>
                <td class="num">{formatMoneyPerHour(p.price_per_gpu_hour, currency)}</td>
                <td class="num" data-testid={`pool-${p.name}-cost`}>{formatMoneyPerHour(p.cost.per_hour, p.cost.currency)}</td>
                <td class="num">{formatMoneyPerHour(p.cost.idle_per_hour, p.cost.currency)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </Panel>
  );
}

/** Per pool, the last hour: how long work waited to start there, and what preemption cost. */
function PoolWaits({ fleet }: { fleet: Fleet }) {
  return (
    <Panel title="Waits and preemptions by pool (last hour)">
      <div class="table-wrap">
        <table class="compact" data-testid="pool-waits-table">
          <thead>
            <tr>
              <th scope="col">Pool</th>
              <th scope="col" class="num" title="Workloads that started in the pool (their first pod's node) in the last hour">Started</th>
              <th scope="col" class="num" title="Median wait from submission to start">Wait p50</th>
              <th scope="col" class="num" title="95th percentile of the same waits">Wait p95</th>
              <th scope="col" class="num">Preempted</th>
              <th scope="col" class="num" title="GPU time since each preempted workload's last checkpoint or start">GPU-hours lost</th>
            </tr>
          </thead>
          <tbody>
            {fleet.pools.map((p) => (
              <tr key={p.name}>
                <th scope="row">{p.name}</th>
                <td class="num" data-testid={`pool-${p.name}-started`}>{formatNumber(p.started_last_hour)}</td>
                <td class="num" data-testid={`pool-${p.name}-wait-p50`}>{formatWait(p.wait_p50_seconds, p.started_last_hour)}</td>
                <td class="num" data-testid={`pool-${p.name}-wait-p95`}>{formatWait(p.wait_p95_seconds, p.started_last_hour)}</td>
                <td class="num" data-testid={`pool-${p.name}-preemptions`}>{formatNumber(p.preemptions_last_hour)}</td>
                <td class="num" data-testid={`pool-${p.name}-lost`}>{formatGpuHours(p.gpu_hours_lost_last_hour)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </Panel>
  );
}

export function OverviewPage() {
  const { fleet, error } = useLive();
  if (!fleet) return <Status loading={true} error={error} />;
  const s = fleet.summary;
  const currency = s.cost.currency;
  const legend = [
    { label: 'Capacity', value: s.gpus.capacity, testid: 'gpus-capacity' },
    { label: 'Allocated', value: s.gpus.allocated, testid: 'gpus-allocated' },
    { label: 'Allocated, idle', value: s.gpus.allocated_idle, testid: 'gpus-allocated-idle', color: stateColors.allocated_idle },
    { label: 'Idle', value: s.gpus.idle, testid: 'gpus-idle', color: stateColors.idle },
    { label: 'Unhealthy', value: s.gpus.unhealthy, testid: 'gpus-unhealthy', color: stateColors.unhealthy },
    { label: 'Used (GPU-equivalents)', value: s.gpus.used, testid: 'gpus-used', color: stateColors.busy },
  ];
  return (
    <div class="page" data-testid="page-overview" data-time={fleet.time}>
      <div class="cards">
        <Card label="Utilization" value={formatPercent(s.utilization)} testid="overview-utilization"
          detail={`${formatGpus(s.gpus.used)} of ${formatGpus(s.gpus.capacity)} GPUs in use`} />
        <Card label="Allocated" value={formatPercent(s.allocation)} testid="overview-allocation"
          detail={`${formatGpus(s.gpus.allocated)} ${s.gpus.allocated === 1 ? 'GPU' : 'GPUs'} held by workloads`} />
        <Card label="Idle" value={formatPercent(s.idle_fraction)} testid="overview-idle" tone={s.idle_fraction > 0.3 ? 'warn' : 'default'}
          detail={`${formatGpus(s.gpus.idle)} unallocated + ${formatGpus(s.gpus.allocated_idle)} allocated, idle`} />
        <Card label="Idle cost now" value={formatMoneyPerHour(s.cost.idle_per_hour, currency)} testid="overview-idle-cost"
          tone={s.cost.idle_per_hour > 0 ? 'warn' : 'default'} detail="idle and allocated-idle GPUs" />
        <Card label="Cost now" value={formatMoneyPerHour(s.cost.per_hour, currency)} testid="overview-cost" detail="every GPU in the fleet" />
        <Card label="Efficiency" value={formatPercent(s.efficiency.used_over_capacity)} testid="overview-efficiency"
          title="Used GPU-hours over capacity GPU-hours since the server started"
          detail={<>used / allocated <strong data-testid="overview-efficiency-allocated">{formatPercent(s.efficiency.used_over_allocated)}</strong></>} />
      </div>
      <div class="grid">
        <div class="stack span-2">
          <UtilizationChart />
          <PoolWaits fleet={fleet} />
        </div>
        <div class="stack">
          <Panel title="GPUs by state">
            <StateBar gpus={s.gpus} testid="gpus-statebar" />
            <dl class="legend">
              {legend.map((l) => (
                <div key={l.testid}>
                  <dt>
                    {l.color && <span class="swatch" style={{ background: l.color }} aria-hidden="true" />}
                    {l.label}
                  </dt>
                  <dd data-testid={l.testid}>{formatGpus(l.value)}</dd>
                </div>
              ))}
            </dl>
          </Panel>
          <Panel title="Queue">
            <dl class="legend">
              <div><dt>Pending workloads</dt><dd data-testid="queue-pending-workloads">{formatNumber(s.queue.pending_workloads)}</dd></div>
              <div><dt>Pending GPUs</dt><dd data-testid="queue-pending-gpus">{formatGpus(s.queue.pending_gpus)}</dd></div>
              <div><dt>Wait p50 (last hour)</dt><dd data-testid="queue-wait-p50">{formatWait(s.queue.wait_p50_seconds, s.queue.started_last_hour)}</dd></div>
              <div><dt>Wait p95 (last hour)</dt><dd data-testid="queue-wait-p95">{formatWait(s.queue.wait_p95_seconds, s.queue.started_last_hour)}</dd></div>
              <div><dt>Preemptions (last hour)</dt><dd data-testid="preemptions">{formatNumber(s.preemptions_last_hour)}</dd></div>
              <div><dt>GPU-hours lost (last hour)</dt><dd data-testid="gpu-hours-lost">{formatGpuHours(s.gpu_hours_lost_last_hour)}</dd></div>
              {s.running_workloads !== undefined && (
                <div><dt>Running workloads</dt><dd data-testid="running-workloads">{formatNumber(s.running_workloads)}</dd></div>
              )}
            </dl>
          </Panel>
        </div>
        <PoolTable fleet={fleet} />
      </div>
    </div>
  );
}
