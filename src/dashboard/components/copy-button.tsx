import { useState } from 'preact/hooks';

/** Copies `text`; says so (or that the browser refused, in which case the text is still there to select). */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  return (
    <button
      type="button"
      class="btn btn-secondary"
      aria-label={label}
      onClick={() => {
        navigator.clipboard.writeText(text).then(
          () => setState('copied'),
          () => setState('failed'),
        );
      }}
    >
      {state === 'copied' ? 'Copied' : state === 'failed' ? 'Select and copy' : 'Copy'}
    </button>
  );
}

/** A secret shown once: in a read-only field, with a copy button and the warning. */
export function SecretOnce({ label, secret }: { label: string; secret: string }) {
  return (
    <div class="secret" role="status">
      <p>
        <strong>{label}</strong> — shown only now. Store it somewhere safe; it cannot be shown again.
      </p>
      <div class="secret-row">
        <input
          readOnly
          value={secret}
          aria-label={label}
          onFocus={(e) => e.currentTarget.select()}
          data-testid="secret"
        />
        <CopyButton text={secret} label={`Copy ${label.toLowerCase()}`} />
      </div>
    </div>
  );
}
