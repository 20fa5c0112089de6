// @darshak/web built twice: an ES module for bundlers (dist/darshak.mjs) and one file for a script tag
// (dist/darshak.js, `window.Darshak.monitor`), which ingest also serves at /sdk/v1/darshak.js. `npm run build` runs
// this; test/sdk/build.test.ts holds it to its size budget.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('./dist', import.meta.url)),
    emptyOutDir: true,
    target: 'es2020',
    minify: true,
    lib: {
      entry: fileURLToPath(new URL('./src/index.ts', import.meta.url)),
      name: 'Darshak',
      formats: ['es', 'iife'],
      fileName: (format) => (format === 'es' ? 'darshak.mjs' : 'darshak.js'),
    },
  },
});
