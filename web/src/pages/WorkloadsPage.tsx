import { useMemo, useState } from 'preact/hooks';
import { useResource } from '../api';
import { Card, Panel, Status } from '../components/Card';
import { VirtualList } from '../components/VirtualList';
import { formatDuration, formatGpuEquivalents, formatGpuHours, formatNumber, formatTime } from '../format';
import { setParams, type Route } from '../router';
import type { QueueList, Workload, WorkloadDetail, WorkloadList, WorkloadState } from '../types';

const workloadStates: WorkloadState[] = ['pending', 'running', 'preempting', 'suspended'];
export const workloadLimit = 5000;
const rowHeight = 40;

export function workloadsPath(queue: string, state: string): string {
  const params = new URLSearchParams({ limit: String(workloadLimit) });
  if (queue) params.set('queue', queue);
  if (state) params.set('state', state);
  return `/api/v1/workloads?${params.toString()}`;
}

/** The API path of one workload: "ml/train-1" -> "/api/v1/workloads/ml/train-1", each part encoded. */
export function workloadPath(name: string): string {
  return '/api/v1/workloads/' + name.split('/').map(encodeURIComponent).join('/');
}

/** What a workload's preemptions cost it, as the list shows it: "–" when never preempted. */
export function lostText(w: Pick<Workload, 'preemption_count' | 'gpu_hours_lost'>): string {
  return w.preemption_count > 0 ? formatGpuHours(w.gpu_hours_lost) : '–';
}

function waitOrRun(w: Workload, now: number): string {
  const submitted = Date.parse(w.submitted);
  if (Number.isNaN(submitted) || Number.isNaN(now)) return '–';
  if (w.started) {
    const started = Date.parse(w.started);
    return `waited ${formatDuration((started - submitted) / 1000)}`;
  }
  return `waiting ${formatDuration((now - submitted) / 1000)}`;
}

function Row({ w, index, now, open }: { w: Workload; index: number; now: number; open: (name: string) => void }) {
  return (
    <div class={`vrow state-${w.state}`} role="row" data-testid="workload-row" data-index={index} data-name={w.name}>
      <span role="cell" class="num" data-testid="wl-position">{w.queue_position === null ? '–' : formatNumber(w.queue_position)}</span>
      <span role="cell" class="wl-name" title={w.name}>
        <a href={`#/workloads?workload=${encodeURIComponent(w.name)}`} data-testid="wl-name"
          onClick={(e) => { e.preventDefault(); open(w.name); }}>{w.name}</a>
      </span>
      <span role="cell" data-testid="wl-queue">{w.queue}</span>
      <span role="cell">
        <span class={`pill pill-${w.state}`} data-testid="wl-state">{w.state}</span>
        {w.borrowing && <span class="pill pill-borrow" title="Running beyond its queue's quota">borrowed</span>}
      </span>
      <span role="cell" class="num" data-testid="wl-gpus">{formatGpuEquivalents(w.gpus)}</span>
      <span role="cell" class="num" data-testid="wl-lost"
        title={w.preemption_count > 0 ? `${formatNumber(w.preemption_count)} preemptions` : 'never preempted'}>{lostText(w)}</span>
      <span role="cell" class="num">{formatNumber(w.priority)}</span>
      <span role="cell" data-testid="wl-reason">{w.pending_reason ?? '–'}</span>
      <span role="cell" class="wl-message" data-testid="wl-message" title={w.pending_message ?? ''}>{w.pending_message ?? (w.nodes.length ? w.nodes.join(', ') : '–')}</span>
      <span role="cell" title={`submitted ${formatTime(w.submitted)}`}>{waitOrRun(w, now)}</span>
    </div>
  );
}

