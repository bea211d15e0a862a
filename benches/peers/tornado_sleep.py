"""Tornado peer for the sleep experiment: the same three handlers as Stoa's
demo app (blocking sleep, timer sleep, immediate), one process on one port.

    python3 benches/peers/tornado_sleep.py PORT
"""
import asyncio
import sys
import time

import tornado.ioloop
import tornado.web

BODY = "when i sleep 5s"


class BlockingSleep(tornado.web.RequestHandler):
    def get(self):
        time.sleep(1)  # holds the IOLoop, on purpose
        self.write(BODY)


class TimerSleep(tornado.web.RequestHandler):
    async def get(self):
        await asyncio.sleep(1)  # the IOLoop serves others meanwhile
        self.write(BODY)


class JustNow(tornado.web.RequestHandler):
    def get(self):
        self.write("i hope just now see you")


class Hello(tornado.web.RequestHandler):
    def get(self):
        self.write("Hello World!")


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8888
    app = tornado.web.Application([
        (r"/demo/syncsleep-handler/", BlockingSleep),
        (r"/demo/sleep-handler/", TimerSleep),
        (r"/demo/justnow/", JustNow),
        (r"/hello/", Hello),
    ])
    app.listen(port, address="127.0.0.1")
    tornado.ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
