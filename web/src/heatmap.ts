// Layout and drawing of the GPU heatmap: one cell per GPU, each node a strip of its GPUs in
// device order, nodes flowing in rows, grouped by pool. Drawn on a canvas so that 10,000 GPUs
// cost 10,000 fillRect calls rather than 10,000 DOM nodes.
import type { Gpu, GpuState } from './types';
import { stateColors } from './components/StateBar';

export interface NodeBox {
  name: string;
  x: number;
  first: number; // index of the node's first GPU in the list
  count: number; // GPUs in the strip (highest device index + 1)
}

export interface Row {
  y: number;
  nodes: NodeBox[];
}

export interface Section {
  title: string;
  y: number;
}

export interface HeatmapLayout {
  width: number;
  height: number;
  cell: number;
  gap: number;
  rows: Row[];
  sections: Section[];
  // Per GPU (in list order): top-left corner, or -1 when not drawn.
  x: Float32Array;
  y: Float32Array;
  nodeCount: number;
}

const padding = 12;
const sectionTitleHeight = 26;

export function cellSizeFor(gpuCount: number): number {
  if (gpuCount <= 512) return 18;
  if (gpuCount <= 2048) return 12;
  if (gpuCount <= 8192) return 8;
  return 6;
}

export function poolOf(gpu: Gpu): string {
  return gpu.pool ?? gpu.model;
}

/** Lays out gpus (ordered by node, then device index) in a canvas width wide. */
export function layoutHeatmap(gpus: Gpu[], width: number): HeatmapLayout {
  const cell = cellSizeFor(gpus.length);
  const gap = 1;
  const nodeGap = Math.max(4, Math.round(cell * 0.75));
  const rowGap = Math.max(3, Math.round(cell * 0.5));
  const x = new Float32Array(gpus.length).fill(-1);
  const y = new Float32Array(gpus.length).fill(-1);

  // Nodes in first-seen order, grouped by pool in first-seen order.
  const pools = new Map<string, { name: string; first: number; indices: number[]; maxIndex: number }[]>();
  const nodeByName = new Map<string, { name: string; first: number; indices: number[]; maxIndex: number }>();
  gpus.forEach((gpu, i) => {
    let node = nodeByName.get(gpu.node);
    if (!node) {
      node = { name: gpu.node, first: i, indices: [], maxIndex: -1 };
      nodeByName.set(gpu.node, node);
      const pool = poolOf(gpu);
      if (!pools.has(pool)) pools.set(pool, []);
      pools.get(pool)!.push(node);
    }
    node.indices.push(i);
    node.maxIndex = Math.max(node.maxIndex, gpu.index);
  });

  const rows: Row[] = [];
  const sections: Section[] = [];
  let cursorY = padding;
  const usable = Math.max(width - 2 * padding, cell);
  for (const [title, nodes] of pools) {
    sections.push({ title, y: cursorY });
    cursorY += sectionTitleHeight;
    let row: Row = { y: cursorY, nodes: [] };
    let cursorX = padding;
    for (const node of nodes) {
      const count = Math.max(node.maxIndex + 1, node.indices.length);
      const stripWidth = count * (cell + gap) - gap;
      if (row.nodes.length > 0 && cursorX + stripWidth > padding + usable) {
        rows.push(row);
        cursorY += cell + rowGap;
        row = { y: cursorY, nodes: [] };
        cursorX = padding;
      }
      row.nodes.push({ name: node.name, x: cursorX, first: node.first, count });
      for (const i of node.indices) {
        const position = Math.max(0, gpus[i].index);
        x[i] = cursorX + position * (cell + gap);
        y[i] = cursorY;
      }
      cursorX += stripWidth + nodeGap;
    }
    if (row.nodes.length > 0) {
      rows.push(row);
      cursorY += cell + rowGap;
    }
    cursorY += rowGap * 2;
  }
  return { width, height: cursorY + padding, cell, gap, rows, sections, x, y, nodeCount: nodeByName.size };
}

/** The GPU under (px, py), in list order, or -1. */
export function hitTest(layout: HeatmapLayout, gpus: Gpu[], px: number, py: number): number {
  const { rows, cell, gap } = layout;
  let lo = 0;
  let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (rows[mid].y > py) hi = mid - 1;
    else if (rows[mid].y + cell <= py) lo = mid + 1;
    else {
      const row = rows[mid];
      for (const node of row.nodes) {
        if (px < node.x || px >= node.x + node.count * (cell + gap)) continue;
        const position = Math.floor((px - node.x) / (cell + gap));
        for (let i = node.first; i < gpus.length && gpus[i].node === node.name; i++) {
          if (gpus[i].index === position) return i;
        }
        return -1;
      }
      return -1;
    }
  }
  return -1;
}