/** One workload (the `workload` route parameter): its standing and what preemption cost it. */
function WorkloadPanel({ name, close }: { name: string; close: () => void }) {
  const { data, error, loading } = useResource<WorkloadDetail>(workloadPath(name));
  const w = data?.workload;
  return (
    <Panel title={`Workload ${name}`}
      actions={<button type="button" class="link-button" onClick={close} data-testid="workload-close">Close</button>}>
      <Status loading={loading && !data} error={error} />
      {w && (
        <div data-testid="workload-detail" data-time={data.time}>
          <dl class="legend detail-list">
            <div><dt>State</dt><dd data-testid="wd-state">{w.state}</dd></div>
            <div><dt>Queue</dt><dd data-testid="wd-queue">{w.queue}</dd></div>
            <div><dt>GPUs</dt><dd>{formatGpuEquivalents(w.gpus)}</dd></div>
            <div><dt>Submitted</dt><dd>{formatTime(w.submitted)}</dd></div>
            <div><dt>Started</dt><dd>{formatTime(w.started)}</dd></div>
            <div><dt>Preemptions</dt><dd data-testid="wd-preemptions">{formatNumber(w.preemption_count)}</dd></div>
            <div><dt>GPU-hours lost</dt><dd data-testid="wd-lost">{formatGpuHours(w.gpu_hours_lost)}</dd></div>
          </dl>
          {w.preemption_history.length === 0 ? (
            <p class="notice" data-testid="wd-no-preemptions">Not preempted while this server has been running.</p>
          ) : (
            <table class="compact" data-testid="wd-history">
              <caption>
                {w.preemption_count > w.preemption_history.length
                  ? `The latest ${formatNumber(w.preemption_history.length)} of ${formatNumber(w.preemption_count)} preemptions`
                  : 'Preemptions'}
              </caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Reason</th>
                  <th scope="col" class="num" title="GPU time since its last checkpoint or start">GPU-hours lost</th>
                </tr>
              </thead>
              <tbody>
                {w.preemption_history.map((p, i) => (
                  <tr key={`${p.time}-${i}`} data-testid="wd-history-row">
                    <td data-testid="wd-history-time">{formatTime(p.time)}</td>
                    <td data-testid="wd-history-reason">{p.reason}</td>
                    <td class="num" data-testid="wd-history-lost">{formatGpuHours(p.gpu_hours_lost)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      )}
    </Panel>
  );
}

export function WorkloadsPage({ route }: { route: Route }) {
  const queue = route.params.get('queue') ?? '';
  const state = route.params.get('state') ?? '';
  const selected = route.params.get('workload') ?? '';
  const [search, setSearch] = useState('');
  const { data, error, loading } = useResource<WorkloadList>(workloadsPath(queue, state));
  const queues = useResource<QueueList>('/api/v1/queues', 30000);
  const update = (patch: Record<string, string>) => setParams('/workloads', { queue, state, workload: selected, ...patch });

  const shown = useMemo(() => {
    if (!data) return [];
    const needle = search.trim().toLowerCase();
    return needle ? data.workloads.filter((w) => w.name.toLowerCase().includes(needle)) : data.workloads;
  }, [data, search]);
  const counts = useMemo(() => {
    const c: Record<string, number> = {};
    for (const w of data?.workloads ?? []) c[w.state] = (c[w.state] ?? 0) + 1;
    return c;
  }, [data]);
  const now = data ? Date.parse(data.time) : NaN;

  return (
    <div class="page" data-testid="page-workloads" data-time={data?.time ?? ''}>
      <div class="cards">
        <Card label="Matching workloads" value={data ? formatNumber(data.total) : '–'} testid="workloads-total"
          detail={data && data.total > data.workloads.length ? `first ${formatNumber(data.workloads.length)} listed` : 'all listed'} />
        <Card label="Pending" value={data ? formatNumber(counts.pending ?? 0) : '–'} testid="workloads-pending" detail="in the list" />
        <Card label="Running" value={data ? formatNumber(counts.running ?? 0) : '–'} testid="workloads-running" detail="in the list" />
        <Card label="Preempting or suspended" value={data ? formatNumber((counts.preempting ?? 0) + (counts.suspended ?? 0)) : '–'} testid="workloads-other" detail="in the list" />
      </div>
      {selected && <WorkloadPanel name={selected} close={() => update({ workload: '' })} />}
      <Panel
        title="Workloads"
        actions={
          <div class="filters">
            <label>
              Queue{' '}
              <select value={queue} onChange={(e) => update({ queue: e.currentTarget.value })} data-testid="filter-queue">
                <option value="">All</option>
                {(queues.data?.queues ?? []).map((q) => (
                  <option key={q.name} value={q.name}>{q.name}</option>
                ))}
                {queue && !queues.data?.queues.some((q) => q.name === queue) && <option value={queue}>{queue}</option>}
              </select>
            </label>
            <label>
              State{' '}
              <select value={state} onChange={(e) => update({ state: e.currentTarget.value })} data-testid="filter-state">
                <option value="">All</option>
                {workloadStates.map((s) => (
                  <option key={s} value={s}>{s}</option>
                ))}
              </select>
            </label>
            <label>
              Name{' '}
              <input type="search" value={search} placeholder="filter" onInput={(e) => setSearch(e.currentTarget.value)} data-testid="filter-name" />
            </label>
          </div>
        }
      >
        <Status loading={loading && !data} error={error} />
        <div class="vtable" role="table" aria-label="Workloads" aria-rowcount={shown.length}>
          <div class="vrow vhead" role="row">
            <span role="columnheader" class="num" title="Queue position">#</span>
            <span role="columnheader">Name</span>
            <span role="columnheader">Queue</span>
            <span role="columnheader">State</span>
            <span role="columnheader" class="num">GPUs</span>
            <span role="columnheader" class="num" title="GPU-hours its preemptions lost">Lost</span>
            <span role="columnheader" class="num">Priority</span>
            <span role="columnheader" title="Pending reason">Reason</span>
            <span role="columnheader">Message or nodes</span>
            <span role="columnheader">Wait</span>
          </div>
          {data && shown.length === 0 ? (
            <div class="notice" data-testid="workloads-empty">No workloads match.</div>
          ) : (
            <VirtualList items={shown} rowHeight={rowHeight} height={Math.min(640, Math.max(shown.length, 4) * rowHeight)}
              testid="workloads-list" label="Workload rows"
              renderRow={(w, i) => <Row key={w.name} w={w} index={i} now={now} open={(name) => update({ workload: name })} />} />
          )}
        </div>
      </Panel>
    </div>
  );
}
