"""Tornado peer for the WSGI comparison: a WSGI application (the Django hello
project by default) in Tornado's WSGIContainer, one process on one port, the
application called on the IOLoop thread (no executor), as the seed ran it.

    python3 benches/peers/tornado_wsgi.py PORT [PROJECT_DIR [MODULE:CALLABLE]]
"""
import asyncio
import importlib
import os
import sys

import tornado.httpserver
import tornado.wsgi

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.join(HERE, "..", "..", "sample-apps", "python", "examples", "djangohello")


async def main():
    port = int(sys.argv[1])
    project = sys.argv[2] if len(sys.argv) > 2 else PROJECT
    target = sys.argv[3] if len(sys.argv) > 3 else "djangohello.wsgi:application"
    sys.path.insert(0, project)
    module, _, name = target.partition(":")
    application = getattr(importlib.import_module(module), name or "application")
    server = tornado.httpserver.HTTPServer(tornado.wsgi.WSGIContainer(application))
    server.listen(port, address="127.0.0.1")
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
