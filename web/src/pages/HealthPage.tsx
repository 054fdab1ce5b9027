import { useState } from 'preact/hooks';
import { useResource } from '../api';
import { Card, Panel, Status } from '../components/Card';
import { evidenceLabel, formatEvidence, formatNumber, formatTime } from '../format';
import type { Evidence, Health } from '../types';

/** What caused an incident and what was done, one line per item of its evidence. */
function EvidenceList({ evidence }: { evidence: Evidence[] }) {
  if (evidence.length === 0) return null;
  return (
    <ul class="evidence" data-testid="incident-evidence">
      {evidence.map((e, k) => (
        <li key={k} class={`evidence-${e.type}`} data-type={e.type}>
          <span class="evidence-label">{evidenceLabel(e.type)}</span>
          <span data-testid="evidence-text">{formatEvidence(e)}</span>
        </li>
      ))}
    </ul>
  );
}

export function HealthPage() {
  const { data, error, loading } = useResource<Health>('/api/v1/health');
  const [openOnly, setOpenOnly] = useState(false);
  if (!data) return <Status loading={loading} error={error} />;
  const open = data.incidents.filter((i) => !i.resolved);
  const incidents = openOnly ? open : data.incidents;
  return (
    <div class="page" data-testid="page-health" data-time={data.time}>
      <div class="cards">
        <Card label="Open incidents" value={formatNumber(open.length)} testid="health-open" tone={open.length > 0 ? 'bad' : 'good'} />
        <Card label="Incidents listed" value={formatNumber(data.incidents.length)} testid="health-incidents" detail="newest 200 at most" />
        <Card label="Fenced nodes" value={formatNumber(data.fenced_nodes.length)} testid="health-fenced-nodes" tone={data.fenced_nodes.length > 0 ? 'warn' : 'default'} detail="cordoned" />
        <Card label="Fenced GPUs" value={formatNumber(data.fenced_gpus.length)} testid="health-fenced-gpus" tone={data.fenced_gpus.length > 0 ? 'warn' : 'default'} />
      </div>
      <div class="grid two-even">
        <Panel
          title="Incidents"
          class="span-3"
          actions={
            <label class="check">
              <input type="checkbox" checked={openOnly} onChange={(e) => setOpenOnly(e.currentTarget.checked)} /> open only
            </label>
          }
        >
          {incidents.length === 0 ? (
            <div class="notice" data-testid="incidents-empty">No incidents.</div>
          ) : (
            <div class="table-wrap scroll-y">
              <table data-testid="incidents-table">
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Node</th>
                    <th scope="col" class="num">GPU</th>
                    <th scope="col">Cause</th>
                    <th scope="col">Evidence</th>
                    <th scope="col">Status</th>
                  </tr>
                </thead>
                <tbody>
                  {incidents.map((i, n) => (
                    <tr key={`${i.uuid}-${i.time}-${n}`} data-testid="incident-row">
                      <td class="nowrap">{formatTime(i.time)}</td>
                      <td data-testid="incident-node">{i.node}</td>
                      <td class="num" data-testid="incident-gpu">{i.gpu_index}</td>
                      <td data-testid="incident-cause">
                        {i.cause ?? i.kind}
                        {i.severity && <span class={`pill pill-${i.severity}`} data-testid="incident-severity">{i.severity}</span>}
                      </td>
                      <td class="wrap">
                        <div data-testid="incident-message">{i.message}</div>
                        <EvidenceList evidence={i.evidence} />
                      </td>
                      <td data-testid="incident-status">
                        {i.resolved ? (
                          <span class="pill pill-resolved" title={i.resolved_time ? `resolved ${formatTime(i.resolved_time)}` : undefined}>resolved</span>
                        ) : (
                          <span class="pill pill-open">open</span>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </Panel>
        <Panel title="Fenced nodes">
          {data.fenced_nodes.length === 0 ? (
            <p class="muted">None.</p>
          ) : (
            <ul class="chips" data-testid="fenced-nodes">
              {data.fenced_nodes.map((n) => <li key={n}>{n}</li>)}
            </ul>
          )}
        </Panel>
        <Panel title="Fenced GPUs">
          {data.fenced_gpus.length === 0 ? (
            <p class="muted">None.</p>
          ) : (
            <ul class="chips" data-testid="fenced-gpus">
              {data.fenced_gpus.map((g) => (
                <li key={g.uuid} title={g.uuid}>{g.node} / {g.index}</li>
              ))}
            </ul>
          )}
        </Panel>
      </div>
    </div>
  );
}
