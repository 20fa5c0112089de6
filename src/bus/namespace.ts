import { connect } from 'nats';
import { configKeys } from '../config/schema.js';

/**
 * Delete every stream, KV bucket and object store (streams named KV_<bucket>, OBJ_<bucket>) of a deployment's namespace
 * (NATS_PREFIX): what a test or a load test leaves behind. Answers the names removed.
 */
export async function removeNamespace(natsUrl: string, prefix: string): Promise<string[]> {
  // An empty or odd prefix would match other deployments' names (or, empty, anything starting with "_").
  if (!new RegExp(configKeys.nats_prefix.pattern ?? '^$').test(prefix))
    throw new Error(`not a NATS_PREFIX: ${JSON.stringify(prefix)}`);
  const removed: string[] = [];
  const nc = await connect({ servers: natsUrl, reconnect: false });
  try {
    const jsm = await nc.jetstreamManager();
    const names: string[] = [];
    for await (const s of jsm.streams.list()) names.push(s.config.name);
    for (const name of names) {
      if (name.startsWith(`${prefix}_`) || name.startsWith(`KV_${prefix}_`) || name.startsWith(`OBJ_${prefix}_`)) {
        await jsm.streams.delete(name);
        removed.push(name);
      }
    }
  } finally {
    await nc.close();
  }
  return removed;
}
