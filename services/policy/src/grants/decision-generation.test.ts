import { createLogger } from '@custos/service-kit';
import { decisionGenerationBump } from './decision-generation';

const logger = createLogger({ service: 'policy-test', level: 'silent' });

describe('decisionGenerationBump', () => {
  it('moves the org key to a value it never had (never a counter that could repeat after a Redis loss)', async () => {
    const values: string[] = [];
    const redis = {
      set: async (key: string, value: string) => {
        expect(key).toBe('custos:policy:gen:6f0c7e7a-4bd1-4a43-9a55-4a0f7f1b2c3d');
        values.push(value);
        return 'OK';
      },
    };
    const bump = decisionGenerationBump(redis, logger);
    for (let i = 0; i < 50; i++) await bump('6F0C7E7A-4BD1-4A43-9A55-4A0F7F1B2C3D');
    expect(new Set(values).size).toBe(50);
  });

  it('does not fail the committed change when Redis refuses: it logs, and the TTL bounds what is cached', async () => {
    const errors: unknown[] = [];
    const bump = decisionGenerationBump(
      {
        set: async () => {
          throw new Error('connection lost');
        },
      },
      { ...logger, error: (...args: unknown[]) => errors.push(args) } as unknown as typeof logger,
    );
    await expect(bump('6f0c7e7a-4bd1-4a43-9a55-4a0f7f1b2c3d')).resolves.toBeUndefined();
    expect(errors).toHaveLength(1);
  });
});
