import { loadConfig } from '@custos/service-kit';
import { natsConfigShape } from './config';

const base = { NATS_URL: 'nats://127.0.0.1:4222' };

describe('natsConfigShape: stream settings', () => {
  it('defaults to one replica and no byte limit', () => {
    const c = loadConfig(natsConfigShape, base);
    expect(c.NATS_STREAM_REPLICAS).toBe(1);
    expect(c.NATS_STREAM_MAX_BYTES).toBe(-1);
  });

  it('takes 1..5 replicas and a byte limit of at least 1 MiB', () => {
    const c = loadConfig(natsConfigShape, {
      ...base,
      NATS_STREAM_REPLICAS: '3',
      NATS_STREAM_MAX_BYTES: String(10 * 1024 ** 3),
    });
    expect(c.NATS_STREAM_REPLICAS).toBe(3);
    expect(c.NATS_STREAM_MAX_BYTES).toBe(10 * 1024 ** 3);
  });

  it.each([
    ['NATS_STREAM_REPLICAS', '0'],
    ['NATS_STREAM_REPLICAS', '6'],
    ['NATS_STREAM_MAX_BYTES', '0'],
    ['NATS_STREAM_MAX_BYTES', '1000'],
    ['NATS_STREAM_MAX_BYTES', '-2'],
  ])('refuses %s=%s, naming the variable', (name, value) => {
    expect(() => loadConfig(natsConfigShape, { ...base, [name]: value })).toThrow(name);
  });
});
