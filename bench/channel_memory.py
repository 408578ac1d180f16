#!/usr/bin/env python3
# Usage: bench/channel_memory.py PORT NODE_PID N  (a node started with --set group.default.guest_idle_seconds=3600; ulimit -n > 2N)
# Rough memory per open channel socket: RSS of the node before/after N sockets, each with one open page.
import os, socket, base64, json, struct, sys, time, urllib.request, re
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1]) * 1024
def mint():
    r = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/whoami")
    c = r.headers.get("Set-Cookie"); return re.search(r"troupe_cid=([^;]+)", c).group(1)
def frame(text):
    b = text.encode(); mask = os.urandom(4)
    h = bytes([0x81]) + (bytes([0x80 | len(b)]) if len(b) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(b)))
    return h + mask + bytes(x ^ mask[i % 4] for i, x in enumerate(b))
def read_frame(s):
    h = s.recv(2); ln = h[1] & 0x7f
    if ln == 126: ln = struct.unpack(">H", s.recv(2))[0]
    data = b""
    while len(data) < ln: data += s.recv(ln - len(data))
    return data
cids = [mint() for _ in range(n)]
time.sleep(1); before = rss()
socks = []
for i, cid in enumerate(cids):
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /_troupe/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nCookie: troupe_cid={cid}\r\n\r\n").encode())
    resp = b""
    while b"\r\n\r\n" not in resp: resp += s.recv(4096)
    s.sendall(frame(json.dumps({"id": 1, "page": "p", "path": "/_troupe/openchannel"})))
    r = json.loads(read_frame(s)); assert r["status"] == 200, r
    socks.append(s)
time.sleep(1); after = rss()
print(f"{n} sockets with an open page: RSS {before} -> {after}: {(after - before) / n:.0f} B per socket (node-side user/page records included)")
