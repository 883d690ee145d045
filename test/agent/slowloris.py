#!/usr/bin/env python3
"""test/agent/slowloris.py PORT N SRC HOLD: a slowloris client (issue 31).

Opens N TCP connections from the loopback address SRC to 127.0.0.1:PORT,
each sending half a request header, and prints "opened K" (those the agent
accepted: the rest it refused or closed at once). For HOLD seconds it then
trickles one more header byte on each every second (the kind of client a
timeout alone does not stop), then goes silent and waits up to 30 s for the
agent to close them, printing "closed C of K" and "refused R". Python's
socket module only (the standard library)."""
import select
import socket
import sys
import time

port, n, src, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
socks = []
refused = 0
for _ in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow")
        socks.append(s)
    except OSError:
        refused += 1
        s.close()


def gone(s):
    """The agent closed s (EOF or reset)."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# connections the agent took and closed at once (over its limits) are refused too
time.sleep(0.5)
held = [s for s in socks if not gone(s)]
refused += len(socks) - len(held)
print("opened %d" % len(held), flush=True)
end = time.monotonic() + hold
while time.monotonic() < end:
    time.sleep(1)
    for s in held:
        try:
            s.send(b"x")
        except OSError:
            pass
closed = 0
end = time.monotonic() + 30
while time.monotonic() < end:
    closed = sum(1 for s in held if gone(s))
    if closed == len(held):
        break
    time.sleep(0.2)
print("closed %d of %d" % (closed, len(held)), flush=True)
print("refused %d" % refused, flush=True)
