// Talking to chamberd: JSON requests, and the live fleet summary from the server-sent event
// stream /api/v1/events, with polling while the stream is down.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Fleet } from './types';

const tokenKey = 'chamber.token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function authHeaders(): Record<string, string> {
  const token = readToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export function readToken(): string {
  try {
    return localStorage.getItem(tokenKey) ?? '';
  } catch {
    return '';
  }
}

export function saveToken(token: string): void {
  try {
    if (token) localStorage.setItem(tokenKey, token);
    else localStorage.removeItem(tokenKey);
  } catch {
    // Storage can be disabled; the token then lasts until the page reloads.
  }
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const response = await fetch(path, { headers: { Accept: 'application/json', ...authHeaders() }, signal });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = (await response.json()) as { error?: string };
      if (body.error) message = body.error;
    } catch {
      // Not JSON: keep the status line.
    }
    throw new ApiError(response.status, message);
  }
  return (await response.json()) as T;
}

export type Connection = 'connecting' | 'live' | 'polling';

export interface LiveState {
  fleet: Fleet | null;
  connection: Connection;
  // Increases with every fleet update; pages refetch their own resources when it changes.
  tick: number;
  error: string | null;
}

type Listener = (state: LiveState) => void;

const pollIntervalMs = 5000;
const maxReconnectDelayMs = 30000;
// The server sends a keep-alive comment when it has nothing else to say; a stream silent for this
// long is taken as dead.
const streamSilenceMs = 45000;

/**
 * The fleet summary, kept current from the event stream. While the stream is down it polls
 * /api/v1/fleet and tries the stream again with exponential backoff.
 */
class LiveFleet {
  private state: LiveState = { fleet: null, connection: 'connecting', tick: 0, error: null };
  private listeners = new Set<Listener>();
  private started = false;
  private reconnectDelayMs = 1000;
  private pollTimer: number | undefined;
  private stream: AbortController | undefined;

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    if (!this.started) {
      this.started = true;
      void this.poll();
      this.connect();
    }
    return () => this.listeners.delete(listener);
  }

  get current(): LiveState {
    return this.state;
  }

  /** Reconnects at once (after a new token, say). */
  restart(): void {
    const old = this.stream;
    this.stream = undefined; // so that its end is not taken for a failure
    old?.abort();
    this.reconnectDelayMs = 1000;
    void this.poll();
    this.connect();
  }

  private set(patch: Partial<LiveState>): void {
    this.state = { ...this.state, ...patch };
    for (const listener of this.listeners) listener(this.state);
  }

  private accept(fleet: Fleet): void {
    this.set({ fleet, tick: this.state.tick + 1, error: null });
  }

  private async poll(): Promise<void> {
    try {
      this.accept(await getJson<Fleet>('/api/v1/fleet'));
    } catch (e) {
      this.set({ error: e instanceof Error ? e.message : String(e) });
    }
  }

  private startPolling(): void {
    if (this.pollTimer !== undefined) return;
    this.pollTimer = window.setInterval(() => void this.poll(), pollIntervalMs);
  }

  private stopPolling(): void {
    window.clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }

  private connect(): void {
    const controller = new AbortController();
    this.stream = controller;
    this.readStream(controller).then(
      () => this.streamEnded(controller, 'the event stream closed'),
      (e: unknown) => this.streamEnded(controller, e instanceof Error ? e.message : String(e)),
    );
  }

  private streamEnded(controller: AbortController, why: string): void {
    if (this.stream !== controller) return;
    this.set({ connection: 'polling', error: this.state.fleet ? null : why });
    this.startPolling();
    const delay = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(delay * 2, maxReconnectDelayMs);
    window.setTimeout(() => {
      if (this.stream === controller) this.connect();
    }, delay);
  }

  // fetch rather than EventSource, so that the bearer token can go in a header.
  private async readStream(controller: AbortController): Promise<void> {
    let silence = window.setTimeout(() => controller.abort(), streamSilenceMs);
    const heard = () => {
      window.clearTimeout(silence);
      silence = window.setTimeout(() => controller.abort(), streamSilenceMs);
    };
    try {
      const response = await fetch('/api/v1/events', {
        headers: { Accept: 'text/event-stream', ...authHeaders() },
        signal: controller.signal,
        cache: 'no-store',
      });
      if (!response.ok || !response.body) throw new ApiError(response.status, `event stream: ${response.status}`);
      heard();
      await this.readEvents(response.body, heard);
    } finally {
      window.clearTimeout(silence);
    }
  }

  private async readEvents(body: ReadableStream<Uint8Array>, heard: () => void): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      heard();
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        this.dispatch(block);
      }
    }
  }

  private dispatch(block: string): void {
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue; // keep-alive comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (event !== 'fleet' || data.length === 0) return;
    const fleet = JSON.parse(data.join('\n')) as Fleet;
    this.stopPolling();
    this.reconnectDelayMs = 1000;
    this.set({ connection: 'live' });
    this.accept(fleet);
  }
}

export const liveFleet = new LiveFleet();

export function useLive(): LiveState {
  const [state, setState] = useState(liveFleet.current);
  useEffect(() => liveFleet.subscribe(setState), []);
  return state;
}

export interface Resource<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
}

/**
 * GET path, again after every fleet update but at most once per minIntervalMs. A new path
 * fetches at once and keeps showing the old data until the new answer arrives.
 */
export function useResource<T>(path: string | null, minIntervalMs = 2000): Resource<T> {
  const { tick } = useLive();
  const [resource, setResource] = useState<Resource<T>>({ data: null, error: null, loading: true });
  const inFlight = useRef(false);
  const again = useRef(false);
  const lastStart = useRef(0);
  const timer = useRef<number | undefined>(undefined);
  const currentPath = useRef(path);

  const run = useRef<() => void>(() => {});
  run.current = () => {
    const wanted = currentPath.current;
    if (wanted === null) return;
    if (inFlight.current) {
      again.current = true;
      return;
    }
    inFlight.current = true;
    lastStart.current = Date.now();
    getJson<T>(wanted).then(
      (data) => {
        if (currentPath.current === wanted) setResource({ data, error: null, loading: false });
      },
      (e: unknown) => {
        if (currentPath.current === wanted)
          setResource((r) => ({ ...r, error: e instanceof Error ? e.message : String(e), loading: false }));
      },
    ).finally(() => {
      inFlight.current = false;
      if (again.current) {
        again.current = false;
        schedule();
      }
    });
  };

  const schedule = () => {
    if (timer.current !== undefined) return;
    const wait = Math.max(0, lastStart.current + minIntervalMs - Date.now());
    timer.current = window.setTimeout(() => {
      timer.current = undefined;
      run.current();
    }, wait);
  };

  // A new path: fetch now.
  useEffect(() => {
    currentPath.current = path;
    setResource((r) => ({ ...r, loading: true }));
    window.clearTimeout(timer.current);
    timer.current = undefined;
    if (inFlight.current) again.current = true;
    else run.current();
  }, [path]);

  // A fleet update: fetch again, throttled.
  useEffect(() => {
    if (tick > 0) schedule();
  }, [tick]);

  useEffect(() => () => window.clearTimeout(timer.current), []);
  return resource;
}
