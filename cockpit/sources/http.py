"""The one HTTP layer of the sources: httpx, one kept-alive client per server.

`HttpClient.get`/`post_form` return a whole `Reply` read within a total deadline and a size
cap, or raise `SourceError` with a one-line reason; no credential the client sends can appear
in a reason or an answer's text (`mask`). Proxies come from the environment, as httpx reads them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import socket
import ssl
import time
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import NamedTuple, Protocol
from urllib.parse import quote, quote_plus, urljoin, urlsplit, urlunsplit

import httpx

from cockpit.core.model import SourceFailure
from cockpit.core.text import first_line, visible

RETRY_AFTER_CAP_S = 60.0
"""The longest wait a server's Retry-After can ask for (the poller's back-off cap)."""
CONNECT_TIMEOUT_S = 5.0
"""At most this long to open a connection (the whole request has `timeout`)."""
MAX_BYTES = 64_000_000
"""The largest answer read (a runaway query or label would otherwise fill the memory)."""


class SourceError(SourceFailure):
    """A read failed; `str()` is one line for the user, free of secrets."""

    connect_failed = False
    """Nothing answered the connection (refused, unknown host, TLS)."""


class Credentials(Protocol):
    """Credentials that may change while running (a secret file rotated)."""

    def current(self) -> tuple[str | None, tuple[str, str] | None]:
        """(bearer token, None) or (None, (username, password)) as they are now."""
        ...

    def forget(self) -> None:
        """The server refused them: read them afresh at the next `current`."""
        ...


class Reply(NamedTuple):
    """One HTTP answer, whole; `reason` and `text` masked."""

    status: int
    reason: str
    headers: Mapping[str, str]  # case-insensitive names
    text: str


def redact_url(url: str) -> str:
    """The URL without user:password@."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def secret_forms(bearer: str | None, basic: tuple[str, str] | None) -> tuple[str, ...]:
    """Every form a credential takes on the wire (and percent-encoded), longest first."""
    forms: list[str] = [bearer] if bearer else []
    if basic is not None:
        forms.append(base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode())
        if basic[1]:
            forms.append(basic[1])
    forms += [quote(form, safe="") for form in forms]
    unique = {form for form in forms if len(form) >= 4}
    return tuple(sorted(unique, key=len, reverse=True))


def mask(text: str, secrets: Iterable[str]) -> str:
    """`text` with each secret replaced by ***."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The Retry-After header in seconds (HTTP-date forms are ignored), within [0, cap]."""
    try:
        seconds = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    if math.isnan(seconds):
        return RETRY_AFTER_CAP_S
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def status_error(url: str, reply: Reply) -> SourceError:
    """The failure for an HTTP status >= 400, with the wait the server asked for."""
    retry = retry_after(reply.headers)
    reason = f"{url}: HTTP {reply.status} {one_line(reply.reason)}".rstrip()
    if retry is not None:
        reason += f" (retry after {retry:g} s)"
    return SourceError(reason, retry)


def one_line(text: str) -> str:
    """The first line of a server's `text`, control characters made visible (ESC as ␛)."""
    return visible(first_line(text))


CERT_NOT_YET_VALID, CERT_EXPIRED, HOST_MISMATCH, IP_MISMATCH = 9, 10, 62, 64
"""OpenSSL's verify codes for a certificate out of its dates or for other names."""
NO_CHECK_TIME = 0x200000
"""OpenSSL's X509_V_FLAG_NO_CHECK_TIME: accept a certificate out of its dates (only to read
its dates and names for the reason)."""
LARGE_HEADERS = 16_384
"""Request headers above this size (a huge token or password) are named when a server hangs
up: most servers take 8-64 KB of headers, Go's 1 MB."""


def certificate_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error behind a transport failure, if that is what it is."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause
        if isinstance(cause, BaseExceptionGroup):
            found = {certificate_error(one) for one in cause.exceptions} - {None}
            return found.pop() if len(found) == 1 else None
        cause = cause.__cause__ or cause.__context__
    return None


def certificate_reason(
    error: ssl.SSLCertVerificationError, certificate: Mapping[str, object] | None, host: str
) -> str:
    """Why a certificate was refused: expired (when), not yet valid (from when), for other
    names (which), or not trusted by the CAs used."""
    cert = certificate or {}
    if error.verify_code == CERT_EXPIRED:
        return "TLS certificate expired" + _on(cert.get("notAfter"), " on ")
    if error.verify_code == CERT_NOT_YET_VALID:
        return "TLS certificate not valid yet" + _on(cert.get("notBefore"), ": valid from ")
    if error.verify_code in (HOST_MISMATCH, IP_MISMATCH):
        names = certificate_names(cert)
        return f"TLS certificate is for {', '.join(names) if names else 'other names'}, not {host}"
    return "TLS certificate not trusted (self-signed? set ca_file)"


