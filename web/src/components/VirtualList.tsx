import type { ComponentChildren } from 'preact';
import { useLayoutEffect, useRef, useState } from 'preact/hooks';

interface VirtualListProps<T> {
  items: T[];
  rowHeight: number;
  height: number;
  renderRow: (item: T, index: number) => ComponentChildren;
  testid: string;
  label: string;
}

/** A scrolling list that renders only the rows in view (plus a few), for thousands of rows. */
export function VirtualList<T>({ items, rowHeight, height, renderRow, testid, label }: VirtualListProps<T>) {
  const [scrollTop, setScrollTop] = useState(0);
  const box = useRef<HTMLDivElement>(null);
  const overscan = 8;
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(items.length, Math.ceil((scrollTop + height) / rowHeight) + overscan);

  // A shorter list (new filter) may leave the scroll position past its end.
  useLayoutEffect(() => {
    const element = box.current;
    if (element && element.scrollTop > items.length * rowHeight) {
      element.scrollTop = 0;
      setScrollTop(0);
    }
  }, [items.length]);

  const rows: ComponentChildren[] = [];
  for (let i = first; i < last; i++) rows.push(renderRow(items[i], i));
  return (
    <div
      class="vlist"
      ref={box}
      style={{ height: `${height}px` }}
      onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}
      data-testid={testid}
      data-rows={items.length}
      role="rowgroup"
      aria-label={label}
      tabIndex={0}
    >
      <div style={{ height: `${items.length * rowHeight}px`, position: 'relative' }}>
        <div style={{ position: 'absolute', top: `${first * rowHeight}px`, left: 0, right: 0 }}>{rows}</div>
      </div>
    </div>
  );
}
