// Type-aware lint of every TypeScript file (typescript-eslint's recommended type-checked rules); Prettier owns layout.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tap/', 'data/', '.scratch/', '**/*.js', '**/*.mjs', '**/vite.config.ts'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // tap runs the subtests it is given in order; the promise `t.test` returns needs no await.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] },
      ],
      // An async method that does not await yet keeps its interface's promise (a module's stop, a handler).
      '@typescript-eslint/require-await': 'off',
      // A variable a callback reads before the one assignment that follows (a server's handler and the server).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // A leading underscore names what is there for its position only (an unused argument, a left-out field).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
    },
  },
);
