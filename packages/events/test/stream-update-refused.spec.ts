import { randomBytes } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import { type TestNatsServer, testNatsServer, waitFor } from '@custos/service-kit/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import {
  NATS_SERVICES,
  type NatsService,
  NatsLink,
  inboxPrefixOf,
  natsServerConfig,
  serviceNatsUsers,
} from '../src';

const MiB = 1024 * 1024;
const isError = (l: { level: string }) => l.level === 'error' || l.level === 'fatal';

// The chart's secured install: each service's NATS user may create the stream but not update it
// ($JS.API.STREAM.UPDATE.<stream> is not in its permissions). A stream made before a setting
// (here: no byte limit, then NATS_STREAM_MAX_BYTES) is asked to change on every connect; NATS
// refuses the request, and also sends the connection an asynchronous permissions violation.
// That refusal is expected and the note says what to run: one warning, never an error, and not
// again on each reconnect.
describe('a secured NATS user without stream-edit rights (real nats-server)', () => {
  const stream = `UPD_${randomBytes(4).toString('hex').toUpperCase()}`;
  const prefix = `upd.${stream.toLowerCase()}`;
  const where = { prefix, stream };
  const passwords = Object.fromEntries(
    Object.keys(NATS_SERVICES).map((s) => [s, randomBytes(12).toString('hex')]),
  ) as Record<NatsService, string>;
  const adminPassword = randomBytes(12).toString('hex');
  let server: TestNatsServer;

  beforeAll(async () => {
    server = await testNatsServer(undefined, ({ port, storeDir }) =>
      natsServerConfig({
        host: '127.0.0.1',
        port,
        storeDir,
        users: [
          ...serviceNatsUsers(where, passwords),
          { user: 'admin', password: adminPassword }, // the operator, who may edit streams
        ],
      }),
    );
    await server.start();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('logs the refused stream update once, as a warning with the command, and no error on reconnects', async () => {
    // An older release's stream: no byte limit, discard old.
    const admin = await connect({ servers: server.url, user: 'admin', pass: adminPassword });
    const ajsm = await jetstreamManager(admin);
    await ajsm.streams.add({ name: stream, subjects: [`${prefix}.>`], deny_delete: true, deny_purge: true });
    await admin.close();

    const lines: Array<{ level: string; msg: string; err?: { message?: string } }> = [];
    const logger = createLogger({
      service: 'policy',
      level: 'debug',
      destination: { write: (l: string) => lines.push(JSON.parse(l) as (typeof lines)[number]) },
    });
    const link = new NatsLink(
      [server.url],
      { stream, subjectPrefix: prefix, maxBytes: 16 * MiB },
      logger,
      'policy',
      { user: 'policy', password: passwords.policy, inboxPrefix: inboxPrefixOf('policy') },
    );
    link.start();
    try {
      const ready = async () => {
        await waitFor(
          async () => (await link.ready().catch(() => undefined)) !== undefined && link.isConnected(),
          15000,
          100,
        );
      };
      await ready();
      // The asynchronous -ERR from the server arrives after the request failed: give it time.
      await new Promise((r) => setTimeout(r, 500));

      const refused = lines.filter((l) => /NATS refused the change/.test(l.msg));
      expect(refused).toHaveLength(1);
      expect(refused[0]!.level).toBe('warn');
      expect(refused[0]!.msg).toContain(`Run: nats stream edit ${stream} --max-bytes 16777216 --discard new`);
      expect(lines.filter((l) => isError(l))).toEqual([]);

      // A reconnect (the server restarts) checks the stream again and is refused again.
      await server.stop();
      await waitFor(async () => !link.isConnected(), 10000, 50);
      await server.start();
      await ready();
      await new Promise((r) => setTimeout(r, 500));
      expect(lines.some((l) => l.msg === 'NATS reconnected')).toBe(true);
      // Refused again (said at debug level only), and the server's violation each time too.
      const again = lines.filter((l) => /NATS refused the change/.test(l.msg));
      expect(again.map((l) => l.level)).toEqual(['warn', 'debug']);
      expect(lines.filter((l) => l.msg === 'NATS refused the stream update (expected)')).toHaveLength(2);
      expect(lines.filter((l) => isError(l))).toEqual([]);

      // Any other refusal is still an error: a publish this user may not make.
      const { js } = (await link.ready())!;
      await js.publish(`${prefix}.nobody.published`, new Uint8Array(1)).catch(() => undefined);
      await waitFor(async () => lines.some((l) => isError(l)), 5000, 50);
      expect(lines.filter((l) => isError(l)).map((l) => l.msg)).toEqual(['NATS refused an operation']);
    } finally {
      await link.close();
    }
    // The stream is untouched: the operator runs the command.
    const check = await connect({ servers: server.url, user: 'admin', pass: adminPassword });
    expect((await (await jetstreamManager(check)).streams.info(stream)).config.max_bytes).toBe(-1);
    await check.close();
  });
});
