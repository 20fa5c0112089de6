import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import type { KV } from 'nats';
import type { Bus } from '../bus/bus.js';
import { decodeRecord, encodeRecord, readAll } from '../control/kv-records.js';
import type { Logger } from '../log.js';
import { writeParquet, writeParquetS3 } from '../store/export.js';
import { parseS3Url, presign, type S3Target } from '../store/s3.js';

export type ExportStatus = 'pending' | 'ready' | 'failed';

/** One export as kept in the `<prefix>_exports` bucket, keyed by its id. */
export interface ExportRecord {
  export_id: string;
  tenant: string;
  status: ExportStatus;
  /** Days, `YYYY-MM-DD`, both included. */
  from: string;
  to: string;
  event_types: string[];
  rows: number | null;
  bytes: number | null;
  created_at: string;
  finished_at: string | null;
  error: string | null;
  /** When the file is deleted (24 h after it was written). */
  expires_at: string | null;
  /** Where the file is: this api process's DATA_DIR/exports (absent: older records), or the EXPORT_S3_URL store. */
  storage?: 'file' | 's3';
  /** Set once an S3 object past its 24 hours is deleted. */
  deleted_at?: string | null;
}

export const exportIdPattern = /^exp_[0-9a-f]{20}$/;
export const maxPendingPerTenant = 2;
/** A job still pending this long after its request, and not running here, was cut off by a stop or crash of its process. */
export const jobTimeoutMs = 30 * 60_000;
export const fileLifetimeMs = 24 * 3_600_000;
export const urlLifetimeMs = 3_600_000;
const sweepEveryMs = 10 * 60_000;
const recordLifetimeMs = 7 * 86_400_000;

export class TooManyExportsError extends Error {
  override name = 'TooManyExportsError';
}

/**
 * Exports of raw events to Parquet: records in NATS KV (every api process sees every export), jobs run one at a time
 * by the api process that took the request (a bulk export is disk- and store-bound; running two at once only slows
 * both). Files go under `DATA_DIR/exports`, with links signed with a secret shared through KV; or, with
 * `EXPORT_S3_URL`, to an S3-compatible store, with S3 presigned links (any api process can then hand them out).
 */
export class ExportService {
  private readonly queue: string[] = [];
  private running = false;
  private idle: Promise<void> = Promise.resolve();
  private creating: Promise<void> = Promise.resolve();
  private sweeper: NodeJS.Timeout | undefined;
  /** The export whose job is running here. */
  private current: string | undefined;

  private constructor(
    private readonly records: KV,
    private readonly secret: Buffer,
    private readonly client: ClickHouseClient,
    readonly dir: string,
    private readonly s3: S3Target | null,
    private readonly log: Logger,
  ) {}

  /** `s3Url`: EXPORT_S3_URL, or '' for files under DATA_DIR/exports. */
  static async open(
    bus: Bus,
    client: ClickHouseClient,
    dataDir: string,
    s3Url: string,
    log: Logger,
  ): Promise<ExportService> {
    const s3 = s3Url === '' ? null : parseS3Url(s3Url);
    // Records expire a week after their last write: the files are gone long before, and every POST reads them all.
    const [records, secrets] = await Promise.all([
      bus.kv(bus.names.exportsBucket, recordLifetimeMs),
      bus.kv(bus.names.exportSecretBucket),
    ]);
    const dir = resolve(dataDir, 'exports');
    mkdirSync(dir, { recursive: true });
    const service = new ExportService(records, await sharedSecret(secrets), client, dir, s3, log);
    await service.failInterrupted();
    return service;
  }

  /** Sweep every 10 minutes (and once now): stale pending exports, and files past their 24 hours. */
  start(): void {
    const sweep = async (): Promise<void> => {
      await this.failInterrupted().catch((err: unknown) =>
        this.log.warn({ err }, 'cannot check for interrupted exports'),
      );
      await this.sweep();
    };
    void sweep();
    this.sweeper = setInterval(() => void sweep(), sweepEveryMs);
    this.sweeper.unref();
  }

