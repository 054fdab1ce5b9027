import { useState } from 'preact/hooks';
import { useLive, useResource } from '../api';
import { Card, Panel, Status } from '../components/Card';
import { formatGpuHours, formatGpus, formatMoneyPerHour, formatNumber, formatWait } from '../format';
import type { PreemptionReason, Queue, QueueList } from '../types';

interface TreeRow {
  queue: Queue;
  depth: number;
  hasChildren: boolean;
}

/** Queues in tree order (each parent before its children, siblings by name). */
export function queueTree(queues: Queue[], collapsed: Set<string>): TreeRow[] {
  const names = new Set(queues.map((q) => q.name));
  const children = new Map<string | null, Queue[]>();
  for (const q of queues) {
    const parent = q.parent && names.has(q.parent) ? q.parent : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent)!.push(q);
  }
  for (const list of children.values()) list.sort((a, b) => a.name.localeCompare(b.name));
  const rows: TreeRow[] = [];
  const visit = (parent: string | null, depth: number) => {
    for (const queue of children.get(parent) ?? []) {
      const hasChildren = (children.get(queue.name)?.length ?? 0) > 0;
      rows.push({ queue, depth, hasChildren });
      if (hasChildren && !collapsed.has(queue.name)) visit(queue.name, depth + 1);
    }
  };
  visit(null, 0);
  return rows;
}

const reasons: PreemptionReason[] = ['Reclaim', 'Priority', 'HardwareFault'];
const reasonLabels: Record<PreemptionReason, string> = { Reclaim: 'Reclaim', Priority: 'Priority', HardwareFault: 'HW fault' };

/** What a queue's preemptions since the server started lost, by reason: the cell's tooltip. */
export function lostByReason(queue: Queue): string {
  return reasons
    .map((r) => {
      const l = queue.preemptions_by_reason[r];
      return `${r}: ${formatNumber(l.preemptions)} (${formatGpuHours(l.gpu_hours_lost)} GPU-h)`;
    })
    .join(', ');
}

function UsageBar({ queue }: { queue: Queue }) {
  const scale = Math.max(queue.quota, queue.allocated, queue.fair_share, queue.limit ?? 0, 1);
  const pct = (v: number) => `${Math.min(100, (100 * v) / scale)}%`;
  return (
    <div class="usage" aria-hidden="true">
      <span class="usage-fill" style={{ width: pct(queue.allocated) }} />
      <span class="usage-mark quota" style={{ left: pct(queue.quota) }} title="quota" />
      <span class="usage-mark share" style={{ left: pct(queue.fair_share) }} title="fair share" />
    </div>
  );
}

