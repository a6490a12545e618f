import { isValidCode } from '../codes/base62';
import { RESERVED_CODES } from '../codes/code-strategy';

export const MAX_URL_LENGTH = 2048;

/** The input was refused; `message` says why, in words a client can act on. */
export class InvalidUrlError extends Error {
  readonly code = 'INVALID_URL';
}

/**
 * Checks the body of `POST /urls` and returns the URL to store (normalized by WHATWG URL
 * parsing, so `HTTPS://Example.com` and `https://example.com/` are the same URL). `isSelf`
 * says whether a URL points at this app (see SelfAddress).
 */
export function validateTargetUrl(body: unknown, isSelf: (url: URL) => boolean): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidUrlError(
      'The request body must be a JSON object like {"url": "https://example.com/page"}',
    );
  }
  const raw = (body as Record<string, unknown>).url;
  if (raw === undefined || raw === null || raw === '') {
    throw new InvalidUrlError(
      'The JSON body has no "url": send {"url": "https://example.com/page"}',
    );
  }
  if (typeof raw !== 'string') {
    throw new InvalidUrlError(`"url" must be a string, got ${typeof raw}`);
  }
  const input = raw.trim();
  if (input.length > MAX_URL_LENGTH) {
    throw new InvalidUrlError(
      `"url" is ${input.length} characters long; the limit is ${MAX_URL_LENGTH}`,
    );
  }
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw new InvalidUrlError(
      `"url" must be an absolute http or https URL such as https://example.com/page, got "${truncate(input)}"`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidUrlError(
      `"url" must use http or https, not ${url.protocol.replace(/:$/, '')}`,
    );
  }
  if (!url.hostname) {
    throw new InvalidUrlError('"url" has no host name');
  }
  if (url.username || url.password) {
    throw new InvalidUrlError(
      '"url" must not contain a user name or password (user:password@host): short links are public',
    );
  }
  if (isSelf(url)) {
    throw new InvalidUrlError(
      `"url" points at this shortener (${url.host}); shortening a short link would make a redirect loop`,
    );
  }
  if (url.href.length > MAX_URL_LENGTH) {
    throw new InvalidUrlError(
      `"url" is ${url.href.length} characters long once normalized; the limit is ${MAX_URL_LENGTH}`,
    );
  }
  return url.href;
}

/** A code this app could have handed out: Base62, 1..11 characters, not a route name. */
export function isLookupableCode(code: string): boolean {
  return isValidCode(code) && !RESERVED_CODES.has(code);
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
