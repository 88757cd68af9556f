/** A new vault as a caller asks for it (unchecked; see vault-fns). */
export interface VaultRequest {
  name: string;
  /** Empty for none. */
  description: string;
}
