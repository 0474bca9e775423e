import net from 'node:net';

/**
 * CIDR lists in settings (OUTBOUND_HTTP_ALLOW_NETWORKS, TRUSTED_PROXIES): `10.0.0.0/8, 127.0.0.0/8, ::1/128`,
 * a bare address being a single host. Throws naming `setting` when an entry is not a range.
 */
export function parseNetworks(list: string, setting = 'OUTBOUND_HTTP_ALLOW_NETWORKS'): string[] {
  const out: string[] = [];
  for (const raw of list.split(/[\s,]+/).filter(Boolean)) {
    const [address, bits] = raw.split('/');
    const family = net.isIP(address ?? '');
    const prefix = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits);
    if (!family || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32)) {
      throw new Error(`${setting}: "${raw}" is not a CIDR range (such as 127.0.0.0/8)`);
    }
    out.push(`${address}/${prefix}`);
  }
  return out;
}

/** The ranges as a list addresses can be checked against. */
export function networkList(ranges: readonly string[]): net.BlockList {
  const list = new net.BlockList();
  for (const r of ranges) {
    const [address, bits] = r.split('/');
    list.addSubnet(address!, Number(bits), net.isIP(address!) === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

/** The IPv4 address inside an IPv4-mapped IPv6 one (::ffff:127.0.0.1), else the address itself. */
export function unmapped(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? m[1]! : address;
}

/** Whether `address` (either family, IPv4-mapped forms included) is in `list`. */
export function inNetworks(list: net.BlockList, address: string): boolean {
  const a = unmapped(address.trim());
  const family = net.isIP(a);
  return family !== 0 && list.check(a, family === 6 ? 'ipv6' : 'ipv4');
}
