import {
  AckPolicy,
  connect,
  DeliverPolicy,
  StorageType,
  DiscardPolicy,
  Events,
  RetentionPolicy,
  type Consumer,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  type KV,
  type NatsConnection,
  type ObjectStore,
  type StreamConfig,
} from 'nats';
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { natsConnectOptions, type NatsAccess } from './connect-options.js';
import { busNames, type BusNames } from './names.js';
import { OperatorError } from '../operator-error.js';

/** NATS configuration durations are in nanoseconds. */
export const nanos = (ms: number): number => ms * 1_000_000;

/** Tries of a JetStream administration request that timed out, at start (streams, consumers, buckets). */
const adminTries = 4;

/**
 * A JetStream administration request, tried again when it times out: a cluster electing leaders (just formed, or
 * a server lost) answers late, and the request may even have been done; each step here is safe to repeat. Seen
 * on a three-server cluster on a busy machine: a start failed on its first stream.
 */
async function patiently<T>(what: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await what();
    } catch (err) {
      if (!isPassingBusError(err) || attempt >= adminTries) throw err;
      await new Promise((r) => setTimeout(r, 1000 * attempt));
    }
  }
}

const identityPattern = /^darshak stream ([0-9a-f]+)$/;
const newStreamIdentity = (): string => `darshak stream ${randomBytes(8).toString('hex')}`;

/**
 * A stream's identity, kept in its description: set when the stream is made and kept by every update, so a stream
 * made again (its sequences restarting at 1) has another. Not its creation time: nats-server 2.9 forgets that when it
 * restarts after an update (every process start updates the streams), and takes the restart's time instead; the
 * flusher's de-duplication tokens, named after it, then changed under messages written again (the soak found rows
 * stored twice).
 */
export function streamIdentity(config: Pick<StreamConfig, 'name' | 'description'>): string {
  const id = identityPattern.exec(config.description ?? '')?.[1];
  if (!id)
    throw new Error(
      `stream ${config.name} has no identity in its description: a process that runs ensureStreams gives it one`,
    );
  return id;
}

export class BusUnavailableError extends OperatorError {
  override name = 'BusUnavailableError';
  constructor(
    message: string,
    /** JetStream did not answer in time (a cluster electing its leaders): trying again later may succeed. */
    readonly passing = false,
  ) {
    super(message);
  }
}

/** JetStream's answer when fewer servers are in the cluster than a stream's replicas. */
const noPeersForPlacement = 10005;

/**
 * A NATS failure that passes: a request that timed out (a cluster without its leaders yet, a server just restarted),
 * JetStream saying it is temporarily unavailable, or a cluster that cannot place a stream's replicas yet (it formed
 * with two servers of three and the third is still starting; seen in CI). Not one that needs an operator: no
 * JetStream at all, a refused sign-in or permission.
 */
export function isPassingBusError(err: unknown): boolean {
  if (err instanceof BusUnavailableError) return err.passing;
  // The store's, the configuration's: they say what to do, and waiting does not do it.
  if (err instanceof OperatorError) return false;
  const e = err as { code?: unknown; message?: unknown; api_error?: { err_code?: unknown } } | null;
  return (
    e?.code === 'TIMEOUT' ||
    e?.api_error?.err_code === 10008 ||
    e?.api_error?.err_code === noPeersForPlacement ||
    /timeout|temporarily unavailable/i.test(String(e?.message))
  );
}

