import type { TokenVerifier } from '@custos/auth';
import type { AccountServiceServer } from '@custos/proto/custos/identity/v1/account';
import type { AsyncService, Database, Logger } from '@custos/service-kit';
import type { Mailer } from '../mail/mailer.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import type { UserStore } from '../users/user-store.js';
import { accountGrpc } from './account-grpc.js';
import { AccountStore } from './account-store.js';
import { DeletionService } from './deletion-service.js';
import { EmailChangeService } from './email-change-service.js';
import { PasswordService } from './password-service.js';
import { QuotaService } from './quota-service.js';
import { ReauthService } from './reauth-service.js';
import { SettingsService } from './settings-service.js';

export { AccountServiceService } from '@custos/proto/custos/identity/v1/account';

/**
 * The account slice wired from the composition root's shared pieces, so that main.ts registers it
 * with one line: `rt.grpc.add(AccountServiceService, accountService({...}))`.
 */
export function accountService(deps: {
  db: Database;
  users: UserStore;
  revocations: RevocationStore;
  mailer: Mailer;
  verifier: TokenVerifier;
  publicBaseUrl: string;
  logger: Logger;
}): AsyncService<AccountServiceServer> {
  const store = new AccountStore(deps.db);
  const reauth = new ReauthService(store, deps.users, deps.logger);
  return accountGrpc({
    passwords: new PasswordService(
      store,
      deps.users,
      reauth,
      deps.revocations,
      deps.mailer,
      { publicBaseUrl: deps.publicBaseUrl },
      deps.logger,
    ),
    reauth,
    emailChange: new EmailChangeService(store, deps.users, deps.mailer, deps.logger),
    deletion: new DeletionService(store, reauth, deps.revocations, deps.logger),
    settings: new SettingsService(store),
    quota: new QuotaService(store),
    verifier: deps.verifier,
  });
}
