import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useResource } from '../api';
import { Panel, Status } from '../components/Card';
import { stateColors } from '../components/StateBar';
import { formatBytes, formatGpuState, formatNumber, formatPercent } from '../format';
import { drawHeatmap, hitTest, layoutHeatmap, migMarkColor, poolOf, type ColorMode } from '../heatmap';
import type { Gpu, GpuList, GpuState } from '../types';

const states: GpuState[] = ['busy', 'allocated_idle', 'idle', 'unhealthy'];

function GpuDetails({ gpu }: { gpu: Gpu }) {
  return (
    <dl class="gpu-details" data-testid="gpu-details" data-uuid={gpu.uuid}>
      <div><dt>GPU</dt><dd data-testid="gpu-details-name">{gpu.node} / {gpu.index}</dd></div>
      <div><dt>State</dt><dd data-testid="gpu-details-state">{formatGpuState(gpu.state)}</dd></div>
      <div><dt>Utilization</dt><dd data-testid="gpu-details-utilization">{formatPercent(gpu.utilization)}</dd></div>
      <div><dt>Memory</dt><dd>{formatBytes(gpu.memory_used_bytes)} of {formatBytes(gpu.memory_total_bytes)}</dd></div>
      <div><dt>Model</dt><dd>{gpu.model}</dd></div>
      {gpu.pool && <div><dt>Pool</dt><dd>{gpu.pool}</dd></div>}
      <div><dt>Workload</dt><dd data-testid="gpu-details-workload">{gpu.workload ?? (gpu.shares?.length ? (gpu.mig ? 'MIG devices' : 'shared') : '–')}</dd></div>
      {gpu.queue && <div><dt>Queue</dt><dd>{gpu.queue}</dd></div>}
      {gpu.shares && gpu.shares.length > 0 && (
        <div>
          <dt>Shares</dt>
          <dd data-testid="gpu-details-shares">
            <span data-testid="gpu-details-held">{`${formatPercent(gpu.allocated ?? 0)} held`}</span>
            <ul class="gpu-shares">
              {gpu.shares.map((s, i) => (
                <li key={i} data-testid="gpu-details-share">
                  {s.workload} ({s.queue}): {s.mig_profile ? `MIG ${s.mig_profile}, ` : ''}{formatPercent(s.gpu_fraction)}
                  {s.gpu_memory_mib !== null ? `, ${formatBytes(s.gpu_memory_mib * 1048576)}` : ''}
                  {s.memory_used_bytes != null ? `; uses ${formatBytes(s.memory_used_bytes)}` : ''}
                  {s.over_memory_since ? ' (over its memory)' : ''}
                </li>
              ))}
            </ul>
          </dd>
        </div>
      )}
      {gpu.mig && (
        <div>
          <dt>MIG mode</dt>
          <dd data-testid="gpu-details-mig">
            {gpu.mig_devices && gpu.mig_devices.length > 0 ? (
              <ul class="gpu-shares">
                {gpu.mig_devices.map((d) => (
                  <li key={d.uuid} data-testid="gpu-details-mig-device">
                    {d.profile || 'unknown profile'}: {d.pod ?? 'free'}
                  </li>
                ))}
              </ul>
            ) : (
              'devices not listed (no agent reports them)'
            )}
          </dd>
        </div>
      )}
      <div><dt>UUID</dt><dd class="mono">{gpu.uuid}</dd></div>
    </dl>
  );
}

/** [first, last + 1) of the GPUs on the node of gpus[i]; a node's GPUs are contiguous. */
function nodeBounds(gpus: Gpu[], i: number): [number, number] {
  let begin = i;
  while (begin > 0 && gpus[begin - 1].node === gpus[i].node) begin--;
  let end = i + 1;
  while (end < gpus.length && gpus[end].node === gpus[i].node) end++;
  return [begin, end];
}

/** On the node starting at begin, the GPU with the highest device index not above index. */
function closestInNode(gpus: Gpu[], begin: number, index: number): number {
  let best = begin;
  for (let j = begin; j < gpus.length && gpus[j].node === gpus[begin].node; j++) {
    if (gpus[j].index <= index) best = j;
  }
  return best;
}

