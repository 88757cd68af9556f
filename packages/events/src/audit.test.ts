import { auditOf } from './audit';

describe('auditOf', () => {
  it('describes a user action with the user as actor', () => {
    expect(
      auditOf(
        { kind: 'user', userId: 'u1', orgId: 'o1' },
        'vault.created',
        { type: 'vault', id: 'v1' },
        { name: 'n' },
      ),
    ).toEqual({
      orgId: 'o1',
      actorType: 'user',
      actorId: 'u1',
      action: 'vault.created',
      resourceType: 'vault',
      resourceId: 'v1',
      metadata: { name: 'n' },
    });
  });

  it('describes an agent action with the agent as actor and empty details by default', () => {
    expect(
      auditOf({ kind: 'agent', agentId: 'a1', orgId: 'o1' }, 'secret.read', { type: 'secret', id: null }),
    ).toMatchObject({
      actorType: 'agent',
      actorId: 'a1',
      resourceId: null,
      metadata: {},
    });
  });
});
