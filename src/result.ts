// What every step that can fail answers: its value, or why not. The caller branches on `ok`; the reason is typed by
// the step (an error code, a reply to send, a message), so one shape serves the HTTP adapter, the API and ingest.

export type Result<T, E> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const fail = <E>(error: E): { ok: false; error: E } => ({ ok: false, error });
