// The shapes of the REST API's answers (docs/openapi.yaml).

export interface GpuCounts {
  capacity: number;
  allocated: number;
  used: number;
  idle: number;
  allocated_idle: number;
  unhealthy: number;
  shared?: number; // GPUs that pods' shares divide
  mig?: number; // GPUs in MIG mode
}

export interface CostRate {
  per_hour: number;
  idle_per_hour: number;
  currency: string;
}

export interface FleetSummary {
  gpus: GpuCounts;
  utilization: number;
  allocation: number;
  idle_fraction: number;
  efficiency: { used_over_capacity: number; used_over_allocated: number };
  cost: CostRate;
  queue: {
    pending_workloads: number;
    pending_gpus: number;
    started_last_hour: number;
    wait_p50_seconds: number;
    wait_p95_seconds: number;
  };
  preemptions_last_hour: number;
  gpu_hours_lost_last_hour: number;
  nodes?: number;
  running_workloads?: number;
  cycle_ms?: number;
}

export type Pricing = 'on-demand' | 'reserved' | 'spot';

/**
 * The last hour of a pool or queue: workloads that first started in it, the nearest-rank
 * percentiles of their waits (0 when none started), preemptions and the GPU-hours they lost.
 */
export interface RecentFigures {
  started_last_hour: number;
  wait_p50_seconds: number;
  wait_p95_seconds: number;
  preemptions_last_hour: number;
  gpu_hours_lost_last_hour: number;
}

export interface Pool extends RecentFigures {
  name: string;
  model: string;
  pricing: Pricing;
  price_per_gpu_hour: number;
  nodes: number;
  gpus: GpuCounts;
  utilization: number;
  allocation: number;
  cost: CostRate;
}

export interface Fleet {
  time: string;
  mode: 'demo' | 'cluster';
  simulated?: boolean;
  summary: FleetSummary;
  pools: Pool[];
}

export type GpuState = 'idle' | 'allocated_idle' | 'busy' | 'unhealthy';

export interface Gpu {
  node: string;
  index: number;
  uuid: string;
  model: string;
  pool?: string;
  state: GpuState;
  utilization: number;
  memory_used_bytes: number;
  memory_total_bytes: number;
  workload: string | null;
  queue?: string | null;
  allocated?: number; // part held, 0..1: 1 when held whole, else its shares' sum
  shares?: GpuShare[]; // pods holding a share of it (in MIG mode: the MIG devices they hold)
  mig?: boolean; // in MIG mode: its MIG devices are advertised, not it
  mig_devices?: MigDevice[]; // as its node's agent lists them
}

/** A MIG device of a GPU in MIG mode, as its node's agent lists it. */
export interface MigDevice {
  uuid: string;
  profile: string;
  memory_total_bytes: number;
  pod: string | null; // the pod the device plugin gave it to
}

/** A pod's share of one GPU's compute and memory. */
export interface GpuShare {
  workload: string;
  queue: string;
  pod?: string | null;
  gpu_fraction: number;
  gpu_memory_mib: number | null;
  memory_used_bytes?: number | null; // measured by the node's agent
  over_memory_since?: string | null; // while it holds more memory than it asked for
  mig_profile?: string | null; // a MIG device of the GPU, of this profile
}

export interface GpuList {
  time: string;
  gpus: Gpu[];
}

export type PreemptionReason = 'Reclaim' | 'Priority' | 'HardwareFault';

export interface LostWork {
  preemptions: number;
  gpu_hours_lost: number;
}

export interface Queue extends RecentFigures {
  name: string;
  parent: string | null;
  quota: number;
  limit: number | null;
  weight: number;
  allocated: number;
  used?: number;
  fair_share: number;
  borrowed: number;
  lent: number;
  pending_workloads: number;
  pending_gpus?: number;
  running_workloads: number;
  cost_per_hour?: number;
  /** Since the server started; a parent's include its children's. */
  preemptions_total: number;
  gpu_hours_lost_total: number;
  preemptions_by_reason: Record<PreemptionReason, LostWork>;
  error?: string | null;
}

export interface QueueList {
  time: string;
  queues: Queue[];
}