/** One NATS connection per process, shared by every role in it. */
export class Bus {
  private up = true;
  private readonly kvs = new Map<string, Promise<KV>>();
  private readonly listeners = { disconnect: new Set<() => void>(), reconnect: new Set<() => void>() };

  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    readonly names: BusNames,
    private readonly log: Logger,
    /** Copies JetStream keeps of every stream, bucket and object store (STREAM_REPLICAS: 3 on a cluster). */
    readonly replicas: number,
  ) {
    void this.watchStatus();
  }

  static async connect(
    config: NatsAccess & Pick<Config, 'nats_prefix'> & Partial<Pick<Config, 'stream_replicas'>>,
    log: Logger,
    name = 'darshak',
  ): Promise<Bus> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        ...natsConnectOptions(config),
        servers: config.nats_url.split(',').map((s) => s.trim()),
        name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        pingInterval: 5_000,
        // nats.js otherwise builds an Error (a stack trace) for every request, JetStream acknowledgements included:
        // 15 % of the webhooks role's time in its benchmark. Our errors say what failed without it.
        noAsyncTraces: true,
      });
    } catch (err) {
      const message = (err as Error).message;
      if (/authori[sz]ation|authentication/i.test(message)) {
        throw new BusUnavailableError(
          `NATS at ${config.nats_url} refused to sign in (${message}): set NATS_USER and NATS_PASSWORD, NATS_TOKEN, NATS_CREDS_FILE or NATS_NKEY_FILE (docs/security.md); a server that \`darshak start\` runs keeps its user in DATA_DIR/nats/credentials.json, found with the same DATA_DIR`,
        );
      }
      throw new BusUnavailableError(`cannot reach NATS at ${config.nats_url}: ${message}`);
    }
    const jsm = await nc.jetstreamManager({ timeout: 5_000 }).catch((err: Error) => {
      void nc.close();
      if (isPassingBusError(err))
        throw new BusUnavailableError(
          `JetStream at ${config.nats_url} did not answer within 5 s (a cluster still electing its leaders?): ${err.message}`,
          true,
        );
      throw new BusUnavailableError(
        `NATS at ${config.nats_url} has no JetStream (start nats-server with -js): ${err.message}`,
      );
    });
    return new Bus(
      nc,
      nc.jetstream(),
      jsm,
      busNames(config.nats_prefix),
      log.child({ module: 'bus' }),
      config.stream_replicas ?? 1,
    );
  }

  /** True while the connection is established; publishes are refused (not buffered) otherwise. */
  get connected(): boolean {
    return this.up && !this.nc.isClosed();
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      // A permissions violation, say: the server refused something this process's NATS user may not do.
      if (s.type === Events.Error) this.log.error({ err: s.data }, 'NATS refused an operation');
      if (s.type !== Events.Disconnect && s.type !== Events.Reconnect) continue;
      this.up = s.type === Events.Reconnect;
      if (this.up) this.log.info({ server: s.data }, 'NATS reconnected');
      else this.log.warn({ server: s.data }, 'NATS disconnected');
      for (const fn of this.listeners[s.type]) {
        try {
          fn();
        } catch (err) {
          this.log.error({ err, event: s.type }, 'bus status listener failed');
        }
      }
    }
  }

  /**
   * Call `fn` on every disconnect or reconnect; returns the unsubscribe. On reconnect: a restarted server has lost the
   * consumers behind KV watches, and the client notices only after two missed idle heartbeats (about 10 s), so
   * watchers reopen at once. On disconnect: publishes awaiting an acknowledgement stop waiting.
   */
  on(event: 'disconnect' | 'reconnect', fn: () => void): () => void {
    this.listeners[event].add(fn);
    return () => void this.listeners[event].delete(fn);
  }

  /** The partitioned event stream and the raw stream after it; the shard count is fixed when first created. */
  async ensureStreams(shards: number, maxAgeHours: number): Promise<void> {
    const cluster = await this.kv(this.names.clusterBucket);
    const existing = await cluster.get('shards');
    if (existing && existing.operation === 'PUT') {
      const have = Number(existing.string());
      if (have !== shards) {
        throw new Error(
          `config: SHARDS (shards) is ${shards} but the event stream ${this.names.eventsStream} was created with ${have} shards`,
        );
      }
    } else {
      try {
        await cluster.create('shards', String(shards));
      } catch {
        return this.ensureStreams(shards, maxAgeHours);
      }
    }
    const age = nanos(maxAgeHours * 3_600_000);
    const limits = {
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      duplicate_window: nanos(120_000),
    };
    // Direct gets: the flusher reads messages of both by sequence (readMessage): the input messages aggregator output
    // names, and the members of a group it writes again.
    await this.ensureStream({
      ...limits,
      name: this.names.eventsStream,
      subjects: [this.names.eventsWildcard],
      max_age: age,
      allow_direct: true,
    });
    await this.ensureStream({
      ...limits,
      name: this.names.rawStream,
      subjects: [this.names.rawWildcard],
      max_age: age,
      allow_direct: true,
    });
    // The alerts role rebuilds 7-day baselines (churn, completion) from signals: at least 8 days of them.
    await this.ensureStream({
      ...limits,
      name: this.names.signalsStream,
      subjects: [this.names.signalsWildcard],
      max_age: Math.max(age, nanos(8 * 86_400_000)),
    });
  }

  /** Create a stream, or bring one made by an older version (or another process) to this configuration. */
  ensureStream(stream: Partial<StreamConfig> & { name: string }): Promise<void> {
    return patiently(() => this.ensureStreamOnce(stream));
  }

  private async ensureStreamOnce(stream: Partial<StreamConfig> & { name: string }): Promise<void> {
    const config = { ...stream, num_replicas: this.replicas };
    try {
      const info = await this.jsm.streams.info(config.name);
      const kept = info.config.description ?? '';
      await this.jsm.streams.update(config.name, {
        ...config,
        description: identityPattern.test(kept) ? kept : newStreamIdentity(),
      });
    } catch (err) {
      if (!/stream not found/i.test((err as Error).message)) throw err;
      await this.jsm.streams.add({ ...config, description: newStreamIdentity() }).catch((e: Error) => {
        // Another process created it meanwhile.
        if (!/already in use|already exists/i.test(e.message)) throw e;
      });
    }
  }

  /**
   * A stream's message by sequence, or null when the stream no longer holds it. Asked by a direct get (the bytes as
   * stored, answered by any replica), and of the stream's leader when that finds nothing (a replica may not have the
   * message yet) or no one answers (a stream without direct gets).
   */
  async readMessage(stream: string, seq: number): Promise<Uint8Array | null> {
    try {
      const r = await this.nc.request(`$JS.API.DIRECT.GET.${stream}`, JSON.stringify({ seq }), { timeout: 5_000 });
      const status = r.headers?.code ?? 0;
      if (status === 0 || status === 200) return r.data;
    } catch (err) {
      if (!/no responders|503/i.test((err as Error).message)) throw err;
    }
    try {
      return (await this.jsm.streams.getMessage(stream, { seq })).data;
    } catch (err) {
      if (/no message found/i.test((err as Error).message)) return null;
      throw err;
    }
  }

  /** Create a durable consumer, or bring one made by an older version to these settings (it keeps its position). */
  ensureConsumer(stream: string, config: Partial<ConsumerConfig> & { durable_name: string }): Promise<void> {
    return patiently(() => this.ensureConsumerOnce(stream, config));
  }

  private async ensureConsumerOnce(
    stream: string,
    config: Partial<ConsumerConfig> & { durable_name: string },
  ): Promise<void> {
    try {
      await this.jsm.consumers.info(stream, config.durable_name);
      await this.jsm.consumers.update(stream, config.durable_name, config);
    } catch (err) {
      if (!/consumer not found/i.test((err as Error).message)) throw err;
      await this.jsm.consumers.add(stream, config);
    }
  }

  /**
   * What one reader of large messages (the event, raw and signals streams) may have pulled and not yet handled: two
   * of the largest messages. The server cuts a connection whose unread data passes its `max_pending` (64 MB by
   * default) as a slow consumer, and one process may run a reader per shard; a count of messages of up to 1 MB each
   * is no bound at all.
   */
  get readAheadBytes(): number {
    return 2 * (this.nc.info?.max_payload ?? 1_048_576) + 64 * 1024;
  }

  /** A KV bucket, created on first use. `ttlMs` expires entries (counters of past minutes). */
  kv(bucket: string, ttlMs?: number): Promise<KV> {
    let kv = this.kvs.get(bucket);
    if (!kv) {
      // Reads go to the bucket's leader: a direct get may be answered by a replica that has not yet applied the
      // write just acknowledged (seen on a three-server cluster: `tenant create` read back "no such tenant").
      const base = { history: 1, replicas: this.replicas, allow_direct: false };
      const opts = ttlMs === undefined ? base : { ...base, ttl: ttlMs };
      kv = patiently(() => this.js.views.kv(bucket, opts));
      this.kvs.set(bucket, kv);
      kv.catch(() => this.kvs.delete(bucket));
    }
    return kv;
  }

  /**
   * A private reader of `stream` (one subject of it, or all) from `from` on, in order and without acknowledgements:
   * an ephemeral consumer in memory, gone 30 s after its last read. It is what nats.js's ordered consumer makes, but
   * its creation is one request with the manager's deadline: the ordered consumer retries creating it by itself, up
   * to 30 times with up to 10 s between tries and nothing reported, and a three-server cluster electing leaders kept
   * a shard waiting there for minutes. A failure here is the caller's, who reads again from where it stands.
   * Messages come in delivery order; `consumeLoop({ ordered: true })` ends a read at a gap in it.
   */
  async reader(
    stream: string,
    subject: string | undefined,
    from: { seq: number } | { time: number } | 'all',
  ): Promise<Consumer> {
    const start: Partial<ConsumerConfig> =
      from === 'all'
        ? { deliver_policy: DeliverPolicy.All }
        : 'seq' in from
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from.seq }
          : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(from.time).toISOString() };
    const info = await this.jsm.consumers.add(stream, {
      ...start,
      ...(subject === undefined ? {} : { filter_subject: subject }),
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(30_000),
    });
    return this.js.consumers.get(stream, info.name);
  }

  /** An object store (aggregator and alerts checkpoints), created on first use. */
  objectStore(bucket: string): Promise<ObjectStore> {
    return patiently(() => this.js.views.os(bucket, { replicas: this.replicas }));
  }

  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    try {
      await this.nc.drain();
    } catch {
      await this.nc.close();
    }
  }
}
