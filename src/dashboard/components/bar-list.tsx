/**
 * Labelled horizontal bars: a breakdown readable at 360 px, and by a screen reader as a list. An item's `secondary`
 * value (a p95 beside a p50) is drawn faint behind it and shown in parentheses.
 */
export function BarList({
  label,
  items,
  format,
  max,
  empty = 'No data in this range.',
}: {
  label: string;
  items: ReadonlyArray<{ name: string; value: number; secondary?: number }>;
  format: (v: number) => string;
  max?: number;
  empty?: string;
}) {
  const top = max ?? Math.max(0, ...items.map((i) => Math.max(i.value, i.secondary ?? 0)));
  if (items.length === 0) return <p class="empty">{empty}</p>;
  const width = (v: number): string => `${top > 0 ? Math.max(1, (v / top) * 100) : 0}%`;
  return (
    <ul class="bars" aria-label={label}>
      {items.map((i) => (
        <li key={i.name}>
          <span class="bar-name">{i.name}</span>
          <span class="bar-track" aria-hidden="true">
            {i.secondary !== undefined && <span class="bar-fill faint" style={{ width: width(i.secondary) }} />}
            <span class="bar-fill" style={{ width: width(i.value) }} />
          </span>
          <span class="bar-value">
            {format(i.value)}
            {i.secondary !== undefined && ` (${format(i.secondary)})`}
          </span>
        </li>
      ))}
    </ul>
  );
}
