import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Metadata } from '@grpc/grpc-js';
import {
  Transaction,
  TypedDataEncoder,
  getAddress,
  hashMessage,
  hexlify,
  recoverAddress,
  toUtf8Bytes,
  verifyMessage,
  verifyTypedData,
} from 'ethers';
import { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import { startMeshAnvil } from '@custos/mesh';
import { callUnary } from '@custos/service-kit';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { type Mesh, sharedMesh, startMesh } from '../src/mesh';
import { grpcClientAs } from '../src/mesh-grpc';

// Issue 17, sign intents: POST /v1/agents/{id}/sign against the shared mesh's anvil (chain `anvil`,
// chain_id 31337): personal_sign, typed_data, eip712_digest and the sign-only transaction, every
// refusal of the Intents API with its problem body and its `agent.sign.refused` record, and a
// canary scan of the agent's private key over responses, logs, events and audit records.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;
type Answer = Awaited<ReturnType<typeof api>>;

const ADMIN_EMAIL = 'ops@example.org';
const RECIPIENT = '0x000000000000000000000000000000000000c0DE';
// The same address with one letter's case flipped: a wrong EIP-55 checksum.
const BAD_CHECKSUM = '0x000000000000000000000000000000000000C0DE';

const MAIL = {
  types: {
    EIP712Domain: [
      { name: 'name', type: 'string' },
      { name: 'version', type: 'string' },
      { name: 'chainId', type: 'uint256' },
      { name: 'verifyingContract', type: 'address' },
    ],
    Person: [
      { name: 'name', type: 'string' },
      { name: 'wallet', type: 'address' },
    ],
    Mail: [
      { name: 'from', type: 'Person' },
      { name: 'to', type: 'Person' },
      { name: 'contents', type: 'string' },
    ],
  },
  primaryType: 'Mail',
  domain: {
    name: 'Ether Mail',
    version: '1',
    chainId: 31337,
    verifyingContract: '0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC',
  },
  message: {
    from: { name: 'Cow', wallet: '0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826' },
    to: { name: 'Bob', wallet: '0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB' },
    contents: 'Hello, Bob!',
  },
};
const MAIL_TYPES = { Person: MAIL.types.Person, Mail: MAIL.types.Mail };

describe('signer: sign intents (POST /v1/agents/{id}/sign) on anvil', () => {
  let mesh: Mesh;
  let owner: User;
  let admin: string;
  /** The agent that signs: Intents API and message signing on, raw signing off at first. */
  let agent: { id: string; token: string; address: string };
  // Everything the API answered in this spec, scanned for the private key at the end.
  const seen: string[] = [];

  const call = async (
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; confirm?: string } = {},
  ) => {
    const r = await api(mesh, method, path, opts);
    seen.push(JSON.stringify(r.body));
    return r;
  };

  async function anvil<T = unknown>(method: string, params: unknown[]): Promise<T> {
    const res = await fetch(mesh.env['LOCAL_EVM_RPC_URL']!, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    const j = (await res.json()) as { result?: T; error?: unknown };
    if (j.error) throw new Error(`${method}: ${JSON.stringify(j.error)}`);
    return j.result as T;
  }

  /** A new agent of `owner`'s org with these settings, its token, and (unless `keyless`) an anvil key. */
  async function newAgent(
    settings: Body,
    keyless = false,
  ): Promise<{ id: string; token: string; address: string }> {
    const created = await call('POST', '/v1/agents', {
      token: owner.token,
      body: { name: `sign-bot-${randomBytes(3).toString('hex')}`, ...settings },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: id, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    let address = '';
    if (!keyless) {
      const k = await call('POST', `/v1/agents/${id}/signing-keys`, {
        token: owner.token,
        body: { chain: 'anvil' },
      });
      expect(k.status).toBe(201);
      address = k.body['address'] as string;
    }
    return { id, token: t.body['access_token'] as string, address };
  }

  const sign = (who: { id: string; token: string }, body: Body, path = who.id) =>
    call('POST', `/v1/agents/${path}/sign`, { token: who.token, body: { chain: 'anvil', ...body } });

  /** signer's audit records (as its outbox carries them) of one action on an agent. */
  async function records(action: string, agentId: string): Promise<Body[]> {
    const rows = await sqlOn<{ payload: Body }>(
      mesh,
      `SELECT payload FROM signer.outbox WHERE name = 'audit.recorded'
         AND payload->>'action' = $1 AND payload->>'resource_id' = $2 ORDER BY seq`,
      [action, agentId],
    );
    return rows.map((r) => r.payload);
  }

  /**
   * Expects a refusal: its status and problem body (with `type` or `field` when given), one more
   * `agent.sign.refused` record naming its reason (and field), and no signature recorded.
   */
  async function expectRefusal(
    send: () => Promise<Answer>,
    agentId: string,
    status: number,
    want: { type?: string; field?: string },
  ): Promise<void> {
    const refusedBefore = (await records('agent.sign.refused', agentId)).length;
    const signedBefore = await signedCount(agentId);
    const r = await send();
    expectProblem(r, status, {
      ...(want.type ? { type: want.type } : {}),
      ...(want.field ? { field: want.field } : {}),
    });
    expect(JSON.stringify(r.body)).not.toMatch(/"signature"|signed_tx|at .*\.js:\d+/);
    const refused = await records('agent.sign.refused', agentId);
    expect(refused).toHaveLength(refusedBefore + 1);
    expect(refused[refused.length - 1]!['metadata']).toMatchObject({
      status,
      reason: want.type ?? expect.any(String),
      ...(want.field ? { field: want.field } : {}),
    });
    expect(await signedCount(agentId)).toBe(signedBefore);
  }

  async function signedCount(agentId: string): Promise<number> {
    const rows = await sqlOn<{ n: number }>(
      mesh,
      `SELECT count(*)::int AS n FROM signer.outbox WHERE name = 'audit.recorded'
         AND payload->>'action' LIKE 'agent.sign.%' AND payload->>'action' <> 'agent.sign.refused'
         AND payload->>'resource_id' = $1`,
      [agentId],
    );
    return rows[0]!.n;
  }

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    let signup = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: ADMIN_EMAIL, password: TEST_PASSWORD },
    });
    if (signup.status !== 201) {
      signup = await api(mesh, 'POST', '/v1/auth/token', {
        body: { email: ADMIN_EMAIL, password: TEST_PASSWORD },
      });
    }
    admin = signup.body['access_token'] as string;
    agent = await newAgent({ intents_api_enabled: true, message_signing_enabled: true });
  });
  afterAll(() => mesh?.stop());

  describe('signatures', () => {
    it('personal_sign: an EIP-191 signature that verifies to the key address, audited with the hash', async () => {
      const text = `custos says hi ${randomUUID()}`;
      const message = hexlify(toUtf8Bytes(text));
      const r = await sign(agent, { intent_type: 'personal_sign', message });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        intent_type: 'personal_sign',
        chain: 'anvil',
        from: agent.address,
        message_hash: hashMessage(toUtf8Bytes(text)),
        signed_tx: null,
        tx_hash: null,
        typed_data_hash: null,
        tx_type: null,
        status: null,
      });
      expect(verifyMessage(text, r.body['signature'] as string)).toBe(agent.address);
      const recs = await records('agent.sign.personal_sign', agent.id);
      expect(recs[recs.length - 1]).toMatchObject({
        actor_type: 'agent',
        actor_id: agent.id,
        metadata: {
          intent_type: 'personal_sign',
          chain: 'anvil',
          chain_id: 31337,
          from: agent.address,
          message_hash: r.body['message_hash'],
        },
      });
      // The chain may be named by its chain_id too; the empty message is a message.
      const byId = await sign(agent, { intent_type: 'personal_sign', message: '0x', chain: 31337 });
      expect(byId.status).toBe(200);
      expect(verifyMessage(new Uint8Array(), byId.body['signature'] as string)).toBe(agent.address);
    });

    it('typed_data: an EIP-712 signature that verifies to the key address; the domain chainId may be absent', async () => {
      const r = await sign(agent, { intent_type: 'typed_data', typed_data: MAIL });
      expect(r.status).toBe(200);
      const hash = TypedDataEncoder.hash(MAIL.domain, MAIL_TYPES, MAIL.message);
      expect(r.body).toMatchObject({
        intent_type: 'typed_data',
        from: agent.address,
        typed_data_hash: hash,
        message_hash: null,
      });
      expect(verifyTypedData(MAIL.domain, MAIL_TYPES, MAIL.message, r.body['signature'] as string)).toBe(
        agent.address,
      );
      const recs = await records('agent.sign.typed_data', agent.id);
      expect(recs[recs.length - 1]!['metadata']).toMatchObject({
        typed_data_hash: hash,
        primary_type: 'Mail',
        domain: { name: 'Ether Mail', chain_id: '31337', verifying_contract: MAIL.domain.verifyingContract },
      });
      const { chainId: _omitted, ...domain } = MAIL.domain;
      const types = {
        ...MAIL.types,
        EIP712Domain: MAIL.types.EIP712Domain.filter((f) => f.name !== 'chainId'),
      };
      const noChain = await sign(agent, {
        intent_type: 'typed_data',
        typed_data: { ...MAIL, types, domain },
      });
      expect(noChain.status).toBe(200);
      expect(verifyTypedData(domain, MAIL_TYPES, MAIL.message, noChain.body['signature'] as string)).toBe(
        agent.address,
      );
    });

    it('eip712_digest: refused without raw_signing_enabled (403), signed as given once an owner enables it (step-up)', async () => {
      const digest = `0x${randomBytes(32).toString('hex')}`;
      await expectRefusal(() => sign(agent, { intent_type: 'eip712_digest', hash: digest }), agent.id, 403, {
        type: 'raw_signing_disabled',
      });
      // Opening a signing path is a guardrail edit: it needs the owner's step-up.
      const reauth = await api(mesh, 'POST', '/v1/auth/reauth', {
        token: owner.token,
        body: { purpose: 'agent.guardrails.edit', password: TEST_PASSWORD },
      });
      expect(reauth.status).toBe(200);
      const patched = await call('PATCH', `/v1/agents/${agent.id}`, {
        token: owner.token,
        body: { raw_signing_enabled: true },
        confirm: reauth.body['token'] as string,
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ raw_signing_enabled: true });
      // The agent's token was minted before: signer reads the setting from identity now.
      const r = await sign(agent, { intent_type: 'eip712_digest', hash: digest });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        intent_type: 'eip712_digest',
        from: agent.address,
        typed_data_hash: digest,
      });
      expect(recoverAddress(digest, r.body['signature'] as string)).toBe(agent.address);
      const recs = await records('agent.sign.eip712_digest', agent.id);
      expect(recs[recs.length - 1]!['metadata']).toMatchObject({
        typed_data_hash: digest,
        from: agent.address,
      });
      // A malformed digest is a 400 naming hash.
      for (const hash of ['0x1234', digest.slice(2), `${digest}00`]) {
        await expectRefusal(() => sign(agent, { intent_type: 'eip712_digest', hash }), agent.id, 400, {
          field: 'hash',
        });
      }
    });

    it('transaction: signed (EIP-1559 by default), not broadcast; anvil accepts it when the test broadcasts it and it mines', async () => {
      await anvil('anvil_setBalance', [agent.address, '0x8ac7230489e80000']); // 10 ETH
      const before = BigInt(await anvil<string>('eth_getBalance', [RECIPIENT, 'latest']));
      const nonceBefore = Number(await anvil<string>('eth_getTransactionCount', [agent.address, 'pending']));
      const r = await sign(agent, { intent_type: 'transaction', to: RECIPIENT.toLowerCase(), value: '0.01' });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        intent_type: 'transaction',
        chain: 'anvil',
        from: agent.address,
        tx_type: 2,
        status: 'sign_only',
        nonce: nonceBefore,
        message_hash: null,
        typed_data_hash: null,
      });
      const tx = Transaction.from(r.body['signed_tx'] as string);
      expect(tx.from).toBe(agent.address);
      expect(tx.hash).toBe(r.body['tx_hash']);
      expect(tx.type).toBe(2);
      expect(tx.chainId).toBe(31337n);
      expect(tx.to).toBe(getAddress(RECIPIENT));
      expect(tx.value).toBe(10n ** 16n);
      expect(tx.signature!.serialized).toBe(r.body['signature']);
      // Signer did not broadcast it.
      expect(await anvil('eth_getTransactionByHash', [tx.hash])).toBeNull();
      expect(Number(await anvil<string>('eth_getTransactionCount', [agent.address, 'pending']))).toBe(
        nonceBefore,
      );

      // Kept as a sign_only transaction, with its event and its audit record (neither holds the bytes).
      const rows = await sqlOn<Body>(
        mesh,
        'SELECT status, tx_hash, nonce, nonce_held FROM signer.transactions WHERE id = $1',
        [r.body['transaction_id']],
      );
      expect(rows).toEqual([
        { status: 'sign_only', tx_hash: tx.hash, nonce: String(nonceBefore), nonce_held: false },
      ]);
      const events = await sqlOn<{ payload: Body; org_id: string }>(
        mesh,
        `SELECT payload, org_id FROM signer.outbox WHERE name = 'agent.transaction.signed' AND payload->>'tx_id' = $1`,
        [r.body['transaction_id']],
      );
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        org_id: owner.orgId,
        payload: {
          agent_id: agent.id,
          chain: 'anvil',
          chain_id: '31337',
          from: agent.address,
          tx_hash: tx.hash,
          status: 'sign_only',
        },
      });
      expect(JSON.stringify(events)).not.toContain((r.body['signed_tx'] as string).slice(2, 60));
      const recs = await records('agent.sign.transaction', agent.id);
      expect(recs[recs.length - 1]!['metadata']).toMatchObject({
        tx_id: r.body['transaction_id'],
        tx_hash: tx.hash,
        nonce: nonceBefore,
        value_wei: (10n ** 16n).toString(),
      });
      expect(JSON.stringify(recs)).not.toContain((r.body['signed_tx'] as string).slice(2, 60));

      // It is listed among the agent's transactions (the Transactions API reads it), without the bytes by default.
      const got = await call(
        'GET',
        `/v1/agents/${agent.id}/transactions/${String(r.body['transaction_id'])}`,
        {
          token: agent.token,
        },
      );
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({
        id: r.body['transaction_id'],
        status: 'sign_only',
        tx_hash: tx.hash,
        nonce: nonceBefore,
      });
      expect(got.body).not.toHaveProperty('signed_tx');
      const sent = await anvil<string>('eth_sendRawTransaction', [r.body['signed_tx']]);
      expect(sent).toBe(tx.hash);
      let receipt: { status: string } | null = null;
      for (let i = 0; i < 100 && !receipt; i++) {
        receipt = await anvil<{ status: string } | null>('eth_getTransactionReceipt', [tx.hash]);
        if (!receipt) await new Promise((res) => setTimeout(res, 100));
      }
      expect(receipt).toMatchObject({ status: '0x1' });
      expect(BigInt(await anvil<string>('eth_getBalance', [RECIPIENT, 'latest'])) - before).toBe(10n ** 16n);
    });

    it("transaction: with no nonce given, the Transactions API's next nonce when it is ahead of the chain's", async () => {
      const mover = await newAgent({ intents_api_enabled: true });
      await anvil('anvil_setBalance', [mover.address, '0x8ac7230489e80000']); // 10 ETH
      for (let i = 0; i < 2; i++) {
        const sent = await call('POST', `/v1/agents/${mover.id}/transactions`, {
          token: mover.token,
          body: { chain: 'anvil', to: RECIPIENT, value: '1' },
        });
        expect(sent.status).toBe(201);
      }
      const stored = await sqlOn<{ next_nonce: string }>(
        mesh,
        `SELECT n.next_nonce FROM signer.nonces n JOIN signer.signing_keys k ON k.id = n.key_id
          WHERE k.agent_id = $1 AND n.chain_id = 31337`,
        [mover.id],
      );
      expect(stored).toEqual([{ next_nonce: '2' }]);
      // The chain forgets the key's transactions (as a node behind, or a reorg, would show it).
      await anvil('anvil_setNonce', [mover.address, '0x0']);
      expect(Number(await anvil<string>('eth_getTransactionCount', [mover.address, 'pending']))).toBe(0);
      const r = await sign(mover, { intent_type: 'transaction', to: RECIPIENT, value: '1' });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: 'sign_only', nonce: 2 });
      expect(Transaction.from(r.body['signed_tx'] as string).nonce).toBe(2);
      // Read only: the Transactions API's next nonce did not move.
      const after = await sqlOn<{ next_nonce: string }>(
        mesh,
        `SELECT n.next_nonce FROM signer.nonces n JOIN signer.signing_keys k ON k.id = n.key_id
          WHERE k.agent_id = $1 AND n.chain_id = 31337`,
        [mover.id],
      );
      expect(after).toEqual([{ next_nonce: '2' }]);
    });

    it('transaction: legacy type 0 and caller-given nonce, gas and fees are signed as given', async () => {
      const r = await sign(agent, {
        intent_type: 'transaction',
        tx_type: 0,
        to: RECIPIENT,
        value: '1000',
        nonce: 4242,
        gas_limit: 30000,
        gas_price: '3000000000',
      });
      expect(r.status).toBe(200);
      const tx = Transaction.from(r.body['signed_tx'] as string);
      expect({
        type: tx.type,
        nonce: tx.nonce,
        gasLimit: tx.gasLimit,
        gasPrice: tx.gasPrice,
        value: tx.value,
        chainId: tx.chainId,
      }).toEqual({
        type: 0,
        nonce: 4242,
        gasLimit: 30000n,
        gasPrice: 3_000_000_000n,
        value: 1000n,
        chainId: 31337n,
      });
      expect(tx.from).toBe(agent.address);
      expect(r.body).toMatchObject({ tx_type: 0, nonce: 4242, status: 'sign_only' });
      // The agent's fee cap bounds what it may sign.
      const capped = await newAgent({
        intents_api_enabled: true,
        max_fee_per_gas_gwei: 1,
        max_gas_limit: 25000,
      });
      await expectRefusal(
        () =>
          sign(capped, {
            intent_type: 'transaction',
            to: RECIPIENT,
            max_fee_per_gas: '2000000000',
            gas_limit: 21000,
            max_priority_fee_per_gas: '1',
          }),
        capped.id,
        400,
        { field: 'max_fee_per_gas' },
      );
      await expectRefusal(
        () => sign(capped, { intent_type: 'transaction', to: RECIPIENT, gas_limit: 30000 }),
        capped.id,
        400,
        { field: 'gas_limit' },
      );
    });
  });

  describe('refusals: status, problem body, agent.sign.refused, nothing signed', () => {
    const message = '0x68656c6c6f';

    it('a human, another agent, an agent without the Intents API', async () => {
      await expectRefusal(
        () =>
          call('POST', `/v1/agents/${agent.id}/sign`, {
            token: owner.token,
            body: { intent_type: 'personal_sign', chain: 'anvil', message },
          }),
        agent.id,
        403,
        { type: 'intents_agent_only' },
      );
      const other = await newAgent({ intents_api_enabled: true, message_signing_enabled: true });
      await expectRefusal(
        () => sign({ id: agent.id, token: other.token }, { intent_type: 'personal_sign', message }),
        agent.id,
        403,
        { type: 'intents_other_agent' },
      );
      const off = await newAgent({ message_signing_enabled: true });
      await expectRefusal(() => sign(off, { intent_type: 'personal_sign', message }), off.id, 403, {
        type: 'intents_api_disabled',
      });
    });

    it('an unknown chain, a disabled chain (400 naming chain)', async () => {
      await expectRefusal(
        () => sign(agent, { intent_type: 'personal_sign', message, chain: 'no-such-chain' }),
        agent.id,
        400,
        {
          field: 'chain',
        },
      );
      const name = `sign-off-${randomBytes(3).toString('hex')}`;
      const made = await call('POST', '/v1/admin/chains', {
        token: admin,
        body: {
          name,
          display_name: 'Disabled',
          chain_id: 800_000 + Math.floor(Math.random() * 90_000),
          is_enabled: false,
          is_testnet: true,
        },
      });
      expect(made.status).toBe(201);
      await expectRefusal(
        () => sign(agent, { intent_type: 'personal_sign', message, chain: name }),
        agent.id,
        400,
        {
          field: 'chain',
        },
      );
    });

    it('malformed fields: intent_type, message, typed_data, chainId mismatch, to, value, tx_type', async () => {
      const bad: Array<[Body, string]> = [
        [{ intent_type: 'eth_sign', message }, 'intent_type'],
        [{ intent_type: 'personal_sign', message: 'hello' }, 'message'],
        [{ intent_type: 'personal_sign', message: '0x123' }, 'message'],
        [{ intent_type: 'personal_sign' }, 'message'],
        [{ intent_type: 'typed_data', typed_data: 'not an object' }, 'typed_data'],
        [
          {
            intent_type: 'typed_data',
            typed_data: { ...MAIL, message: { ...MAIL.message, to: { name: 'x', wallet: 'nope' } } },
          },
          'typed_data',
        ],
        [
          { intent_type: 'typed_data', typed_data: { ...MAIL, primaryType: 'Nope' } },
          'typed_data.primaryType',
        ],
        [
          { intent_type: 'typed_data', typed_data: { ...MAIL, domain: { ...MAIL.domain, chainId: 1 } } },
          'typed_data.domain.chainId',
        ],
        [{ intent_type: 'transaction', to: '0x1234', value: '1' }, 'to'],
        [{ intent_type: 'transaction', to: BAD_CHECKSUM, value: '1' }, 'to'],
        [{ intent_type: 'transaction', to: RECIPIENT, value: '-1' }, 'value'],
        [{ intent_type: 'transaction', to: RECIPIENT, value: '1e18' }, 'value'],
        [{ intent_type: 'transaction', to: RECIPIENT, value: '1', tx_type: 1 }, 'tx_type'],
        [{ intent_type: 'transaction', to: RECIPIENT, value: '1', tx_type: 4 }, 'tx_type'],
        [{ intent_type: 'transaction', to: RECIPIENT, data: '0xabc' }, 'data'],
      ];
      for (const [body, field] of bad) {
        await expectRefusal(() => sign(agent, body), agent.id, 400, { field });
      }
    });

    it('typed_data too large, too deep or with too many types: 400 naming typed_data, never a 500', async () => {
      // At the gateway (shape only, not audited): over 64 KiB of JSON, or nested too deeply to serialize.
      const chain: Record<string, { name: string; type: string }[]> = {};
      // (3,000 types: about 100 KB; the gateway's general limit of 10,000 members per object is not reached.)
      for (let i = 0; i < 3_000; i++) {
        chain[`T${i}`] = [{ name: 'n', type: i < 2_999 ? `T${i + 1}` : 'uint8' }];
      }
      // Nested too deeply for JSON.stringify (the test sends it as raw text for the same reason).
      const { message: _m, ...rest } = MAIL;
      const deep = `${JSON.stringify({ intent_type: 'typed_data', chain: 'anvil', typed_data: rest }).slice(0, -2)},"message":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`;
      const sends = [
        () =>
          sign(agent, {
            intent_type: 'typed_data',
            typed_data: { types: chain, primaryType: 'T0', domain: {}, message: {} },
          }),
        () => api(mesh, 'POST', `/v1/agents/${agent.id}/sign`, { token: agent.token, raw: deep }),
      ];
      for (const send of sends) {
        const before = await signedCount(agent.id);
        const r = await send();
        // (The deep one meets the gateway's general nesting limit first, which names the path in typed_data.)
        expectProblem(r, 400);
        expect(String(r.body['field'])).toMatch(/^typed_data(\.message\[0\].*)?$/);
        expect(JSON.stringify(r.body)).not.toMatch(/RangeError|at .*\.js:\d+/);
        expect(await signedCount(agent.id)).toBe(before);
      }
      // In signer (audited agent.sign.refused): more than 100 struct types, or a field type too long.
      const few: Record<string, { name: string; type: string }[]> = {};
      for (let i = 0; i < 101; i++) few[`T${i}`] = [{ name: 'n', type: i < 100 ? `T${i + 1}` : 'uint8' }];
      await expectRefusal(
        () =>
          sign(agent, {
            intent_type: 'typed_data',
            typed_data: { types: few, primaryType: 'T0', domain: {}, message: {} },
          }),
        agent.id,
        400,
        { field: 'typed_data.types' },
      );
      await expectRefusal(
        () =>
          sign(agent, {
            intent_type: 'typed_data',
            typed_data: {
              ...MAIL,
              types: { ...MAIL_TYPES, Mail: [{ name: 'a', type: `uint8${'[]'.repeat(60)}` }] },
            },
          }),
        agent.id,
        400,
        { field: 'typed_data.types' },
      );
    });

    it('message signing not enabled for the agent (403 message_signing_disabled)', async () => {
      const quiet = await newAgent({ intents_api_enabled: true });
      await expectRefusal(() => sign(quiet, { intent_type: 'personal_sign', message }), quiet.id, 403, {
        type: 'message_signing_disabled',
      });
      // Typed data is not message signing: it is signed (the EIP-712 domain guardrails come later).
      const typed = await sign(quiet, { intent_type: 'typed_data', typed_data: MAIL });
      expect(typed.status).toBe(200);
    });

    it('no key on the chain (404), and a client_tss key is refused on the server path (403)', async () => {
      const keyless = await newAgent({ intents_api_enabled: true, message_signing_enabled: true }, true);
      await expectRefusal(
        () => sign(keyless, { intent_type: 'personal_sign', message }),
        keyless.id,
        404,
        {},
      );
      await sqlOn(
        mesh,
        `INSERT INTO signer.signing_keys (id, org_id, agent_id, family, curve, public_key, address, key_version, custody, is_active, vault_secret_id, created_by)
         VALUES ($1, $2, $3, 'evm', 'secp256k1', '0x04', '0x000000000000000000000000000000000000dEaD', 1, 'client_tss', true, $4, $5)`,
        [randomUUID(), owner.orgId, keyless.id, randomUUID(), owner.userId],
      );
      for (const body of [
        { intent_type: 'personal_sign', message },
        { intent_type: 'transaction', to: RECIPIENT, value: '1' },
      ]) {
        await expectRefusal(() => sign(keyless, body), keyless.id, 403, { type: 'client_tss_refused' });
      }
    });
  });

  it("signatures and refusals reach the org's audit log (the audit service takes agent.sign.* from signer)", async () => {
    for (const action of [
      'agent.sign.personal_sign',
      'agent.sign.typed_data',
      'agent.sign.eip712_digest',
      'agent.sign.transaction',
      'agent.sign.refused',
    ]) {
      const events = await waitFor(
        async () => {
          const a = await call('GET', `/v1/audit/events?limit=100&action=${action}`, { token: owner.token });
          const list = ((a.body['events'] as Body[] | undefined) ?? []).filter(
            (e) => e['resource_id'] === agent.id,
          );
          return list.length > 0 ? list : undefined;
        },
        30_000,
        200,
      );
      expect(events[0]).toMatchObject({ action, resource_id: agent.id });
    }
  });

  it("no response, log line, event or audit record holds the agent's private key (canary scan)", async () => {
    const [row] = await sqlOn<{ id: string; vault_secret_id: string }>(
      mesh,
      'SELECT id, vault_secret_id FROM signer.signing_keys WHERE agent_id = $1 AND is_active',
      [agent.id],
    );
    const s = grpcClientAs(mesh, 'signer', AgentKeyVaultServiceClient, 'vault-crypto');
    let pk: Buffer;
    try {
      const r = await callUnary(
        s.client,
        s.client.loadAgentKey,
        { orgId: owner.orgId, secretId: row!.vault_secret_id, keyId: row!.id, purpose: 'sign' },
        new Metadata(),
      );
      pk = Buffer.from(r.privateKey);
    } finally {
      s.close();
    }
    expect(pk).toHaveLength(32);
    const outboxes = await sqlOn<{ payload: unknown }>(
      mesh,
      'SELECT payload FROM signer.outbox UNION ALL SELECT payload FROM vault_crypto.outbox',
    );
    const audit = await call('GET', '/v1/audit/events?limit=100', { token: owner.token });
    expect(audit.status).toBe(200);
    const logs = [...mesh.output.values()].flat();
    const corpus = [...seen, ...logs, ...outboxes.map((o) => JSON.stringify(o.payload))]
      .join('\n')
      .toLowerCase();
    expect(seen.length).toBeGreaterThan(20);
    for (const canary of [
      pk.toString('hex'),
      pk.toString('base64').toLowerCase(),
      pk.toString('base64url').toLowerCase(),
    ]) {
      expect(corpus.includes(canary)).toBe(false);
    }
    pk.fill(0);
  });
});

