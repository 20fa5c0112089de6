import { connect } from 'nats';
import t from 'tap';
import { removeNamespace } from '../../src/bus/namespace.js';
import { natsUrl, uniquePrefix } from '../helpers/env.js';

t.test('a namespace is removed whole; a prefix that could match others is refused', async (t) => {
  const prefix = uniquePrefix();
  const other = uniquePrefix();
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const js = nc.jetstream();
  await js.views.kv(`${prefix}_things`);
  await js.views.kv(`${other}_things`);
  await (await nc.jetstreamManager()).streams.add({ name: `${prefix}_events`, subjects: [`${prefix}.events.>`] });
  t.same((await removeNamespace(natsUrl, prefix)).sort(), [`KV_${prefix}_things`, `${prefix}_events`].sort());
  for (const bad of ['', 'KV', '*', 'a b', `${other}>`])
    await t.rejects(removeNamespace(natsUrl, bad), /not a NATS_PREFIX/, JSON.stringify(bad));
  t.same(await removeNamespace(natsUrl, other), [`KV_${other}_things`], 'the other namespace was untouched');
});
