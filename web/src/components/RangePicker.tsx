import { ranges } from '../history';

export type Range = (typeof ranges)[number];

// The segmented time-range control above the history charts.
export function RangePicker({ value, onChange }: { value: Range; onChange: (r: Range) => void }) {
  return (
    <div class="segmented" role="group" aria-label="Time range">
      {ranges.map((r) => (
        <button key={r.label} type="button" aria-pressed={r === value} onClick={() => onChange(r)}>
          {r.label}
        </button>
      ))}
    </div>
  );
}
