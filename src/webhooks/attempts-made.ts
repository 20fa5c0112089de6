import type { KV } from 'nats';
import type { Bus } from '../bus/bus.js';
import type { AttemptLog } from '../contracts/webhook-attempt.js';

/** Long enough for any delivery message still in its stream (30 days, contracts/webhook-streams.ts) to be looked up. */
const keptMs = 30 * 24 * 3_600_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The attempts made, one entry per delivery message (keyed by its sequence in the deliveries stream): its log entry,
 * written after the attempt's retry is scheduled and before the log is. A message that comes again after its attempt
 * was made (its acknowledgement lost with a killed process or NATS server, whether JetStream marks it as redelivered
 * or not) keeps its sequence and is found here; a retry, or a held delivery released to start its schedule again, is
 * a message of its own. A key lookup: one round trip to NATS per delivery, where the log would be a read of 200.
 */
export class AttemptsMade {
  private constructor(private readonly kv: KV) {}

  static async open(bus: Bus): Promise<AttemptsMade> {
    return new AttemptsMade(await bus.kv(bus.names.webhookAttemptsBucket, keptMs));
  }

  async get(seq: number): Promise<AttemptLog | null> {
    const entry = await this.kv.get(String(seq));
    return entry && entry.operation === 'PUT' ? (JSON.parse(decoder.decode(entry.value)) as AttemptLog) : null;
  }

  async record(seq: number, entry: AttemptLog): Promise<void> {
    await this.kv.put(String(seq), encoder.encode(JSON.stringify(entry)));
  }
}
