"""The FastAPI app benches/peers/asgi_vs_peers.sh serves from every ASGI server.

GET /hello    text/plain "Hello World!"
GET /article  application/json {"Name":"A Royal Baby","Body":"A slow news week"}
    (the article app's body, byte for byte)
/ws           WebSocket echo: every text or binary message comes back as it came
"""

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, PlainTextResponse

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

ARTICLE = {"Name": "A Royal Baby", "Body": "A slow news week"}


@app.get("/hello")
async def hello():
    return PlainTextResponse("Hello World!")


@app.get("/article")
async def article():
    return JSONResponse(ARTICLE)


@app.websocket("/ws")
async def echo(websocket: WebSocket):
    await websocket.accept()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await websocket.send_text(message["text"])
            else:
                await websocket.send_bytes(message["bytes"])
    except WebSocketDisconnect:
        return
