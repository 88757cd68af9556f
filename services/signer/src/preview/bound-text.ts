import { keccak256, toUtf8Bytes } from 'ethers';

/** The most bytes of one text (an argument, return data, a revert reason) a preview shows as is. */
export const PREVIEW_TEXT_MAX = 2048;

/**
 * A text of the preview bounded to PREVIEW_TEXT_MAX bytes: a longer one is cut (hex: its first 64
 * bytes; other text: its first 512 characters) and named by its size and keccak-256, as the
 * approval's payload names long call data.
 */
export function boundText(text: string): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= PREVIEW_TEXT_MAX) return text;
  if (/^0x([0-9a-fA-F]{2})*$/.test(text)) {
    return `${text.slice(0, 130)}… (${(text.length - 2) / 2} bytes, keccak256 ${keccak256(text)})`;
  }
  const hash = keccak256(toUtf8Bytes(text));
  return `${text.slice(0, 512)}… (${bytes} bytes of text, keccak256 of its UTF-8 ${hash})`;
}
