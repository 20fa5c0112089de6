import { connect } from 'nats';

/**
 * Delete every stream, KV bucket and object store (streams named KV_<bucket>, OBJ_<bucket>) of a deployment's namespace
 * (NATS_PREFIX): what a test or a load test leaves behind. Answers the names removed.
 */
export async function removeNamespace(natsUrl: string, prefix: string): Promise<string[]> {
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
