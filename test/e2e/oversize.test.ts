import t from 'tap';
import { makeTenant, startService } from '../helpers/env.js';
import { engineTest } from '../helpers/engines.js';
import { oversizeOutcomes } from '../helpers/oversize.js';

// A batch over ingest's 1 MiB cap, as a reporter sends it: the 413 must arrive readable on both engines, with
// keep-alive and without, from just over the cap to several times it (issue 60; docs/errors.md "Bodies over the
// cap"), and nothing of it is published.

const cap = 1024 * 1024;
const heartbeat = JSON.stringify({ event_type: 'heartbeat', session_id: 's-1', position_sec: 10, bitrate_kbps: 4500 });

/** A JSON batch of heartbeats of about `bytes`. */
function batchOf(bytes: number): Buffer {
  const n = Math.ceil(bytes / (heartbeat.length + 1));
  return Buffer.from(`{"events":[${new Array<string>(n).fill(heartbeat).join(',')}]}`);
}

for (const engine of ['uws', 'node'] as const) {
  t.test(`ingest on ${engine}: an oversize batch gets a readable 413`, engineTest(engine), async (t) => {
    const svc = await startService({ http_engine: engine });
    t.teardown(() => svc.stop());
    const tenant = await makeTenant(svc.config.nats_prefix);
    const headers = { 'content-type': 'application/json', 'x-api-key': tenant.key };
    const readable = ['413 payload_too_large'];
    for (const bytes of [cap + 100, 1_100_000, 3 * cap, 7.5 * cap]) {
      const seen = await oversizeOutcomes(`${svc.ingestUrl}/v1/ingest/events`, batchOf(bytes), headers);
      t.same(seen, { fetch: readable, keepAlive: readable, closed: readable }, `${bytes} B`);
    }
    const cmcd = Buffer.from('e=t,sta=p,sid="s-2",sn=1\n'.repeat(Math.ceil((2 * cap) / 25)));
    const seen = await oversizeOutcomes(`${svc.ingestUrl}/v1/ingest/cmcd`, cmcd, {
      'content-type': 'application/cmcd',
      'x-api-key': tenant.key,
    });
    t.same(seen, { fetch: readable, keepAlive: readable, closed: readable }, 'CMCD reports, 2 MiB');
    const small = await fetch(`${svc.ingestUrl}/v1/ingest/events`, { method: 'POST', headers, body: batchOf(1000) });
    t.equal(small.status, 200, 'and a batch under the cap is taken on the same listener');
  });
}
