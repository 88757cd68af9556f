import fs from 'node:fs';
import path from 'node:path';
import { type CapturedMessage, type SmtpCapture, startSmtpServer } from '@custos/testing';

// The shared meshes of a test run send their e-mail here. Spec files run in other processes (jest
// workers) than the one that started the meshes, so each message becomes a JSON file in a folder
// every spec can read, written before the server says 250: a message is there by the time the
// request that sent it has been answered, as with @custos/testing's in-process capture.

/** A running spool server. */
export interface MailSpool {
  port: number;
  /** An SMTP_URL with credentials that reaches it. */
  url(username: string, password: string): string;
  close(): Promise<void>;
}

/**
 * Starts an SMTP server on 127.0.0.1 (free port) that requires AUTH PLAIN or LOGIN, accepts any
 * credentials, and writes every message to `<dir>/<seq>.json`. For tests only (no STARTTLS).
 */
export async function startMailSpool(dir: string): Promise<MailSpool> {
  fs.mkdirSync(dir, { recursive: true });
  let seq = 0;
  const server = await startSmtpServer((message) => {
    const name = `${String((seq += 1)).padStart(8, '0')}.json`;
    // Written whole, then renamed: a reader never sees half a message.
    fs.writeFileSync(path.join(dir, `.${name}`), JSON.stringify(message));
    fs.renameSync(path.join(dir, `.${name}`), path.join(dir, name));
  });
  return {
    port: server.port,
    url: (username, password) =>
      `smtp://${encodeURIComponent(username)}:${encodeURIComponent(password)}@127.0.0.1:${server.port}`,
    close: () => server.close(),
  };
}

/**
 * The messages in a spool folder, as the SmtpCapture of @custos/testing: `messages` lists what has
 * arrived so far (the same object each time for the same message), `waitForMessage` polls.
 * `close` does nothing: the spool belongs to the test run.
 */
export function readMailSpool(dir: string, spool: { port: number; url: string }): SmtpCapture {
  const seen = new Map<string, CapturedMessage>();
  const messages = (): CapturedMessage[] => {
    for (const name of fs.readdirSync(dir).sort()) {
      if (name.startsWith('.') || seen.has(name)) continue;
      const m = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as CapturedMessage;
      seen.set(name, { ...m, receivedAt: new Date(m.receivedAt) });
    }
    return [...seen.values()];
  };
  return {
    port: spool.port,
    // The meshes were started with this one; every spec reads the same spool.
    url: () => spool.url,
    get messages() {
      return messages();
    },
    async waitForMessage(predicate = () => true, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = messages().find(predicate);
        if (found) return found;
        if (Date.now() > deadline) {
          throw new Error(`no matching e-mail within ${timeoutMs} ms (${seen.size} in the shared spool)`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: async () => undefined,
  };
}
