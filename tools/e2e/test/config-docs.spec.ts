import {
  normalizeTables,
  readDocumentedTables,
  renderVariableTables,
  writeDocumentedTables,
} from '../src/config-docs';

describe('docs/configuration.md', () => {
  it('documents every variable of every service, as the schemas define them', () => {
    // `UPDATE_DOCS=1 pnpm --filter @custos/e2e-tests test config-docs` rewrites the section.
    if (process.env.UPDATE_DOCS === '1') writeDocumentedTables();
    expect(normalizeTables(readDocumentedTables())).toBe(normalizeTables(renderVariableTables()));
  });
});
