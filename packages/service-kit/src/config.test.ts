import { ConfigError, env, loadConfig } from './config';

const shape = {
  NAME: env.string('a name'),
  PORT: env.port('a port').default(8080),
  ENABLED: env.bool('a switch').default('false'),
  PEERS: env.list('a list'),
  URL: env.url('a url', ['postgres', 'postgresql']).optional(),
  MODE: env.oneOf('a mode', ['a', 'b']).default('a'),
};

describe('loadConfig', () => {
  it('parses values and applies defaults', () => {
    expect(loadConfig(shape, { NAME: 'x', ENABLED: 'yes', PEERS: ' a, ,b ' })).toEqual({
      NAME: 'x',
      PORT: 8080,
      ENABLED: true,
      PEERS: ['a', 'b'],
      URL: undefined,
      MODE: 'a',
    });
  });

  it('treats blank values as unset', () => {
    expect(() => loadConfig(shape, { NAME: '   ' })).toThrow('invalid configuration: NAME: is required');
    expect(loadConfig(shape, { NAME: 'x', PORT: '' }).PORT).toBe(8080);
  });

  it('names every bad variable in one message', () => {
    try {
      loadConfig(shape, { PORT: '99999', ENABLED: 'maybe', URL: 'http://x', MODE: 'c' });
      throw new Error('expected a ConfigError');
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const e = err as ConfigError;
      expect(e.problems.map((p) => p.variable)).toEqual(['NAME', 'PORT', 'ENABLED', 'URL', 'MODE']);
      expect(e.message).not.toContain('\n');
      expect(e.message).toContain('URL: expected a postgres or postgresql URL');
    }
  });

  it('does not echo the rejected value', () => {
    expect(() => loadConfig(shape, { NAME: 'x', URL: 'mysql://user:hunter2@db' })).toThrow(/^(?!.*hunter2)/s);
  });
});
