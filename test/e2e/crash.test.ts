import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import t from 'tap';
import {
  eventually,
  mainJs,
  makeTenant,
  natsUrl,
  readEventStream,
  removeNamespace,
  uniquePrefix,
  freePort,
} from '../helpers/env.js';

// kill -9 (and SIGTERM) of an ingest process under load: every event it answered "accepted" is in the stream; anything else in
// the stream came from a request whose answer was lost with the process (the client retries those, and the
// aggregators' event_id de-duplication absorbs the repeat). Nothing is invented, nothing accepted is lost.

for (const signal of ['SIGKILL', 'SIGTERM'] as const)
  t.test(`${signal} to ingest mid-load loses no accepted event`, async (t) => {
    const prefix = uniquePrefix();
    t.teardown(() => removeNamespace(prefix));
    const tenant = await makeTenant(prefix, 'crashy', 'enterprise');
    const port = await freePort();
    const child = spawn(process.execPath, [mainJs, 'start', '--role', 'ingest'], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        NATS_URL: natsUrl,
        NATS_PREFIX: prefix,
        INGEST_PORT: String(port),
        LOG_LEVEL: 'error',
      },
      stdio: 'ignore',
    });
    const exited = new Promise((r) => child.on('exit', r));
    t.teardown(() => child.kill('SIGKILL'));
    const url = `http://127.0.0.1:${port}/v1/ingest/events`;
    t.not(
      await eventually(
        async () => {
          try {
            return (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;
          } catch {
            return false;
          }
        },
        15_000,
        100,
      ),
      -1,
    );

    const accepted = new Set<string>();
    const unanswered = new Set<string>();
    const sent = new Set<string>();
    let running = true;
    const sender = async (): Promise<void> => {
      while (running) {
        const ids = Array.from({ length: 20 }, () => randomUUID());
        for (const id of ids) sent.add(id);
        const body = {
          events: ids.map((id) => ({ event_type: 'heartbeat', event_id: id, session_id: id.slice(0, 8) })),
        };
        try {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'x-api-key': tenant.key },
            body: JSON.stringify(body),
          });
          const answer = (await res.json()) as { accepted?: number; errors?: Array<{ index: number }> };
          if (res.status === 200) {
            const refused = new Set((answer.errors ?? []).map((e) => e.index));
            ids.forEach((id, i) => !refused.has(i) && accepted.add(id));
          }
        } catch {
          for (const id of ids) unanswered.add(id);
          return;
        }
      }
    };
    const senders = Array.from({ length: 8 }, () => sender());
    await new Promise((r) => setTimeout(r, 1500));
    child.kill(signal);
    await exited;
    running = false;
    await Promise.all(senders);

    const stored = (await readEventStream(prefix)).flatMap((m) => m.events.map((e) => e.event_id ?? ''));
    t.ok(accepted.size > 500, `load was real: ${accepted.size} events accepted before the kill`);
    t.equal(new Set(stored).size, stored.length, 'no event stored twice');
    const storedSet = new Set(stored);
    const missing = [...accepted].filter((id) => !storedSet.has(id));
    t.same(missing, [], 'every accepted event is in the stream');
    const extra = stored.filter((id) => !accepted.has(id));
    t.ok(
      extra.every((id) => unanswered.has(id)),
      `events stored without an answer (${extra.length}) all belong to requests cut off by the kill`,
    );
    // A graceful stop answers every request it took on before closing connections.
    if (signal === 'SIGTERM') t.same(extra, [], 'SIGTERM: every stored event was answered');
    t.ok(
      stored.every((id) => sent.has(id)),
      'nothing stored that was not sent',
    );
  });
