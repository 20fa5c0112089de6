import { useState } from 'preact/hooks';
import { ApiError, login } from '../api.js';
import { Button } from '../components/button.js';
import { TextField } from '../components/field.js';
import { ErrorNotice } from '../components/notice.js';

export function LoginPage() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await login(email.trim(), password);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client_error', String(err), ''));
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form class="card login-card" onSubmit={(e) => void submit(e)} aria-labelledby="login-title">
        <h1 id="login-title">
          <span class="logo" aria-hidden="true">
            ◉
          </span>{' '}
          Darshak
        </h1>
        <p class="muted">Sign in to see your viewers, live.</p>
        <TextField
          label="E-mail"
          type="email"
          name="email"
          autoComplete="username"
          required
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
        <TextField
          label="Password"
          type="password"
          name="password"
          autoComplete="current-password"
          required
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
        <ErrorNotice error={error} />
        <Button variant="primary" type="submit" busy={busy}>
          Sign in
        </Button>
      </form>
    </main>
  );
}
