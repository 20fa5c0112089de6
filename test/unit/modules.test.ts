import t from 'tap';
import {
  resolveTargets,
  Services,
  StartAbandonedError,
  startModules,
  startOrder,
  type ModuleRegistry,
} from '../../src/modules.js';
import { registry } from '../../src/registry.js';
import { boxProcesses } from '../../src/cli/box.js';
import { createLogger } from '../../src/log.js';
import { testConfig } from '../helpers/env.js';

const fake = (deps: string[], role = false) => ({ deps, role, start: async () => ({ stop: async () => undefined }) });

t.test('all expands to every role; unknown roles are refused by name', async (t) => {
  t.same(resolveTargets(registry, 'all'), ['ingest', 'aggregate', 'flush', 'alerts', 'api', 'webhooks']);
  t.same(resolveTargets(registry, 'ingest'), ['ingest']);
  t.throws(
    () => resolveTargets(registry, 'ingest,bogus'),
    /unknown role "bogus"; roles: all, ingest, aggregate, flush, alerts, api, webhooks/,
  );
  t.throws(() => resolveTargets(registry, 'bus'), /unknown role "bus"/, 'shared modules are not roles');
});

t.test('dependencies start first, once each; cycles are refused', async (t) => {
  const reg: ModuleRegistry = { a: fake([]), b: fake(['a']), c: fake(['a', 'b'], true), d: fake(['b'], true) };
  t.same(startOrder(reg, ['c', 'd']), ['a', 'b', 'c', 'd']);
  t.same(
    startOrder(registry, ['ingest']),
    ['bus', 'directory', 'usage', 'keyUsage', 'ingest'],
    'ingest reads tenants and keys, not the control plane',
  );
  t.same(startOrder(registry, ['aggregate']), ['bus', 'aggregate'], 'aggregators need no store: they run anywhere');
  t.same(
    startOrder(registry, ['aggregate', 'flush']),
    ['bus', 'store', 'flusher', 'alertWriter', 'replay', 'history', 'flush', 'aggregate'],
    'in one process, flush first: a rebuilding shard may ask it for stored sessions',
  );
  t.same(
    startOrder(registry, ['api']),
    ['bus', 'control', 'store', 'tokens', 'exports', 'api'],
    'a role is a group of modules: the api starts its token and export services first',
  );
  t.throws(() => startOrder({ x: fake(['y']), y: fake(['x']) }, ['x']), /cycle/);
});

t.test('the webhooks role needs only NATS: it runs anywhere', async (t) => {
  t.same(startOrder(registry, ['webhooks']), ['bus', 'control', 'webhooks']);
});

t.test('the alerts role needs only NATS: it runs anywhere', async (t) => {
  t.same(startOrder(registry, ['alerts']), ['bus', 'directory', 'usage', 'alerts']);
});

t.test('a start abandoned (a signal came) stops after the module under way, and stops what started', async (t) => {
  const events: string[] = [];
  let signalled = false;
  const traced = (name: string, deps: string[], role = false) => ({
    deps,
    role,
    start: async () => {
      events.push(`start ${name}`);
      // The signal comes while the first module starts.
      if (name === 'a') signalled = true;
      return { stop: async () => void events.push(`stop ${name}`) };
    },
  });
  const reg: ModuleRegistry = { a: traced('a', []), b: traced('b', ['a']), c: traced('c', ['b'], true) };
  await t.rejects(
    startModules(reg, ['c'], new Services(testConfig(), createLogger('silent')), () => signalled),
    StartAbandonedError,
  );
  t.same(events, ['start a', 'stop a'], 'b and c never started; a stopped');
});

t.test('the box runs every role exactly once, and every role that opens the store in one process', async (t) => {
  const grouped = boxProcesses.flat();
  t.same([...grouped].sort(), [...resolveTargets(registry, 'all')].sort(), 'every role');
  t.equal(new Set(grouped).size, grouped.length, 'once');
  const withStore = boxProcesses.filter((roles) => startOrder(registry, roles).includes('store'));
  t.equal(withStore.length, 1, 'chDB admits one process per data directory');
  t.same(boxProcesses[0], ['ingest'], 'ingest stops first, so nothing is accepted after the aggregators stop');
});
