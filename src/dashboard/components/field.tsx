import type { InputHTMLAttributes } from 'preact';
import { useId } from 'preact/hooks';

interface FieldProps {
  label: string;
  hint?: string;
}

export function TextField({ label, hint, ...input }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input id={id} aria-describedby={hint ? `${id}-hint` : undefined} {...input} />
      {hint && (
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      )}
    </div>
  );
}

export function SelectField<T extends string>({
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
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value as T)}>
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

/** A set of checkboxes in a fieldset whose legend names them. */
export function CheckboxGroup({
  legend,
  options,
  selected,
  onChange,
}: {
  legend: string;
  options: readonly string[];
  selected: ReadonlySet<string>;
  onChange: (next: Set<string>) => void;
}) {
  return (
    <fieldset class="checks">
      <legend>{legend}</legend>
      {options.map((o) => (
        <label key={o} class="check">
          <input
            type="checkbox"
            checked={selected.has(o)}
            onChange={(e) => {
              const next = new Set(selected);
              if (e.currentTarget.checked) next.add(o);
              else next.delete(o);
              onChange(next);
            }}
          />
          {o}
        </label>
      ))}
    </fieldset>
  );
}