  /** Stop sweeping and wait for the job under way; queued jobs stay pending until a sweep elsewhere fails them. */
  async stop(): Promise<void> {
    clearInterval(this.sweeper);
    this.queue.length = 0;
    await this.idle;
  }

  async get(id: string): Promise<ExportRecord | null> {
    if (!exportIdPattern.test(id)) return null;
    const e = await this.records.get(id);
    return e && e.operation === 'PUT' ? decodeRecord<ExportRecord>(e.value) : null;
  }

  /**
   * Record a pending export and queue its job. The per-tenant limit is a count of pending records, so two api
   * processes racing can both pass it; the limit protects the store, and one over is harmless.
   */
  create(tenant: string, from: string, to: string, eventTypes: string[]): Promise<ExportRecord> {
    // One creation at a time in this process, so requests arriving together cannot all pass the count.
    const created = this.creating.then(() => this.createNow(tenant, from, to, eventTypes));
    this.creating = created.then(
      () => undefined,
      () => undefined,
    );
    return created;
  }

  private async createNow(tenant: string, from: string, to: string, eventTypes: string[]): Promise<ExportRecord> {
    const all = await readAll<ExportRecord>(this.records);
    if (all.filter((r) => r.tenant === tenant && r.status === 'pending').length >= maxPendingPerTenant)
      throw new TooManyExportsError();
    const record: ExportRecord = {
      export_id: `exp_${randomBytes(10).toString('hex')}`,
      tenant,
      status: 'pending',
      from,
      to,
      event_types: eventTypes,
      rows: null,
      bytes: null,
      created_at: new Date().toISOString(),
      finished_at: null,
      error: null,
      expires_at: null,
    };
    await this.records.create(record.export_id, encodeRecord(record));
    this.queue.push(record.export_id);
    this.drain();
    return record;
  }

  /**
   * The download link of a ready export, valid one hour from `now` and never past `notAfter` (the file's deletion):
   * `{base_url}/v1/exports/{id}/file?expires=…&signature=…`, or an S3 presigned URL for a file in the store.
   */
  link(r: ExportRecord, baseUrl: string, notAfter: number, now = Date.now()): { url: string; expiresAt: number } {
    const expires = Math.floor(Math.min(now + urlLifetimeMs, notAfter) / 1000);
    if (r.storage === 's3' && this.s3)
      return {
        url: presign(this.s3, 'GET', objectKey(r), expires - Math.floor(now / 1000), now),
        expiresAt: expires * 1000,
      };
    return {
      url: `${baseUrl.replace(/\/+$/, '')}/v1/exports/${r.export_id}/file?expires=${expires}&signature=${this.sign(r.export_id, expires)}`,
      expiresAt: expires * 1000,
    };
  }

  /** Whether a link's expiry and signature are this service's and still valid; compared in constant time. */
  verify(id: string, expires: string | null, signature: string | null, now = Date.now()): boolean {
    if (
      !exportIdPattern.test(id) ||
      expires === null ||
      signature === null ||
      !/^[0-9]{1,12}$/.test(expires) ||
      !/^[0-9a-f]{64}$/.test(signature)
    )
      return false;
    const n = Number(expires);
    if (n * 1000 <= now) return false;
    return timingSafeEqual(Buffer.from(this.sign(id, n), 'hex'), Buffer.from(signature, 'hex'));
  }

  filePath(id: string): string {
    return join(this.dir, `${id}.parquet`);
  }

  private sign(id: string, expires: number): string {
    return createHmac('sha256', this.secret).update(`${id}.${expires}`).digest('hex');
  }

  private drain(): void {
    if (this.running) return;
    this.running = true;
    this.idle = (async () => {
      for (let id = this.queue.shift(); id !== undefined; id = this.queue.shift()) await this.run(id);
      this.running = false;
    })();
  }

  private async run(id: string): Promise<void> {
    this.current = id;
    try {
      await this.runJob(id);
    } finally {
      this.current = undefined;
    }
  }

