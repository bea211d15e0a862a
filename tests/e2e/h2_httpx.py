"""Python's httpx over HTTP/2 against a running stoa, as a browser would.

    python3 h2_httpx.py [--ca FILE] BASE_URL N

With one httpx AsyncClient (HTTP/2 only: ALPN `h2` for https://, prior
knowledge for http://), sends N GET BASE_URL/article at once (N streams on
one connection, as a browser loads a page's resources), then a POST of
100 KB to BASE_URL/_environ/upload. Prints `versions V`, `statuses S` (the
distinct HTTP versions and statuses of the N answers), `article BODY` (the
first one's body), and for the POST `post STATUS VERSION BODY_LENGTH` with
the version and body length the environ app saw. Exit status 3 if httpx
(or its h2 extra) is missing.
"""

import argparse
import asyncio
import sys

try:
    import h2  # noqa: F401 - httpx's HTTP/2 needs it
    import httpx
except ImportError:
    print("python3 -m pip install 'httpx[http2]'", file=sys.stderr)
    sys.exit(3)


async def main(args):
    async with httpx.AsyncClient(http1=False, http2=True, verify=args.ca or True, timeout=30) as client:
        answers = await asyncio.gather(*(client.get(f"{args.base}/article") for _ in range(args.n)))
        print("versions", " ".join(sorted({r.http_version for r in answers})))
        print("statuses", " ".join(sorted({str(r.status_code) for r in answers})))
        print("article", answers[0].text.strip())
        posted = await client.post(f"{args.base}/_environ/upload", content=b"x" * 100_000)
        seen = posted.json()
        print("post", posted.status_code, seen["version"], seen["body_length"])


parser = argparse.ArgumentParser()
parser.add_argument("--ca", help="the CA file that signed the host's certificate")
parser.add_argument("base")
parser.add_argument("n", type=int)
asyncio.run(main(parser.parse_args()))
