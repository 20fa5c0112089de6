import t from 'tap';
import { parseBatch, shapeBatch } from '../../src/ingest/batch.js';
import { eventLimits } from '../../src/ingest/taxonomy.js';

// The batch steps of ingest: the body read as UTF-8 JSON, then its shape. Each refusal carries the registry's code
// and a message that says what to fix; nothing here judges an event (validate.test.ts does).

const heartbeat = { event_type: 'heartbeat', session_id: 's' };
const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

t.test('a body that is not UTF-8 JSON is refused as invalid_json, saying which', async (t) => {
  t.match(parseBatch(Uint8Array.from([0x7b, 0xff, 0x7d])), {
    ok: false,
    error: { code: 'invalid_json', message: /not valid UTF-8/ },
  });
  t.match(parseBatch(bytes('{"events": [')), {
    ok: false,
    error: { code: 'invalid_json', message: /not valid JSON: / },
  });
  t.match(parseBatch(bytes('')), { ok: false, error: { code: 'invalid_json' } });
});

t.test('the shape: exactly events (1 to the maximum) and an optional sent_at', async (t) => {
  for (const [value, message] of [
    [null, undefined],
    [[heartbeat], undefined],
    ['events', undefined],
    [{}, undefined],
    [{ events: heartbeat }, undefined],
    [{ events: [] }, /"events" is empty/],
    [{ events: [heartbeat], extra: 1 }, /Unknown top-level field "extra"/],
    [{ events: [heartbeat], sent_at: '2026-11-21' }, /"sent_at" must be an ISO 8601 timestamp/],
    [{ events: [heartbeat], sent_at: 1763719200000 }, /"sent_at" must be/],
    [{ events: [heartbeat], sent_at: '2026-13-45T99:00:00Z' }, /"sent_at" must be/],
  ] as const) {
    const r = shapeBatch(value, false);
    t.match(r, { ok: false, error: { code: 'invalid_body' } }, JSON.stringify(value));
    if (message && !r.ok) t.match(r.error.message, message);
  }
  const long = shapeBatch({ events: [heartbeat], ['x'.repeat(500)]: 1 }, false);
  t.ok(!long.ok && long.error.message!.length < 200, 'an unknown field is named, cut short');
});

t.test('at most the batch maximum of events', async (t) => {
  const full = Array.from({ length: eventLimits.batchMax }, () => heartbeat);
  t.match(shapeBatch({ events: full }, false), { ok: true, value: { events: full, sentAt: null } });
  t.match(shapeBatch({ events: [...full, heartbeat] }, false), {
    ok: false,
    error: {
      code: 'too_many_events',
      message: `A batch holds at most ${eventLimits.batchMax} events; this one has ${eventLimits.batchMax + 1}`,
    },
  });
});

t.test('sent_at is read in any time zone; the surrogate hint follows the raw text', async (t) => {
  t.match(parseBatch(bytes(JSON.stringify({ events: [heartbeat], sent_at: '2026-11-21T15:30:00+05:30' }))), {
    ok: true,
    value: { sentAt: Date.parse('2026-11-21T10:00:00Z'), mayHaveSurrogates: false },
  });
  t.match(parseBatch(bytes('{"events":[{"event_type":"x","properties":{"s":"\\ud800"}}]}')), {
    ok: true,
    value: { mayHaveSurrogates: true },
  });
});
