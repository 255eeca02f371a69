"""What the routes share: the gateway, the key store, the metrics, the settings.

    services = get_services(request)
    tenant = await services.tenant_for(secret, server=request.scope.get("server"))

Built by the app's lifespan (or at once, when a test or a host passes its own gateway), and
kept on ``app.state.services``.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from ..gateway import Gateway
from ..stores.keys import ApiKeyStore
from .errors import ApiError
from .metrics import Metrics
from .settings import LOCAL_TENANT, ServiceSettings

__all__ = ["Services", "get_services", "is_loopback"]

_AUTH_HEADERS = {"WWW-Authenticate": "Bearer"}


@dataclass
class Services:
    """The running service's parts."""

    gateway: Gateway
    keys: ApiKeyStore
    metrics: Metrics
    settings: ServiceSettings
    _keys_seen: bool = field(default=False, repr=False)

    async def keys_required(self) -> bool:
        """True once the database has a key (or the settings demand keys). Keys are never
        deleted, so once True it stays True: the answer is cached."""
        if not self._keys_seen:
            self._keys_seen = self.settings.require_keys or await self.keys.has_api_keys()
        return self._keys_seen

    async def tenant_for(
        self,
        secret: str | None,
        *,
        server: object,
        host: str | None = None,
        session: str | None = None,
    ) -> str:
        """The tenant of a request that presented `secret` (None for no key).

        With keys: the key's tenant (or, for the page, the key of its `session`), else 401
        (the Host is not checked: the key is what proves who asks). Without: the local
        tenant, for a request that came in on loopback *and* names a loopback Host (403
        otherwise): a web page that reaches the server through DNS rebinding names its own
        host. A key sent anyway is ignored, since an
        OpenAI client always sends one.
        """
        if await self.keys_required():
            if not secret and not session:
                raise ApiError(
                    401,
                    "missing API key: send the header 'Authorization: Bearer <key>' "
                    "(create a key with: workingmem keys create --tenant <tenant>)",
                    code="missing_api_key",
                    headers=_AUTH_HEADERS,
                )
            if secret:
                key = await self.keys.find_api_key(secret)
            else:
                assert session is not None
                key = await self.keys.find_page_session(session)
            if key is None or not key.active:
                raise ApiError(
                    401,
                    "invalid API key: it is unknown or was revoked",
                    code="invalid_api_key",
                    headers=_AUTH_HEADERS,
                )
            return key.tenant_id
        if not _served_on_loopback(server) or not _loopback_host(host):
            raise ApiError(
                403,
                "this server has no API keys, so it serves its local tenant on loopback only; "
                "create a key with: workingmem keys create --tenant <tenant>",
                code="loopback_only",
                type="permission_error",
            )
        return LOCAL_TENANT


def get_services(request: HTTPConnection) -> Services:
    """The app's services; 503 before the lifespan has started them."""
    services = getattr(request.app.state, "services", None)
    if not isinstance(services, Services):
        raise ApiError(503, "the service is starting", code="starting", type="server_error")
    return services


@functools.lru_cache(maxsize=256)
def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; remembered, since a keyless server asks
    it of two addresses on every request (a bounded cache: the Host header is the client's)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _loopback_host(host: str | None) -> bool:
    """A Host header that names this machine: ``127.0.0.1:8080``, ``localhost``, ``[::1]:80``
    (a request without one, HTTP/1.0, is local by its socket already)."""
    if host is None:
        return True
    name = host.strip()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name
    else:
        name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
    return is_loopback(name)


def _served_on_loopback(server: object) -> bool:
    """The address the request came in on; None (a Unix socket) is local too."""
    if server is None:
        return True
    if isinstance(server, (tuple, list)) and server:
        return is_loopback(str(server[0]))
    return False
