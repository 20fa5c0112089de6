import { ErrorCode, type NatsError } from 'nats';
import { Bus } from '../bus/bus.js';
import type { Config } from '../config/schema.js';
import type { ReplayAnswer } from '../flush/replay-service.js';
import { replayRange, ReplayError, type ReplayResult } from '../flush/replay.js';
import type { Logger } from '../log.js';
import { flags, UsageError } from './args.js';

/** `YYYY-MM-DD` (midnight UTC) or an ISO 8601 time with its zone. */
export function parseTime(value: string, name: string): number {
  const t = /^\d{4}-\d{2}-\d{2}$/.test(value)
    ? Date.parse(`${value}T00:00:00Z`)
    : /(Z|[+-]\d{2}:?\d{2})$/.test(value)
      ? Date.parse(value)
      : NaN;
  if (Number.isNaN(t))
    throw new UsageError(
      `--${name} must be a date (2026-11-20) or an ISO 8601 time with a zone (2026-11-20T18:30:00Z), got ${JSON.stringify(value)}`,
    );
  return t;
}

/**
 * `darshak replay --tenant S --from T --to T`: recompute the snapshots of a range from the raw events. Sent to a
 * running flush role when there is one (it holds the store); otherwise the store is opened here.
 */
export async function runReplay(
  argv: string[],
  config: Config,
  log: Logger,
  out: NodeJS.WritableStream,
): Promise<void> {
  const f = flags(argv, { tenant: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' } }, [
    'tenant',
    'from',
    'to',
  ]);
  const req = {
    tenant: f.tenant as string,
    from: parseTime(f.from as string, 'from'),
    to: parseTime(f.to as string, 'to'),
  };
  if (!(req.from < req.to) || req.from % 60_000 !== 0 || req.to % 60_000 !== 0)
    throw new UsageError('--from and --to must be whole minutes, --from before --to');
  const bus = await Bus.connect(config, log, 'darshak-cli');
  let result: ReplayResult;
  try {
    const reply = await bus.nc
      .request(bus.names.replaySubject, new TextEncoder().encode(JSON.stringify(req)), { timeout: 30 * 60_000 })
      .catch((err: NatsError) => {
        if ((err.code as ErrorCode) === ErrorCode.NoResponders) return null;
        throw err;
      });
    if (reply) {
      const answer = JSON.parse(new TextDecoder().decode(reply.data)) as ReplayAnswer;
      if ('error' in answer) throw new ReplayError(answer.error);
      result = answer.result;
    } else {
      const { Store } = await import('../store/store.js');
      const store = await Store.open(config, log);
      try {
        result = await replayRange(store.client, req);
      } finally {
        await store.close();
      }
    }
  } finally {
    await bus.close();
  }
  out.write(`${JSON.stringify(result)}\n`);
}