export function HeatmapPage() {
  const { data, error, loading } = useResource<GpuList>('/api/v1/gpus', 3000);
  const [width, setWidth] = useState(0);
  const [mode, setMode] = useState<ColorMode>('state');
  const [pool, setPool] = useState('');
  const [highlight, setHighlight] = useState<GpuState | ''>('');
  const [hover, setHover] = useState<{ index: number; x: number; y: number } | null>(null);
  const [selected, setSelected] = useState(-1);
  const wrap = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [drawn, setDrawn] = useState({ cells: 0, ms: 0 });

  const gpus = data?.gpus ?? [];
  const pools = useMemo(() => Array.from(new Set(gpus.map(poolOf))), [data]);
  const shown = useMemo(() => (pool ? gpus.filter((g) => poolOf(g) === pool) : gpus), [data, pool]);
  const counts = useMemo(() => {
    const c: Record<string, number> = { busy: 0, allocated_idle: 0, idle: 0, unhealthy: 0 };
    for (const g of shown) c[g.state] = (c[g.state] ?? 0) + 1;
    return c;
  }, [shown]);
  const migCount = useMemo(() => shown.filter((g) => g.mig).length, [shown]);
  const layout = useMemo(() => (width > 0 ? layoutHeatmap(shown, width) : null), [shown, width]);

  useLayoutEffect(() => {
    const element = wrap.current;
    if (!element) return;
    setWidth(element.clientWidth);
    const observer = new ResizeObserver(() => setWidth(element.clientWidth));
    observer.observe(element);
    return () => observer.disconnect();
  }, [data !== null]);

  // Keep the selection on the same GPU across refreshes.
  const selectedUuid = useRef<string | null>(null);
  useEffect(() => {
    if (selectedUuid.current === null) return;
    setSelected(shown.findIndex((g) => g.uuid === selectedUuid.current));
  }, [shown]);
  const select = (i: number) => {
    setSelected(i);
    selectedUuid.current = i >= 0 ? shown[i].uuid : null;
  };

  useEffect(() => {
    if (!layout || !canvas.current) return;
    const start = performance.now();
    const cells = drawHeatmap(canvas.current, layout, shown, mode, selected, (g) => highlight !== '' && g.state !== highlight);
    const ms = performance.now() - start;
    setDrawn((d) => (d.cells === cells && Math.abs(d.ms - ms) < 1 ? d : { cells, ms }));
    if (!performance.getEntriesByName('heatmap-first-draw').length) performance.mark('heatmap-first-draw');
  }, [layout, mode, selected, highlight]);

  const onMove = (e: MouseEvent) => {
    if (!layout) return;
    const rect = canvas.current!.getBoundingClientRect();
    const index = hitTest(layout, shown, e.clientX - rect.left, e.clientY - rect.top);
    setHover(index < 0 ? null : { index, x: e.clientX - rect.left, y: e.clientY - rect.top });
  };

  const onKey = (e: KeyboardEvent) => {
    if (shown.length === 0) return;
    let next = selected;
    const current = selected < 0 ? 0 : selected;
    switch (e.key) {
      case 'ArrowRight':
        next = selected < 0 ? 0 : Math.min(shown.length - 1, current + 1);
        break;
      case 'ArrowLeft':
        next = Math.max(0, current - 1);
        break;
      case 'ArrowDown': {
        // The same device index on the next node.
        const [, end] = nodeBounds(shown, current);
        if (end < shown.length) next = closestInNode(shown, end, shown[current].index);
        break;
      }
      case 'ArrowUp': {
        const [begin] = nodeBounds(shown, current);
        if (begin > 0) next = closestInNode(shown, nodeBounds(shown, begin - 1)[0], shown[current].index);
        break;
      }
      case 'Home':
        next = 0;
        break;
      case 'End':
        next = shown.length - 1;
        break;
      case 'Escape':
        next = -1;
        break;
      default:
        return;
    }
    e.preventDefault();
    select(next);
  };

  const hovered = hover ? shown[hover.index] : null;
  const first = layout && shown.length > 0 ? `${layout.x[0]},${layout.y[0]},${layout.cell}` : '';
  const chosen =
    layout && selected >= 0 && selected < shown.length ? `${layout.x[selected]},${layout.y[selected]},${layout.cell}` : '';
  return (
    <div class="page" data-testid="page-heatmap" data-time={data?.time ?? ''}>
      <Status loading={loading && !data} error={error} />
      {data && (
        <>
          <div class="toolbar">
            <label>
              Pool{' '}
              <select value={pool} onChange={(e) => { setPool(e.currentTarget.value); select(-1); }} data-testid="heatmap-pool">
                <option value="">All pools</option>
                {pools.map((p) => (
                  <option key={p} value={p}>{p}</option>
                ))}
              </select>
            </label>
            <label>
              Highlight{' '}
              <select value={highlight} onChange={(e) => setHighlight(e.currentTarget.value as GpuState | '')} data-testid="heatmap-highlight">
                <option value="">All states</option>
                {states.map((s) => (
                  <option key={s} value={s}>{formatGpuState(s)}</option>
                ))}
              </select>
            </label>
            <div class="segmented" role="group" aria-label="Colour by">
              <button type="button" aria-pressed={mode === 'state'} onClick={() => setMode('state')}>State</button>
              <button type="button" aria-pressed={mode === 'utilization'} onClick={() => setMode('utilization')}>Utilization</button>
            </div>
            <ul class="heat-legend" aria-label="GPUs by state">
              {states.map((s) => (
                <li key={s}>
                  <span class="swatch" style={{ background: stateColors[s] }} aria-hidden="true" />
                  {formatGpuState(s)} <strong data-testid={`heatmap-count-${s}`}>{formatNumber(counts[s] ?? 0)}</strong>
                </li>
              ))}
              {migCount > 0 && (
                <li>
                  <span class="swatch" style={{ background: migMarkColor }} aria-hidden="true" />
                  MIG mode <strong data-testid="heatmap-count-mig">{formatNumber(migCount)}</strong>
                </li>
              )}
              <li>
                GPUs <strong data-testid="heatmap-total">{formatNumber(shown.length)}</strong> on{' '}
                <strong data-testid="heatmap-nodes">{formatNumber(layout?.nodeCount ?? 0)}</strong> nodes
              </li>
            </ul>
          </div>
          <div class="heat-grid">
            <Panel title="Node × GPU" class="heat-panel">
              <div class="heat-wrap" ref={wrap}>
                <canvas
                  ref={canvas}
                  tabIndex={0}
                  role="img"
                  aria-label={`Heatmap of ${shown.length} GPUs; arrow keys select a GPU`}
                  data-testid="heatmap-canvas"
                  data-cells={drawn.cells}
                  data-nodes={layout?.nodeCount ?? 0}
                  data-first-cell={first}
                  data-selected-cell={chosen}
                  data-draw-ms={drawn.ms.toFixed(1)}
                  onMouseMove={onMove}
                  onMouseLeave={() => setHover(null)}
                  onClick={() => hover && select(hover.index)}
                  onKeyDown={onKey}
                />
                {hovered && hover && (
                  <div class="tooltip" data-testid="heatmap-tooltip" role="tooltip"
                    style={{ left: `${Math.min(hover.x + 14, width - 260)}px`, top: `${hover.y + 14}px` }}>
                    <GpuDetails gpu={hovered} />
                  </div>
                )}
              </div>
            </Panel>
            <Panel title="Selected GPU" class="heat-side">
              <div aria-live="polite">
                {selected >= 0 && shown[selected] ? (
                  <GpuDetails gpu={shown[selected]} />
                ) : (
                  <p class="muted">Hover over a cell, click it, or focus the map and use the arrow keys.</p>
                )}
              </div>
            </Panel>
          </div>
        </>
      )}
    </div>
  );
}