def _on(when: object, prefix: str) -> str:
    """` on 2024-01-31 00:00 UTC` from a certificate's date, or '' when unknown."""
    if not isinstance(when, str):
        return ""
    try:
        seconds = ssl.cert_time_to_seconds(when)
    except ValueError:
        return f"{prefix}{visible(when)}"
    return prefix + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


def certificate_names(cert: Mapping[str, object]) -> list[str]:
    """The DNS names and IP addresses a certificate is for (its common name without them)."""
    alt = cert.get("subjectAltName")
    names = [str(value) for _, value in alt] if isinstance(alt, tuple) else []
    if not names and isinstance(subject := cert.get("subject"), tuple):
        names = [str(v) for rdn in subject for k, v in rdn if k == "commonName"]
    return [visible(name) for name in names]


async def peer_certificate(url: str, verify: bool | str) -> dict[str, object] | None:
    """The server's certificate as Python decodes it, read past its dates and names (only the
    chain is checked), to say what was wrong with it; None when it can't be had."""
    parts = urlsplit(url)
    if parts.hostname is None:
        return None
    context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    context.check_hostname = False
    context.verify_flags |= NO_CHECK_TIME
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            _, writer = await asyncio.open_connection(
                parts.hostname, parts.port or 443, ssl=context
            )
    except (OSError, TimeoutError, ssl.SSLError, ValueError):
        return None
    try:
        certificate = writer.get_extra_info("peercert")
        return dict(certificate) if certificate else None
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


def redirect_error(url: str, response: httpx.Response, secrets: Iterable[str]) -> SourceError:
    """A redirect is not followed (credentials stay with the URL configured): say where to."""
    asked = str(response.request.url)
    target = urljoin(asked, response.headers.get("location", ""))
    status = response.status_code
    if urlsplit(target)._replace(fragment="") == urlsplit(asked)._replace(fragment=""):
        return SourceError(f"{url}: HTTP {status} redirects to itself (a redirect loop)")
    where = visible(mask(redact_url(target), secrets))
    return SourceError(f"{url}: HTTP {status} redirects to {where}: configure that URL instead")


