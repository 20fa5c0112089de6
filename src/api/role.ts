import type { ServiceAccountRecord, TenantRecord } from '../control/records.js';
import { KeyUsage } from '../control/key-usage.js';
import { UsageCounters } from '../control/usage.js';
import { WatchedMap } from '../control/watched-map.js';
import { opsRoutes } from '../http/ops.js';
import { MinuteLimiter } from '../http/rate-limit.js';
import { createHttpServer } from '../http/server.js';
import type { ModuleDef } from '../modules.js';
import type { ClickHouseClient } from '@clickhouse/client';
import type { ReadinessCheck } from '../http/ops.js';
import type { Route } from '../http/types.js';
import { accountRoutes, type AccountDeps } from './account-routes.js';
import { alertSettingsRoutes } from './alert-settings-routes.js';
import { analyticsRoutes } from './analytics-routes.js';
import { dashboard } from './dashboard.js';
import { Authenticator } from './auth.js';
import { exportRoutes } from './export-routes.js';
import { ExportService } from './exports.js';
import { LiveFeed } from './live.js';
import { Login, LoginAttempts, loginWindowMs } from './login.js';
import { openApiRoute } from './openapi.js';
import { RevokedTokens } from './revoked-tokens.js';
import { TokenService } from './tokens.js';
import { webhookRoutes } from './webhook-routes.js';
import type { Bus } from '../bus/bus.js';
import { AddressGuard } from '../http/ssrf.js';
import { ensureWebhookStreams } from '../contracts/webhook-streams.js';

/** Request bodies of the API are small JSON objects. */
const maxBodyBytes = 64 * 1024;

export interface ApiRouteDeps extends AccountDeps {
  client: ClickHouseClient;
  live: LiveFeed;
  checks: () => readonly ReadinessCheck[];
  bus: Bus;
  exports: ExportService;
  publicBaseUrl: string;
  guard: AddressGuard;
  /** OPS_TOKEN: /readyz and /metrics need it when set. */
  opsToken: string;
}

/** Every API route of the `{base_url}` listener (the live feed's upgrade and the dashboard's files, src/api/dashboard.ts, aside). */
export function apiRoutes(deps: ApiRouteDeps): Route[] {
  return [
    ...accountRoutes(deps),
    ...webhookRoutes(deps),
    ...alertSettingsRoutes(deps),
    ...analyticsRoutes(deps.auth, deps.client),
    ...exportRoutes(deps.auth, deps.control, deps.exports, deps.publicBaseUrl),
    deps.live.httpRoute(),
    openApiRoute(),
    ...opsRoutes(deps.checks, deps.opsToken),
  ];
}

/** The signing key and the published JWKS: tokens issued and checked. */
export const tokensModule: ModuleDef = {
  deps: ['bus'],
  role: false,
  async start(services) {
    const tokens = await TokenService.open(
      services.config,
      services.get('bus'),
      services.log.child({ module: 'tokens' }),
    );
    services.set('tokens', tokens);
    return { stop: async () => tokens.stop() };
  },
};

/** Export jobs and their files (or S3 objects), swept for stale jobs and expired files. */
export const exportsModule: ModuleDef = {
  deps: ['bus', 'store'],
  role: false,
  async start(services) {
    const { config } = services;
    const exports = await ExportService.open(
      services.get('bus'),
      services.get('store').client,
      config.data_dir,
      config.export_s3_url,
      services.log.child({ module: 'export' }),
    );
    exports.start();
    services.set('exports', exports);
    return { stop: () => exports.stop() };
  },
};

export const apiRole: ModuleDef = {
  deps: ['bus', 'control', 'store', 'tokens', 'exports'],
  role: true,
  async start(services) {
    const { config } = services;
    const log = services.log.child({ module: 'api' });
    const bus = services.get('bus');
    const control = services.get('control');
    const store = services.get('store');
    const tokens = services.get('tokens');
    const exports = services.get('exports');
    // The deliveries list and the test ping work even where no webhooks role runs yet.
    await ensureWebhookStreams(bus);
    const [serviceAccounts, users, tenants, failures, revoked] = await Promise.all([
      WatchedMap.open<ServiceAccountRecord>(control.serviceAccounts.kv, bus, log, (_k, v) => v.id),
      WatchedMap.open<unknown>(control.users.kv, bus, log),
      WatchedMap.open<TenantRecord>(control.tenants, bus, log),
      bus.kv(bus.names.loginsBucket, loginWindowMs),
      RevokedTokens.open(bus, log),
    ]);
    const requests = await UsageCounters.open(bus, config.usage_sync_ms, log, {
      month: null,
      minute: bus.names.apiRateBucket,
    });
    const auth = new Authenticator(
      tokens,
      serviceAccounts,
      users,
      new MinuteLimiter(config.analytics_rate_per_minute, requests),
      tenants,
      revoked,
    );
    const login = await Login.create(control, new LoginAttempts(failures), tokens, (tenant) => auth.suspended(tenant));
    const live = new LiveFeed(auth, store.client, bus, log.child({ module: 'live' }));
    const app = dashboard(log.child({ module: 'dashboard' }));
    const server = await createHttpServer({
      listener: 'base',
      host: config.host,
      port: config.base_port,
      engine: config.http_engine,
      routes: [
        ...apiRoutes({
          auth,
          control,
          login,
          tokens,
          revoked,
          keysLastUsed: () => KeyUsage.read(bus),
          client: store.client,
          live,
          checks: () => services.checks,
          bus,
          exports,
          publicBaseUrl: config.public_base_url,
          guard: new AddressGuard(config.webhook_allow_hosts),
          trustProxy: config.trust_proxy,
          opsToken: config.ops_token,
        }),
        ...app.routes,
      ],
      fallback: app.fallback,
      websockets: [live.route()],
      maxBodyBytes,
      log,
    });
    live.start();
    services.listeners.set('base', { port: server.port, engine: server.engine });
    return {
      async stop() {
        live.stop();
        await server.close(5000);
        serviceAccounts.stop();
        users.stop();
        tenants.stop();
        revoked.stop();
        await requests.close();
      },
    };
  },
};
