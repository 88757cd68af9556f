/**
 * Whether a secret path matches a glob of SPEC §2.3 / DECISIONS.md: segments are separated by `/`,
 * `*` matches exactly one segment, `**` zero or more segments, anything else matches itself.
 */
export function pathMatches(pattern: string, path: string): boolean {
  const pat = pattern.split('/');
  const segs = path.split('/');
  // reach[j]: the first i pattern segments can match the first j path segments. O(|pat|·|segs|).
  let reach = new Array<boolean>(segs.length + 1).fill(false);
  reach[0] = true;
  for (const p of pat) {
    const next = new Array<boolean>(segs.length + 1).fill(false);
    if (p === '**') {
      let any = false;
      for (let j = 0; j <= segs.length; j += 1) {
        any = any || reach[j]!;
        next[j] = any;
      }
    } else {
      for (let j = 1; j <= segs.length; j += 1) {
        next[j] = reach[j - 1]! && (p === '*' || p === segs[j - 1]);
      }
    }
    reach = next;
  }
  return reach[segs.length]!;
}

/** Whether any of an agent's JWT scopes covers the path (an empty list covers nothing). */
export function scopesCover(scopes: readonly string[], path: string): boolean {
  return scopes.some((s) => pathMatches(s, path));
}
