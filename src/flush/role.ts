import type { ModuleDef } from '../modules.js';
import { AlertWriter } from './alerts.js';
import { Flusher } from './flusher.js';
import { serveHistory } from './history-service.js';
import { serveReplay } from './replay-service.js';

export const flushRole: ModuleDef = {
  deps: ['bus', 'store'],
  role: true,
  async start(services) {
    const bus = services.get('bus');
    const store = services.get('store');
    const flusher = new Flusher(bus, store, services.log, { minIntervalMs: services.config.flush_interval_ms });
    await flusher.start();
    const alerts = new AlertWriter(bus, store, services.log);
    await alerts.start();
    const replay = serveReplay(bus, store, services.log);
    const history = serveHistory(bus, store, services.log);
    return {
      async stop() {
        await replay.drain();
        await history.drain();
        await flusher.stop();
        await alerts.stop();
      },
    };
  },
};
