import type { GpuCounts } from '../types';
import { formatGpus } from '../format';

export const stateColors = {
  busy: '#2f7de1',
  allocated_idle: '#f0a02c',
  idle: '#cfd6e0',
  unhealthy: '#d9434e',
} as const;

/**
 * GPUs by state as one bar: busy (allocated and active), allocated but idle, idle
 * (unallocated) and unhealthy.
 */
export function StateBar({ gpus, testid }: { gpus: GpuCounts; testid: string }) {
  const busy = Math.max(0, gpus.allocated - gpus.allocated_idle);
  const parts = [
    { key: 'busy', label: 'Busy', value: busy, color: stateColors.busy },
    { key: 'allocated_idle', label: 'Allocated, idle', value: gpus.allocated_idle, color: stateColors.allocated_idle },
    { key: 'idle', label: 'Idle', value: gpus.idle, color: stateColors.idle },
    { key: 'unhealthy', label: 'Unhealthy', value: gpus.unhealthy, color: stateColors.unhealthy },
  ];
  const total = parts.reduce((s, p) => s + p.value, 0) || 1;
  return (
    <div class="statebar" data-testid={testid} role="img"
      aria-label={parts.map((p) => `${p.label}: ${formatGpus(p.value)}`).join(', ')}>
      {parts.map((p) =>
        p.value > 0 ? (
          <span key={p.key} style={{ width: `${(100 * p.value) / total}%`, background: p.color }}
            title={`${p.label}: ${formatGpus(p.value)} GPUs`} />
        ) : null,
      )}
    </div>
  );
}
