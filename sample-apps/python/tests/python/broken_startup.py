"""A FastAPI application whose lifespan startup fails: the bridge must
refuse it, naming the message (tests/e2e/asgi_lifespan.rs)."""

from contextlib import asynccontextmanager

from fastapi import FastAPI


@asynccontextmanager
async def lifespan(app):
    raise RuntimeError("the database is unreachable: startup failed on purpose")
    yield  # never reached


app = FastAPI(lifespan=lifespan)


@app.get("/hello")
async def hello():
    return "never served"
