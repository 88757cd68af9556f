import { randomUUID } from 'node:crypto';
import { testNatsServer, type TestNatsServer } from '@custos/service-kit/testing';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { ensureStream } from '../src/nats';

const HOUR = 60 * 60 * 1000;

describe('ensureStream: the event stream keeps a message at most NATS_STREAM_MAX_AGE_HOURS', () => {
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

  it('creates a new stream with the max age (the duplicate window fitted inside it)', async () => {
    const s = names();
    expect(await ensureStream(jsm, { ...s, maxAgeMs: 168 * HOUR })).toBeUndefined();
    const c = (await jsm.streams.info(s.stream)).config;
    expect(c.max_age).toBe(nanos(168 * HOUR));
    expect(c.duplicate_window).toBe(nanos(2 * HOUR));
    expect(c.deny_delete && c.deny_purge).toBe(true);

    const short = names();
    await ensureStream(jsm, { ...short, maxAgeMs: HOUR });
    const sc = (await jsm.streams.info(short.stream)).config;
    expect(sc.max_age).toBe(nanos(HOUR));
    expect(sc.duplicate_window).toBe(nanos(HOUR));
  });

  it('lowers an existing stream kept forever or longer, and keeps a shorter one', async () => {
    const s = names();
    await ensureStream(jsm, s); // made the old way: no max age
    expect((await jsm.streams.info(s.stream)).config.max_age).toBe(0);
    expect(await ensureStream(jsm, { ...s, maxAgeMs: 168 * HOUR })).toMatch(/changed to max age 168 h/);
    expect((await jsm.streams.info(s.stream)).config.max_age).toBe(nanos(168 * HOUR));
    expect(await ensureStream(jsm, { ...s, maxAgeMs: 24 * HOUR })).toMatch(/changed to max age 24 h/);
    const c = (await jsm.streams.info(s.stream)).config;
    expect(c.max_age).toBe(nanos(24 * HOUR));
    expect(c.deny_delete && c.deny_purge).toBe(true);
    // An operator's shorter max age stays; the same one is left alone.
    expect(await ensureStream(jsm, { ...s, maxAgeMs: 168 * HOUR })).toBeUndefined();
    expect((await jsm.streams.info(s.stream)).config.max_age).toBe(nanos(24 * HOUR));
  });

  it('still uses a stream NATS refuses to change, and says what the operator should run', async () => {
    const s = names();
    await ensureStream(jsm, s);
    const refusing = {
      streams: {
        info: (name: string) => jsm.streams.info(name),
        add: () => Promise.reject(new Error('not expected')),
        update: () =>
          Promise.reject(new Error('Permissions Violation for Publish to "$JS.API.STREAM.UPDATE"')),
      },
    } as unknown as JetStreamManager;
    const note = await ensureStream(refusing, { ...s, maxAgeMs: 168 * HOUR });
    expect(note).toMatch(/it kept messages forever.*NATS refused the change.*Permissions Violation/);
    expect(note).toContain(`nats stream edit ${s.stream} --max-age 168h`);
    expect((await jsm.streams.info(s.stream)).config.max_age).toBe(0);
  });
});