export type ColorMode = 'state' | 'utilization';

/** The mark in the top-right corner of a GPU in MIG mode. */
export const migMarkColor = '#6d28d9';

/** The side of the MIG mark of a cell `cell` pixels wide. */
export function migMarkSize(cell: number): number {
  return Math.max(2, Math.round(cell / 3));
}

function utilizationColor(u: number): string {
  // From pale grey-blue (0) to deep blue (1), in 11 steps.
  const steps = ['#eef2f7', '#dbe6f4', '#c6d9f1', '#aecbee', '#94bbea', '#79aae5', '#5e98df', '#4586d6', '#3174c9', '#2262b5', '#17509c'];
  return steps[Math.min(10, Math.max(0, Math.round(u * 10)))];
}

export function colorOf(gpu: Gpu, mode: ColorMode): string {
  if (gpu.state === 'unhealthy') return stateColors.unhealthy;
  if (mode === 'utilization') return utilizationColor(gpu.utilization);
  return stateColors[gpu.state as GpuState] ?? '#999';
}

/** Draws every GPU; returns how many cells were drawn. */
export function drawHeatmap(
  canvas: HTMLCanvasElement,
  layout: HeatmapLayout,
  gpus: Gpu[],
  mode: ColorMode,
  selected: number,
  dimmed: (gpu: Gpu) => boolean,
): number {
  const ratio = window.devicePixelRatio || 1;
  const width = Math.round(layout.width * ratio);
  const height = Math.round(layout.height * ratio);
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;
    canvas.height = height;
    canvas.style.width = `${layout.width}px`;
    canvas.style.height = `${layout.height}px`;
  }
  const ctx = canvas.getContext('2d')!;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, layout.width, layout.height);

  ctx.fillStyle = '#1f2937';
  ctx.font = '600 13px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
  ctx.textBaseline = 'top';
  for (const section of layout.sections) ctx.fillText(section.title, 12, section.y + 4);

  // One pass per colour keeps fillStyle changes to a handful.
  const byColor = new Map<string, number[]>();
  let drawn = 0;
  for (let i = 0; i < gpus.length; i++) {
    if (layout.x[i] < 0) continue;
    const color = dimmed(gpus[i]) ? '#f3f4f6' : colorOf(gpus[i], mode);
    let list = byColor.get(color);
    if (!list) byColor.set(color, (list = []));
    list.push(i);
  }
  const { cell } = layout;
  for (const [color, list] of byColor) {
    ctx.fillStyle = color;
    for (const i of list) ctx.fillRect(layout.x[i], layout.y[i], cell, cell);
    drawn += list.length;
  }
  // A GPU that shares (or the MIG devices of a GPU in MIG mode) divide shows the part they hold:
  // the free part of its cell, at the top, in the idle colour.
  if (mode === 'state') {
    ctx.fillStyle = stateColors.idle;
    for (let i = 0; i < gpus.length; i++) {
      const held = gpus[i].allocated;
      if (layout.x[i] < 0 || held === undefined || held <= 0 || held >= 1) continue;
      if (gpus[i].state === 'unhealthy' || dimmed(gpus[i])) continue;
      ctx.fillRect(layout.x[i], layout.y[i], cell, cell * (1 - held));
    }
  }
  // A GPU in MIG mode carries a mark in its top-right corner, in either mode.
  ctx.fillStyle = migMarkColor;
  const mark = migMarkSize(cell);
  for (let i = 0; i < gpus.length; i++) {
    if (layout.x[i] < 0 || !gpus[i].mig || dimmed(gpus[i])) continue;
    ctx.fillRect(layout.x[i] + cell - mark, layout.y[i], mark, mark);
  }
  if (selected >= 0 && selected < gpus.length && layout.x[selected] >= 0) {
    ctx.strokeStyle = '#111827';
    ctx.lineWidth = 2;
    ctx.strokeRect(layout.x[selected] - 1, layout.y[selected] - 1, cell + 2, cell + 2);
  }
  return drawn;
}
