#!/usr/bin/env python
"""A TCP proxy that limits the bytes/s flowing back to the client (a slow WAN link to a hub mirror).

Test-bed only: olah serves from local disk at hundreds of MB/s, too fast to stop a download midway;
behind this proxy a test can kill the client while a shard is half-written.
Usage: throttle_proxy.py --listen-port P --target HOST:PORT --rate BYTES_PER_S [--shared] [--port-file F]
                         [--stats-file F]
--stats-file: the bytes sent back to clients so far, as {"bytes_to_clients": N, "connections": N}, rewritten
at most every 0.2 s while bytes flow and when a connection ends (how a bench counts what "the hub" served).
--rate 0: no limit (a counting proxy only).
"""
import argparse
import asyncio
import sys
import time
from pathlib import Path


class Link:
    """One shared budget for all connections (--shared): a single WAN link to the mirror."""

    def __init__(self):
        self.sent, self.t0 = 0, None


class Stats:
    """Bytes sent back to the clients, all connections together (--stats-file)."""

    def __init__(self, path):
        self.path, self.bytes, self.connections, self.written = path, 0, 0, 0.0

    def add(self, n):
        self.bytes += n
        if self.path and time.monotonic() - self.written > 0.2:
            self.write()

    def write(self):
        if not self.path:
            return
        self.written = time.monotonic()
        tmp = self.path + ".tmp"
        Path(tmp).write_text('{"bytes_to_clients": %d, "connections": %d}\n' % (self.bytes, self.connections))
        Path(tmp).replace(self.path)


STATS = Stats(None)


async def pipe(reader, writer, rate=None, link=None, count=False):
    link = link or Link()
    try:
        while True:
            data = await reader.read(64 << 10)
            if not data:
                break
            writer.write(data)
            await writer.drain()
            if count:
                STATS.add(len(data))
            if rate:
                now = time.monotonic()
                if link.t0 is None or now - (link.t0 + link.sent / rate) > 1.0:
                    link.t0, link.sent = now, 0  # idle for a while: start a new budget window
                link.sent += len(data)
                delay = link.sent / rate - (time.monotonic() - link.t0)
                if delay > 0:
                    await asyncio.sleep(delay)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main_async(args):
    host, port = args.target.rsplit(":", 1)

    shared = Link() if args.shared else None
    STATS.path = args.stats_file
    STATS.write()

    async def handle(cr, cw):
        try:
            ur, uw = await asyncio.open_connection(host, int(port))
        except OSError:
            cw.close()
            return
        STATS.connections += 1
        await asyncio.gather(pipe(cr, uw), pipe(ur, cw, args.rate, shared, count=True))
        STATS.write()

    server = await asyncio.start_server(handle, args.host, args.listen_port)
    bound = server.sockets[0].getsockname()[1]
    if args.port_file:
        Path(args.port_file).write_text("%d\n" % bound)
    print("throttle proxy :%d -> %s at %d B/s" % (bound, args.target, args.rate), flush=True)
    async with server:
        await server.serve_forever()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--listen-port", type=int, default=0)
    ap.add_argument("--target", required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--port-file")
    ap.add_argument("--stats-file")
    ap.add_argument("--shared", action="store_true", help="one rate for all connections together (default: per connection)")
    asyncio.run(main_async(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
