import t from 'tap';
import { validateEvent } from '../../src/ingest/validate.js';
import { eventLimits } from '../../src/ingest/taxonomy.js';

// One event judged against CONTRACT §5's taxonomy: each refusal has its code, its index, and names the field.

const play = {
  event_type: 'play_start',
  session_id: 's-1',
  anonymous_id: 'viewer-1',
  content_id: 'final',
  ts: '2026-11-21T10:00:00.000Z',
};

t.test('a known event with its fields, and a custom event, are accepted as sent', async (t) => {
  t.same(validateEvent(play, 0, false), { ok: true, value: play });
  const custom = { event_type: 'ad_click', anonymous_id: 'v', properties: { slot: 'pre-roll' } };
  t.same(validateEvent(custom, 3, false), { ok: true, value: custom });
});

t.test('each refusal names the event by index and the field by name', async (t) => {
  const cases: Array<[unknown, string, RegExp]> = [
    [[play], 'invalid_event', /must be a JSON object/],
    ['play', 'invalid_event', /must be a JSON object/],
    [{ event_type: 'heartbeat' }, 'missing_field', /"session_id" is required for heartbeat/],
    [{ ...play, anonymous_id: undefined }, 'missing_field', /"anonymous_id" or "user_id"/],
    [{ ...play, ts: '2026-11-21 10:00' }, 'invalid_field', /"ts" must be an ISO 8601 timestamp/],
    [{ ...play, ts: '2026-13-21T10:00:00Z' }, 'invalid_field', /"ts" must be an ISO 8601 timestamp/],
    [{ ...play, colour: 'red' }, 'unknown_field', /unknown field "colour"; free-form data belongs in "properties"/],
  ];
  for (const [value, code, message] of cases) {
    const r = validateEvent(JSON.parse(JSON.stringify(value ?? null)) as unknown, 7, false);
    t.match(r, { ok: false, error: { index: 7, code, message } }, `${JSON.stringify(value)}: ${code}`);
  }
});

t.test('properties are bounded in bytes and depth', async (t) => {
  const big = { ...play, properties: { s: 'x'.repeat(eventLimits.propertiesMaxBytes) } };
  t.match(validateEvent(big, 0, false), { ok: false, error: { code: 'properties_too_large' } });
  let deep: Record<string, unknown> = {};
  for (let i = 0; i <= eventLimits.propertiesMaxDepth; i++) deep = { d: deep };
  t.match(validateEvent({ ...play, properties: deep }, 0, false), {
    ok: false,
    error: { code: 'properties_too_large' },
  });
});

t.test('an unpaired surrogate is refused when the raw text may hold one', async (t) => {
  const lone = { ...play, properties: { s: '\ud800' } };
  t.match(validateEvent(lone, 0, true), {
    ok: false,
    error: { code: 'invalid_field', message: /unpaired UTF-16 surrogate/ },
  });
  const paired = { ...play, properties: { s: '\ud83c\udfcf' } };
  t.match(validateEvent(paired, 0, true), { ok: true }, 'a paired one (an emoji) is text');
});
