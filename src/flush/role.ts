import type { ModuleDef } from '../modules.js';
import { Flusher } from './flusher.js';

export const flushRole: ModuleDef = {
  deps: ['bus', 'store'],
  role: true,
  async start(services) {
    const flusher = new Flusher(services.get('bus'), services.get('store'), services.log);
    await flusher.start();
    return { stop: () => flusher.stop() };
  },
};
