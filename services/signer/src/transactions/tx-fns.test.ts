import { canonicalJson } from '@custos/service-kit';
import { createHash } from 'node:crypto';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import { InvalidArgumentError } from '@custos/service-kit';
import type { ChainRecord } from '../chains/chain-types.js';
import {
  chainRefOf,
  checkChainAgrees,
  checkIdempotencyKey,
  decodeCursor,
  encodeCursor,
  evmRequestOf,
  transferInputOf,
  refuseUnsupported,
  requestHash,
} from './tx-fns.js';

const chain = { name: 'anvil', chainId: 31337n, family: 'evm', nativeDecimals: 18 } as ChainRecord;
const base: SubmitTransactionRequest = {
  agentId: 'a',
  chain: 'anvil',
  to: '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed',
  value: '0.5',
  data: '',
  simulateFirst: false,
  idempotencyKey: '',
  resumeTxId: '',
  unsupportedFields: [],
  canonicalBody: '',
};
const fieldOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
};

describe('tx-fns', () => {
  it('canonical JSON sorts keys at every level; the hash is over the body text when the gateway sends it', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { y: 1, x: 0 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[2,{"x":0,"y":1}]},"b":1}',
    );
    const body = canonicalJson({ value: '1', to: '0x', chain: 'anvil' });
    expect(requestHash({ ...base, canonicalBody: body })).toBe(
      createHash('sha256').update(body).digest('hex'),
    );
    expect(requestHash(base)).toBe(requestHash({ ...base }));
    expect(requestHash(base)).not.toBe(requestHash({ ...base, value: '0.6' }));
  });

  it('parses the EVM fields, naming the field at fault', () => {
    const r = evmRequestOf(base, chain, '0x' + '11'.repeat(20));
    expect(r).toMatchObject({ chainId: 31337n, value: 5n * 10n ** 17n, data: '0x', type: 2 });
    expect(r.to).toBe('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed');
    expect(fieldOf(() => evmRequestOf({ ...base, to: '' }, chain, '0x'))).toBe('to');
    expect(fieldOf(() => evmRequestOf({ ...base, value: '' }, chain, '0x'))).toBe('value');
    expect(fieldOf(() => evmRequestOf({ ...base, txType: 1 }, chain, '0x'))).toBe('tx_type');
    expect(fieldOf(() => evmRequestOf({ ...base, gasLimit: '0' }, chain, '0x'))).toBe('gas_limit');
    expect(fieldOf(() => evmRequestOf({ ...base, gasPrice: 'x' }, chain, '0x'))).toBe('gas_price');
  });

  it('chain or chain_id, agreeing; unsupported fields and Idempotency-Keys named', () => {
    expect(chainRefOf({ ...base, chain: '', chainId: '31337' })).toBe('31337');
    expect(fieldOf(() => chainRefOf({ ...base, chain: '' }))).toBe('chain');
    expect(fieldOf(() => checkChainAgrees({ ...base, chainId: '1' }, chain))).toBe('chain');
    expect(fieldOf(() => checkChainAgrees({ ...base, chainId: '31337' }, chain))).toBeUndefined();
    expect(fieldOf(() => refuseUnsupported({ ...base, unsupportedFields: ['nonce', 'memo'] }, chain))).toBe(
      'nonce',
    );
    expect(fieldOf(() => refuseUnsupported({ ...base, unsupportedFields: ['memo'] }, chain))).toBe('memo');
    expect(fieldOf(() => checkIdempotencyKey('has space'))).toBe('Idempotency-Key');
    expect(checkIdempotencyKey('abc-123')).toBe('abc-123');
  });

  it('cursors round-trip and foreign ones are 400 naming cursor', () => {
    const id = '0b6e2b0c-6a52-4d8e-9d1e-3f0a8f5f7c11';
    expect(decodeCursor(encodeCursor({ id }))).toBe(id);
    expect(fieldOf(() => decodeCursor('zzz'))).toBe('cursor');
    expect(fieldOf(() => decodeCursor(Buffer.from(`tx:${id}'`).toString('base64url')))).toBe('cursor');
  });
});

describe('transferInputOf', () => {
  it('carries the chain fields as given; an empty token_mint is no token; int64 text must be a safe integer', () => {
    expect(
      transferInputOf({
        to: 'r1',
        value: '5',
        memo: 'm',
        destinationTag: '7',
        tokenMint: '',
        ttl: '99',
        data: '0x',
      }),
    ).toEqual({ to: 'r1', value: '5', memo: 'm', destinationTag: 7, ttl: 99 });
    expect(
      transferInputOf({ to: 'T1', value: '1', tokenMint: 'TMint', tokenDecimals: 6, feeLimitSun: '10' }),
    ).toEqual({
      to: 'T1',
      value: '1',
      tokenMint: 'TMint',
      tokenDecimals: 6,
      feeLimitSun: 10,
    });
    expect(transferInputOf({ to: 'x', value: '1', data: '0xab' }).data).toBe('0xab');
    expect(
      fieldOf(() => transferInputOf({ to: 'x', value: '1', feeRateSatPerVbyte: '9007199254740993' })),
    ).toBe('fee_rate_sat_per_vbyte');
  });
});
