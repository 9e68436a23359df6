#!/usr/bin/env python3
"""Checks the RoCEv2 ICRC of every UDP/4791 packet in a pcap, independently of simnic's code.

The ICRC (IBA Annex A17.3.3) is zlib's CRC-32 over: 8 bytes of 0xff (standing for the masked
LRH), the IPv4 header with TOS, TTL and header checksum set to all ones, the UDP header with its
checksum set to all ones, the BTH with byte 4 (FECN/BECN/reserved) set to 0xff, then the rest of
the packet up to the ICRC, which is stored little-endian in the last 4 bytes.

Usage: check_icrc.py FILE.pcap   (Ethernet, Linux cooked (SLL/SLL2), loopback/raw IPv4 captures)
Prints one line per failing packet and a summary; exit status 0 only if every packet verifies.
"""
import struct
import sys
import zlib


def ip_offset(linktype, frame):
    if linktype == 1:  # Ethernet
        return 14 if frame[12:14] == b"\x08\x00" else None
    if linktype == 113:  # Linux cooked v1
        return 16 if frame[14:16] == b"\x08\x00" else None
    if linktype == 276:  # Linux cooked v2
        return 20 if frame[0:2] == b"\x08\x00" else None
    if linktype in (101, 228):  # raw IP
        return 0
    if linktype == 0:  # BSD loopback
        return 4
    return None


def icrc_ok(ip):
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 17 or len(ip) < ihl + 8 + 12 + 4:
        return None
    udp = ip[ihl:]
    if struct.unpack("!H", udp[2:4])[0] != 4791:
        return None
    total = struct.unpack("!H", ip[2:4])[0]
    ip = bytearray(ip[:total])
    udp_end = ihl + 8
    masked = bytearray(ip)
    masked[1] = 0xFF
    masked[8] = 0xFF
    masked[10:12] = b"\xff\xff"
    masked[ihl + 6 : ihl + 8] = b"\xff\xff"
    masked[udp_end + 4] = 0xFF
    body = bytes(masked[:-4])
    want = zlib.crc32(b"\xff" * 8 + body) & 0xFFFFFFFF
    got = struct.unpack("<I", bytes(ip[-4:]))[0]
    return want == got, struct.unpack("!H", ip[4:6])[0], want, got


def main(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    off, n, bad, numbered = 24, 0, 0, 0
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off : off + 16])
        frame = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        o = ip_offset(linktype, frame)
        if o is None:
            continue
        r = icrc_ok(frame[o:])
        if r is None:
            continue
        n += 1
        ok, ip_id, want, got = r
        numbered += ip_id != 0
        if not ok:
            bad += 1
            if bad <= 10:
                print(f"packet {n}: IP id 0x{ip_id:04x}: ICRC 0x{got:08x}, computed 0x{want:08x}")
    # A GSO send's segments carry Identification 0, 1, 2, ... (the kernel numbers them).
    print(f"{n - bad} passed, {bad} failed (RoCEv2 packets in {path}; {numbered} with a non-zero IP Identification)")
    return 0 if n and not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