describe('signer: agent.transaction.signed reaches a webhook, signed (private mesh)', () => {
  let mesh: Mesh;
  let chain: Awaited<ReturnType<typeof startMeshAnvil>>;
  const seen: Array<{ headers: http.IncomingHttpHeaders; raw: Buffer }> = [];
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ headers: req.headers, raw: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });

  beforeAll(async () => {
    chain = await startMeshAnvil();
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.2', resolve));
    mesh = await startMesh({
      extraEnv: {
        EMAIL_VERIFICATION_REQUIRED: 'false',
        LOCAL_EVM_RPC_URL: chain.url,
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOWED_CIDRS: '127.0.0.2/32',
        WEBHOOK_WORKER_INTERVAL_MS: '40',
      },
    });
  });
  afterAll(async () => {
    await mesh?.stop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    await chain?.stop();
  });

  it('delivers the sign-only transaction with an HMAC signature over the body, without the signed bytes', async () => {
    const owner = await quickUser(mesh);
    const port = (receiver.address() as AddressInfo).port;
    const hook = await api(mesh, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: `http://127.0.0.2:${port}/signed`, events: ['agent.transaction.signed'] },
    });
    expect(hook.status).toBe(201);
    const secret = hook.body['secret'] as string;
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: 'hooked-signer', intents_api_enabled: true },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const key = await api(mesh, 'POST', `/v1/agents/${id}/signing-keys`, {
      token: owner.token,
      body: { chain: 'anvil' },
    });
    expect(key.status).toBe(201);
    const token = (
      await api(mesh, 'POST', '/v1/auth/agent-token', {
        body: { agent_id: id, api_key: created.body['api_key'] },
      })
    ).body['access_token'] as string;
    // Every figure given: signed without asking the node anything.
    const r = await api(mesh, 'POST', `/v1/agents/${id}/sign`, {
      token,
      body: {
        intent_type: 'transaction',
        chain: 'anvil',
        to: RECIPIENT,
        value: '5',
        nonce: 0,
        gas_limit: 21000,
        max_fee_per_gas: '2000000000',
        max_priority_fee_per_gas: '1000000000',
      },
    });
    expect(r.status).toBe(200);
    const got = await waitFor(async () => (seen.length > 0 ? seen[0] : undefined), 30_000, 100);
    const sig = String(got.headers['x-webhook-signature']);
    const expected = createHmac('sha256', secret).update(got.raw).digest('hex');
    expect(timingSafeEqual(Buffer.from(sig, 'hex'), Buffer.from(expected, 'hex'))).toBe(true);
    expect(got.headers['x-webhook-event']).toBe('agent.transaction.signed');
    expect(JSON.parse(got.raw.toString('utf8'))).toMatchObject({
      type: 'agent.transaction.signed',
      org_id: owner.orgId,
      data: {
        tx_id: r.body['transaction_id'],
        agent_id: id,
        chain: 'anvil',
        chain_id: '31337',
        from: key.body['address'],
        to: RECIPIENT,
        value_wei: '5',
        nonce: 0,
        tx_type: 2,
        tx_hash: r.body['tx_hash'],
        status: 'sign_only',
      },
    });
    expect(got.raw.toString()).not.toContain((r.body['signed_tx'] as string).slice(2));
  });
});
