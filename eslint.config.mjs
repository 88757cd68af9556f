// Lint rules for the whole workspace. Beyond style, they hold the package boundaries of
// CONVENTIONS.md: no import of another package's src/, no import cycles, no undeclared dependencies.
// Boundaries are judged on resolved paths, not on import text: tools/lint-tests proves it.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      'packages/proto/src/gen/**',
      '.custos-dev/**',
      '.tools/**',
      'charts/**',
      'bench/results/**',
      '**/coverage/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [
        createTypeScriptImportResolver({ alwaysTryTypes: true, project: ['**/tsconfig.json'] }),
      ],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-extraneous-dependencies': ['error', { includeTypes: true }],
      'import-x/no-self-import': 'error',
      // A relative import that resolves into another workspace package (`../../identity/src/x`
      // from vault-crypto) is refused whatever its spelling; packages meet through their exports.
      'import-x/no-relative-packages': 'error',
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@custos/*/src', '@custos/*/src/*'],
              message: 'Import a package through its exports map, not its src/.',
            },
            {
              group: ['**/packages/*/src/**', '**/services/*/src/**'],
              message: 'No reaching into another package by path.',
            },
            { group: ['@custos/*/dist/*'], message: 'Import a package through its exports map.' },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
  {
    files: ['**/*.cjs', '**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        console: 'readonly',
        __dirname: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
        AbortSignal: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
