import type { WireEvent } from '../../src/bus/wire.js';
import { Rng } from '../../bench/simulator/rng.js';
import { post } from './env.js';

/** A seeded generator: the same traffic on every run. */
function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.next();
}

/** How playback behaves in one (region, pop) at one instant. */
export interface Conditions {
  /** Chance that a heartbeat interval holds a stall, and how long stalls last. */
  stallChance: number;
  stallMs: number;
  /** Startup time: about this, ±25 %. */
  startupMs: number;
  /** Chance that a session ends in a fatal error. */
  fatalChance: number;
  /** Chance that a session plays to the end (else it is closed at a random position). */
  endChance: number;
  /** How far the sessions closed early get, as a share of the content. */
  abandonAt: number;
}

export const normal: Conditions = {
  stallChance: 0.03,
  stallMs: 2000,
  startupMs: 800,
  fatalChance: 0.002,
  endChance: 0.6,
  abandonAt: 0.4,
};

export interface Audience {
  tenant: string;
  /** Region → its pops. */
  places: Record<string, string[]>;
  /** Sessions playing at once per pop. */
  perPop: number;
  contents: readonly string[];
  /** App versions the sessions run, in turn (`context.app_version`); none by default. */
  appVersions?: readonly string[];
  /** Conditions at `ts` in a region and pop, for an app version ('' without), normal unless a test injects a problem. */
  conditions?(ts: number, region: string, pop: string, appVersion: string): Conditions;
  heartbeatMs?: number;
  seed?: number;
}

/**
 * One region (two pops of 40 sessions, one title, three app versions) whose app version 5.13.0 fails 60 % of its
 * sessions in the 5 minutes before `now`: an error spike whose alert should name that version.
 */
export function oneVersionFailing(tenant: string, now: number): Audience {
  return {
    tenant,
    places: { Maharashtra: ['mum1', 'mum2'] },
    perPop: 40,
    contents: ['c1'],
    appVersions: ['5.12.0', '5.12.1', '5.13.0'],
    conditions: (ts, _region, _pop, app) =>
      app === '5.13.0' && ts >= now - 5 * 60_000 ? { ...normal, fatalChance: 0.6 } : normal,
  };
}

const contentSeconds = 1200;

/**
 * Playback of a steady audience from `from` to `to` (ms): each pop holds `perPop` sessions back to back (2 to 6
 * minutes each), with heartbeats, stalls, startups, fatal errors and endings drawn from its conditions. Events
 * arrive 200 ms after they happen; the list is in arrival order. Session and viewer ids carry the seed: audiences of
 * one tenant played together need seeds of their own.
 */
export function playback(a: Audience, from: number, to: number): WireEvent[] {
  const seed = a.seed ?? 1;
  const r = rng(seed);
  const hb = a.heartbeatMs ?? 15_000;
  const out: WireEvent[] = [];
  let n = 0;
  for (const [region, pops] of Object.entries(a.places)) {
    for (const pop of pops) {
      for (let slot = 0; slot < a.perPop; slot++) {
        // Stagger the slots so that sessions do not all start together.
        let t = from + Math.floor(r() * 240_000) - 240_000;
        while (t < to) {
          const session_id = `s${seed}-${++n}`;
          const content_id = a.contents[n % a.contents.length]!;
          const app = a.appVersions?.[n % a.appVersions.length];
          const c = a.conditions?.(t, region, pop, app ?? '') ?? normal;
          const context: Record<string, string> = { pop };
          if (app !== undefined) context.app_version = app;
          const base = {
            tenant: a.tenant,
            env: 'production' as const,
            client_ts: null,
            country: 'IN',
            region,
            device: 'tv',
            session_id,
            context,
          };
          const push = (event_type: string, ts: number, extra: Partial<WireEvent> = {}): void => {
            if (ts >= from && ts < to) out.push({ ...base, event_type, ts, received_at: ts + 200, ...extra });
          };
          const fatal = r() < c.fatalChance;
          // A fatal error usually strikes early (a stream that cannot play); other sessions last 2 to 6 minutes.
          const length = fatal ? 5000 + Math.floor(r() * 30_000) : 120_000 + Math.floor(r() * 240_000);
          const ends = r() < c.endChance;
          push('play_start', t, {
            content_id,
            anonymous_id: `a${seed}-${n}`,
            content_title: `Title ${content_id}`,
            properties: { duration_sec: contentSeconds },
          });
          const startup = Math.round(c.startupMs * (0.75 + r() * 0.5));
          push('first_frame', t + startup);
          let at = t + startup;
          const stop = t + length;
          while (at + hb < stop) {
            const cond = a.conditions?.(at, region, pop, app ?? '') ?? normal;
            if (r() < cond.stallChance) {
              const s = at + 2000;
              push('rebuffer_start', s);
              push('rebuffer_end', s + Math.round(cond.stallMs * (0.5 + r())));
            }
            at += hb;
            push('heartbeat', at, { position_sec: Math.round((at - t) / 1000) });
          }
          if (fatal)
            push('error', stop, {
              properties: { fatal: true, code: r() < 0.7 ? 'MEDIA_ERR_DECODE' : 'NETWORK_ERROR' },
            });
          else if (ends) push('ended', stop, { position_sec: contentSeconds });
          else push('session_end', stop, { position_sec: Math.round(contentSeconds * c.abandonAt * r()) });
          t = stop + 1000;
        }
      }
    }
  }
  return out.sort((x, y) => x.received_at - y.received_at);
}

/** Payments every minute (some failing) and an occasional cancellation, from `from` to `to`. */
export function payments(
  tenant: string,
  from: number,
  to: number,
  perMinute: number,
  failChance: number,
  cancelsPerHour: number,
  seed = 2,
): WireEvent[] {
  const r = rng(seed);
  const out: WireEvent[] = [];
  let n = 0;
  const push = (event_type: string, ts: number, properties: Record<string, unknown>): void => {
    out.push({
      tenant,
      env: 'production',
      event_type,
      ts,
      client_ts: null,
      received_at: ts + 200,
      country: 'IN',
      region: '',
      device: '',
      user_id: `u${++n}`,
      properties,
    });
  };
  for (let m = from; m < to; m += 60_000) {
    for (let i = 0; i < perMinute; i++)
      push(r() < failChance ? 'payment_failed' : 'payment_succeeded', m + Math.floor(r() * 60_000), {
        amount_inr: 199,
      });
    if (r() < cancelsPerHour / 60) push('subscription_cancelled', m + Math.floor(r() * 60_000), {});
  }
  return out.sort((x, y) => x.received_at - y.received_at);
}

/** A generated event as a client sends it to the ingest API (region, country and device in its context). */
export function toIngest(e: WireEvent): Record<string, unknown> {
  const { tenant: _t, env: _e, ts, client_ts: _c, received_at: _r, region, country, device, context, ...rest } = e;
  return { ...rest, ts: new Date(ts).toISOString(), context: { ...context, region, country, device_type: device } };
}

/** Events through the ingest API in batches of 500; the count accepted (anything but a 200 throws). */
export async function sendEvents(ingestUrl: string, key: string, events: readonly WireEvent[]): Promise<number> {
  let accepted = 0;
  for (let i = 0; i < events.length; i += 500) {
    const r = await post(
      `${ingestUrl}/v1/ingest/events`,
      { sent_at: new Date().toISOString(), events: events.slice(i, i + 500).map(toIngest) },
      { 'x-api-key': key },
    );
    if (r.status !== 200) throw new Error(`ingest answered ${r.status}: ${JSON.stringify(r.body)}`);
    accepted += Number(r.body.accepted);
  }
  return accepted;
}
