import { randomUUID } from 'node:crypto';
import { BATCH_ID_PREFIX, batchMessageId, isEventBatch } from './event-batch';

describe('batch envelope', () => {
  const ids = [randomUUID(), randomUUID(), randomUUID()];

  it('names a batch by its ids in their order, whatever their case, and never like a plain event', () => {
    expect(batchMessageId(ids)).toBe(batchMessageId([...ids]));
    expect(batchMessageId(ids.map((i) => i.toUpperCase()))).toBe(batchMessageId(ids));
    expect(batchMessageId(ids)).toMatch(new RegExp(`^${BATCH_ID_PREFIX}[0-9a-f]{64}$`));
    // Re-cut on a retry (another order, one more or one fewer) is another message.
    expect(batchMessageId([ids[1]!, ids[0]!, ids[2]!])).not.toBe(batchMessageId(ids));
    expect(batchMessageId(ids.slice(0, 2))).not.toBe(batchMessageId(ids));
    expect(batchMessageId([...ids, randomUUID()])).not.toBe(batchMessageId(ids));
    // Ids are joined unambiguously: ["ab", "c"] is not ["a", "bc"].
    expect(batchMessageId(['ab', 'c'])).not.toBe(batchMessageId(['a', 'bc']));
  });

  it('tells a batch from a plain event envelope', () => {
    expect(isEventBatch({ events: [] })).toBe(true);
    expect(isEventBatch({ events: [{ id: ids[0] }], traceparents: [null] })).toBe(true);
    expect(isEventBatch({ id: ids[0], type: 'policy.updated', data: { events: [] }, events: [] })).toBe(
      false,
    );
    expect(isEventBatch({ id: ids[0], type: 'policy.updated' })).toBe(false);
    expect(isEventBatch({ events: 'no' })).toBe(false);
    expect(isEventBatch(null)).toBe(false);
    expect(isEventBatch([])).toBe(false);
  });
});
