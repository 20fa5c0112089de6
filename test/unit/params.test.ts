import t from 'tap';
import { intervalParam, limitParam, offsetParam, parseParams, rangeParam } from '../../src/api/params.js';

const specs = {
  range: rangeParam,
  interval: intervalParam,
  limit: limitParam,
  offset: offsetParam,
  acknowledged: { kind: 'bool' },
} as const;
const parse = (q: string) => parseParams(new URLSearchParams(q), specs);

t.test('defaults fill what is not given; given values are typed', async (t) => {
  t.same(parse(''), { ok: true, value: { range: '24h', interval: 5, limit: 50, offset: 0 } });
  t.same(parse('range=qtd&interval=60&limit=200&offset=7&acknowledged=false'), {
    ok: true,
    value: { range: 'qtd', interval: 60, limit: 200, offset: 7, acknowledged: false },
  });
});

t.test('anything else is refused naming the parameter', async (t) => {
  for (const [q, parameter, message] of [
    ['range=24H', 'range', /one of 24h, 7d, 30d, qtd/],
    ['interval=10', 'interval', /one of 1, 5, 15, 60/],
    ['limit=201', 'limit', /1 to 200/],
    ['limit=007x', 'limit', /whole number/],
    ['limit= 5', 'limit', /whole number/],
    ['limit=1e2', 'limit', /whole number/],
    ['offset=-0', 'offset', /whole number/],
    ['offset=99999999999999999', 'offset', /whole number/],
    ['acknowledged=1', 'acknowledged', /true or false/],
    ['limit=5&limit=5', 'limit', /more than once/],
    ['__proto__=1', '__proto__', /unknown parameter/],
    ['constructor=x', 'constructor', /unknown parameter/],
  ] as const) {
    const r = parse(q);
    t.match(r, { ok: false, error: { parameter, message } }, q);
  }
});
