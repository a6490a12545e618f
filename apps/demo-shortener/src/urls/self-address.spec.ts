import { isLocalHost, normalizeHost, SelfAddress } from './self-address';

const self = (publicBaseUrl: string, ports: number[] = [3000]) =>
  new SelfAddress({ publicBaseUrl, ports, machineHosts: ['myhost', '10.1.2.3', 'fe80::1'] });
const is = (a: SelfAddress, url: string, origin = {}) => a.matches(new URL(url), origin);

describe('isLocalHost', () => {
  it.each([
    'localhost',
    'LOCALHOST',
    'localhost.',
    'app.localhost',
    '127.0.0.1',
    '127.1.2.3',
    '127.255.255.254',
    '0.0.0.0',
    '[::1]',
    '::1',
    '[::]',
    '[::ffff:7f00:1]',
    '[::ffff:7f01:203]',
    '[::ffff:0:0]',
    '[::7f00:1]',
  ])('%s is this machine', (host) => {
    expect(isLocalHost(host)).toBe(true);
  });

  it.each([
    'example.com',
    '128.0.0.1',
    '10.0.0.1',
    '[::2]',
    '[::ffff:a00:1]',
    'localhost.example.com',
  ])('%s is not', (host) => {
    expect(isLocalHost(host)).toBe(false);
  });
});

describe('normalizeHost', () => {
  it('lower-cases, drops brackets and trailing dots', () => {
    expect(normalizeHost('Sho.RT..')).toBe('sho.rt');
    expect(normalizeHost('[::1]')).toBe('::1');
  });
});

describe('SelfAddress', () => {
  const app = self('https://sho.rt');

  it.each([
    // Every spelling WHATWG URL parsing gives of loopback on the app's port.
    'http://127.0.0.1:3000/x',
    'http://127.1:3000/x',
    'http://127.9.8.7:3000/x',
    'http://2130706433:3000/x',
    'http://0x7f.1:3000/x',
    'http://[::1]:3000/x',
    'http://[0:0:0:0:0:0:0:1]:3000/x',
    'http://[::ffff:127.0.0.1]:3000/x',
    'http://[::127.0.0.1]:3000/x',
    'http://0.0.0.0:3000/x',
    'http://0:3000/x',
    'http://[::]:3000/x',
    'http://localhost:3000/x',
    'http://localhost.:3000/x',
    'http://LocalHost..:3000/x',
    'https://localhost:3000/x',
    // This machine's own name and addresses on the app's port.
    'http://myhost:3000/x',
    'http://MYHOST.:3000/x',
    'http://10.1.2.3:3000/x',
    'http://[fe80::1]:3000/x',
    // The public host: any port, any scheme, any case, a trailing dot.
    'https://sho.rt/abc',
    'http://sho.rt/abc',
    'https://SHO.RT./abc',
    'https://sho.rt:8443/abc',
  ])('refuses %s', (url) => {
    expect(is(app, url)).toBe(true);
  });

  it.each([
    'http://127.0.0.1:8080/x',
    'http://localhost:8080/x',
    'http://[::1]:5432/x',
    'http://127.0.0.1/x', // port 80: another service
    'https://sho.rt.example.com/',
    'https://example.com:3000/',
    'http://10.1.2.4:3000/',
  ])('allows %s', (url) => {
    expect(is(app, url)).toBe(false);
  });

  it('counts the port the request came in on, and the host name the client used', () => {
    expect(is(app, 'http://127.0.0.1:41234/x')).toBe(false);
    expect(is(app, 'http://127.0.0.1:41234/x', { localPort: 41234 })).toBe(true);
    expect(is(app, 'http://edge.internal:41234/x', { localPort: 41234 })).toBe(false);
    expect(
      is(app, 'http://EDGE.internal.:41234/x', {
        localPort: 41234,
        hostHeader: 'edge.internal:41234',
      }),
    ).toBe(true);
  });

  it('with a loopback public base (the default), refuses its port and allows other local ports', () => {
    const dev = self('http://localhost:3000', [3000]);
    expect(is(dev, 'http://localhost:3000/x')).toBe(true);
    expect(is(dev, 'http://127.0.0.1:3000/x')).toBe(true);
    expect(is(dev, 'http://localhost:8080/x')).toBe(false);
  });

  it('refuses the public port on this machine even when PORT differs (behind a local proxy)', () => {
    const proxied = self('http://localhost:8080', [3000]);
    expect(is(proxied, 'http://127.0.0.1:8080/x')).toBe(true);
    expect(is(proxied, 'http://127.0.0.1:3000/x')).toBe(true);
  });
});
