import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export interface Query<T> {
  data: T | undefined;
  error: ApiError | null;
  loading: boolean;
  reload(): void;
}

/**
 * Load `load()` when `key` changes, and again every `refreshMs` if given. An answer that arrives after a newer request
 * started is dropped, so a quick range change never shows the old range's numbers.
 */
export function useQuery<T>(load: () => Promise<T>, key: string, refreshMs = 0): Query<T> {
  const [state, setState] = useState<{ data: T | undefined; error: ApiError | null; loading: boolean }>({ data: undefined, error: null, loading: true });
  const generation = useRef(0);
  const loader = useRef(load);
  loader.current = load;
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    loader.current().then(
      (data) => mine === generation.current && setState({ data, error: null, loading: false }),
      (err: unknown) => {
        if (mine !== generation.current) return;
        const error = err instanceof ApiError ? err : new ApiError(0, 'client_error', String(err), '');
        setState((s) => ({ data: s.data, error, loading: false }));
      },
    );
  }, []);
  useEffect(() => {
    run();
    if (refreshMs <= 0) return undefined;
    const timer = setInterval(run, refreshMs);
    return () => clearInterval(timer);
  }, [key, refreshMs, run]);
  return { ...state, reload: run };
}