export function QueuesPage() {
  const { data, error, loading } = useResource<QueueList>('/api/v1/queues');
  const [collapsed, setCollapsed] = useState<Set<string>>(new Set());
  const currency = useLive().fleet?.summary.cost.currency ?? 'USD';
  const toggle = (name: string) => {
    const next = new Set(collapsed);
    if (next.has(name)) next.delete(name);
    else next.add(name);
    setCollapsed(next);
  };
  if (!data) return <Status loading={loading} error={error} />;
  const leaves = data.queues.filter((q) => !data.queues.some((c) => c.parent === q.name));
  const sum = (f: (q: Queue) => number) => leaves.reduce((s, q) => s + f(q), 0);
  const rows = queueTree(data.queues, collapsed);
  return (
    <div class="page" data-testid="page-queues" data-time={data.time}>
      <Status loading={false} error={error} />
      <div class="cards">
        <Card label="Queues" value={formatNumber(data.queues.length)} testid="queues-count" detail={`${formatNumber(leaves.length)} leaf queues`} />
        <Card label="Quota (leaf queues)" value={formatGpus(sum((q) => q.quota))} testid="queues-quota" detail="GPUs guaranteed" />
        <Card label="Allocated (leaf queues)" value={formatGpus(sum((q) => q.allocated))} testid="queues-allocated" detail="GPUs held" />
        <Card label="Borrowed" value={formatGpus(sum((q) => q.borrowed))} testid="queues-borrowed" detail="GPUs beyond quota" />
        <Card label="Pending workloads" value={formatNumber(sum((q) => q.pending_workloads))} testid="queues-pending" />
        <Card label="GPU-hours lost (last hour)" value={formatGpuHours(sum((q) => q.gpu_hours_lost_last_hour))} testid="queues-lost"
          tone={sum((q) => q.gpu_hours_lost_last_hour) > 0 ? 'warn' : 'default'}
          detail={`${formatNumber(sum((q) => q.preemptions_last_hour))} preemptions`} />
      </div>
      <Panel title="Queues and teams">
        <div class="table-wrap">
          <table class="tree" data-testid="queues-table">
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col" class="num">Quota</th>
                <th scope="col" class="num">Limit</th>
                <th scope="col" class="num">Weight</th>
                <th scope="col">Usage</th>
                <th scope="col" class="num">Allocated</th>
                <th scope="col" class="num">Used</th>
                <th scope="col" class="num">Fair share</th>
                <th scope="col" class="num">Borrowed</th>
                <th scope="col" class="num">Lent</th>
                <th scope="col" class="num">Pending</th>
                <th scope="col" class="num">Running</th>
                <th scope="col" class="num">Cost</th>
              </tr>
            </thead>
            <tbody>
              {rows.map(({ queue: q, depth, hasChildren }) => (
                <tr key={q.name} data-testid={`queue-${q.name}`} class={q.error ? 'row-error' : undefined}>
                  <th scope="row" style={{ paddingLeft: `${12 + depth * 20}px` }}>
                    {hasChildren ? (
                      <button type="button" class="twisty" aria-expanded={!collapsed.has(q.name)}
                        aria-label={`${collapsed.has(q.name) ? 'Expand' : 'Collapse'} ${q.name}`} onClick={() => toggle(q.name)}>
                        {collapsed.has(q.name) ? '▸' : '▾'}
                      </button>
                    ) : (
                      <span class="twisty-space" />
                    )}
                    <a href={`#/workloads?queue=${encodeURIComponent(q.name)}`}>{q.name}</a>
                    {q.error && <span class="badge badge-bad" title={q.error}>error</span>}
                  </th>
                  <td class="num" data-testid={`queue-${q.name}-quota`}>{formatGpus(q.quota)}</td>
                  <td class="num">{q.limit === null ? '∞' : formatGpus(q.limit)}</td>
                  <td class="num">{formatNumber(q.weight, Number.isInteger(q.weight) ? 0 : 2)}</td>
                  <td><UsageBar queue={q} /></td>
                  <td class="num" data-testid={`queue-${q.name}-allocated`}>{formatGpus(q.allocated)}</td>
                  <td class="num">{q.used === undefined ? '–' : formatGpus(q.used)}</td>
                  <td class="num" data-testid={`queue-${q.name}-fair-share`}>{formatGpus(q.fair_share)}</td>
                  <td class="num" data-testid={`queue-${q.name}-borrowed`}>{formatGpus(q.borrowed)}</td>
                  <td class="num" data-testid={`queue-${q.name}-lent`}>{formatGpus(q.lent)}</td>
                  <td class="num" data-testid={`queue-${q.name}-pending`}>{formatNumber(q.pending_workloads)}</td>
                  <td class="num">{formatNumber(q.running_workloads)}</td>
                  <td class="num">{q.cost_per_hour === undefined ? '–' : formatMoneyPerHour(q.cost_per_hour, currency)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <p class="footnote">
          <span class="usage-key fill" /> allocated <span class="usage-key quota" /> quota <span class="usage-key share" /> fair share.
          Borrowed: GPUs held beyond quota; lent: unused quota others hold.
        </p>
      </Panel>
      <Panel title="Waits and lost work">
        <div class="table-wrap">
          <table class="tree" data-testid="queue-waits-table">
            <thead>
              <tr>
                <td />
                <th scope="colgroup" colSpan={5} class="group">Last hour</th>
                <th scope="colgroup" colSpan={2 + reasons.length} class="group">Since the server started</th>
              </tr>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col" class="num" title="Workloads that started in the last hour">Started</th>
                <th scope="col" class="num" title="Median wait from submission to start, over the workloads that started in the last hour">Wait p50</th>
                <th scope="col" class="num" title="95th percentile of the same waits">Wait p95</th>
                <th scope="col" class="num">Preempted</th>
                <th scope="col" class="num" title="GPU-hours lost to the last hour's preemptions">Lost GPU-h</th>
                <th scope="col" class="num">Preempted</th>
                <th scope="col" class="num">Lost GPU-h</th>
                {reasons.map((r) => (
                  <th key={r} scope="col" class="num" title={`GPU-hours lost to ${r} preemptions`}>{reasonLabels[r]}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map(({ queue: q, depth }) => (
                <tr key={q.name} data-testid={`queue-waits-${q.name}`}>
                  <th scope="row" style={{ paddingLeft: `${12 + depth * 20}px` }}>{q.name}</th>
                  <td class="num" data-testid={`queue-${q.name}-started`}>{formatNumber(q.started_last_hour)}</td>
                  <td class="num" data-testid={`queue-${q.name}-wait-p50`}>{formatWait(q.wait_p50_seconds, q.started_last_hour)}</td>
                  <td class="num" data-testid={`queue-${q.name}-wait-p95`}>{formatWait(q.wait_p95_seconds, q.started_last_hour)}</td>
                  <td class="num" data-testid={`queue-${q.name}-preemptions`}>{formatNumber(q.preemptions_last_hour)}</td>
                  <td class="num" data-testid={`queue-${q.name}-lost`}>{formatGpuHours(q.gpu_hours_lost_last_hour)}</td>
                  <td class="num" data-testid={`queue-${q.name}-preemptions-total`}>{formatNumber(q.preemptions_total)}</td>
                  <td class="num" data-testid={`queue-${q.name}-lost-total`} title={lostByReason(q)}>{formatGpuHours(q.gpu_hours_lost_total)}</td>
                  {reasons.map((r) => (
                    <td key={r} class="num" data-testid={`queue-${q.name}-lost-${r}`}
                      title={`${formatNumber(q.preemptions_by_reason[r].preemptions)} preemptions`}>
                      {formatGpuHours(q.preemptions_by_reason[r].gpu_hours_lost)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <p class="footnote">
          Waits run from submission to first start, over the workloads that started in the last hour (“–” when none
          did). Lost GPU-hours are the GPU time since each preempted workload's last checkpoint (or start), which it runs
          again. A parent queue's figures include its children's; totals count since the server started.
        </p>
      </Panel>
    </div>
  );
}
