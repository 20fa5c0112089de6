import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export interface Query<T> {
  data: T | undefined;
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

/**
 * Load `load()` when `key` changes, and again every `refreshMs` if given. An answer that arrives after a newer request
 * started is dropped, so a quick range change never shows the old range's numbers.
 */
export function useQuery<T>(load: () => Promise<T>, key: string, refreshMs = 0): Query<T> {
  const [state, setState] = useState<{ data: T | undefined; error: ApiError | null; loading: boolean }>({
    data: undefined,
    error: null,
    loading: true,
  });
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
    const timer = refreshMs > 0 ? setInterval(run, refreshMs) : undefined;
    return () => {
      clearInterval(timer);
      // An answer still on its way belongs to a key (or a page) that is gone.
      generation.current++;
    };
  }, [key, refreshMs, run]);
  return { ...state, reload: run };
}
