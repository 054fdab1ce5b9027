// Time series from /api/v1/history, over a range that ends at the fleet's own clock (simulated
// in the demo).
import { useResource, useLive } from './api';
import type { HistoryCatalogue, HistorySeries } from './types';

export const ranges = [
  { label: '1h', seconds: 3600 },
  { label: '6h', seconds: 6 * 3600 },
  { label: '24h', seconds: 24 * 3600 },
  { label: '7d', seconds: 7 * 24 * 3600 },
];

/** The catalogue of stored metrics and scopes; fetched once. */
export function useCatalogue() {
  return useResource<HistoryCatalogue>('/api/v1/history', 3_600_000);
}

/** The first of the wanted metrics that the server stores. */
export function pickMetric(catalogue: HistoryCatalogue | null, ...wanted: string[]): string | null {
  if (!catalogue) return null;
  return wanted.find((m) => catalogue.metrics.includes(m)) ?? null;
}

export function historyPath(metric: string | null, scope: string, rangeSeconds: number, nowSeconds: number | null): string | null {
  if (!metric || nowSeconds === null) return null;
  // The range moves in steps of 1/120 of itself, so the URL (and the fetch) changes only that
  // often; the answer's last point is at most one step old.
  const grain = Math.max(1, Math.floor(rangeSeconds / 120));
  const to = Math.ceil(nowSeconds / grain) * grain;
  const from = to - rangeSeconds;
  const params = new URLSearchParams({ metric, scope, from: String(from), to: String(to) });
  return `/api/v1/history?${params.toString()}`;
}

/** The fleet's current time in Unix seconds, or null before the first update. */
export function useFleetNow(): number | null {
  const { fleet } = useLive();
  if (!fleet) return null;
  const ms = Date.parse(fleet.time);
  return Number.isNaN(ms) ? null : Math.floor(ms / 1000);
}

export function useSeries(metric: string | null, scope: string, rangeSeconds: number) {
  const now = useFleetNow();
  return useResource<HistorySeries>(historyPath(metric, scope, rangeSeconds, now), 2000);
}
