import { useId } from 'preact/hooks';

/** A small radio group shown as a row of toggles (range and interval pickers). */
export function Segmented<T extends string | number>({
  label,
  value,
  options,
  onChange,
}: {
  label: string;
  value: T;
  options: ReadonlyArray<readonly [T, string]>;
  onChange: (v: T) => void;
}) {
  const name = useId();
  return (
    <fieldset class="segmented">
      <legend class="visually-hidden">{label}</legend>
      {options.map(([v, text]) => (
        <label key={String(v)} class={v === value ? 'on' : ''}>
          <input type="radio" name={name} value={String(v)} checked={v === value} onChange={() => onChange(v)} />
          {text}
        </label>
      ))}
    </fieldset>
  );
}

export const rangeOptions = [
  ['24h', '24 hours'],
  ['7d', '7 days'],
  ['30d', '30 days'],
  ['qtd', 'Quarter to date'],
] as const;