export type WorkloadState = 'pending' | 'running' | 'preempting' | 'suspended';

export interface Workload {
  name: string;
  queue: string;
  priority: number;
  state: WorkloadState;
  gpus: number;
  borrowing?: boolean;
  pending_reason: string | null;
  pending_message: string | null;
  queue_position: number | null;
  submitted: string;
  started: string | null;
  nodes: string[];
  /** Preemptions this server decided for it, and the GPU-hours they lost in all. */
  preemption_count: number;
  gpu_hours_lost: number;
}

export interface Preemption {
  time: string;
  reason: PreemptionReason;
  gpu_hours_lost: number;
}

export interface WorkloadDetail {
  time: string;
  workload: Workload & {
    reserved: boolean;
    pods: string[];
    pending_details: string[];
    preemptions: string[];
    /** The last 10 of preemption_count, oldest first. */
    preemption_history: Preemption[];
  };
  pod: string | null;
  queue: Queue | null;
}

export interface WorkloadList {
  time: string;
  total: number;
  workloads: Workload[];
}

/** One item of an incident's evidence (docs/health.md, "Evidence"), told apart by `type`. */
export type Evidence =
  | { type: 'xid'; xid: number; name: string; meaning: string; class: string; source: string; count: number | null }
  | {
      type: 'ecc';
      volatile_single_bit: number | null;
      volatile_double_bit: number | null;
      aggregate_single_bit: number | null;
      aggregate_double_bit: number | null;
    }
  | { type: 'row_remap'; single_bit_rows: number; double_bit_rows: number; pending: boolean; failed: boolean }
  | {
      type: 'nvlink';
      links: {
        link: number;
        active: boolean;
        replay_errors: number;
        recovery_errors: number;
        crc_flit_errors: number;
        crc_data_errors: number;
      }[];
      links_down: number[];
    }
  | {
      type: 'pcie';
      replays: number | null;
      width_current: number | null;
      width_max: number | null;
      gen_current: number | null;
      gen_max: number | null;
    }
  | { type: 'thermal'; temperature_c: number | null; slowdown_c: number | null; shutdown_c: number | null; clock_event_reasons: string[] }
  | { type: 'power'; power_watts: number | null; clock_event_reasons: string[] }
  | { type: 'recovery_action'; action: number; name: string }
  | { type: 'rule'; rule: string; severity: string; condition: string; threshold: string }
  | {
      type: 'action';
      gpu_fenced: boolean;
      taint: string | null;
      breaker_held: boolean;
      workloads_requeued: string[];
      workloads_requeued_count: number;
    };

export interface Incident {
  time: string;
  node: string;
  gpu_index: number;
  uuid: string;
  kind: string;
  cause: string | null;
  severity: string | null;
  message: string;
  evidence: Evidence[];
  resolved: boolean;
  resolved_time?: string | null;
}

export interface Health {
  time: string;
  incidents: Incident[];
  fenced_nodes: string[];
  fenced_gpus: { node: string; index: number; uuid: string }[];
}

export interface CostTotals {
  since: string;
  capacity_gpu_hours: number;
  allocated_gpu_hours: number;
  used_gpu_hours: number;
  cost: number;
  idle_cost: number;
  backfill_gpu_hours: number;
  backfill_savings: number;
}

export interface CostPool {
  name: string;
  model: string;
  pricing: Pricing;
  price_per_gpu_hour: number;
  per_hour: number;
  idle_per_hour: number;
  totals?: CostTotals;
}

export interface CostQueue {
  name: string;
  per_hour: number;
  backfill_per_hour: number;
}

export interface Cost {
  time: string;
  currency: string;
  per_hour: number;
  idle_per_hour: number;
  unallocated_per_hour: number;
  allocated_idle_per_hour: number;
  backfill_savings_per_hour: number;
  totals: CostTotals;
  pools: CostPool[];
  queues: CostQueue[];
}

export interface HistorySeries {
  metric: string;
  scope: string;
  from: number;
  to: number;
  step: number;
  points: [number, number][];
}

export interface HistoryCatalogue {
  metrics: string[];
  scopes: string[];
  resolutions: { step: number; retention: number }[];
}
