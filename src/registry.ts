import { Bus } from './bus/bus.js';
import { ControlPlane } from './control/control-plane.js';
import type { ApiKeyRecord, TenantRecord } from './control/records.js';
import { UsageCounters } from './control/usage.js';
import { KeyUsage } from './control/key-usage.js';
import { WatchedMap } from './control/watched-map.js';
import { aggregateRole } from './aggregate/role.js';
import { alertsRole } from './alerts/role.js';
import { apiRole, exportsModule, tokensModule } from './api/role.js';
import { alertWriterModule, flushRole, flusherModule, historyModule, replayModule } from './flush/role.js';
import { ingestRole } from './ingest/role.js';
import { Store } from './store/store.js';
import { webhooksRole } from './webhooks/role.js';
import type { ModuleRegistry } from './modules.js';

/** Every module of Darshak. A new role is one entry here and its folder under src/. */
export const registry: ModuleRegistry = {
  bus: {
    deps: [],
    role: false,
    async start(services) {
      const { config } = services;
      const bus = await Bus.connect(config, services.log, `darshak-${process.pid}`);
      await bus.ensureStreams(config.shards, config.stream_max_age_hours);
      services.set('bus', bus);
      services.checks.push({ name: 'nats', ready: () => bus.connected });
      return { stop: () => bus.close() };
    },
  },
  control: {
    deps: ['bus'],
    role: false,
    async start(services) {
      services.set('control', await ControlPlane.open(services.get('bus')));
      return { stop: async () => undefined };
    },
  },
  // Only the two buckets ingest and alerts need, not the control plane: their NATS users may not read the others.
  directory: {
    deps: ['bus'],
    role: false,
    async start(services) {
      const bus = services.get('bus');
      const log = services.log.child({ module: 'directory' });
      const [keys, tenants] = await Promise.all([
        bus
          .kv(bus.names.apiKeysBucket)
          .then((kv) => WatchedMap.open<ApiKeyRecord>(kv, bus, log, (_k, v) => v.key_hash)),
        bus.kv(bus.names.tenantsBucket).then((kv) => WatchedMap.open<TenantRecord>(kv, bus, log)),
      ]);
      services.set('directory', { keys, tenants });
      return {
        async stop() {
          keys.stop();
          tenants.stop();
        },
      };
    },
  },
  usage: {
    deps: ['bus'],
    role: false,
    async start(services) {
      const usage = await UsageCounters.open(services.get('bus'), services.config.usage_sync_ms, services.log);
      services.set('usage', usage);
      return { stop: () => usage.close() };
    },
  },
  keyUsage: {
    deps: ['bus'],
    role: false,
    async start(services) {
      const keyUsage = await KeyUsage.open(services.get('bus'), services.config.usage_sync_ms, services.log);
      services.set('keyUsage', keyUsage);
      return { stop: () => keyUsage.close() };
    },
  },
  store: {
    deps: [],
    role: false,
    async start(services) {
      const store = await Store.open(services.config, services.log);
      services.set('store', store);
      let up = true;
      // Readiness is asked often; the ping runs in the background every 2 s.
      const timer = setInterval(() => void store.ping().then((ok) => (up = ok)), 2000);
      timer.unref();
      services.checks.push({ name: 'clickhouse', ready: () => up });
      return {
        async stop() {
          clearInterval(timer);
          await store.close();
        },
      };
    },
  },
  flusher: flusherModule,
  alertWriter: alertWriterModule,
  replay: replayModule,
  history: historyModule,
  tokens: tokensModule,
  exports: exportsModule,
  ingest: ingestRole,
  aggregate: aggregateRole,
  flush: flushRole,
  alerts: alertsRole,
  api: apiRole,
  webhooks: webhooksRole,
};
