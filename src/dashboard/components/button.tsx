import { useState } from 'preact/hooks';
import type { ButtonHTMLAttributes, ComponentChildren } from 'preact';

export interface ButtonProps extends Omit<ButtonHTMLAttributes<HTMLButtonElement>, 'type'> {
  variant?: 'primary' | 'secondary' | 'danger' | 'quiet';
  type?: 'button' | 'submit';
  busy?: boolean;
  children: ComponentChildren;
}

/** A button that says when it is working (aria-busy) and cannot be pressed twice meanwhile. */
export function Button({
  variant = 'secondary',
  type = 'button',
  busy = false,
  disabled,
  children,
  ...rest
}: ButtonProps) {
  return (
    <button {...rest} type={type} class={`btn btn-${variant}`} disabled={Boolean(disabled) || busy} aria-busy={busy}>
      {children}
    </button>
  );
}

/** A destructive action asked twice, in place: no modal dialog to trap focus or to be missed at 360 px. */
export function ConfirmButton({
  label,
  confirmLabel,
  onConfirm,
  busy = false,
}: {
  label: string;
  confirmLabel: string;
  onConfirm: () => void;
  busy?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <Button variant="quiet" busy={busy} onClick={() => setAsking(true)}>
        {label}
      </Button>
    );
  }
  return (
    <span class="confirm">
      <Button
        variant="danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </Button>
      <Button variant="quiet" onClick={() => setAsking(false)}>
        Cancel
      </Button>
    </span>
  );
}
