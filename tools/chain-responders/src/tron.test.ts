/* eslint-disable @typescript-eslint/no-explicit-any -- the node's answers are read as loose JSON here */
import { randomBytes } from 'node:crypto';
import { TronWeb, utils } from 'tronweb';
import { TronResponder } from './tron.js';

const TRX = 1_000_000;
let node: TronResponder;

beforeEach(async () => {
  node = await TronResponder.start();
  node.produceBlock();
});
afterEach(async () => {
  await node.close();
});

async function post(path: string, body: unknown = {}): Promise<Record<string, any>> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, any>;
}

function account(): { pk: string; address: string } {
  const pk = randomBytes(32).toString('hex');
  return { pk, address: TronWeb.address.fromPrivateKey(pk) as string };
}

const text = (hex: string): string => Buffer.from(hex, 'hex').toString('utf8');

async function signedTransfer(from: { pk: string; address: string }, to: string, amount: number) {
  const tx = await post('/wallet/createtransaction', {
    owner_address: from.address,
    to_address: to,
    amount,
    visible: true,
  });
  return utils.crypto.signTransaction(from.pk, tx) as unknown as Record<string, any>;
}

describe('tron responder', () => {
  it('serves accounts, blocks and chain parameters as java-tron shapes them', async () => {
    const a = account();
    expect(await post('/wallet/getaccount', { address: a.address, visible: true })).toEqual({});
    node.fund(a.address, 5 * TRX);
    const acct = await post('/wallet/getaccount', { address: a.address, visible: true });
    expect(acct).toMatchObject({ address: a.address, balance: 5 * TRX });
    const hexAcct = await post('/wallet/getaccount', { address: TronWeb.address.toHex(a.address) });
    expect(hexAcct.address).toBe(TronWeb.address.toHex(a.address).toLowerCase());
    const b = await post('/wallet/getnowblock');
    expect(b.blockID).toMatch(/^[0-9a-f]{64}$/);
    expect(b.block_header.raw_data.number).toBe(1);
    expect(parseInt(b.blockID.slice(0, 16), 16)).toBe(1);
    const p = await post('/wallet/getchainparameters');
    expect(p.chainParameter).toContainEqual({ key: 'getTransactionFee', value: 1000 });
  });

  it('accepts a transfer signed by the owner, includes it in the next block and charges its fee', async () => {
    const a = account();
    const to = account().address;
    node.fund(a.address, 10 * TRX);
    const signed = await signedTransfer(a, to, 2 * TRX);
    const r = await post('/wallet/broadcasttransaction', signed);
    expect(r).toEqual({ result: true, txid: signed.txID });
    expect(node.verified[0]).toMatchObject({
      from: a.address,
      to,
      amount: 2_000_000n,
      type: 'TransferContract',
    });
    expect(await post('/wallet/gettransactioninfobyid', { value: signed.txID })).toEqual({});
    expect((await post('/wallet/gettransactionfrompending', { value: signed.txID })).txID).toBe(signed.txID);
    const block = node.produceBlock();
    const info = await post('/wallet/gettransactioninfobyid', { value: signed.txID });
    expect(info).toMatchObject({
      id: signed.txID,
      blockNumber: block.number,
      blockTimeStamp: block.timestamp,
    });
    // A new account: bandwidth + 0.1 TRX + 1 TRX creation fees.
    expect(info.fee).toBeGreaterThan(1_100_000);
    expect(node.balanceOf(to)).toBe(2_000_000n);
    expect(node.balanceOf(a.address)).toBe(BigInt(8 * TRX - info.fee));
    const byId = await post('/wallet/gettransactionbyid', { value: signed.txID });
    expect(byId.ret).toEqual([{ contractRet: 'SUCCESS' }]);
    const nb = await post('/wallet/getnowblock');
    expect(nb.transactions.map((t: { txID: string }) => t.txID)).toEqual([signed.txID]);
  });

  it('refuses a signature of another key (SIGERROR)', async () => {
    const a = account();
    node.fund(a.address, 10 * TRX);
    const tx = await post('/wallet/createtransaction', {
      owner_address: a.address,
      to_address: account().address,
      amount: 1000,
      visible: true,
    });
    const forged = utils.crypto.signTransaction(account().pk, tx) as unknown as Record<string, any>;
    const r = await post('/wallet/broadcasttransaction', forged);
    expect(r.code).toBe('SIGERROR');
    expect(text(r.message)).toMatch(/is signed by T\w+ but it is not contained of permission/);
    expect(node.verified).toHaveLength(0);
  });

  it('refuses a transaction whose raw_data was changed after signing', async () => {
    const a = account();
    node.fund(a.address, 10 * TRX);
    const signed = await signedTransfer(a, account().address, 1000);
    const changed = structuredClone(signed);
    changed.raw_data.contract[0].parameter.value.amount = 5 * TRX;
    const r1 = await post('/wallet/broadcasttransaction', changed);
    expect(r1.code).toBe('SIGERROR');
    expect(text(r1.message)).toMatch(/raw_data_hex/);
    // Without the hex and id the node hashes the changed data: the signature recovers elsewhere.
    delete changed.raw_data_hex;
    delete changed.txID;
    const r2 = await post('/wallet/broadcasttransaction', changed);
    expect(r2.code).toBe('SIGERROR');
    expect(text(r2.message)).toMatch(/not contained of permission/);
    expect(node.balanceOf(a.address)).toBe(BigInt(10 * TRX));
  });

  it('refuses the same transaction twice and a double spend of one balance', async () => {
    const a = account();
    node.fund(a.address, 5 * TRX);
    const one = await signedTransfer(a, account().address, 3 * TRX);
    expect((await post('/wallet/broadcasttransaction', one)).result).toBe(true);
    const dup = await post('/wallet/broadcasttransaction', one);
    expect(dup.code).toBe('DUP_TRANSACTION_ERROR');
    expect(text(dup.message)).toBe('dup transaction');
    const two = await signedTransfer(a, account().address, 3 * TRX);
    const r = await post('/wallet/broadcasttransaction', two);
    expect(r.code).toBe('CONTRACT_VALIDATE_ERROR');
    expect(text(r.message)).toBe(
      'Contract validate error : Validate TransferContract error, balance is not sufficient.',
    );
    expect(node.broadcasts).toEqual(['SUCCESS', 'DUP_TRANSACTION_ERROR', 'CONTRACT_VALIDATE_ERROR']);
  });

  it('refuses an expired transaction and an unknown reference block', async () => {
    const a = account();
    node.fund(a.address, 5 * TRX);
    const signed = await signedTransfer(a, account().address, 1000);
    node.advanceTime(61_000);
    node.produceBlock();
    const r = await post('/wallet/broadcasttransaction', signed);
    expect(r.code).toBe('TRANSACTION_EXPIRATION_ERROR');
    const other = await TronResponder.start();
    try {
      other.fund(a.address, 5 * TRX);
      const fresh = await signedTransfer(a, account().address, 1000);
      const res = await fetch(`${other.url}/wallet/broadcasttransaction`, {
        method: 'POST',
        body: JSON.stringify(fresh),
      });
      const body = (await res.json()) as Record<string, string>;
      expect(body.code).toBe('TAPOS_ERROR');
    } finally {
      await other.close();
    }
  });

  it('refuses an account that cannot pay the bandwidth (BANDWITH_ERROR) or has no account', async () => {
    const a = account();
    const to = account().address;
    node.fund(to, 1);
    node.fund(a.address, 1000 + 50);
    const signed = await signedTransfer(a, to, 1000);
    expect((await post('/wallet/broadcasttransaction', signed)).code).toBe('BANDWITH_ERROR');
    const b = account();
    const created = await post('/wallet/createtransaction', {
      owner_address: b.address,
      to_address: to,
      amount: 1,
      visible: true,
    });
    expect(created.Error).toMatch(/no OwnerAccount/);
  });

  it('runs TRC-20 balanceOf, decimals and transfer; a transfer over the balance is included as REVERT', async () => {
    const a = account();
    const to = account().address;
    node.fund(a.address, 100 * TRX);
    const token = node.deployToken({ symbol: 'USDT', decimals: 6 });
    node.mintToken(token, a.address, 5_000_000n);
    const param = TronWeb.address.toHex(a.address).slice(2).padStart(64, '0');
    const bal = await post('/wallet/triggerconstantcontract', {
      owner_address: a.address,
      contract_address: token,
      function_selector: 'balanceOf(address)',
      parameter: param,
      visible: true,
    });
    expect(BigInt(`0x${bal.constant_result[0]}`)).toBe(5_000_000n);
    const dec = await post('/wallet/triggerconstantcontract', {
      owner_address: a.address,
      contract_address: token,
      function_selector: 'decimals()',
      visible: true,
    });
    expect(parseInt(dec.constant_result[0], 16)).toBe(6);
    const send = async (amount: bigint) => {
      const call = await post('/wallet/triggersmartcontract', {
        owner_address: a.address,
        contract_address: token,
        function_selector: 'transfer(address,uint256)',
        parameter:
          TronWeb.address.toHex(to).slice(2).padStart(64, '0') + amount.toString(16).padStart(64, '0'),
        fee_limit: 50 * TRX,
        visible: true,
      });
      expect(call.result).toEqual({ result: true });
      const signed = utils.crypto.signTransaction(a.pk, call.transaction) as unknown as Record<string, any>;
      expect((await post('/wallet/broadcasttransaction', signed)).result).toBe(true);
      return signed.txID as string;
    };
    const ok = await send(3_000_000n);
    const reverted = await send(3_000_000n);
    node.produceBlock();
    const i1 = await post('/wallet/gettransactioninfobyid', { value: ok });
    expect(i1.receipt).toMatchObject({
      result: 'SUCCESS',
      energy_usage_total: node.fees.energyTransferNewHolder,
    });
    const i2 = await post('/wallet/gettransactioninfobyid', { value: reverted });
    expect(i2).toMatchObject({ result: 'FAILED', receipt: { result: 'REVERT' } });
    expect(i2.fee).toBeGreaterThan(0);
    expect(node.tokenBalance(token, to)).toBe(3_000_000n);
    expect(node.tokenBalance(token, a.address)).toBe(2_000_000n);
    expect(await post('/wallet/getcontract', { value: account().address, visible: true })).toEqual({});
  });

  it('runs a TRC-20 transfer whose fee limit is under its energy as OUT_OF_ENERGY', async () => {
    const a = account();
    node.fund(a.address, 100 * TRX);
    const token = node.deployToken({ symbol: 'TK', decimals: 6 });
    node.mintToken(token, a.address, 5_000_000n);
    const call = await post('/wallet/triggersmartcontract', {
      owner_address: a.address,
      contract_address: token,
      function_selector: 'transfer(address,uint256)',
      parameter:
        TronWeb.address.toHex(account().address).slice(2).padStart(64, '0') +
        1n.toString(16).padStart(64, '0'),
      fee_limit: TRX,
      visible: true,
    });
    const signed = utils.crypto.signTransaction(a.pk, call.transaction) as unknown as Record<string, any>;
    expect((await post('/wallet/broadcasttransaction', signed)).result).toBe(true);
    node.produceBlock();
    const info = await post('/wallet/gettransactioninfobyid', { value: signed.txID });
    expect(info.receipt.result).toBe('OUT_OF_ENERGY');
    expect(node.tokenBalance(token, a.address)).toBe(5_000_000n);
  });

  it('a dry run of a blacklisted sender reverts with the ABI-encoded reason; an old token returns false', async () => {
    const a = account();
    const to = account().address;
    node.fund(a.address, 100 * TRX);
    const token = node.deployToken({ symbol: 'USDT', decimals: 6 });
    node.mintToken(token, a.address, 5_000_000n);
    const transferParam = (amount: bigint) =>
      TronWeb.address.toHex(to).slice(2).padStart(64, '0') + amount.toString(16).padStart(64, '0');
    node.blacklist(token, a.address);
    const dry = await post('/wallet/triggerconstantcontract', {
      owner_address: a.address,
      contract_address: token,
      function_selector: 'transfer(address,uint256)',
      parameter: transferParam(1n),
      visible: true,
    });
    expect(dry.transaction.ret).toEqual([{ ret: 'FAILED' }]);
    expect(text(dry.result.message)).toBe('REVERT opcode executed');
    const [reason] = utils.abi.decodeParams([], ['string'], `0x${dry.constant_result[0].slice(8)}`, true);
    expect(dry.constant_result[0].slice(0, 8)).toBe('08c379a0');
    expect(reason).toBe('Blacklistable: account is blacklisted');
    // A token that answers false on a shortfall: the call succeeds, returns 0 and moves nothing.
    const old = node.deployToken({ symbol: 'OLD', decimals: 6, shortfall: 'false' });
    node.mintToken(old, a.address, 1n);
    const call = await post('/wallet/triggersmartcontract', {
      owner_address: a.address,
      contract_address: old,
      function_selector: 'transfer(address,uint256)',
      parameter: transferParam(2n),
      fee_limit: 50 * TRX,
      visible: true,
    });
    const signed = utils.crypto.signTransaction(a.pk, call.transaction) as unknown as Record<string, any>;
    expect((await post('/wallet/broadcasttransaction', signed)).result).toBe(true);
    node.produceBlock();
    const info = await post('/wallet/gettransactioninfobyid', { value: signed.txID });
    expect(info.receipt.result).toBe('SUCCESS');
    expect(BigInt(`0x${info.contractResult[0]}`)).toBe(0n);
    expect(node.tokenBalance(old, a.address)).toBe(1n);
  });

  it('the solidity API lags the head by the configured blocks', async () => {
    node.setSolidLag(2);
    const a = account();
    node.fund(a.address, 10 * TRX);
    const signed = await signedTransfer(a, account().address, TRX);
    expect((await post('/wallet/broadcasttransaction', signed)).result).toBe(true);
    const b = node.produceBlock();
    expect((await post('/wallet/gettransactioninfobyid', { value: signed.txID })).blockNumber).toBe(b.number);
    expect(await post('/walletsolidity/gettransactioninfobyid', { value: signed.txID })).toEqual({});
    expect((await post('/walletsolidity/getnowblock')).block_header.raw_data.number).toBe(b.number - 2);
    node.produceBlock();
    node.produceBlock();
    expect((await post('/walletsolidity/getnowblock')).block_header.raw_data.number).toBe(b.number);
    const solid = await post('/walletsolidity/gettransactioninfobyid', { value: signed.txID });
    expect(solid.blockNumber).toBe(b.number);
  });

  it('answers 503 when told to, then answers again', async () => {
    node.failNext(1, 503);
    const res = await fetch(`${node.url}/wallet/getnowblock`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(503);
    expect((await post('/wallet/getnowblock')).blockID).toMatch(/^[0-9a-f]{64}$/);
  });
});
