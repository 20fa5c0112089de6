// A module of one type, so the dashboard (src/dashboard/types.ts) reads the log's shape without the bus code.

/** One attempt in the delivery log (CONTRACT §4), as the API lists it. */
export interface AttemptLog {
  id: string;
  delivery_id: string;
  event_id: string;
  type: string;
  attempt: number;
  status: 'succeeded' | 'failed' | 'pending';
  response_code: number | null;
  latency_ms: number | null;
  error: string | null;
  request_body: string;
  created_at: string;
  next_attempt_at: string | null;
}
