import {
  SanctionsListError,
  listCounts,
  normalizeAddress,
  parseJsonList,
  parseOfacSdnCsv,
  parseSanctionsList,
} from './sanctions-list.js';

// The sanctions list formats (docs/screening.md): the native JSON document and OFAC's SDN CSV,
// and the one spelling of an address per chain family that lists and requests are compared in.

const EVM = '0x8589427373D6D84E98730D7795D8f6f8731FDA16'; // EIP-55 mixed case
const BTC_BECH32 = 'bc1qsxdxe2yuz4ttmh5xc3xyzcmtd2z4ra5gnpnq2z';
const BTC_LEGACY = '1AjZPMsnmpdK2Rv9KQNfMurTXinscVro9V';
const TRON = 'TXsmKpEuW7qWnXzJLGP9eDLvWPR2GRn1FS';
const SOL = '9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM';
const XRP = 'rEb8TK3gBgk5auZkwc6sHnwrGVJH8DuaLh';

describe('normalizeAddress', () => {
  it('lowercases EVM hex (checksums are only case)', () => {
    expect(normalizeAddress('evm', ` ${EVM} `)).toBe(EVM.toLowerCase());
  });
  it('lowercases bech32 (Bitcoin bc1, Cardano addr1) and keeps base58 as written', () => {
    expect(normalizeAddress('bitcoin', BTC_BECH32.toUpperCase())).toBe(BTC_BECH32);
    expect(normalizeAddress('cardano', 'ADDR1QXYZ0123456789ABCDEF')).toBe('addr1qxyz0123456789abcdef');
    expect(normalizeAddress('bitcoin', BTC_LEGACY)).toBe(BTC_LEGACY);
    expect(normalizeAddress('solana', SOL)).toBe(SOL);
    expect(normalizeAddress('tron', TRON)).toBe(TRON);
    expect(normalizeAddress('xrp', XRP)).toBe(XRP);
    // base58 is case-sensitive: another case is another address.
    expect(normalizeAddress('solana', SOL.toLowerCase())).not.toBe(SOL);
  });
});

describe('parseJsonList', () => {
  it('reads families and OFAC currency tags, normalized, and places USDT by the address form', () => {
    const list = parseJsonList(
      JSON.stringify({
        name: 'ofac-sdn',
        published_at: '2026-11-20T00:00:00Z',
        addresses: {
          ETH: [EVM],
          XBT: [BTC_BECH32.toUpperCase(), BTC_LEGACY],
          USDT: [TRON, '0x' + 'ab'.repeat(20)],
          SOL: [SOL],
          xrp: [XRP],
          XMR: ['4' + 'A'.repeat(94)],
        },
      }),
      'fallback',
    );
    expect(list.name).toBe('ofac-sdn');
    expect(list.publishedAt?.toISOString()).toBe('2026-11-20T00:00:00.000Z');
    expect([...list.addresses.get('evm')!].sort()).toEqual(
      ['0x' + 'ab'.repeat(20), EVM.toLowerCase()].sort(),
    );
    expect([...list.addresses.get('bitcoin')!].sort()).toEqual([BTC_LEGACY, BTC_BECH32].sort());
    expect([...list.addresses.get('tron')!]).toEqual([TRON]);
    expect([...list.addresses.get('solana')!]).toEqual([SOL]);
    expect([...list.addresses.get('xrp')!]).toEqual([XRP]);
    expect(list.skipped).toBe(1); // XMR: no family signer serves
    expect(listCounts(list)).toEqual({ evm: 2, bitcoin: 2, tron: 1, solana: 1, xrp: 1 });
  });

  it('uses the fallback name and no publication time when the document has none', () => {
    const list = parseJsonList(JSON.stringify({ addresses: { evm: [EVM] } }), 'sanctions');
    expect(list.name).toBe('sanctions');
    expect(list.publishedAt).toBeUndefined();
  });

  it.each([
    ['not JSON', '{', 'not JSON'],
    ['an array', '[]', 'JSON object'],
    ['no addresses', '{"name":"x"}', '"addresses"'],
    ['addresses not arrays', '{"addresses":{"evm":"0x"}}', 'addresses.evm must be an array'],
    ['a non-string entry', '{"addresses":{"evm":[1]}}', 'addresses.evm[0] must be a string'],
    ['a malformed EVM address', '{"addresses":{"ETH":["0x1234"]}}', 'addresses.ETH[0]: not a evm address'],
    ['a bad published_at', `{"published_at":"yesterday","addresses":{}}`, '"published_at"'],
    ['a bad name', `{"name":"a b","addresses":{}}`, '"name"'],
  ])('refuses %s, naming what is wrong', (_what, text, message) => {
    expect(() => parseJsonList(text, 'x')).toThrow(SanctionsListError);
    expect(() => parseJsonList(text, 'x')).toThrow(message);
  });
});

// Two entries in the shape of OFAC's sdn.csv (ent_num, name, type, program, …, remarks).
const SDN_CSV = [
  `36,"AEROCARIBBEAN AIRLINES",-0- ,"CUBA",-0- ,-0- ,-0- ,-0- ,-0- ,-0- ,-0- ,-0-`,
  `25308,"EXAMPLE, Person",individual,"CYBER2",-0- ,-0- ,-0- ,-0- ,-0- ,-0- ,-0- ,"DOB 1980; Digital Currency Address - XBT ${BTC_LEGACY}; alt. Digital Currency Address - ETH ${EVM}; Digital Currency Address - XMR 4${'A'.repeat(94)}; Digital Currency Address - USDT ${TRON}."`,
  `25309,"EXAMPLE EXCHANGE",-0- ,"CYBER2",-0- ,-0- ,-0- ,-0- ,-0- ,-0- ,-0- ,"Digital Currency Address - TRX ${TRON}; Digital Currency Address - SOL ${SOL}; Digital Currency Address - XRP ${XRP}"`,
].join('\n');

describe('parseOfacSdnCsv', () => {
  it("reads the remarks' Digital Currency Address entries", () => {
    const list = parseOfacSdnCsv(SDN_CSV, 'ofac-sdn');
    expect(list.name).toBe('ofac-sdn');
    expect(list.publishedAt).toBeUndefined();
    expect(listCounts(list)).toEqual({ bitcoin: 1, evm: 1, tron: 1, solana: 1, xrp: 1 });
    expect(list.addresses.get('evm')!.has(EVM.toLowerCase())).toBe(true);
    expect(list.skipped).toBe(1);
  });

  it('refuses a document that is not an SDN CSV', () => {
    expect(() => parseOfacSdnCsv('<html>maintenance</html>', 'x')).toThrow(SanctionsListError);
  });

  it('accepts an SDN CSV without any digital currency address (an empty list)', () => {
    expect(listCounts(parseOfacSdnCsv(SDN_CSV.split('\n')[0]!, 'x'))).toEqual({});
  });
});

describe('parseSanctionsList', () => {
  it('auto-detects JSON by its opening brace, otherwise SDN CSV', () => {
    expect(parseSanctionsList(` {"addresses":{"evm":["${EVM}"]}}`, 'auto', 'n').addresses.size).toBe(1);
    expect(parseSanctionsList(SDN_CSV, 'auto', 'n').addresses.size).toBe(5);
    expect(() => parseSanctionsList(SDN_CSV, 'json', 'n')).toThrow('not JSON');
  });
});
