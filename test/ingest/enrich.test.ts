import t from 'tap';
import { Enricher } from '../../src/ingest/enrich.js';

// What ingest adds when a client does not say: region from the client's address (DB-IP's city database), device
// type from its user agent (bowser).

const enricher = new Enricher();

t.test('geo of an address: country and Indian state; nothing for a private or malformed one', async (t) => {
  const geo = enricher.geoOfIp('49.36.0.1');
  t.equal(geo.country, 'IN', 'a Jio address is in India');
  t.not(geo.region, '', `with its state (${geo.region})`);
  t.same(enricher.geoOfIp('10.1.2.3'), { country: '', region: '' });
  t.same(enricher.geoOfIp('not an address'), { country: '', region: '' });
  t.same(enricher.geoOfIp('49.36.0.1'), geo, 'the same answer again (memoised)');
});

t.test('device type of a user agent', async (t) => {
  for (const [ua, device] of [
    [
      'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36',
      'mobile',
    ],
    [
      'Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
      'tablet',
    ],
    [
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
      'desktop',
    ],
    [
      'Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 TV Safari/537.36',
      'tv',
    ],
    ['Mozilla/5.0 (PlayStation; PlayStation 5/2.26) AppleWebKit/605.1.15 (KHTML, like Gecko)', 'console'],
    ['', 'other'],
    ['curl/8.5.0', 'other'],
  ] as const) {
    t.equal(enricher.deviceOfUserAgent(ua), device, `${device}: ${ua.slice(0, 40)}`);
  }
});
