/** The optional limits of a router key; null means no limit. */
export interface RouterKeyLimits {
  maxConcurrentStreams: number | null;
  spendCapMicroUsd: number | null;
}

/** The public view of a router key (never its secret). */
export interface RouterKey extends RouterKeyLimits {
  id: string;
  agentId: string;
  /** `sk-proxy-v1-` and the key's lookup id. */
  keyPrefix: string;
  createdBy: string;
  createdAt: Date;
  revokedAt: Date | null;
}
