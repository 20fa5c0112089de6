import t from 'tap';
import { quota } from './pipeline.js';
import { at, ev, feed } from '../../test/helpers/pipeline.js';

t.test('every stored event counts once, in the minute it arrived, custom events included', async (t) => {
  t.same(feed(quota, [ev('heartbeat', 1), ev('my.custom', 2), ev('heartbeat', 61, { ts: 0 })]).quota_minutes, [
    [JSON.stringify(['acme', at(0)]), [2]],
    [JSON.stringify(['acme', at(60)]), [1]],
  ]);
});
