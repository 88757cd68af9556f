import { getAddress } from 'ethers';
import { typedDataAddresses } from './screening-fns.js';

// The addresses a typed-data signature pays or empowers, for sanctions screening: every field of
// type `address`, however written, at any depth.

const BOB = '0x8589427373D6D84E98730D7795D8f6f8731FDA16';
const ALICE = `0x${'11'.repeat(20)}`;

describe('typedDataAddresses', () => {
  it('finds address fields written without 0x or in lower case, in nested structs and arrays', () => {
    const types = {
      Permit: [
        { name: 'owner', type: 'address' },
        { name: 'spender', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'batch', type: 'Leg[]' },
      ],
      Leg: [
        { name: 'to', type: 'address' },
        { name: 'memo', type: 'string' },
      ],
    };
    const message = {
      owner: ALICE,
      spender: BOB.slice(2).toLowerCase(),
      value: 1,
      batch: [
        { to: BOB.toLowerCase(), memo: `0x${'22'.repeat(20)} is only text` },
        { to: ALICE, memo: '' },
      ],
    };
    expect(typedDataAddresses({ types, message })).toEqual([getAddress(ALICE), BOB, BOB, getAddress(ALICE)]);
  });
});
