import t from 'tap';
import { content } from './pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';

t.test('watch time per content, and a catalogue row per event that names a content', async (t) => {
  const rows = feed(content, [
    ev('play_start', 0, { content_id: 'm1', content_title: 'Match 1', content_type: 'sports' }),
    ev('first_frame', 1),
    ev('heartbeat', 11),
    ev('content_published', 5, {
      session_id: undefined,
      content_id: 'm1',
      content_title: 'Final',
      content_type: 'sports',
      properties: { duration_sec: 5400 },
    }),
  ]);
  t.same(
    rows.content_minute_sums,
    [
      [JSON.stringify(['acme', at(0), 'm1', -1]), [10_000, 0, 0]],
      [JSON.stringify(['acme', at(0), 'm1', 0]), [0, 1, 0]],
    ],
    'watch time under -1 (the heartbeat has no content_id: the session’s); the session, without a duration, under its furthest position',
  );
  t.equal(rows.content_catalog!.length, 2);
  t.match(rows.content_catalog!.map(([k]) => k).join('\n'), /"Final","sports",5400/);
});