  private async runJob(id: string): Promise<void> {
    const record = await this.get(id);
    if (!record || record.status !== 'pending') return;
    const log = this.log.child({ export_id: id, tenant: record.tenant });
    const started = Date.now();
    const filter = {
      tenant: record.tenant,
      fromMs: Date.parse(`${record.from}T00:00:00Z`),
      toMs: Date.parse(`${record.to}T00:00:00Z`) + 86_400_000,
      eventTypes: record.event_types,
    };
    const storage = this.s3 ? 's3' : 'file';
    try {
      const { rows, bytes } = this.s3
        ? await writeParquetS3(this.client, filter, this.s3, objectKey(record))
        : await writeParquet(this.client, filter, this.filePath(id));
      const finished = Date.now();
      await this.records.put(
        id,
        encodeRecord({
          ...record,
          status: 'ready',
          rows,
          bytes,
          storage,
          finished_at: new Date(finished).toISOString(),
          expires_at: new Date(finished + fileLifetimeMs).toISOString(),
        }),
      );
      log.info({ rows, bytes, ms: finished - started }, 'export ready');
    } catch (err) {
      log.error({ err }, 'export failed');
      await rm(this.filePath(id), { force: true });
      await this.records
        .put(
          id,
          encodeRecord({ ...record, status: 'failed', finished_at: new Date().toISOString(), error: 'export_failed' }),
        )
        .catch((e: unknown) => log.error({ err: e }, 'cannot record the failure'));
    }
  }

  private async sweepS3(s3: S3Target, now: number): Promise<void> {
    for (const r of await readAll<ExportRecord>(this.records)) {
      if (r.storage !== 's3' || r.deleted_at || r.expires_at === null || Date.parse(r.expires_at) > now) continue;
      const res = await fetch(presign(s3, 'DELETE', objectKey(r), 60, now), { method: 'DELETE' });
      if (!res.ok && res.status !== 404) throw new Error(`DELETE of ${objectKey(r)} answered ${res.status}`);
      await this.records.put(r.export_id, encodeRecord({ ...r, deleted_at: new Date(now).toISOString() }));
    }
  }

  /**
   * Pending exports older than the job timeout, and not this process's own, belong to a process that stopped: mark
   * them failed, so they no longer count against their tenant's two. At open and then with every sweep.
   */
  private async failInterrupted(now = Date.now()): Promise<void> {
    for (const r of await readAll<ExportRecord>(this.records)) {
      if (r.status !== 'pending' || now - Date.parse(r.created_at) < jobTimeoutMs) continue;
      if (r.export_id === this.current || this.queue.includes(r.export_id)) continue;
      const e = await this.records.get(r.export_id);
      if (!e || e.operation !== 'PUT') continue;
      try {
        await this.records.update(
          r.export_id,
          encodeRecord({ ...r, status: 'failed', finished_at: new Date(now).toISOString(), error: 'interrupted' }),
          e.revision,
        );
        this.log.warn({ export_id: r.export_id }, 'export interrupted by a stop; marked failed');
      } catch {
        // Another api process finished or failed it meanwhile.
      }
    }
  }

  /**
   * Delete this process's files older than 24 h (each api process has its own DATA_DIR/exports), and the store's
   * objects of exports past their 24 hours (any api process may; deleting twice is harmless).
   */
  private async sweep(now = Date.now()): Promise<void> {
    if (this.s3)
      await this.sweepS3(this.s3, now).catch((err: unknown) => this.log.warn({ err }, 'export object sweep failed'));
    try {
      for (const name of await readdir(this.dir)) {
        const path = join(this.dir, name);
        if (now - (await stat(path)).mtimeMs >= fileLifetimeMs) await rm(path, { force: true });
      }
    } catch (err) {
      this.log.warn({ err }, 'export file sweep failed');
    }
  }
}

/** An export's object key in the store, under EXPORT_S3_URL's prefix. */
const objectKey = (r: ExportRecord): string => `${r.tenant}/${r.export_id}.parquet`;

/** The URL-signing secret: 32 random bytes, created by the first api process, read by every other. */
async function sharedSecret(kv: KV): Promise<Buffer> {
  for (;;) {
    const e = await kv.get('secret');
    if (e && e.operation === 'PUT') return Buffer.from(e.value);
    try {
      await kv.create('secret', randomBytes(32));
    } catch {
      // Another process created it first: read theirs.
    }
  }
}
