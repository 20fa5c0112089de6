// Pages are real paths (the api role answers index.html for any page a browser asks for), moved between with the
// History API so the in-memory session survives navigation.
import { signal } from '@preact/signals';

export const pages = [
  { path: '/', label: 'Overview' },
  { path: '/live', label: 'Live' },
  { path: '/content', label: 'Content & audience' },
  { path: '/alerts', label: 'Alerts' },
  { path: '/admin', label: 'Admin' },
] as const;

export const currentPath = signal(location.pathname);

export function navigate(to: string, replace = false): void {
  if (to === location.pathname) return;
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  currentPath.value = to;
}

addEventListener('popstate', () => {
  currentPath.value = location.pathname;
});
