import { InvalidArgumentError } from '@custos/service-kit';
import {
  TypedDataEncoder,
  Wallet,
  hashMessage,
  recoverAddress,
  toUtf8Bytes,
  verifyMessage,
  verifyTypedData,
} from 'ethers';
import {
  parseDigest,
  parseIntentType,
  parseMessage,
  parseTxIntent,
  parseTypedData,
  personalMessageHash,
  reachableTypes,
  signDigest,
} from './sign-fns.js';

const PK = Buffer.from('4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318', 'hex');
const ADDRESS = new Wallet(`0x${PK.toString('hex')}`).address;

function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

const MAIL = {
  types: {
    EIP712Domain: [
      { name: 'name', type: 'string' },
      { name: 'chainId', type: 'uint256' },
    ],
    Person: [
      { name: 'name', type: 'string' },
      { name: 'wallet', type: 'address' },
    ],
    Mail: [
      { name: 'from', type: 'Person' },
      { name: 'to', type: 'Person[]' },
      { name: 'contents', type: 'string' },
    ],
    Unused: [{ name: 'x', type: 'uint8' }],
  },
  primaryType: 'Mail',
  domain: { name: 'Ether Mail', chainId: 31337 },
  message: {
    from: { name: 'Cow', wallet: '0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826' },
    to: [{ name: 'Bob', wallet: '0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB' }],
    contents: 'Hello, Bob!',
  },
};

describe('parseIntentType, parseMessage, parseDigest', () => {
  it('knows the four EVM intents and names intent_type otherwise', () => {
    expect(parseIntentType('typed_data')).toBe('typed_data');
    for (const bad of ['', 'PERSONAL_SIGN', 'sign', 'eth_sign'])
      expect(fieldOf(() => parseIntentType(bad))).toBe('intent_type');
  });
  it('reads a message as even-length 0x hex (0x: empty) and names message otherwise', () => {
    expect(Buffer.from(parseMessage('0x48656c6c6f')).toString()).toBe('Hello');
    expect(parseMessage('0x')).toHaveLength(0);
    for (const bad of [undefined, 'Hello', '48656c', '0x123', '0xzz', ''])
      expect(fieldOf(() => parseMessage(bad))).toBe('message');
  });
  it('reads a digest as 32 bytes of 0x hex and names hash otherwise', () => {
    const h = `0x${'Ab'.repeat(32)}`;
    expect(parseDigest(h)).toBe(h.toLowerCase());
    for (const bad of [
      undefined,
      '0x',
      `0x${'ab'.repeat(31)}`,
      `0x${'ab'.repeat(33)}`,
      'ab'.repeat(32),
      `0x${'zz'.repeat(32)}`,
    ])
      expect(fieldOf(() => parseDigest(bad))).toBe('hash');
  });
});

