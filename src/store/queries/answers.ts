// The analytics answers' shapes, as the API sends them (docs/metrics.md, docs/openapi.json). A module of types
// alone: the dashboard (src/dashboard/types.ts) reads them too, without the store's code.

export interface Overview {
  monthly_active_users: number;
  watch_hours: number;
  paid_subscribers: number;
  arpu_inr: number;
  churn_pct: number;
  wow_delta: { mau: number; watch_hours: number; subs: number; revenue: number };
}

export interface ConcurrencySeries {
  interval_minutes: number;
  points: Array<{ ts: string; value: number }>;
  peak: number;
  peak_at: string;
}

/** A page of a list, and the length of the whole list (the API's `X-Total-Count`). */
export interface Paged<T> {
  items: T[];
  total: number;
}

export interface TopContentItem {
  content_id: string;
  title: string;
  content_type: string;
  watch_hours: number;
  completion_pct: number;
  unique_viewers: number;
}

export interface GeoItem {
  region: string;
  watch_hours: number;
  viewers: number;
  share_pct: number;
}

export interface DeviceItem {
  device: string;
  sessions: number;
  share_pct: number;
}
