#!/usr/bin/env python
"""A TCP proxy that limits the bytes/s flowing back to the client (a slow WAN link to a hub mirror).

Test-bed only: olah serves from local disk at hundreds of MB/s, too fast to stop a download midway;
behind this proxy a test can kill the client while a shard is half-written.
Usage: throttle_proxy.py --listen-port P --target HOST:PORT --rate BYTES_PER_S [--shared] [--port-file F]
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


async def pipe(reader, writer, rate=None, link=None):
    link = link or Link()
    try:
        while True:
            data = await reader.read(64 << 10)
            if not data:
                break
            writer.write(data)
            await writer.drain()
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

    async def handle(cr, cw):
        try:
            ur, uw = await asyncio.open_connection(host, int(port))
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, uw), pipe(ur, cw, args.rate, shared))

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
    ap.add_argument("--shared", action="store_true", help="one rate for all connections together (default: per connection)")
    asyncio.run(main_async(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