describe('parseTypedData', () => {
  it('hashes a v4 document (EIP712Domain and unused types left out) to what ethers verifies', async () => {
    const { doc, hash } = parseTypedData(JSON.stringify(MAIL), 31337n);
    expect(Object.keys(doc.types).sort()).toEqual(['Mail', 'Person']);
    expect(hash).toBe(
      TypedDataEncoder.hash(MAIL.domain, { Person: MAIL.types.Person, Mail: MAIL.types.Mail }, MAIL.message),
    );
    const s = signDigest(PK, hash, ADDRESS);
    expect(verifyTypedData(doc.domain, doc.types, doc.message, s.signature)).toBe(ADDRESS);
    const w = new Wallet(`0x${PK.toString('hex')}`);
    expect(await w.signTypedData(doc.domain, doc.types, doc.message)).toBe(s.signature);
  });
  it('takes a domain chainId as number, decimal or hex text, or none', () => {
    for (const chainId of [31337, '31337', '0x7a69', undefined]) {
      expect(() =>
        parseTypedData(JSON.stringify({ ...MAIL, domain: { name: 'x', chainId } }), 31337n),
      ).not.toThrow();
    }
  });
  it('names typed_data.domain.chainId when it is not the chain or not an integer', () => {
    for (const chainId of [1, '1', '0x1', 'abc', 1.5, -1, true]) {
      expect(
        fieldOf(() => parseTypedData(JSON.stringify({ ...MAIL, domain: { name: 'x', chainId } }), 31337n)),
      ).toBe('typed_data.domain.chainId');
    }
  });
  it('names typed_data (or its member) for malformed documents, never crashing', () => {
    const cases: [unknown, string][] = [
      [undefined, 'typed_data'],
      ['[]', 'typed_data'],
      ['{', 'typed_data'],
      ['"x"', 'typed_data'],
      [{ ...MAIL, types: [] }, 'typed_data.types'],
      [{ ...MAIL, types: { Mail: 'x' } }, 'typed_data.types'],
      [{ ...MAIL, primaryType: 'Nope' }, 'typed_data.primaryType'],
      [{ ...MAIL, primaryType: 'EIP712Domain' }, 'typed_data.primaryType'],
      [{ ...MAIL, domain: 'x' }, 'typed_data.domain'],
      [{ ...MAIL, message: null }, 'typed_data.message'],
      [{ ...MAIL, types: { Mail: [{ name: 'a', type: 'Missing' }] } }, 'typed_data'],
      [
        { ...MAIL, message: { ...MAIL.message, from: { name: 'Cow', wallet: 'not-an-address' } } },
        'typed_data',
      ],
      [{ ...MAIL, domain: { name: 'x', salt: 7, color: 'red' } }, 'typed_data'],
      [{ ...MAIL, types: { ...MAIL.types, Person: [{ name: 'p', type: 'Person' }] } }, 'typed_data'],
    ];
    for (const [doc, field] of cases) {
      const json = typeof doc === 'string' || doc === undefined ? doc : JSON.stringify(doc);
      expect(fieldOf(() => parseTypedData(json, 31337n))).toBe(field);
    }
  });
  it('refuses a document too large to hash (400 naming typed_data or its types), never overflowing the stack', () => {
    // 20,000 struct types, each naming the next: a recursive walk overflowed the stack (a 500).
    const chain: Record<string, { name: string; type: string }[]> = {};
    for (let i = 0; i < 20_000; i++)
      chain[`T${i}`] = [{ name: 'n', type: i < 19_999 ? `T${i + 1}` : 'uint8' }];
    const long = { types: chain, primaryType: 'T0', domain: {}, message: {} };
    expect(fieldOf(() => parseTypedData(JSON.stringify(long), 31337n))).toBe('typed_data');
    // The walk is iterative: 20,000 chained types are walked without a stack overflow.
    expect(reachableTypes(chain, 'T0').size).toBe(20_000);
    const few: Record<string, { name: string; type: string }[]> = {};
    for (let i = 0; i < 101; i++) few[`T${i}`] = [{ name: 'n', type: i < 100 ? `T${i + 1}` : 'uint8' }];
    const many = { types: few, primaryType: 'T0', domain: {}, message: {} };
    expect(fieldOf(() => parseTypedData(JSON.stringify(many), 31337n))).toBe('typed_data.types');
    const wide = {
      ...MAIL,
      types: {
        ...MAIL.types,
        Mail: Array.from({ length: 101 }, (_, i) => ({ name: `f${i}`, type: 'uint8' })),
      },
    };
    expect(fieldOf(() => parseTypedData(JSON.stringify(wide), 31337n))).toBe('typed_data.types');
    const deepType = {
      ...MAIL,
      types: { ...MAIL.types, Mail: [{ name: 'a', type: `uint8${'[]'.repeat(200)}` }] },
    };
    expect(fieldOf(() => parseTypedData(JSON.stringify(deepType), 31337n))).toBe('typed_data.types');
    // 100 types reached from the primary type are fine.
    const ok: Record<string, { name: string; type: string }[]> = {};
    for (let i = 0; i < 100; i++) ok[`T${i}`] = [{ name: 'n', type: i < 99 ? `T${i + 1}` : 'uint8' }];
    let message: Record<string, unknown> = { n: 1 };
    for (let i = 98; i >= 0; i--) message = { n: message };
    expect(() =>
      parseTypedData(JSON.stringify({ types: ok, primaryType: 'T0', domain: {}, message }), 31337n),
    ).not.toThrow();
  });
  it('answers any failure inside the encoder as a 400 naming typed_data', () => {
    // A message nested far deeper than its types: whatever ethers throws is the caller's 400.
    const message = `${'{"n":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
    const json = `{"types":{"A":[{"name":"n","type":"uint8"}]},"primaryType":"A","domain":{},"message":${message}}`;
    expect(fieldOf(() => parseTypedData(json, 31337n))).toBe('typed_data');
  });
});

describe('personal_sign and digests', () => {
  it('signs the EIP-191 hash: verifyMessage gives the key address', () => {
    const msg = toUtf8Bytes('hello custos');
    const h = personalMessageHash(msg);
    expect(h).toBe(hashMessage(msg));
    const s = signDigest(PK, h, ADDRESS);
    expect(s.from).toBe(ADDRESS);
    expect(verifyMessage(msg, s.signature)).toBe(ADDRESS);
  });
  it('signs a raw digest as given, and refuses a key that is not the record address', () => {
    const d = `0x${'11'.repeat(32)}`;
    expect(recoverAddress(d, signDigest(PK, d, ADDRESS).signature)).toBe(ADDRESS);
    expect(() => signDigest(PK, d, '0x000000000000000000000000000000000000dEaD')).toThrow(
      /not the signing key/,
    );
    expect(() => signDigest(Buffer.alloc(31, 1), d, ADDRESS)).toThrow(/32 bytes/);
  });
});

describe('parseTxIntent', () => {
  const to = '0x000000000000000000000000000000000000dEaD';
  it('defaults to EIP-1559 with value 0 and empty data; takes type 0', () => {
    expect(parseTxIntent({ agentId: 'a', intentType: 'transaction', chain: 'anvil', to }, 18)).toEqual({
      type: 2,
      to,
      value: 0n,
      data: '0x',
    });
    const f = parseTxIntent(
      {
        agentId: 'a',
        intentType: 'transaction',
        chain: 'anvil',
        to: to.toLowerCase(),
        txType: 0,
        value: '0.5',
        nonce: '3',
        gasLimit: '21000',
        gasPrice: '7',
      },
      18,
    );
    expect(f).toEqual({
      type: 0,
      to,
      value: 5n * 10n ** 17n,
      data: '0x',
      nonce: 3,
      gasLimit: 21000n,
      gasPrice: 7n,
    });
  });
  it('names the field at fault', () => {
    const base = { agentId: 'a', intentType: 'transaction', chain: 'anvil', to };
    const cases: [Record<string, unknown>, string][] = [
      [{ txType: 1 }, 'tx_type'],
      [{ txType: 3 }, 'tx_type'],
      [{ txType: 4 }, 'tx_type'],
      [{ to: '0x1234' }, 'to'],
      [{ to: '0x000000000000000000000000000000000000DEAD' }, 'to'],
      [{ to: undefined }, 'to'],
      [{ value: '-1' }, 'value'],
      [{ value: '1e18' }, 'value'],
      [{ data: '0xabc' }, 'data'],
      [{ nonce: '-1' }, 'nonce'],
      [{ nonce: '99999999999999999' }, 'nonce'],
      [{ gasLimit: '0' }, 'gas_limit'],
      [{ gasPrice: '1.5' }, 'gas_price'],
      [{ maxFeePerGas: 'x' }, 'max_fee_per_gas'],
      [{ maxPriorityFeePerGas: '-2' }, 'max_priority_fee_per_gas'],
    ];
    for (const [change, field] of cases) {
      expect(fieldOf(() => parseTxIntent({ ...base, ...change } as never, 18))).toBe(field);
    }
  });
  it('allows no `to` only for a contract creation with data', () => {
    expect(
      parseTxIntent({ agentId: 'a', intentType: 'transaction', chain: 'anvil', data: '0x6000' }, 18).to,
    ).toBeNull();
  });
});
