"""The web page's security headers: what a browser may load, frame and cache of it.

    app.add_middleware(PageSecurityMiddleware)     # every /ui response

Each page response gets a fresh nonce (``request.state.csp_nonce``) that its one inline style
and script carry, and a Content-Security-Policy that allows nothing else: no other script, no
framing (clickjacking a Forget button), no form posted elsewhere. The page shows a tenant's
conversations, so no response of it is cached or sniffed, and no other site gets it as a
referrer.
"""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["PAGE_PREFIX", "PageSecurityMiddleware", "csp"]

PAGE_PREFIX = "/ui"


def csp(nonce: str) -> str:
    """The page's policy: its own nonce'd style and script, fetches to itself only."""
    return (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
        "connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    )


class PageSecurityMiddleware:
    """Adds the page's headers to every response under `PAGE_PREFIX`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PAGE_PREFIX and not path.startswith(PAGE_PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(18)
        scope.setdefault("state", {})["csp_nonce"] = nonce
        headers = [
            (b"content-security-policy", csp(nonce).encode()),
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"cache-control", b"no-store"),
            (b"referrer-policy", b"same-origin"),  # no-referrer would make Origin "null"
        ]

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"
                ]
                message = {**message, "headers": [*kept, *headers]}
            await send(message)

        await self.app(scope, receive, secured)
