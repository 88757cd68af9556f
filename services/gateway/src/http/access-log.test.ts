import { loggablePath } from './access-log';

describe('loggablePath', () => {
  it('redacts everything after /v1/share/ (a share link), and keeps other paths', () => {
    const id = '6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01';
    expect(loggablePath(`/v1/share/${id}`)).toBe('/v1/share/[redacted]');
    expect(loggablePath(`/V1/Share/${id}/x`)).toBe('/v1/share/[redacted]');
    expect(loggablePath('/v1/share/anything')).toBe('/v1/share/[redacted]');
    expect(loggablePath(`/v1/shares/${id}/accept`)).toBe(`/v1/shares/${id}/accept`);
    expect(loggablePath('/v1/shares/outbound')).toBe('/v1/shares/outbound');
    expect(loggablePath('/v1/secrets/x/share')).toBe('/v1/secrets/x/share');
  });
});
