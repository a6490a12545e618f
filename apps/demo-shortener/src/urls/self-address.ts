import { BlockList, isIP } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';

/**
 * Addresses that reach this machine from itself whatever the port: IPv4 loopback (127.0.0.0/8),
 * the unspecified addresses (0.0.0.0 and ::, which connect to the local host), IPv6 loopback,
 * and their IPv4-mapped (::ffff:127.0.0.1) and IPv4-compatible (::127.0.0.1) spellings.
 */
const LOCAL_ADDRESSES = new BlockList();
LOCAL_ADDRESSES.addSubnet('127.0.0.0', 8, 'ipv4');
LOCAL_ADDRESSES.addAddress('0.0.0.0', 'ipv4');
LOCAL_ADDRESSES.addAddress('::1', 'ipv6');
LOCAL_ADDRESSES.addAddress('::', 'ipv6');
LOCAL_ADDRESSES.addSubnet('::7f00:0', 104, 'ipv6');

/** A host name as URLs compare: lower case, no IPv6 brackets, no trailing dots (`sho.rt.` is `sho.rt`). */
export function normalizeHost(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.+$/, '');
}

/** The port a URL connects to: its own, else its scheme's default. */
export function effectivePort(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/** Loopback or unspecified, in any spelling WHATWG URL parsing leaves (it already turns 127.1, 0x7f.1 and 2130706433 into 127.0.0.1). */
export function isLocalHost(host: string): boolean {
  const h = normalizeHost(host);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const family = isIP(h);
  return family !== 0 && LOCAL_ADDRESSES.check(h, family === 4 ? 'ipv4' : 'ipv6');
}

/** The names and addresses of this machine (host name, every interface address). */
export function machineHosts(): string[] {
  const hosts = [hostname()];
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) hosts.push(a.address);
  }
  return hosts;
}

export interface SelfAddressOptions {
  /** PUBLIC_BASE_URL: its host is this app on any port and scheme (a proxy may redirect http to https). */
  publicBaseUrl: string;
  /** Ports this app answers on: PORT (when not 0) and whatever else is known. */
  ports: number[];
  /** Names and addresses of this machine besides loopback (default: machineHosts()). */
  machineHosts?: string[];
}

/** Where a request reached the app: the port it came in on and the host name the client used. */
export interface RequestOrigin {
  localPort?: number;
  hostHeader?: string;
}

/**
 * Decides whether a URL points at this app itself, so that shortening it would make a link
 * that redirects to the shortener (a loop, or a way to chain short links). A URL is the app
 * when its host is the public host (any port), or when its host is this machine (loopback in
 * any spelling, 0.0.0.0, the host name, an interface address, the Host the client used) and
 * its port is one the app answers on. Other ports of this machine are other services.
 */
export class SelfAddress {
  private readonly publicHost: string;
  private readonly publicIsLocal: boolean;
  private readonly ports: Set<number>;
  private readonly hosts: Set<string>;

  constructor(options: SelfAddressOptions) {
    const base = new URL(options.publicBaseUrl);
    this.publicHost = normalizeHost(base.hostname);
    this.publicIsLocal = isLocalHost(this.publicHost);
    this.ports = new Set([...options.ports.filter((p) => p > 0), effectivePort(base)]);
    this.hosts = new Set((options.machineHosts ?? machineHosts()).map(normalizeHost));
  }

  matches(url: URL, origin: RequestOrigin = {}): boolean {
    const host = normalizeHost(url.hostname);
    if (host === this.publicHost && !this.publicIsLocal) return true;
    const port = effectivePort(url);
    const ports = new Set(this.ports);
    if (origin.localPort) ports.add(origin.localPort);
    if (!ports.has(port)) return false;
    if (host === this.publicHost || isLocalHost(host) || this.hosts.has(host)) return true;
    return origin.hostHeader !== undefined && host === hostOfHeader(origin.hostHeader);
  }
}

function hostOfHeader(header: string): string | undefined {
  try {
    return normalizeHost(new URL(`http://${header}`).hostname);
  } catch {
    return undefined;
  }
}
