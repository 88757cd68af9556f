/** A stored webhook, secret still sealed. */
export interface WebhookRecord {
  id: string;
  orgId: string;
  url: string;
  events: string[];
  description: string;
  isActive: boolean;
  secretSealed: string;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
}

/** A webhook as the service hands it out: never its secret, sealed or not. */
export type Webhook = Omit<WebhookRecord, 'secretSealed'>;

/** The fields of a new webhook; the URL is judged by the destination rules separately. */
export interface WebhookInput {
  url: string;
  events: string[];
  /** Empty for none. */
  description: string;
}

/** A change to a webhook: absent fields are left unchanged; at least one is present. */
export interface WebhookPatch {
  url?: string;
  events?: string[];
  /** Empty clears it. */
  description?: string;
  isActive?: boolean;
}

/** Where a delivery stands. */
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

/** One try at sending a delivery. */
export interface DeliveryAttempt {
  attempt: number;
  /** Null when no response arrived. */
  statusCode: number | null;
  durationMs: number;
  /** Empty on success. */
  error: string;
  attemptedAt: Date;
}

/** A stored delivery with its attempts. */
export interface DeliveryRecord {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attemptCount: number;
  /** Meaningful while pending only. */
  nextAttemptAt: Date;
  createdAt: Date;
  completedAt: Date | null;
  attempts: DeliveryAttempt[];
}

/** Which deliveries of a webhook to list. */
export interface DeliveryQuery {
  /** 1..1000. */
  limit: number;
  /** 0 or more. */
  offset: number;
  /** Only deliveries in this status; all when absent. */
  status?: DeliveryStatus;
}

/** A page of deliveries, newest first, with the number that match in all. */
export interface DeliveryPage {
  deliveries: DeliveryRecord[];
  count: number;
}
