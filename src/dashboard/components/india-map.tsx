import { useEffect, useState } from 'preact/hooks';
import { formatHours, formatInt, formatPct } from '../format.js';
import type { GeoItem } from '../types.js';

interface MapData {
  viewBox: string;
  locations: ReadonlyArray<{ id: string; name: string; path: string }>;
}

// DB-IP and the map (drawn before 2019/2020) name some states differently; the map's name is the key.
const aliases: Record<string, string[]> = {
  'Jammu and Kashmir': ['Ladakh'],
  'Dadra and Nagar Haveli': ['Dadra and Nagar Haveli and Daman and Diu'],
  'Daman and Diu': ['Dadra and Nagar Haveli and Daman and Diu'],
  Delhi: ['National Capital Territory of Delhi', 'NCT of Delhi'],
  Odisha: ['Orissa'],
  Puducherry: ['Pondicherry'],
  Uttarakhand: ['Uttaranchal'],
};

const shades = 5;

/** India by state, coloured by watch hours in five steps; each state says its numbers on hover or focus. */
export function IndiaMap({ items }: { items: readonly GeoItem[] }) {
  const [map, setMap] = useState<MapData | null>(null);
  const [hover, setHover] = useState<{ name: string; item: GeoItem | undefined } | null>(null);
  useEffect(() => {
    // A separate chunk: most of the map's weight is path data, not needed for the first page.
    void import('@svg-maps/india').then((m) => setMap(m.default as MapData));
  }, []);
  if (!map) return <p class="empty">Loading the map…</p>;
  const byRegion = new Map(items.map((i) => [i.region, i]));
  const itemOf = (name: string): GeoItem | undefined =>
    byRegion.get(name) ?? (aliases[name] ?? []).map((a) => byRegion.get(a)).find(Boolean);
  const max = Math.max(0, ...map.locations.map((l) => itemOf(l.name)?.watch_hours ?? 0));
  const shade = (v: number): number => (v <= 0 || max <= 0 ? 0 : Math.min(shades, Math.ceil((v / max) * shades)));
  const describe = (name: string, item: GeoItem | undefined): string =>
    item
      ? `${name}: ${formatHours(item.watch_hours)} watch hours, ${formatInt(item.viewers)} viewers, ${formatPct(item.share_pct)} of watch time`
      : `${name}: no viewers`;
  return (
    <figure class="india-map">
      <svg viewBox={map.viewBox} role="group" aria-label="Watch hours by Indian state">
        {map.locations.map((l) => {
          const item = itemOf(l.name);
          return (
            <path
              key={l.id}
              d={l.path}
              class={`state shade-${shade(item?.watch_hours ?? 0)}`}
              tabIndex={0}
              role="img"
              aria-label={describe(l.name, item)}
              data-state={l.name}
              onMouseEnter={() => setHover({ name: l.name, item })}
              onFocus={() => setHover({ name: l.name, item })}
              onMouseLeave={() => setHover(null)}
              onBlur={() => setHover(null)}
            />
          );
        })}
      </svg>
      <figcaption>
        <div class="map-tooltip" role="status" aria-live="polite" data-testid="map-tooltip">
          {hover ? describe(hover.name, hover.item) : 'Point at or tab to a state for its numbers.'}
        </div>
        <div class="legend" aria-hidden="true">
          <span>fewer</span>
          {Array.from({ length: shades + 1 }, (_, i) => (
            <i key={i} class={`shade-${i}`} />
          ))}
          <span>more watch hours</span>
        </div>
      </figcaption>
    </figure>
  );
}
