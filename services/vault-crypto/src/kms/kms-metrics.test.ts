import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { KmsUnavailableError } from './kms-errors';
import { measuredKms } from './kms-metrics';
import type { KmsProvider } from './kms-types';
import { LocalKms } from './local-kms';

/** The samples of `name` in the registry, as Prometheus would scrape them. */
async function samples(registry: Registry, name: string) {
  return (await registry.getSingleMetric(name)!.get()).values;
}

describe('measuredKms', () => {
  it('exports every failure series an alert counts with increase() as zero before the first call', async () => {
    const registry = new Registry();
    measuredKms(new LocalKms(randomBytes(32)), registry);
    const failures = await samples(registry, 'custos_kms_request_failures_total');
    const zero = (operation: string, reason: string) =>
      expect.objectContaining({ labels: { provider: 'local', operation, reason }, value: 0 });
    expect(failures).toEqual(
      expect.arrayContaining([
        zero('unwrap', 'rejected'),
        zero('unwrap', 'unavailable'),
        zero('unwrap', 'error'),
        zero('wrap', 'unavailable'),
        zero('wrap', 'error'),
      ]),
    );
  });

  it('times wraps and unwraps of the local provider by operation and counts a refused unwrap', async () => {
    const registry = new Registry();
    const kms = measuredKms(new LocalKms(randomBytes(32)), registry);
    expect(kms.name).toBe('local');
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrapKey(dataKey, 'org:1');
    expect(await kms.unwrapKey(wrapped, 'org:1')).toEqual(dataKey);
    await expect(kms.unwrapKey(wrapped, 'org:2')).rejects.toThrow('data key could not be unwrapped');

    const duration = await samples(registry, 'custos_kms_request_duration_seconds');
    const count = (operation: string) =>
      duration.find(
        (v) =>
          v.metricName?.endsWith('_count') &&
          v.labels['operation'] === operation &&
          v.labels['provider'] === 'local',
      )?.value;
    expect(count('wrap')).toBe(1);
    expect(count('unwrap')).toBe(2);
    const failures = await samples(registry, 'custos_kms_request_failures_total');
    expect(failures).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          labels: { provider: 'local', operation: 'unwrap', reason: 'rejected' },
          value: 1,
        }),
        expect.objectContaining({
          labels: { provider: 'local', operation: 'wrap', reason: 'unavailable' },
          value: 0,
        }),
      ]),
    );
    // Exposed without key material or contexts.
    const text = await registry.metrics();
    expect(text).not.toContain('org:1');
    expect(text).not.toContain(dataKey.toString('hex'));
  });

  it('classes an unreachable provider as unavailable, for its self-test too, and passes close through', async () => {
    const registry = new Registry();
    let closed = false;
    const down: KmsProvider = {
      name: 'aws-kms',
      wrapKey: () =>
        Promise.reject(
          new KmsUnavailableError('aws-kms', 'Encrypt', 'connect ECONNREFUSED https://kms.example'),
        ),
      unwrapKey: () => Promise.reject(new Error('boom')),
      health: () => Promise.reject(new KmsUnavailableError('aws-kms', 'DescribeKey', 'timeout')),
      close: async () => {
        closed = true;
      },
    };
    const kms = measuredKms(down, registry);
    await expect(kms.wrapKey(randomBytes(32), 'org:1')).rejects.toBeInstanceOf(KmsUnavailableError);
    await expect(kms.unwrapKey(Buffer.alloc(60), 'org:1')).rejects.toThrow('boom');
    await expect(kms.health!(new AbortController().signal)).rejects.toBeInstanceOf(KmsUnavailableError);
    await kms.close!();
    expect(closed).toBe(true);
    const failures = Object.fromEntries(
      (await samples(registry, 'custos_kms_request_failures_total')).map((v) => [
        `${v.labels['operation']}/${v.labels['reason']}`,
        v.value,
      ]),
    );
    expect(failures).toMatchObject({ 'wrap/unavailable': 1, 'unwrap/error': 1, 'health/unavailable': 1 });
    expect(await registry.metrics()).not.toContain('kms.example');
  });
});
