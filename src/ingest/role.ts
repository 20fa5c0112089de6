import { EventPublisher } from '../bus/publisher.js';
import { createHttpServer } from '../http/server.js';
import { opsRoutes } from '../http/ops.js';
import type { ModuleDef } from '../modules.js';
import { Enricher } from './enrich.js';
import { rateHeaders } from '../http/rate-limit.js';
import { Ingest, rateOf } from './ingest.js';
import { LoadShedder } from './load-shedder.js';
import { ingestRoutes } from './routes.js';
import { sdkRoutes } from './sdk-script.js';
import { eventLimits } from './taxonomy.js';

export const ingestRole: ModuleDef = {
  deps: ['bus', 'directory', 'usage', 'keyUsage'],
  role: true,
  async start(services) {
    const { config } = services;
    const log = services.log.child({ module: 'ingest' });
    const bus = services.get('bus');
    const shedder = new LoadShedder(bus, config.shards, {
      targetLagMs: config.ingest_shed_lag_ms,
      maxLagMs: config.ingest_shed_max_lag_ms,
    });
    const publisher = new EventPublisher(
      bus,
      {
        shards: config.shards,
        timeoutMs: config.publish_timeout_ms,
        maxInflight: config.publish_max_inflight,
        maxMessageBytes: config.publish_max_message_bytes,
        onAcked: (shard, seq, events) => shedder.published(shard, seq, events),
      },
      log,
    );
    const directory = services.get('directory');
    const ingest = new Ingest({
      ...directory,
      usage: services.get('usage'),
      keyUsage: services.get('keyUsage'),
      publisher,
      enricher: new Enricher(),
      shedder,
      shards: config.shards,
      trustProxy: config.trust_proxy,
    });
    const server = await createHttpServer({
      listener: 'ingest',
      host: config.host,
      port: config.ingest_port,
      engine: config.http_engine,
      routes: [...ingestRoutes(ingest), ...sdkRoutes(), ...opsRoutes(() => services.checks, services.config.ops_token)],
      maxBodyBytes: eventLimits.bodyMaxBytes,
      cors: {
        origins: '*',
        allowHeaders: ['Content-Type', 'X-API-Key', 'Authorization', 'X-Request-Id'],
        exposeHeaders: ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After'],
      },
      log,
      // Answers that never reached a tenant (404, preflight) still carry RateLimit-*, describing the default limit.
      commonHeaders: () => rateHeaders(rateOf(null, 0, Date.now())),
    });
    services.listeners.set('ingest', { port: server.port, engine: server.engine });
    return {
      async stop() {
        // Requests under way wait for their acknowledgements and are answered before connections close.
        await server.close(config.publish_timeout_ms + 1000);
        await publisher.drain();
        shedder.stop();
      },
    };
  },
};
