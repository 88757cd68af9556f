import { randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import { testNatsServer, type TestNatsServer } from '@custos/service-kit/testing';
import { DiscardPolicy, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { ensureStream, NatsLink } from '../src/nats';

const MiB = 1024 * 1024;

// The stream settings an operator gives (NATS_STREAM_REPLICAS, NATS_STREAM_MAX_BYTES) against a
// real, single nats-server: it holds byte limits, and refuses replicas > 1 as a non-clustered server.
describe('ensureStream: replicas and max bytes (NATS_STREAM_REPLICAS, NATS_STREAM_MAX_BYTES)', () => {
  let nats: TestNatsServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await testNatsServer();
    await nats.start();
    nc = await connect({ servers: [nats.url] });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  const names = () => {
    const id = randomUUID().replace(/-/g, '').slice(0, 12);
    return { stream: `S_${id}`, subjectPrefix: `p${id}` };
  };

  it('creates a stream with the byte limit and discard new, or unlimited and discard old without one', async () => {
    const s = names();
    expect(await ensureStream(jsm, { ...s, maxBytes: 4 * MiB, replicas: 1 })).toBeUndefined();
    const c = (await jsm.streams.info(s.stream)).config;
    expect(c.max_bytes).toBe(4 * MiB);
    expect(c.discard).toBe(DiscardPolicy.New);
    expect(c.num_replicas).toBe(1);

    const u = names();
    expect(await ensureStream(jsm, { ...u, maxBytes: -1 })).toBeUndefined();
    const uc = (await jsm.streams.info(u.stream)).config;
    expect(uc.max_bytes).toBe(-1);
    expect(uc.discard).toBe(DiscardPolicy.Old);
  });

  it('a full stream refuses the next event and keeps every earlier one (nothing silently dropped)', async () => {
    const s = names();
    await ensureStream(jsm, { ...s, maxBytes: MiB });
    const js = jetstream(nc);
    const body = new Uint8Array(100 * 1024).fill(7);
    let refused: unknown;
    let stored = 0;
    for (let i = 0; i < 20 && !refused; i++) {
      try {
        await js.publish(`${s.subjectPrefix}.x`, body, { msgID: `m${i}` });
        stored++;
      } catch (err) {
        refused = err;
      }
    }
    expect(String(refused)).toMatch(/maximum bytes exceeded/i);
    const state = (await jsm.streams.info(s.stream)).state;
    expect(state.messages).toBe(stored);
    expect(state.first_seq).toBe(1); // the first event is still there
  });

  it('lowers the byte limit of an existing stream (and switches it to discard new); a smaller one is kept', async () => {
    const s = names();
    await ensureStream(jsm, s); // made before the setting: unlimited, discard old
    expect(await ensureStream(jsm, { ...s, maxBytes: 64 * MiB })).toMatch(
      /changed to max bytes 67108864 \(NATS_STREAM_MAX_BYTES; it was unlimited\), discard new/,
    );
    let c = (await jsm.streams.info(s.stream)).config;
    expect(c.max_bytes).toBe(64 * MiB);
    expect(c.discard).toBe(DiscardPolicy.New);
    expect(await ensureStream(jsm, { ...s, maxBytes: 8 * MiB })).toMatch(/max bytes 8388608/);
    expect((await jsm.streams.info(s.stream)).config.max_bytes).toBe(8 * MiB);
    // An operator's smaller limit stays; unlimited in the settings does not lift it either.
    expect(await ensureStream(jsm, { ...s, maxBytes: 64 * MiB })).toBeUndefined();
    expect(await ensureStream(jsm, { ...s, maxBytes: -1 })).toBeUndefined();
    c = (await jsm.streams.info(s.stream)).config;
    expect(c.max_bytes).toBe(8 * MiB);
    expect(c.deny_delete && c.deny_purge).toBe(true);
  });

  it('does not lower the byte limit of a stream that holds more: NATS would delete the oldest events', async () => {
    const s = names();
    await ensureStream(jsm, s);
    const js = jetstream(nc);
    for (let i = 0; i < 30; i++)
      await js.publish(`${s.subjectPrefix}.x`, new Uint8Array(100 * 1024), { msgID: `m${i}` });
    const note = await ensureStream(jsm, { ...s, maxBytes: MiB });
    expect(note).toMatch(
      /holds \d+ bytes, more than NATS_STREAM_MAX_BYTES \(1048576\), so its limit stays unlimited/,
    );
    expect(note).toContain(`nats stream edit ${s.stream} --max-bytes 1048576 --discard new`);
    const info = await jsm.streams.info(s.stream);
    expect(info.config.max_bytes).toBe(-1);
    expect(info.state.messages).toBe(30);
    expect(info.state.first_seq).toBe(1);
  });

  it('a byte limit an operator set with discard old is switched to discard new', async () => {
    const s = names();
    await ensureStream(jsm, s);
    const info = await jsm.streams.info(s.stream);
    await jsm.streams.update(s.stream, { ...info.config, max_bytes: 2 * MiB, discard: DiscardPolicy.Old });
    expect(await ensureStream(jsm, s)).toMatch(/discard new/);
    expect((await jsm.streams.info(s.stream)).config.discard).toBe(DiscardPolicy.New);
  });

  it('a new stream with more replicas than a single server holds is refused with an error naming the setting', async () => {
    const s = names();
    await expect(ensureStream(jsm, { ...s, replicas: 3 })).rejects.toThrow(
      /event stream S_\w+ could not be created \(.*replicas.*\); NATS_STREAM_REPLICAS is 3: it needs a JetStream cluster of at least 3 servers/,
    );
    await expect(jsm.streams.info(s.stream)).rejects.toThrow(/stream not found/);
  });

  it('an existing stream on a single server is used as it is, with a note that it keeps one copy', async () => {
    const s = names();
    await ensureStream(jsm, { ...s, replicas: 1 });
    const note = await ensureStream(jsm, { ...s, replicas: 3, maxBytes: 16 * MiB });
    expect(note).toMatch(/changed to max bytes 16777216 .*discard new/);
    expect(note).toContain(
      `event stream ${s.stream} has 1 copy, fewer than NATS_STREAM_REPLICAS (3): NATS runs as a single server`,
    );
    // Not asked of a single server: it would accept 3 in the configuration and keep one copy.
    expect((await jsm.streams.info(s.stream)).config.num_replicas).toBe(1);
    // More replicas than configured are never lowered: a setting of 1 asks nothing of a stream of 1.
    expect(await ensureStream(jsm, { ...s, replicas: 1, maxBytes: 16 * MiB })).toBeUndefined();
  });

  it('a cluster that refuses more replicas (no stream-edit rights): the stream is used, the note gives the command', async () => {
    const s = names();
    await ensureStream(jsm, { ...s, replicas: 1 });
    // The stream as a three-server cluster reports it, with an account that may not edit streams.
    const refusing = {
      streams: {
        info: async (name: string) => ({
          ...(await jsm.streams.info(name)),
          cluster: { name: 'c1', leader: 'n1', replicas: [] },
        }),
        add: () => Promise.reject(new Error('not expected')),
        update: () =>
          Promise.reject(new Error('Permissions Violation for Publish to "$JS.API.STREAM.UPDATE"')),
      },
    } as unknown as JetStreamManager;
    const note = await ensureStream(refusing, { ...s, replicas: 3, maxBytes: 16 * MiB });
    expect(note).toMatch(
      /should have max bytes 16777216 .*3 replicas \(NATS_STREAM_REPLICAS; it had 1\), but NATS refused the change \(Permissions Violation/,
    );
    expect(note).toContain(
      `Run: nats stream edit ${s.stream} --max-bytes 16777216 --discard new --replicas 3`,
    );
    expect(note).toContain('has 1 copy, fewer than NATS_STREAM_REPLICAS (3); run 3 JetStream servers');
    expect((await jsm.streams.info(s.stream)).config.max_bytes).toBe(-1);
  });

  it('a service whose stream cannot be created stays up: the link is not ready and logs why once', async () => {
    const s = names();
    const lines: string[] = [];
    const logger = createLogger({
      service: 'stream-test',
      destination: { write: (l: string) => lines.push(l) },
    });
    const link = new NatsLink([nats.url], { ...s, replicas: 3 }, logger, 'stream-test');
    link.start();
    try {
      let err: unknown;
      for (let i = 0; i < 50 && !err; i++) {
        await link.ready().catch((e: unknown) => (err = e));
        if (!err) await new Promise((r) => setTimeout(r, 100));
      }
      expect(String(err)).toMatch(/NATS_STREAM_REPLICAS is 3/);
      await expect(link.ready()).rejects.toThrow(/NATS_STREAM_REPLICAS is 3/);
      expect(link.isConnected()).toBe(false);
      const problems = lines.filter((l) => l.includes('event stream not usable'));
      expect(problems).toHaveLength(1);
    } finally {
      await link.close();
    }
  });
});
