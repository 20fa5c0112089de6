import type { ModuleDef } from '../modules.js';
import { AlertWriter } from './alerts.js';
import { flushTiers } from './flusher.js';
import { serveHistory } from './history-service.js';
import { serveReplay } from './replay-service.js';

// The flush role is a group of modules, each with its own consumer or subject; run apart or together, they stop in
// the reverse of their start: the request services drain before the writers stop.

/**
 * The raw stream into the snapshot tables, and the events it names into `events`: one flusher per tier, each on its
 * own consumer and cadence.
 */
export const flusherModule: ModuleDef = {
  deps: ['bus', 'store'],
  role: false,
  async start(services) {
    const { config } = services;
    const flushers = flushTiers(services.get('bus'), services.get('store'), services.log, {
      live: config.flush_interval_ms,
      bulk: config.flush_bulk_interval_ms,
    });
    await flushers.start();
    return { stop: () => flushers.stop() };
  },
};

/** Alert versions (contracts/alert-rows.ts) into the `alerts` table. */
export const alertWriterModule: ModuleDef = {
  deps: ['bus', 'store'],
  role: false,
  async start(services) {
    const writer = new AlertWriter(services.get('bus'), services.get('store'), services.log);
    await writer.start();
    return { stop: () => writer.stop() };
  },
};

/** A request-reply service of the flush role: it answers on its subject until drained. */
const answering = (serve: typeof serveReplay): ModuleDef => ({
  deps: ['bus', 'store'],
  role: false,
  async start(services) {
    const sub = serve(services.get('bus'), services.get('store'), services.log);
    return { stop: () => sub.drain() };
  },
});

/** `darshak replay` requests: a span of the raw stream written again. */
export const replayModule = answering(serveReplay);

/** Stored sessions for aggregators rebuilding a shard (contracts/history.ts). */
export const historyModule = answering(serveHistory);

export const flushRole: ModuleDef = {
  deps: ['flusher', 'alertWriter', 'replay', 'history'],
  role: true,
  async start() {
    return { stop: async () => undefined };
  },
};
