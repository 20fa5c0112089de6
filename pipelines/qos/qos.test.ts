import t from 'tap';
import { qos, startupBucket } from './pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';

t.test('per minute, region and pop: watch, rebuffering, starts, startup time and fatal sessions', async (t) => {
  const pop = { context: { pop: 'bom1' } };
  const events = [
    ev('play_start', 0, pop),
    ev('first_frame', 2, pop),
    ev('heartbeat', 12, pop),
    ev('rebuffer_start', 20, pop),
    ev('heartbeat', 30, pop),
    ev('error', 300, { ...pop, properties: { fatal: true } }),
    // A second fatal error does not make a second fatal session.
    ev('error', 301, { ...pop, properties: { fatal: true } }),
  ];
  const rows = feed(qos, events);
  const key = (s: number) => JSON.stringify(['acme', at(s), 'Goa', 'bom1']);
  // 10:00: 10 + 8 s watching, 10 s rebuffering (20→30); 30→300 is capped at 30 s of rebuffering, in minute 10:05.
  t.same(rows.qos_minutes, [
    [key(0), [28_000, 10_000, 1, 0, 1, 2000]],
    [key(300), [30_000, 30_000, 0, 1, 0, 0]],
  ]);
  t.same(rows.qos_startup_histogram, [[JSON.stringify(['acme', at(0), 'Goa', 'bom1', startupBucket(2000)]), [1]]]);
  t.equal(startupBucket(2000), 156, '1.05^155 < 2000 ≤ 1.05^156');
});
