"""A stand-in for an LLM provider's HTTP API, for the wiring examples.

The real SDK client is used unchanged; only its transport is replaced: each
request it sends is kept (so an example can check what went over the wire)
and answered with the next response of recorded/. The recorded responses are
hand-written in the shape each provider documents for its API (no network
reaches the providers from the test machines); with an API key, build the
client without `http_client=` and the same code talks to the real service.
"""

import json
from pathlib import Path

import httpx

RECORDED = Path(__file__).parent / "recorded"


class RecordedAPI:
    def __init__(self, *names: str):
        self.responses = [json.loads((RECORDED / name).read_text()) for name in names]
        self.requests: list[dict] = []
        self.headers: list[httpx.Headers] = []

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        self.headers.append(request.headers)
        if not self.responses:
            return httpx.Response(500, json={"error": "no recorded response left"})
        return httpx.Response(200, json=self.responses.pop(0))

    def http_client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self._answer))


def check(name: str, condition: bool, detail: str = "") -> None:
    """Print `ok - name`, or `not ok - name: detail` and exit non-zero."""
    if not condition:
        print(f"not ok - {name}: {detail}")
        raise SystemExit(1)
    print(f"ok - {name}")
