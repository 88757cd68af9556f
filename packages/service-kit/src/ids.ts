const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `id` is a UUID, in either case (an id that is not cannot name any row). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}
