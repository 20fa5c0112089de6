// One WebSocket to GET /v1/live per session: concurrency every second and alerts as they fire, to whichever page
// listens. Reconnects with backoff; a 4001 close (token expired or revoked) ends the session.
import { effect, signal } from '@preact/signals';
import { session } from './api.js';
import type { Alert } from './types.js';

export type LiveMessage = { type: 'concurrency'; ts: string; value: number } | ({ type: 'alert' } & Alert);
export type LiveStatus = 'connecting' | 'open' | 'closed';

export const liveStatus = signal<LiveStatus>('closed');
const listeners = new Set<(m: LiveMessage) => void>();

export function onLive(listener: (m: LiveMessage) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

let socket: WebSocket | null = null;
let retry: ReturnType<typeof setTimeout> | undefined;
let failures = 0;

function connect(token: string): void {
  liveStatus.value = 'connecting';
  const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/live`;
  // The token travels as an offered subprotocol: browsers cannot set headers on a WebSocket, and a query string ends
  // up in access logs.
  const ws = new WebSocket(url, ['darshak.v1', token]);
  socket = ws;
  ws.onopen = () => {
    failures = 0;
    liveStatus.value = 'open';
  };
  ws.onmessage = (e) => {
    let m: LiveMessage;
    try {
      m = JSON.parse(String(e.data)) as LiveMessage;
    } catch {
      return;
    }
    for (const l of listeners) l(m);
  };
  ws.onclose = (e) => {
    if (socket !== ws) return;
    socket = null;
    liveStatus.value = 'closed';
    if (e.code === 4001) {
      session.value = null;
      return;
    }
    // Full jitter, 1 s doubling to 30 s: a restarted api process is not met by every dashboard at once.
    const ceiling = Math.min(30_000, 1000 * 2 ** failures++);
    retry = setTimeout(() => session.value?.token === token && connect(token), Math.random() * ceiling);
  };
}

function disconnect(): void {
  clearTimeout(retry);
  const ws = socket;
  socket = null;
  ws?.close(1000, 'logout');
  liveStatus.value = 'closed';
}

effect(() => {
  const token = session.value?.token;
  disconnect();
  if (token) connect(token);
});
