import { useState } from 'preact/hooks';
import { ApiError } from './api.js';

/** A button's request: which one is under way (by name), and the last one's error. */
export function useAction(): {
  busy: string | null;
  error: ApiError | null;
  run: <T>(name: string, f: () => Promise<T>) => Promise<T | undefined>;
} {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const run = async <T>(name: string, f: () => Promise<T>): Promise<T | undefined> => {
    setBusy(name);
    setError(null);
    try {
      return await f();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client_error', String(err), ''));
      return undefined;
    } finally {
      setBusy(null);
    }
  };
  return { busy, error, run };
}
