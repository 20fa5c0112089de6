// CONTRACT §5: the event taxonomy. Types not listed here are custom events: stored, exported, fed to no metric.

export const deviceTypes = ['mobile', 'tablet', 'desktop', 'tv', 'console', 'other'] as const;
export const contentTypes = ['movie', 'series', 'episode', 'live', 'sports', 'clip', 'trailer', 'other'] as const;

export const contextKeys = [
  'device_type',
  'app_version',
  'os',
  'browser',
  'player',
  'cdn',
  'pop',
  'ip',
  'country',
  'region',
  'user_agent',
] as const;

type Required = { fields?: readonly string[]; properties?: readonly string[]; oneOf?: readonly string[] };

/** Fields each known type needs beyond `event_type` (`oneOf`: at least one of them). */
export const knownTypes: Readonly<Record<string, Required>> = {
  play_start: { fields: ['session_id', 'content_id'], oneOf: ['anonymous_id', 'user_id'] },
  first_frame: { fields: ['session_id'] },
  heartbeat: { fields: ['session_id'] },
  pause: { fields: ['session_id'] },
  resume: { fields: ['session_id'] },
  seek_start: { fields: ['session_id'] },
  seek_end: { fields: ['session_id'] },
  rebuffer_start: { fields: ['session_id'] },
  rebuffer_end: { fields: ['session_id'] },
  bitrate_change: { fields: ['session_id', 'bitrate_kbps'] },
  error: { fields: ['session_id'] },
  ended: { fields: ['session_id'] },
  session_end: { fields: ['session_id'] },
  subscription_started: { fields: ['user_id'], properties: ['amount_inr', 'plan'] },
  subscription_renewed: { fields: ['user_id'], properties: ['amount_inr', 'plan'] },
  subscription_cancelled: { fields: ['user_id'] },
  subscription_expired: { fields: ['user_id'] },
  payment_succeeded: { fields: ['user_id'], properties: ['amount_inr'] },
  payment_failed: { fields: ['user_id'], properties: ['amount_inr'] },
  content_published: { fields: ['content_id', 'content_title', 'content_type'] },
};

/** Limits on one event (CONTRACT §5). */
export const eventLimits = {
  stringMax: 512,
  propertiesMaxBytes: 8192,
  propertiesMaxDepth: 16,
  batchMax: 500,
  bodyMaxBytes: 1_048_576,
  skewToleranceMs: 30_000,
} as const;
