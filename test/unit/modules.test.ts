import t from 'tap';
import { resolveTargets, startOrder, type ModuleRegistry } from '../../src/modules.js';
import { registry } from '../../src/registry.js';

const fake = (deps: string[], role = false) => ({ deps, role, start: async () => ({ stop: async () => undefined }) });

t.test('all expands to every role; unknown roles are refused by name', async (t) => {
  t.same(resolveTargets(registry, 'all'), ['ingest', 'aggregate', 'flush', 'alerts', 'api', 'webhooks']);
  t.same(resolveTargets(registry, 'ingest'), ['ingest']);
  t.throws(() => resolveTargets(registry, 'ingest,bogus'), /unknown role "bogus"; roles: all, ingest, aggregate, flush, alerts, api, webhooks/);
  t.throws(() => resolveTargets(registry, 'bus'), /unknown role "bus"/, 'shared modules are not roles');
});

t.test('dependencies start first, once each; cycles are refused', async (t) => {
  const reg: ModuleRegistry = { a: fake([]), b: fake(['a']), c: fake(['a', 'b'], true), d: fake(['b'], true) };
  t.same(startOrder(reg, ['c', 'd']), ['a', 'b', 'c', 'd']);
  t.same(startOrder(registry, ['ingest']), ['bus', 'directory', 'usage', 'keyUsage', 'ingest'], 'ingest reads tenants and keys, not the control plane');
  t.same(startOrder(registry, ['aggregate']), ['bus', 'aggregate'], 'aggregators need no store: they run anywhere');
  t.same(startOrder(registry, ['aggregate', 'flush']), ['bus', 'store', 'flush', 'aggregate'], 'in one process, flush first: a rebuilding shard may ask it for stored sessions');
  t.throws(() => startOrder({ x: fake(['y']), y: fake(['x']) }, ['x']), /cycle/);
});

t.test('the webhooks role needs only NATS: it runs anywhere', async (t) => {
  t.same(startOrder(registry, ['webhooks']), ['bus', 'control', 'webhooks']);
});

t.test('the alerts role needs only NATS: it runs anywhere', async (t) => {
  t.same(startOrder(registry, ['alerts']), ['bus', 'directory', 'usage', 'alerts']);
});
