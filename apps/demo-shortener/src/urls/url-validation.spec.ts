import { SelfAddress } from './self-address';
import { InvalidUrlError, isLookupableCode, validateTargetUrl } from './url-validation';

const self = new SelfAddress({ publicBaseUrl: 'https://sho.rt', ports: [3000], machineHosts: [] });
const check = (body: unknown) => validateTargetUrl(body, (url) => self.matches(url));

describe('validateTargetUrl', () => {
  it('returns the WHATWG-normalized URL', () => {
    expect(check({ url: 'HTTPS://Example.COM' })).toBe('https://example.com/');
    expect(check({ url: '  http://example.com/a b  ' })).toBe('http://example.com/a%20b');
  });

  it.each([
    [null, /JSON object/],
    [[], /JSON object/],
    ['https://example.com', /JSON object/],
    [{}, /no "url"/],
    [{ url: 1 }, /must be a string/],
    [{ url: 'nope' }, /absolute http or https/],
    [{ url: 'mailto:a@example.com' }, /not mailto/],
    [{ url: 'https://a:b@example.com' }, /user name or password/],
    [{ url: 'https://sho.rt/abc' }, /points at this shortener/],
    [{ url: 'http://SHO.RT./abc' }, /points at this shortener/],
    [{ url: 'http://127.0.0.1:3000/abc' }, /points at this shortener/],
    [{ url: 'http://[::1]:3000/abc' }, /points at this shortener/],
    [{ url: `https://example.com/${'x'.repeat(2048)}` }, /limit is 2048/],
  ])('refuses %j', (body, message) => {
    expect(() => check(body)).toThrow(InvalidUrlError);
    expect(() => check(body)).toThrow(message);
  });

  it('allows other hosts and other ports of other hosts', () => {
    expect(check({ url: 'https://sho.rt.example.com/' })).toBe('https://sho.rt.example.com/');
    expect(check({ url: 'http://localhost:8080/x' })).toBe('http://localhost:8080/x');
  });
});

describe('isLookupableCode', () => {
  it('accepts Base62 codes and refuses route names and anything else', () => {
    expect(isLookupableCode('0urls')).toBe(true);
    expect(isLookupableCode('urls')).toBe(false);
    expect(isLookupableCode('metrics')).toBe(false);
    expect(isLookupableCode('a-b')).toBe(false);
  });
});
