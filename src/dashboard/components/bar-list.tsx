/** Labelled horizontal bars: a breakdown readable at 360 px, and by a screen reader as a list. */
export function BarList({ label, items, format, max }: { label: string; items: ReadonlyArray<{ name: string; value: number }>; format: (v: number) => string; max?: number }) {
  const top = max ?? Math.max(0, ...items.map((i) => i.value));
  if (items.length === 0) return <p class="empty">No data in this range.</p>;
  return (
    <ul class="bars" aria-label={label}>
      {items.map((i) => (
        <li key={i.name}>
          <span class="bar-name">{i.name}</span>
          <span class="bar-track" aria-hidden="true">
            <span class="bar-fill" style={{ width: `${top > 0 ? Math.max(1, (i.value / top) * 100) : 0}%` }} />
          </span>
          <span class="bar-value">{format(i.value)}</span>
        </li>
      ))}
    </ul>
  );
}
