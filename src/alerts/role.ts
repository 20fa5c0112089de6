import type { ModuleDef } from '../modules.js';
import { AlertsService } from './service.js';
import { loadThresholds } from '../metric/thresholds.js';

/** The `alerts` role: detection across shards, alert raising and resolving (one active per cluster). */
export const alertsRole: ModuleDef = {
  deps: ['bus', 'directory', 'usage'],
  role: true,
  async start(services) {
    const { config } = services;
    const service = await AlertsService.start(
      services.get('bus'),
      services.get('directory').tenants,
      services.get('usage'),
      {
        thresholds: loadThresholds(),
        checkpointEveryMs: config.checkpoint_interval_ms,
        tickMs: 5000,
        leaseMs: 10_000,
        maxPerHour: config.alerts_max_per_hour,
        maxKeys: config.alerts_max_keys,
      },
      services.log,
    );
    return { stop: () => service.stop() };
  },
};
