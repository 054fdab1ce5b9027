// Client-side routes in the URL's hash: "#/workloads?queue=team-a&state=pending".
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  path: string;
  params: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const text = hash.replace(/^#/, '') || '/';
  const q = text.indexOf('?');
  const path = q < 0 ? text : text.slice(0, q);
  return { path: path || '/', params: new URLSearchParams(q < 0 ? '' : text.slice(q + 1)) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseHash(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

/** Replaces the current route's query parameters (no new history entry). */
export function setParams(path: string, params: Record<string, string>): void {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '')).toString();
  const hash = '#' + path + (query ? '?' + query : '');
  if (window.location.hash !== hash) window.history.replaceState(null, '', hash);
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}
