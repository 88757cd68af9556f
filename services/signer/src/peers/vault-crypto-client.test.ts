import type { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import type { Logger } from '@custos/service-kit';
import { VaultCryptoClient } from './vault-crypto-client.js';

// VaultCryptoClient over a fake gRPC client: what it does with the key bytes it receives.

const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Logger;
const REQ = {
  orgId: '22222222-2222-4222-8222-222222222222',
  secretId: '44444444-4444-4444-8444-444444444444',
  keyId: '33333333-3333-4333-8333-333333333333',
  purpose: 'sign' as const,
};

describe('VaultCryptoClient.loadKey', () => {
  it('answers a copy of the received key and zeroes the received buffer', async () => {
    const received = Buffer.alloc(32, 7);
    const client = {
      loadAgentKey(_r: unknown, _m: unknown, _o: unknown, cb: (e: null, r: unknown) => void) {
        cb(null, { privateKey: received, curve: 'secp256k1' });
      },
    } as unknown as AgentKeyVaultServiceClient;
    const key = await new VaultCryptoClient(client, logger).loadKey(REQ);
    expect(key).toEqual(Buffer.alloc(32, 7));
    expect(key.buffer).not.toBe(received.buffer);
    expect(received).toEqual(Buffer.alloc(32, 0));
  });
});
