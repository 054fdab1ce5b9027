import type { ComponentChildren } from 'preact';

interface CardProps {
  label: string;
  value: string;
  testid: string;
  detail?: ComponentChildren;
  tone?: 'default' | 'good' | 'warn' | 'bad';
  title?: string;
}

/** One figure with a label: the big numbers of each page. */
export function Card({ label, value, testid, detail, tone = 'default', title }: CardProps) {
  return (
    <div class={`card stat tone-${tone}`} title={title}>
      <div class="stat-label">{label}</div>
      <div class="stat-value" data-testid={testid}>
        {value}
      </div>
      {detail !== undefined && <div class="stat-detail">{detail}</div>}
    </div>
  );
}

export function Panel({
  title,
  children,
  actions,
  class: extra,
}: {
  title: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
  class?: string;
}) {
  return (
    <section class={`card panel ${extra ?? ''}`} aria-label={title}>
      <header class="panel-header">
        <h2>{title}</h2>
        {actions && <div class="panel-actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

export function Status({ loading, error }: { loading: boolean; error: string | null }) {
  if (error) return <div class="notice error" role="alert">Could not load: {error}</div>;
  if (loading) return <div class="notice">Loading…</div>;
  return null;
}
