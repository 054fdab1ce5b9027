// How the dashboard writes numbers. The browser tests format the API's values with these same
// functions and compare them with the text on screen.

const currencySymbols: Record<string, string> = { USD: '$', EUR: '€', GBP: '£', JPY: '¥' };

function groupThousands(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A number with a fixed count of decimals and thousands separators: 12345.6 -> "12,345.6". */
export function formatNumber(value: number, decimals = 0): string {
  if (!Number.isFinite(value)) return '–';
  const fixed = Math.abs(value).toFixed(decimals);
  const [whole, fraction] = fixed.split('.');
  const sign = value < 0 && Number(fixed) !== 0 ? '-' : '';
  return sign + groupThousands(whole) + (fraction ? '.' + fraction : '');
}

/** A fraction (0..1) as a percentage with one decimal: 0.4567 -> "45.7%". */
export function formatPercent(fraction: number): string {
  if (!Number.isFinite(fraction)) return '–';
  return formatNumber(fraction * 100, 1) + '%';
}

/** A GPU count: whole counts without decimals, fractional ones (used GPUs) with one. */
export function formatGpus(count: number): string {
  if (!Number.isFinite(count)) return '–';
  return Number.isInteger(count) ? formatNumber(count, 0) : formatNumber(count, 1);
}

/** An amount of money: two decimals below 1,000, none from 1,000 on. */
export function formatMoney(amount: number, currency = 'USD'): string {
  if (!Number.isFinite(amount)) return '–';
  const symbol = currencySymbols[currency] ?? currency + ' ';
  const text = formatNumber(Math.abs(amount), Math.abs(amount) >= 1000 ? 0 : 2);
  return (amount < 0 && text !== '0.00' ? '-' : '') + symbol + text;
}

/** A rate of money per hour: "$12.50/h". */
export function formatMoneyPerHour(amount: number, currency = 'USD'): string {
  return formatMoney(amount, currency) + '/h';
}

/** A duration in seconds: "45s", "12m 05s", "3h 07m". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '–';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(s / 3600);
  return `${formatNumber(h)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** GPU-hours with one decimal: 21.68 -> "21.7". */
export function formatGpuHours(hours: number): string {
  return formatNumber(hours, 1);
}

/** A wait percentile of the last hour: "–" when no workload started in it, else a duration. */
export function formatWait(seconds: number, started: number): string {
  return started > 0 ? formatDuration(seconds) : '–';
}

/** Bytes in binary units: "37.5 GiB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${formatNumber(value, unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** An RFC 3339 time as "2026-11-30 06:41:05 UTC". */
export function formatTime(rfc3339: string | null | undefined): string {
  if (!rfc3339) return '–';
  const date = new Date(rfc3339);
  if (Number.isNaN(date.getTime())) return rfc3339;
  return date.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
}

/** A GPU state as people read it. */
export function formatGpuState(state: string): string {
  switch (state) {
    case 'idle':
      return 'Idle';
    case 'allocated_idle':
      return 'Allocated, idle';
    case 'busy':
      return 'Busy';
    case 'unhealthy':
      return 'Unhealthy';
    default:
      return state;
  }
}