def transport_reason(exc: BaseException) -> str:
    """One line for a transport failure: refused, unknown host, TLS, or the error's name."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return certificate_reason(cause, None, "")
        if isinstance(cause, ssl.SSLError):
            return f"TLS error ({cause.reason or 'handshake failed'})"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, BaseExceptionGroup):  # every address of a host tried (anyio)
            reasons = {transport_reason(one) for one in cause.exceptions}
            if len(reasons) == 1:
                return reasons.pop()
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__}: {one_line(str(exc)) or 'request failed'}"


def tls_context(url: str, verify: bool | str) -> bool | ssl.SSLContext:
    """What httpx verifies with: the system's CAs, a `ca_file`'s, or none (verify=False); a
    plain-http URL (no TLS, redirects not followed) skips loading CAs, ~70 ms per client."""
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    if verify and urlsplit(url).scheme == "http":
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return verify


FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}


FormValue = str | tuple[str, ...]
"""A form field's value, or its parts in order: a long query whose tail changes at each read
(its evaluation time) is sent as its stable part and the tail, the stable part encoded once."""


@lru_cache(maxsize=16)
def form_encoded(text: str) -> str:
    """`text` url-encoded as a form sends it. The shown lane's queries are the same at each
    read and stay among the few kept; a time, new at each read, soon drops out."""
    return quote_plus(text)


def form_field(name: str, value: FormValue) -> str:
    """`name=value` url-encoded, the value's parts joined (encoding is character by character:
    the parts' encodings joined are the whole's)."""
    parts = (value,) if isinstance(value, str) else value
    return f"{form_encoded(name)}={''.join(map(form_encoded, parts))}"


class HttpClient:
    """One server's kept-alive httpx client: credentials, TLS, timeouts, masking."""

    def __init__(
        self,
        url: str,
        *,
        bearer: str | None = None,
        basic: tuple[str, str] | None = None,
        credentials: Credentials | None = None,
        verify: bool | str = True,
        timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        """`credentials`, when given, are asked before each request (see `Credentials`);
        `bearer`/`basic` are what they are at the start."""
        parts = urlsplit(url)
        if basic is None and parts.username is not None:
            basic = (parts.username, parts.password or "")
        self.url = redact_url(url).rstrip("/")
        self.verify = verify
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.requests = 0
        """Requests sent so far."""
        self._credentials = credentials
        self._sent_as: tuple[str | None, tuple[str, str] | None] = (bearer, basic)
        self._secrets = secret_forms(bearer, basic)
        """Every form the credentials take on the wire: masked in reasons and answers."""
        sent = dict(headers or {})
        if bearer:
            sent["Authorization"] = f"Bearer {bearer}"
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers=sent,
            auth=httpx.BasicAuth(*basic) if basic else None,
            verify=tls_context(url, verify),
            timeout=httpx.Timeout(
                connect=min(timeout, CONNECT_TIMEOUT_S), read=timeout, write=timeout, pool=timeout
            ),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(self, path: str = "", params: Mapping[str, str] | None = None) -> Reply:
        """GET `path` (relative to the URL) with query `params`."""
        return await self._send("GET", path, params=params)

    async def post_form(self, path: str, form: Mapping[str, FormValue]) -> Reply:
        """POST `form` url-encoded to `path`."""
        body = "&".join(form_field(name, value) for name, value in form.items())
        return await self._send("POST", path, content=body.encode("ascii"), headers=FORM_HEADERS)

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        self.requests += 1
        self._renew_credentials()
        try:
            async with (
                asyncio.timeout(self.timeout),
                self._client.stream(
                    method,
                    path,
                    params=params,
                    content=content,
                    headers=headers,
                ) as response,
            ):
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise SourceError(
                            f"{self.url}: answer over {self.max_bytes / 1e6:g} MB refused "
                            "(a runaway query or label?)"
                        )
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL, UnicodeError, OSError) as exc:
            raise await self._described_failure(exc) from None
        if response.is_redirect:
            raise redirect_error(self.url, response, self._secrets)
        text = body.decode(response.encoding or "utf-8", errors="replace")
        if response.status_code == 401 and self._credentials is not None:
            self._credentials.forget()
        return Reply(
            response.status_code,
            mask(response.reason_phrase, self._secrets),
            response.headers,
            mask(text, self._secrets),
        )

    def _renew_credentials(self) -> None:
        """Send the credentials as they are now (SourceError when they can't be read)."""
        if self._credentials is None:
            return
        bearer, basic = self._credentials.current()
        if (bearer, basic) == self._sent_as:
            return
        self._sent_as = (bearer, basic)
        self._secrets = tuple(dict.fromkeys((*secret_forms(bearer, basic), *self._secrets)))
        if bearer:
            self._client.headers["Authorization"] = f"Bearer {bearer}"
        if basic:
            self._client.auth = httpx.BasicAuth(*basic)

    async def _described_failure(self, exc: BaseException) -> SourceError:
        """`_failure`, with what was wrong with a refused certificate read from the server."""
        error = certificate_error(exc)
        codes = (CERT_EXPIRED, CERT_NOT_YET_VALID, HOST_MISMATCH, IP_MISMATCH)
        if error is None or error.verify_code not in codes:
            return self._failure(exc)
        certificate = await peer_certificate(self.url, self.verify)
        host = urlsplit(self.url).hostname or ""
        reason = f"{self.url}: {certificate_reason(error, certificate, host)}"
        failure = SourceError(reason, unreachable=True)
        failure.connect_failed = True
        return failure

    def _header_bytes(self) -> int:
        """The size of the credentials and headers each request sends."""
        basic = self._sent_as[1]
        sent = sum(len(name) + len(value) for name, value in self._client.headers.items())
        return sent + (len(base64.b64encode(f"{basic[0]}:{basic[1]}".encode())) if basic else 0)

    def _failure(self, exc: BaseException) -> SourceError:
        """The one-line, masked SourceError for a request that got no answer."""
        if isinstance(exc, httpx.ConnectTimeout):  # before TimeoutException, its base
            connect = min(self.timeout, CONNECT_TIMEOUT_S)
            reason = f"{self.url}: timed out connecting after {connect:g} s"
            return SourceError(reason, unreachable=True)
        if isinstance(exc, TimeoutError | httpx.TimeoutException):  # the deadline, or a read
            return SourceError(f"{self.url}: timed out after {self.timeout:g} s")
        if isinstance(exc, httpx.LocalProtocolError | UnicodeError | httpx.InvalidURL):
            # its message would quote the header, credentials too
            return SourceError(
                f"{self.url}: request not sendable: a header or the URL has characters HTTP forbids"
            )
        reason = f"{self.url}: {mask(transport_reason(exc), self._secrets)}"
        dropped = httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError
        if isinstance(exc, dropped) and (size := self._header_bytes()) > LARGE_HEADERS:
            reason = (
                f"{self.url}: the server hung up on a request with {size / 1024:,.0f} KiB of "
                "headers (the credentials): over its header limit? (servers take 8-64 KiB)"
            )
        error = SourceError(reason, unreachable=isinstance(exc, httpx.TransportError | OSError))
        error.connect_failed = isinstance(exc, httpx.ConnectError)
        return error
