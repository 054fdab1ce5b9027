import { useState } from 'preact/hooks';
import { useResource } from '../api';
import { Card, Panel, Status } from '../components/Card';
import { Chart, type ChartSeries } from '../components/Chart';
import { RangePicker } from '../components/RangePicker';
import { formatGpus, formatMoney, formatMoneyPerHour, formatNumber, formatTime } from '../format';
import { pickMetric, ranges, useCatalogue, useSeries } from '../history';
import type { Cost } from '../types';

function CostChart({ currency }: { currency: string }) {
  const [range, setRange] = useState(ranges[1]);
  const [scope, setScope] = useState('cluster');
  const catalogue = useCatalogue();
  const scopes = catalogue.data?.scopes ?? ['cluster'];
  const total = useSeries(pickMetric(catalogue.data, 'cost_per_hour', 'cost'), scope, range.seconds);
  // Queues have no idle cost or backfill series; those requests fail and are left out.
  const idle = useSeries(pickMetric(catalogue.data, 'idle_cost_per_hour', 'idle_cost'), scope, range.seconds);
  const backfill = useSeries(pickMetric(catalogue.data, 'backfill_savings_per_hour'), scope, range.seconds);
  const series: ChartSeries[] = [];
  if (total.data) series.push({ label: 'Cost', color: '#2f7de1', points: total.data.points, fill: true });
  if (idle.data && !idle.error) series.push({ label: 'Idle cost', color: '#f0a02c', points: idle.data.points, fill: true });
  if (backfill.data && !backfill.error) series.push({ label: 'Backfill savings', color: '#1f9d63', points: backfill.data.points });
  return (
    <Panel
      title="Cost over time"
      actions={
        <>
          <label>
            Scope{' '}
            <select value={scope} onChange={(e) => setScope(e.currentTarget.value)} data-testid="cost-scope">
              {scopes.map((s) => (
                <option key={s} value={s}>{s}</option>
              ))}
            </select>
          </label>
          <RangePicker value={range} onChange={setRange} />
        </>
      }
    >
      <Status loading={catalogue.loading && !catalogue.data} error={catalogue.error ?? total.error} />
      {catalogue.data && !pickMetric(catalogue.data, 'cost_per_hour', 'cost') ? (
        <div class="notice">The server stores no cost history.</div>
      ) : (
        <Chart series={series} formatValue={(v) => formatMoneyPerHour(v, currency)}
          formatAxis={(v) => formatMoneyPerHour(Math.round(v), currency).replace(/\.00\//, '/')} testid="cost-chart" />
      )}
    </Panel>
  );
}

export function CostPage() {
  const { data, error, loading } = useResource<Cost>('/api/v1/cost');
  if (!data) return <Status loading={loading} error={error} />;
  const c = data.currency;
  const t = data.totals;
  return (
    <div class="page" data-testid="page-cost" data-time={data.time}>
      <div class="cards">
        <Card label="Cost now" value={formatMoneyPerHour(data.per_hour, c)} testid="cost-per-hour" />
        <Card label="Idle cost now" value={formatMoneyPerHour(data.idle_per_hour, c)} testid="cost-idle-per-hour" tone={data.idle_per_hour > 0 ? 'warn' : 'default'}
          detail={<>unallocated <span data-testid="cost-unallocated">{formatMoneyPerHour(data.unallocated_per_hour, c)}</span>, allocated idle <span data-testid="cost-allocated-idle">{formatMoneyPerHour(data.allocated_idle_per_hour, c)}</span></>} />
        <Card label="Backfill savings now" value={formatMoneyPerHour(data.backfill_savings_per_hour, c)} testid="cost-backfill-per-hour" tone="good" />
        <Card label="Spent since start" value={formatMoney(t.cost, c)} testid="cost-total" detail={`since ${formatTime(t.since)}`} />
        <Card label="Idle spend since start" value={formatMoney(t.idle_cost, c)} testid="cost-idle-total" />
        <Card label="Backfill savings since start" value={formatMoney(t.backfill_savings, c)} testid="cost-backfill-total"
          detail={`${formatGpus(Math.round(t.backfill_gpu_hours * 10) / 10)} GPU-hours backfilled`} />
      </div>
      <CostChart currency={c} />
      <div class="grid two">
        <Panel title="Per pool">
          <div class="table-wrap">
            <table data-testid="cost-pools">
              <thead>
                <tr>
                  <th scope="col">Pool</th>
                  <th scope="col">Model</th>
                  <th scope="col">Pricing</th>
                  <th scope="col" class="num">Per GPU</th>
                  <th scope="col" class="num">Cost</th>
                  <th scope="col" class="num">Idle cost</th>
                  <th scope="col" class="num">Spent</th>
                </tr>
              </thead>
              <tbody>
                {data.pools.map((p) => (
                  <tr key={p.name} data-testid={`cost-pool-${p.name}`}>
                    <th scope="row">{p.name}</th>
                    <td>{p.model}</td>
                    <td>{p.pricing}</td>
                    <td class="num">{formatMoneyPerHour(p.price_per_gpu_hour, c)}</td>
                    <td class="num" data-testid={`cost-pool-${p.name}-per-hour`}>{formatMoneyPerHour(p.per_hour, c)}</td>
                    <td class="num" data-testid={`cost-pool-${p.name}-idle`}>{formatMoneyPerHour(p.idle_per_hour, c)}</td>
                    <td class="num">{p.totals ? formatMoney(p.totals.cost, c) : '–'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </Panel>
        <Panel title="Per queue">
          <div class="table-wrap">
            <table data-testid="cost-queues">
              <thead>
                <tr>
                  <th scope="col">Queue</th>
                  <th scope="col" class="num">Cost</th>
                  <th scope="col" class="num">Of which backfill</th>
                  <th scope="col" class="num">Share</th>
                </tr>
              </thead>
              <tbody>
                {[...data.queues].sort((a, b) => b.per_hour - a.per_hour).map((q) => (
                  <tr key={q.name} data-testid={`cost-queue-${q.name}`}>
                    <th scope="row">{q.name}</th>
                    <td class="num" data-testid={`cost-queue-${q.name}-per-hour`}>{formatMoneyPerHour(q.per_hour, c)}</td>
                    <td class="num">{formatMoneyPerHour(q.backfill_per_hour, c)}</td>
                    <td class="num">{data.per_hour > 0 ? formatNumber((100 * q.per_hour) / data.per_hour, 1) + '%' : '–'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </Panel>
      </div>
    </div>
  );
}
