// A time-series chart on uPlot. Series values are drawn as given; the y axis formats them.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  color: string;
  points: [number, number][];
  fill?: boolean;
}

interface ChartProps {
  series: ChartSeries[];
  height?: number;
  formatValue: (v: number) => string;
  // Axis labels; defaults to formatValue.
  formatAxis?: (v: number) => string;
  testid: string;
  yMax?: number;
}

// uPlot wants one x array shared by every series; points missing from a series become null.
function align(series: ChartSeries[]): uPlot.AlignedData {
  const xs = Array.from(new Set(series.flatMap((s) => s.points.map((p) => p[0])))).sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const ys = series.map((s) => {
    const column: (number | null)[] = new Array(xs.length).fill(null);
    for (const [x, y] of s.points) column[index.get(x)!] = y;
    return column;
  });
  return [xs, ...ys] as uPlot.AlignedData;
}

function timeLabel(seconds: number, span: number): string {
  const iso = new Date(seconds * 1000).toISOString();
  return span > 2 * 86400 ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
}

export function Chart({ series, height = 240, formatValue, formatAxis, testid, yMax }: ChartProps) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.label + s.color).join('|') + String(yMax);

  useEffect(() => {
    const element = host.current!;
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 200),
      height,
      cursor: { drag: { x: false, y: false } },
      legend: { show: true },
      scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min), yMax ?? (max > 0 ? max * 1.1 : 1)] } },
      axes: [
        {
          stroke: '#5b6577',
          grid: { stroke: '#eef1f5' },
          ticks: { stroke: '#dfe3ea' },
          space: 70,
          values: (u, values) => {
            const span = (u.scales.x.max ?? 0) - (u.scales.x.min ?? 0);
            return values.map((v) => timeLabel(v, span));
          },
        },
        {
          stroke: '#5b6577',
          grid: { stroke: '#eef1f5' },
          ticks: { stroke: '#dfe3ea' },
          size: 76,
          values: (_u, values) => values.map((v) => (formatAxis ?? formatValue)(v)),
        },
      ],
      series: [
        { label: 'Time', value: (_u, v) => (v == null ? '–' : new Date(v * 1000).toISOString().slice(11, 19) + ' UTC') },
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          fill: s.fill ? s.color + '22' : undefined,
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => (v == null ? '–' : formatValue(v)),
        })),
      ],
    };
    const instance = new uPlot(options, align(series), element);
    plot.current = instance;
    const observer = new ResizeObserver(() => {
      instance.setSize({ width: Math.max(element.clientWidth, 200), height });
    });
    observer.observe(element);
    return () => {
      observer.disconnect();
      instance.destroy();
      plot.current = null;
    };
    // Rebuilt only when the set of series changes; data changes go through setData below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape, height]);

  useEffect(() => {
    plot.current?.setData(align(series));
  }, [series]);

  const count = series.reduce((n, s) => n + s.points.length, 0);
  return <div class="chart" ref={host} data-testid={testid} data-points={count} />;
}
