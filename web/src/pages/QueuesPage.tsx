import { useState } from 'preact/hooks';
import { useLive, useResource } from '../api';
import { Card, Panel, Status } from '../components/Card';
import { formatGpus, formatMoneyPerHour, formatNumber } from '../format';
import type { Queue, QueueList } from '../types';

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
    </div>
  );
}
