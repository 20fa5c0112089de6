import type { ComponentChildren } from 'preact';
import type { ApiError } from '../api.js';

/** An error is announced (role=alert); a status is polite. */
export function Notice({ kind, children }: { kind: 'error' | 'success' | 'info'; children: ComponentChildren }) {
  return (
    <div class={`notice notice-${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      {children}
    </div>
  );
}

/** The API's error message, with its request id for a support ticket. */
export function ErrorNotice({ error }: { error: ApiError | null }) {
  if (!error) return null;
  return (
    <Notice kind="error">
      {error.message}
      {error.requestId && <small class="request-id"> (request {error.requestId})</small>}
    </Notice>
  );
}
