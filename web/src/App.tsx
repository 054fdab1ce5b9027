import type { ComponentType } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { liveFleet, readToken, saveToken, useLive } from './api';
import { formatTime } from './format';
import { useRoute, type Route } from './router';
import { CostPage } from './pages/CostPage';
import { HealthPage } from './pages/HealthPage';
import { HeatmapPage } from './pages/HeatmapPage';
import { OverviewPage } from './pages/OverviewPage';
import { QueuesPage } from './pages/QueuesPage';
import { WorkloadsPage } from './pages/WorkloadsPage';

interface PageDef {
  path: string;
  title: string;
  icon: string;
  component: ComponentType<{ route: Route }>;
}

const pages: PageDef[] = [
  { path: '/', title: 'Fleet overview', icon: '◧', component: OverviewPage },
  { path: '/gpus', title: 'GPU heatmap', icon: '▦', component: HeatmapPage },
  { path: '/queues', title: 'Queues and teams', icon: '☰', component: QueuesPage },
  { path: '/workloads', title: 'Workloads', icon: '≡', component: WorkloadsPage },
  { path: '/health', title: 'Health', icon: '✚', component: HealthPage },
  { path: '/cost', title: 'Cost', icon: '$', component: CostPage },
];

function ConnectionBadge() {
  const { connection, fleet, error } = useLive();
  const label = connection === 'live' ? 'Live' : connection === 'polling' ? 'Polling' : 'Connecting';
  return (
    <div class="topbar-status">
      {fleet?.mode === 'demo' && (
        <span class="badge badge-demo" data-testid="mode" title="An in-process simulated cluster">
          Demo{fleet.simulated ? ' · simulated time' : ''}
        </span>
      )}
      <span class={`badge badge-${connection}`} data-testid="connection-status" title={error ?? undefined}>
        <span class="dot" aria-hidden="true" />
        {label}
      </span>
      <span class="topbar-time" data-testid="fleet-time" data-time={fleet?.time ?? ''}>
        {fleet ? formatTime(fleet.time) : '–'}
      </span>
    </div>
  );
}

function TokenForm() {
  const [value, setValue] = useState(readToken());
  return (
    <form
      class="card token-form"
      onSubmit={(e) => {
        e.preventDefault();
        saveToken(value.trim());
        liveFleet.restart();
      }}
    >
      <h2>Access token</h2>
      <p>This server needs a bearer token. It is kept in this browser only.</p>
      <label>
        Token
        <input type="password" value={value} onInput={(e) => setValue(e.currentTarget.value)} autoComplete="off" />
      </label>
      <button type="submit">Connect</button>
    </form>
  );
}

export function App() {
  const route = useRoute();
  const { error, fleet } = useLive();
  const page = pages.find((p) => p.path === route.path) ?? null;
  const main = useRef<HTMLElement>(null);

  useEffect(() => {
    document.title = `${page?.title ?? 'Not found'} · Chamber`;
  }, [page]);

  const Page = page?.component;
  const needsToken = !fleet && error !== null && /401|token|unauthori/i.test(error);
  return (
    <div class="shell">
      <a class="skip-link" href="#main" onClick={(e) => { e.preventDefault(); main.current?.focus(); }}>
        Skip to content
      </a>
      <nav class="sidebar" aria-label="Pages">
        <div class="brand">
          <span class="brand-mark" aria-hidden="true">◆</span> Chamber
        </div>
        <ul>
          {pages.map((p) => (
            <li key={p.path}>
              <a
                href={'#' + p.path}
                aria-current={p === page ? 'page' : undefined}
                data-testid={`nav-${p.path === '/' ? 'overview' : p.path.slice(1)}`}
              >
                <span class="nav-icon" aria-hidden="true">
                  {p.icon}
                </span>
                {p.title}
              </a>
            </li>
          ))}
        </ul>
        <div class="sidebar-foot">GPU fleet</div>
      </nav>
      <div class="content">
        <header class="topbar">
          <h1 data-testid="page-title">{page?.title ?? 'Not found'}</h1>
          <ConnectionBadge />
        </header>
        <main id="main" ref={main} tabIndex={-1}>
          {needsToken ? (
            <TokenForm />
          ) : Page ? (
            <Page route={route} />
          ) : (
            <div class="card notice">
              No page at <code>{route.path}</code>. <a href="#/">Go to the fleet overview</a>.
            </div>
          )}
        </main>
      </div>
    </div>
  );
}
