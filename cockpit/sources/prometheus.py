"""A lane's window totals from anything that speaks the Prometheus HTTP API.

One long-lived client per server (kept-alive plain HTTP/1.1 for an http:// server without a
proxy; httpx, imported only then, for TLS or a proxy); one `/api/v1/query` request per lane
refresh carries every figure (joined with `or`, split again by the `fig` label), its text
built once per lane and window.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import socket
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote_plus, urlencode, urlsplit, urlunsplit

import h11

from cockpit import dialects
from cockpit.dialects import spec_expression
from cockpit.model import LANE_HISTOGRAMS, Bucket, LaneTotals, frozen_map
from cockpit.timeutil import promql_duration, stamp

if TYPE_CHECKING:
    import httpx

NAMES_TTL_S = 300.0
"""How long a lane's list of exposed metric names is trusted."""
START_TTL_S = 3600.0
"""How long a lane's known data start is trusted before it is looked up again."""
FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}
QUOTED_KEPT = 64
"""Percent-encoded queries kept: a lane's combined query is the same at every refresh."""


class SourceError(Exception):
    """A refresh failed; `str()` is one line for the user, free of secrets."""

    def __init__(
        self,
        reason: str,
        retry_after: float | None = None,
        *,
        unreachable: bool = False,
        engine_absent: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.unreachable = unreachable
        """No answer at all (refused, unknown host, TLS, dropped): a cheap probe tells when
        it is back. A slow or erring server is not unreachable: it gets the back-off."""
        self.engine_absent = engine_absent
        """The lane's engine is not there (yet): Prometheus answers well but has no engine
        series for it (a job not scraped yet, a vLLM still loading its model), or nothing
        listens on its /metrics port. Asking again costs nothing, so every refresh does,
        without back-off, and the lane shows at the first refresh after the engine is up."""


class TransportError(Exception):
    """A request that got no usable answer.

    The light client's subclasses are named as httpx names its errors, so both clients give
    the same reasons; an httpx error is turned into one with its reason already worded (see
    `general_client_error`), so httpx is imported only where it is used."""

    timeout = False
    """No answer in time (see `connect`) rather than a refused or broken exchange."""
    connect = False
    """It failed while connecting: nothing is listening, or not yet."""
    unreachable = True
    """As SourceError.unreachable."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class ConnectTimeout(TransportError):
    timeout = True
    connect = True


class ConnectError(TransportError):
    connect = True


class ReadTimeout(TransportError):
    timeout = True


class ReadError(TransportError):
    pass


class RemoteProtocolError(TransportError):
    pass


class LocalProtocolError(TransportError):
    pass


def general_client_error(exc: httpx.HTTPError) -> TransportError:
    """httpx's error as a TransportError, with its reason worded."""
    import httpx

    error = TransportError(str(exc), reason=transport_reason(exc))
    error.timeout = isinstance(exc, httpx.TimeoutException)
    error.connect = isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError)
    error.unreachable = isinstance(exc, httpx.TransportError)
    return error


def failure_reason(
    url: str, error: TransportError, timeout_s: float, scrub: Callable[[str], str] = str
) -> tuple[str, bool]:
    """One line for the user (the error's own words passed through `scrub`), and whether
    the server counts as unreachable."""
    if error.timeout:
        return f"{url}: timed out after {timeout_s:g} s", error.connect
    return f"{url}: {scrub(error.reason or transport_reason(error))}", error.unreachable


def tls_verify(url: str, verify: bool | str) -> bool | str | ssl.SSLContext:
    """What httpx should verify with. A plain-http URL never uses TLS (redirects are not
    followed), so it gets a strict context with no CA loaded: loading the system's CAs costs
    ~50 ms per client at start-up, and such a context would refuse any server if ever used."""
    if verify is True and urlsplit(url).scheme == "http":
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return verify


def redact_url(url: str) -> str:
    """The URL without user:password@."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True, slots=True)
class Answer:
    """One decoded `/api/v1/query` answer."""

    result: list[dict[str, Any]]
    warnings: tuple[str, ...]
    client_seconds: float
    eval_seconds: float | None
    samples: int | None
    """Samples the server touched (`stats=all`), when reported."""


@dataclass(slots=True)
class _LaneMemory:
    dialect: str | None = None
    names: frozenset[str] | None = None
    names_at: float = 0.0
    start: float | None = None
    start_at: float = 0.0
    start_from: float = 0.0
    """The window start of the query that found `start`."""
    probed_window: float = 0.0
    """The widest long window whose data start was looked up on its own (see `_covered`)."""
    signature: tuple[object, ...] = ()
    blocks: dict[float, dict[str, PieceValue]] = field(default_factory=dict)
    """Closed block end -> raw key -> that block's value (see `_read_blocks`)."""

    def blocks_for(self, signature: tuple[object, ...]) -> dict[float, dict[str, PieceValue]]:
        if signature != self.signature:
            self.signature, self.blocks = signature, {}
        return self.blocks


PieceValue = float | tuple[Bucket, ...] | str | None
"""A piece's value: a number, histogram buckets, a reason it is unusable, or None (no data)."""

LONG_WINDOW_S = 86400.0
"""Windows from this length on are summed from cached closed blocks plus the two open edges."""
BLOCK_SIZES: tuple[float, ...] = (300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86400)


GAUGE_STEPS: tuple[float, ...] = (15, 30, 60, 120, 300, 600, 1800, 3600)
"""Steps a long window's gauges may be sampled at when the lane's history is shorter."""
FINE_STEP_S = 15.0
"""The data start's precision in a long window, as in a short one (`subquery_step`)."""


def gauge_step(window_s: float, covered_s: float | None) -> float:
    """The subquery step of a long window's gauges: the window's own, or, when the lane's data
    covers only `covered_s` of it, the step a window that long would use (rounded up to
    `GAUGE_STEPS`, so a growing history changes it, and drops the cached blocks, rarely).
    Sampled at the window's step, a few minutes of data would be one point or none."""
    step = dialects.subquery_step(window_s)
    if covered_s is None or covered_s >= window_s:
        return step
    wanted = dialects.subquery_step(max(covered_s, 0.0))
    return min([s for s in GAUGE_STEPS if s >= wanted] + [step])


def block_size(window_s: float) -> float | None:
    """The block for a long window: the largest size with >= 48 blocks in it (edges <= ~4 %)."""
    if window_s < LONG_WINDOW_S:
        return None
    fitting = [size for size in BLOCK_SIZES if size <= window_s / 48]
    return fitting[-1] if fitting else None


class PrometheusSource:
    """One Prometheus-compatible server; `read_lane` serves every lane on it."""

    def __init__(
        self,
        url: str,
        *,
        bearer: str | None = None,
        auth: tuple[str, str] | None = None,
        verify: bool | str = True,
        timeout: float = 10.0,
        stats: bool = False,
        block_cache: bool = True,
    ) -> None:
        parts = urlsplit(url)
        if auth is None and parts.username is not None:
            auth = (parts.username, parts.password or "")
        self.url = redact_url(url).rstrip("/")
        self.stats = stats
        self._timeout = timeout
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        self._secrets = _secret_forms(bearer, auth)
        self._plain: PlainHttp | None = None
        self._client: httpx.AsyncClient | None = None
        if plain_http_ok(url):
            if auth is not None:
                headers["Authorization"] = _basic(*auth)
            self._plain = PlainHttp(self.url, headers, timeout)
        else:
            import httpx

            self._client = httpx.AsyncClient(
                base_url=self.url,
                headers=headers,
                auth=httpx.BasicAuth(*auth) if auth else None,
                verify=ssl.create_default_context(cafile=verify)
                if isinstance(verify, str)
                else tls_verify(url, verify),
                timeout=timeout,
            )
        self._lanes: dict[str, _LaneMemory] = {}
        self._quoted: dict[str, str] = {}
        self.block_cache = block_cache
        self.requests = 0
        """HTTP requests sent so far (the benchmark counts them)."""
        self.last_samples: int | None = None
        """Samples the server touched in the last refresh (needs `stats=True`)."""

    def __repr__(self) -> str:
        return f"PrometheusSource({self.url!r})"

    @property
    def connections(self) -> int | None:
        """Connections opened so far on the plain-http path (None: the general client)."""
        return self._plain.connections if self._plain is not None else None

    async def aclose(self) -> None:
        if self._plain is not None:
            self._plain.close()
        if self._client is not None:
            await self._client.aclose()

    # --- the lane read ------------------------------------------------------------------

    async def read_lane(
        self,
        lane: str,
        dialect: str | None,
        selector: str,
        window_s: float,
        end: float | None = None,
    ) -> LaneTotals:
        """The lane's raw totals over (end - window, end]; `dialect=None` detects it."""
        end = time.time() if end is None else end
        self.last_samples = 0
        memory = self._lanes.setdefault(f"{lane}\0{selector}", _LaneMemory())
        names = await self._names(memory, selector, end)
        dialect = dialect or memory.dialect or dialects.detect_dialect(names)
        memory.dialect = dialect
        with_start = self._needs_start(memory, end, window_s)
        block = block_size(window_s) if self.block_cache else None
        plan = dialects.lane_plan(dialect, selector, window_s, names, with_start)
        escaped = dialects.names_escaped(names)
        missing = dict(plan.missing)
        if block is None:
            answer = await self.query(plan.query, end)
            found = _split(answer.result)
            values, histograms = _read_values(plan.exprs, found, missing)
            exprs: Mapping[str, str] = {**plan.exprs, **plan.extra}
        else:
            covered = await self._covered(memory, dialect, escaped, selector, window_s, end)
            step = gauge_step(window_s, covered)
            blocks = memory.blocks_for((dialect, escaped, block, step))
            presence = dialects.presence_metric(dialect, escaped) + dialects.selector_with(selector)
            read = _BlockRead(plan.specs, selector, window_s, end, block, step, presence)
            values, histograms, answer, found, exprs = await self._read_blocks(
                blocks, read, plan.extra, missing
            )
        return self._totals(
            lane,
            dialect,
            selector,
            window_s,
            end,
            exprs,
            missing,
            answer,
            memory,
            found,
            values,
            histograms,
        )

    async def _covered(
        self,
        memory: _LaneMemory,
        dialect: str,
        escaped: bool,
        selector: str,
        window_s: float,
        end: float,
    ) -> float | None:
        """How much of a long window the lane's data covers (None: all of it).

        The lane's known data start tells, if it holds for this window; else (a lane's first
        long read, or a wider window) one coarse lookup does, once per window, so its gauges
        are sampled finely enough from the first answer on."""
        start = _known_start(memory, end, window_s)
        if start is None and memory.probed_window < window_s:
            memory.probed_window = window_s
            expr = dialects.data_start_expression(dialect, selector, window_s, escaped)
            answer = await self.query(expr, end)
            found = _value(answer.result[0]) if answer.result else None
            start = found if isinstance(found, float) else None
        if start is None or start <= end - window_s:
            return None
        return end - start

    async def _read_blocks(
        self,
        blocks: dict[float, dict[str, PieceValue]],
        read: _BlockRead,
        extra: Mapping[str, str],
        missing: dict[str, str],
    ) -> tuple[
        dict[str, float],
        dict[str, tuple[Bucket, ...]],
        Answer,
        dict[str, list[dict[str, Any]]],
        dict[str, str],
    ]:
        """A long window as cached closed blocks plus the open head and tail, one request.

        Each piece is Prometheus's own `increase()` over that piece (resets inside a piece are
        handled by Prometheus; the step across a boundary is covered by each piece's
        extrapolation to its edges). A gauge piece is the sum and the count of its subquery
        points, so the window's mean weighs each piece by the data it holds (a block the
        history only begins in counts for the part it covers).
        """
        specs, block, end = read.specs, read.block, read.end
        start = end - read.window_s
        first = math.ceil(start / block) * block
        last = math.floor(end / block) * block
        ends = [first + block * i for i in range(1, round((last - first) / block) + 1)]
        for old in [e for e in blocks if e not in ends]:
            del blocks[old]
        todo = [e for e in ends if e not in blocks]
        spent = 0.0
        if len(todo) > 2:
            spent += await self._fill_blocks(blocks, read, todo)
            todo = []
        pieces: dict[str, tuple[float, float]] = {}
        if first > start:
            pieces["h"] = (first - start, first)
        if end > last:
            pieces["t"] = (end - last, end)
        for block_end in todo:
            pieces[f"{block_end:.0f}"] = (block, block_end)
        exprs = dict(extra)
        if dialects.DATA_START in exprs and (fine := _data_start(read, blocks, first, ends, last)):
            exprs[dialects.DATA_START] = fine
        for name, (length, at) in pieces.items():
            exprs.update(read.piece_expressions(length, at, f"|{name}"))
        for key, spec in specs.items():
            if isinstance(spec, dialects.Gauge):  # data younger than one step: its last value
                exprs[f"{key}{LAST}"] = f"{spec.across}({spec.metric}{read.series})"
        answer = await self.query(dialects.combined_query(exprs), end)
        found = _split(answer.result)
        for block_end in todo:
            blocks[block_end] = {
                key: _piece(found.get(f"{key}|{block_end:.0f}"), key) for key in read.keys
            }
        values: dict[str, float] = {}
        histograms: dict[str, tuple[Bucket, ...]] = {}
        for key, spec in specs.items():
            edges = [n for n in pieces if n in ("h", "t")]
            combined: float | tuple[Bucket, ...] | str
            if isinstance(spec, dialects.Gauge):
                count = f"{key}{COUNT}"
                sums = [
                    (_piece(found.get(f"{key}|{n}"), key), _piece(found.get(f"{count}|{n}"), key))
                    for n in edges
                ]
                sums += [(blocks[e].get(key), blocks[e].get(count)) for e in ends]
                combined = _gauge_mean(sums, _piece(found.get(f"{key}{LAST}"), key))
            else:
                parts = [_piece(found.get(f"{key}|{n}"), key) for n in edges]
                parts += [blocks[e].get(key) for e in ends]
                combined = _combine(parts)
            if isinstance(combined, str):
                missing[key] = combined
            elif isinstance(combined, tuple):
                histograms[key] = combined
            else:
                values[key] = combined
        window = promql_duration(read.window_s)
        queries = {
            k: e for k, s in specs.items() if (e := spec_expression(s, read.selector, window))
        }
        answer = replace(answer, client_seconds=answer.client_seconds + spent)
        return values, histograms, answer, found, {**queries, **extra}

    async def _fill_blocks(
        self, blocks: dict[float, dict[str, PieceValue]], read: _BlockRead, todo: list[float]
    ) -> float:
        """Read many closed blocks with one range query (step = block); client seconds spent."""
        block = read.block
        exprs = read.piece_expressions(block, None, "")
        form = {
            "query": dialects.combined_query(exprs),
            "start": f"{todo[0]:.3f}",
            "end": f"{todo[-1]:.3f}",
            "step": f"{block:.0f}",
        }
        _, data, spent = await self._evaluate(
            "/api/v1/query_range", form, "matrix", "range answer is not a matrix"
        )
        self._count_samples(data)
        by_time: dict[float, dict[str, list[dict[str, Any]]]] = {e: {} for e in todo}
        for series in data.get("result") or []:
            labels = series.get("metric", {})
            for at, text in series.get("values") or []:
                slot = by_time.get(round(float(at), 3))
                if slot is not None:
                    sample = {"metric": labels, "value": [at, text]}
                    slot.setdefault(labels.get("fig", ""), []).append(sample)
        for block_end, found in by_time.items():
            blocks[block_end] = {key: _piece(found.get(key), key) for key in read.keys}
        return spent

    def _needs_start(self, memory: _LaneMemory, end: float, window_s: float) -> bool:
        """Look the data start up again only when a wider window could find an older one."""
        return end - memory.start_at > START_TTL_S or _known_start(memory, end, window_s) is None

    def _totals(
        self,
        lane: str,
        dialect: str,
        selector: str,
        window_s: float,
        end: float,
        exprs: Mapping[str, str],
        missing: dict[str, str],
        answer: Answer,
        memory: _LaneMemory,
        by_fig: Mapping[str, list[dict[str, Any]]],
        values: dict[str, float],
        histograms: dict[str, tuple[Bucket, ...]],
    ) -> LaneTotals:
        capacity = _capacity(dialect, by_fig.get(dialects.KV_CAPACITY, []))
        if capacity is None:
            missing.setdefault("kv_capacity_tokens", "engine does not report its KV capacity")
        covered, note = self._coverage(memory, by_fig.get(dialects.DATA_START), end, window_s)
        return LaneTotals(
            lane=lane,
            dialect=dialect,
            window_s=window_s,
            end=end,
            values=frozen_map(values),
            missing=frozen_map(missing),
            histograms=frozen_map(histograms),
            queries=frozen_map(dict(exprs)),
            kv_capacity_tokens=capacity,
            covered_s=covered,
            coverage_note=note,
            server=self.url,
            selector=selector,
            warnings=answer.warnings,
            query_seconds=answer.client_seconds,
            eval_seconds=answer.eval_seconds,
        )

    def _coverage(
        self,
        memory: _LaneMemory,
        samples: list[dict[str, Any]] | None,
        end: float,
        window_s: float,
    ) -> tuple[float | None, str]:
        if samples:
            found = _value(samples[0])
            if isinstance(found, float):
                memory.start, memory.start_at, memory.start_from = found, end, end - window_s
        start = memory.start
        if start is None or start <= end - window_s + dialects.subquery_step(window_s):
            return None, ""
        return max(end - start, 0.0), f"data since {stamp(start)}"

    # --- HTTP ---------------------------------------------------------------------------

    async def _names(self, memory: _LaneMemory, selector: str, now: float) -> frozenset[str]:
        if memory.names is not None and time.monotonic() - memory.names_at < NAMES_TTL_S:
            return memory.names
        match = (
            dialects.selector_with(selector)
            if dialects.parse_selector(selector)
            else '{__name__=~"(vllm|sglang)[:_].+"}'
        )
        body = await self._request("GET", "/api/v1/label/__name__/values", {"match[]": match})
        data = body.get("data")
        if not isinstance(data, list):
            raise SourceError(f"{self.url}: label values answer has no list of names")
        if not data:
            raise SourceError(f"{self.url}: no series match {selector}", engine_absent=True)
        names = frozenset(str(name) for name in data)
        if not dialects.has_engine_names(names):  # only `up` and `scrape_*` while it loads
            raise SourceError(
                f"{self.url}: {dialects.NO_ENGINE_METRICS} ({selector})", engine_absent=True
            )
        memory.names, memory.names_at = names, time.monotonic()
        return names

    async def query(self, expr: str, at: float) -> Answer:
        """One instant query (POST form) at `at`; raises SourceError with a one-line reason."""
        body, data, client_seconds = await self._evaluate(
            "/api/v1/query", {"query": expr, "time": f"{at:.3f}"}, "vector",
            "answer is not an instant vector",
        )  # fmt: skip
        timings = (data.get("stats") or {}).get("timings") or {}
        samples = self._count_samples(data)
        return Answer(
            result=list(data.get("result") or []),
            warnings=tuple(str(w) for w in body.get("warnings") or ()),
            client_seconds=client_seconds,
            eval_seconds=timings.get("evalTotalTime"),
            samples=samples,
        )

    async def _evaluate(
        self, path: str, form: dict[str, str], result_type: str, wrong_shape: str
    ) -> tuple[dict[str, Any], dict[str, Any], float]:
        """POST a query; the whole answer, its `data` of the expected type, client seconds."""
        if self.stats:
            form["stats"] = "all"
        started = time.perf_counter()
        body = await self._request("POST", path, form)
        spent = time.perf_counter() - started
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != result_type:
            raise SourceError(f"{self.url}: {wrong_shape}")
        return body, data, spent

    def _count_samples(self, data: Mapping[str, Any]) -> int | None:
        samples = ((data.get("stats") or {}).get("samples") or {}).get("totalQueryableSamples")
        if not isinstance(samples, int | float):
            return None
        self.last_samples = (self.last_samples or 0) + int(samples)
        return int(samples)

    def _form(self, params: Mapping[str, str]) -> bytes:
        """The form body; long values (the queries) are percent-encoded once, then reused."""
        parts = []
        for key, value in params.items():
            quoted = self._quoted.get(value)
            if quoted is None:
                quoted = quote_plus(value)
                if len(value) > 100:
                    if len(self._quoted) >= QUOTED_KEPT:
                        self._quoted.clear()
                    self._quoted[value] = quoted
            parts.append(f"{quote_plus(key)}={quoted}")
        return "&".join(parts).encode("ascii")

    async def _request(self, method: str, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        self.requests += 1
        try:
            reply = await self._send(method, path, params)
        except TransportError as exc:
            reason, unreachable = failure_reason(self.url, exc, self._timeout, self._scrub)
            raise SourceError(reason, unreachable=unreachable) from None
        return self._decode(reply)

    async def _send(self, method: str, path: str, params: Mapping[str, str]) -> Reply:
        if self._plain is not None:
            if method == "POST":
                return await self._plain.request("POST", path, self._form(params))
            return await self._plain.request("GET", f"{path}?{urlencode(params)}")
        import httpx

        assert self._client is not None
        try:
            if method == "POST":
                body = self._form(params)
                response = await self._client.post(path, content=body, headers=FORM_HEADERS)
            else:
                response = await self._client.get(path, params=dict(params))
        except httpx.HTTPError as exc:
            raise general_client_error(exc) from exc
        return Reply(response.status_code, response.reason_phrase, response.headers, response.text)

    def _scrub(self, text: str) -> str:
        """`text` with this server's token or password (in any form sent) replaced by ***."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    async def probe(self) -> bool:
        """Does the query API answer again? One trivial query (`1`): no series are read."""
        try:
            await self._request("GET", "/api/v1/query", {"query": "1"})
        except SourceError:
            return False
        return True

    def _decode(self, response: Reply) -> dict[str, Any]:
        text = response.text
        body = _json(text)
        if isinstance(body, dict) and body.get("status") == "error":
            kind = body.get("errorType", "error")
            message = str(body.get("error", "")).splitlines()[0] if body.get("error") else ""
            # a server may quote the credentials it refused: they stay out of the message
            message = self._scrub(f"{kind}: {message}")
            raise SourceError(f"{self.url}: {message}", _retry_after(response))
        if response.status >= 400:
            reason = f"{self.url}: HTTP {response.status} {response.reason}".rstrip()
            retry = _retry_after(response)
            if retry is not None:
                reason += f" (retry after {retry:g} s)"
            raise SourceError(reason, retry)
        if body is None:
            if text.lstrip()[:1] == "<":
                raise SourceError(
                    f"{self.url}: answered an HTML page, not the Prometheus API "
                    "(wrong URL or a login page?)"
                )
            raise SourceError(f"{self.url}: answered invalid JSON")
        if not isinstance(body, dict) or body.get("status") != "success":
            raise SourceError(f"{self.url}: answer is not a Prometheus API response")
        return body


# --- plain HTTP -------------------------------------------------------------------------


class Reply(NamedTuple):
    """One HTTP answer, whole."""

    status: int
    reason: str
    headers: Mapping[str, str]
    """Lower-case names (or a case-insensitive mapping)."""
    text: str


def plain_http_ok(url: str) -> bool:
    """A plain-http URL and no proxy configured for it: `PlainHttp` can ask it (otherwise the
    general client, which speaks TLS and honours proxies)."""
    proxies = environment_proxies()
    return urlsplit(url).scheme == "http" and not ("http" in proxies or "all" in proxies)


def environment_proxies() -> dict[str, str]:
    """The proxies the environment names, by scheme, by the rule of urllib's
    `getproxies_environment` (what httpx follows): a lower-case variable wins, and a CGI
    script's HTTP_PROXY (a request header) is ignored. Reading them here spares importing
    urllib.request, and http.client and email with it, at start-up. (macOS also has system
    proxy settings: there urllib itself is asked.)"""
    if sys.platform == "darwin":
        import urllib.request

        return urllib.request.getproxies()
    proxies: dict[str, str] = {}
    for name, value in os.environ.items():
        if value and name[-6:].lower() == "_proxy":
            proxies[name[:-6].lower()] = value
    if "REQUEST_METHOD" in os.environ:
        proxies.pop("http", None)
    for name, value in os.environ.items():
        if name[-6:] == "_proxy":
            if value:
                proxies[name[:-6].lower()] = value
            else:
                proxies.pop(name[:-6].lower(), None)
    return proxies


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


READ_SIZE = 1 << 16


@dataclass
class _Connection:
    """One socket and the HTTP/1.1 state h11 keeps for it."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    state: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))

    def closed(self) -> bool:
        return self.reader.at_eof() or self.writer.is_closing()


class _Stale(Exception):
    """A kept-alive connection the server had closed before this request reached it."""


class PlainHttp:
    """HTTP/1.1 over kept-alive asyncio connections, for a plain-http server with no proxy.

    A lane refresh is one small POST; the general client spends ~2 ms of CPU per request on
    layers this path does not need (cookies, redirects, auth flows, anyio). h11 does the
    framing; failures are raised as TransportError, named as httpx names its errors.
    """

    def __init__(self, url: str, headers: Mapping[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        defaults = {"Accept": "*/*", "User-Agent": "lane-cockpit"}
        self._headers = [("Host", parts.netloc), *{**defaults, **headers}.items()]
        self._idle: list[_Connection] = []
        self._closed = False
        """After `close()`, a connection whose answer comes in late is closed, not kept."""
        self.connections = 0
        """Connections opened so far (a kept-alive one is reused)."""

    def close(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.writer.close()
        self._idle.clear()

    async def request(self, method: str, target: str, body: bytes | None = None) -> Reply:
        """Send one request; retried on a fresh connection if a kept one was closed."""
        request = self._request_event(method, target, body)
        while self._idle:
            connection = self._idle.pop()
            if connection.closed():
                connection.writer.close()
                continue
            try:
                return await self._exchange(connection, request, body, fresh=False)
            except _Stale:
                continue
        return await self._exchange(await self._connect(), request, body, fresh=True)

    def _request_event(self, method: str, target: str, body: bytes | None) -> h11.Request:
        headers = self._headers
        if body is not None:
            headers = [*headers, *FORM_HEADERS.items(), ("Content-Length", str(len(body)))]
        try:
            return h11.Request(method=method, target=self._prefix + target, headers=headers)
        except h11.LocalProtocolError:  # its message would quote the header, credentials too
            raise LocalProtocolError(
                "request not sendable: a header or the URL path has characters HTTP forbids"
            ) from None

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self._timeout):
                reader, writer = await asyncio.open_connection(self._host, self._port)
        except TimeoutError:
            raise ConnectTimeout("connect timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc) or type(exc).__name__) from exc
        self.connections += 1
        return _Connection(reader, writer)

    async def _exchange(
        self, connection: _Connection, request: h11.Request, body: bytes | None, fresh: bool
    ) -> Reply:
        """One request and its answer; the connection is kept if h11 says it can be reused."""
        state = connection.state
        try:
            async with asyncio.timeout(self._timeout):
                return await _roundtrip(connection, request, body)
        except TimeoutError:
            raise ReadTimeout("timed out") from None
        except (OSError, RemoteProtocolError) as exc:
            if not fresh and state.their_state is h11.SEND_RESPONSE:
                raise _Stale from exc  # nothing came back: the request was not answered
            if isinstance(exc, OSError):
                raise ReadError(str(exc) or type(exc).__name__) from exc
            raise
        except h11.RemoteProtocolError as exc:
            raise RemoteProtocolError(str(exc)) from None
        finally:
            if state.our_state is h11.DONE and state.their_state is h11.DONE and not self._closed:
                state.start_next_cycle()
                self._idle.append(connection)
            else:
                connection.writer.close()


async def _roundtrip(connection: _Connection, request: h11.Request, body: bytes | None) -> Reply:
    events = [request, h11.Data(data=body or b""), h11.EndOfMessage()]
    connection.writer.write(b"".join(connection.state.send(event) or b"" for event in events))
    await connection.writer.drain()
    response = await _next_event(connection)
    while not isinstance(response, h11.Response):  # skips a 1xx answer
        response = await _next_event(connection)
    parts = []
    while not isinstance(event := await _next_event(connection), h11.EndOfMessage):
        if isinstance(event, h11.Data):
            parts.append(event.data)
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers}
    text = _text(b"".join(parts), headers.get("content-type", ""))
    return Reply(response.status_code, response.reason.decode("latin-1"), headers, text)


async def _next_event(connection: _Connection) -> h11.Event:
    """The answer's next event, reading from the socket as h11 needs."""
    state = connection.state
    while (event := state.next_event()) is h11.NEED_DATA:
        data = await connection.reader.read(READ_SIZE)
        if not data and state.their_state is h11.SEND_RESPONSE:
            raise RemoteProtocolError("Server disconnected without sending a response.")
        state.receive_data(data)
    assert isinstance(event, h11.Event)  # PAUSED comes only after the answer's end
    return event


def _text(body: bytes, content_type: str) -> str:
    """The body in the charset its Content-Type names (UTF-8 if none or unknown)."""
    charset = content_type.lower().partition("charset=")[2].split(";")[0].strip(' "')
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


# --- decoding helpers -------------------------------------------------------------------


def _secret_forms(bearer: str | None, auth: tuple[str, str] | None) -> tuple[str, ...]:
    """Every form a credential takes on the wire, longest first."""
    forms: list[str] = [bearer] if bearer else []
    if auth is not None:
        forms.append(base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
        if auth[1]:
            forms.append(auth[1])
    return tuple(sorted((form for form in forms if len(form) >= 4), key=len, reverse=True))


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _retry_after(response: Reply) -> float | None:
    header = response.headers.get("retry-after")
    if header is None:
        return None
    try:
        return max(float(header), 0.0)
    except ValueError:
        return None


def transport_reason(exc: Exception) -> str:
    """One line for a transport failure: refused, unknown host, TLS, or the error's name."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "TLS certificate not trusted (self-signed? set ca_file)"
        if isinstance(cause, ssl.SSLError):
            return f"TLS error ({cause.reason or 'handshake failed'})"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(exc).lower()
    if "certificate verify failed" in text:
        return "TLS certificate not trusted (self-signed? set ca_file)"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    if "connection refused" in text or "connect call failed" in text:
        return "connection refused"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'request failed'}"


def _value(sample: Mapping[str, Any]) -> float | str:
    """The sample's number, or the reason it is not one."""
    try:
        number = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return "answer carried no readable value"
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "not a number (NaN) in window"
    return "infinite value in window"


def _buckets(samples: list[dict[str, Any]]) -> tuple[Bucket, ...] | str:
    pairs: list[Bucket] = []
    for sample in samples:
        number = _value(sample)
        if isinstance(number, str):
            return number
        try:
            bound = dialects.parse_le(sample["metric"]["le"])
        except (KeyError, ValueError):
            return "histogram bucket without a readable le"
        pairs.append((bound, number))
    return dialects.sorted_buckets(pairs)


def _capacity(dialect: str, samples: list[dict[str, Any]]) -> float | None:
    if not samples:
        return None
    if dialect == "sglang":
        number = _value(samples[0])
        return number if isinstance(number, float) and number > 0 else None
    total = 0.0
    for sample in samples:
        capacity = dialects.capacity_from_info(sample.get("metric", {}))
        if capacity is None:
            return None
        total += capacity
    return total


def _split(result: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The answer's samples grouped by their `fig` label."""
    by_fig: dict[str, list[dict[str, Any]]] = {}
    for sample in result:
        by_fig.setdefault(sample.get("metric", {}).get("fig", ""), []).append(sample)
    return by_fig


def _piece(samples: list[dict[str, Any]] | None, key: str) -> PieceValue:
    if not samples:
        return None
    if key in LANE_HISTOGRAMS:
        return _buckets(samples)
    return _value(samples[0])


def _read_values(
    exprs: Mapping[str, str],
    found: Mapping[str, list[dict[str, Any]]],
    missing: dict[str, str],
) -> tuple[dict[str, float], dict[str, tuple[Bucket, ...]]]:
    values: dict[str, float] = {}
    histograms: dict[str, tuple[Bucket, ...]] = {}
    for key in exprs:
        piece = _piece(found.get(key), key)
        if piece is None:
            missing[key] = "no samples in window"
        elif isinstance(piece, str):
            missing[key] = piece
        elif isinstance(piece, tuple):
            histograms[key] = piece
        else:
            values[key] = piece
    return values, histograms


def _known_start(memory: _LaneMemory, end: float, window_s: float) -> float | None:
    """The lane's data start if it holds for this window: found inside the window that asked
    (the first sample), or that window reached back as far as this one (data covers it)."""
    if memory.start is None:
        return None
    exact = memory.start > memory.start_from + dialects.subquery_step(window_s)
    return memory.start if exact or end - window_s >= memory.start_from else None


COUNT = "#n"
"""Suffix of a gauge piece's count of subquery points (the piece itself is their sum)."""
LAST = "#last"
"""Suffix of a gauge's value at the window's end."""


@dataclass(frozen=True, slots=True)
class _BlockRead:
    """What a long window's pieces are asked for."""

    specs: Mapping[str, dialects.Spec]
    selector: str
    window_s: float
    end: float
    block: float
    gauge_step: float
    presence: str
    """The lane's presence series (metric and selector), for its data start."""

    @property
    def series(self) -> str:
        return dialects.selector_with(self.selector)

    @property
    def keys(self) -> tuple[str, ...]:
        """A piece's values: one per spec, and each gauge's count of points."""
        counts = [f"{k}{COUNT}" for k, s in self.specs.items() if isinstance(s, dialects.Gauge)]
        return (*self.specs, *counts)

    def piece_expressions(self, length_s: float, at: float | None, suffix: str) -> dict[str, str]:
        """Key + suffix -> PromQL of one piece `length_s` long ending at `at` (None: the
        evaluation time): counters' and histograms' increase, gauges' sum and count."""
        pin = "" if at is None else f" @ {at:.3f}"
        step = promql_duration(self.gauge_step)
        length = f"{round(length_s * 1000)}ms"
        # A subquery's range holds both its ends: a point on a boundary would count in both
        # pieces, so a gauge piece leaves out its start (the piece before holds it).
        points_length = f"{round(length_s * 1000) - 1}ms"
        exprs: dict[str, str] = {}
        for key, spec in self.specs.items():
            if isinstance(spec, dialects.Gauge):
                points = f"{spec.across}({spec.metric}{self.series})[{points_length}:{step}]{pin}"
                exprs[f"{key}{suffix}"] = f"sum_over_time({points})"
                exprs[f"{key}{COUNT}{suffix}"] = f"count_over_time({points})"
            elif expr := spec_expression(spec, self.selector, length, at):
                exprs[f"{key}{suffix}"] = expr
        return exprs


def _data_start(
    read: _BlockRead,
    blocks: Mapping[float, Mapping[str, PieceValue]],
    first: float,
    ends: list[float],
    last: float,
) -> str:
    """The lane's first sample in a long window, to `FINE_STEP_S` as in a short window.

    Sampled at the window's own step, each point sees only the newest sample, so a history
    shorter than a step came out as the evaluation time. Instead, each piece that may hold the
    start (the head, blocks not known empty, up to the first known to hold data, else the tail)
    is scanned at the fine step, and `or` keeps the earliest piece's answer: a few blocks'
    worth of points, asked only when the start is looked up.
    """
    fine = promql_duration(FINE_STEP_S)
    spans: list[tuple[float, float]] = []
    if first > read.end - read.window_s:
        spans.append((first - (read.end - read.window_s), first))
    for block_end in ends:
        known = blocks.get(block_end)
        if known is not None and all(value is None for value in known.values()):
            continue
        spans.append((read.block, block_end))
        if known is not None:
            break
    else:
        if read.end > last:
            spans.append((read.end - last, read.end))
    return " or ".join(
        f"min(min_over_time(timestamp({read.presence})[{round(length * 1000)}ms:{fine}]"
        f" @ {at:.3f}))"
        for length, at in spans
    )


def _gauge_mean(sums: list[tuple[PieceValue, PieceValue]], last: PieceValue) -> float | str:
    """The mean of every subquery point in the window: the pieces' sums over their counts
    (a piece without data adds nothing); data younger than one step gives its last value."""
    total = count = 0.0
    for piece_sum, piece_count in sums:
        for value in (piece_sum, piece_count):
            if isinstance(value, str):
                return value
        if isinstance(piece_sum, float) and isinstance(piece_count, float):
            total, count = total + piece_sum, count + piece_count
    if count:
        return total / count
    if isinstance(last, float | str):
        return last
    return "no samples in window"


def _combine(parts: list[PieceValue]) -> float | tuple[Bucket, ...] | str:
    """Sum of the pieces (per `le` for buckets)."""
    present = [value for value in parts if value is not None]
    reasons = [value for value in present if isinstance(value, str)]
    if reasons:
        return reasons[0]
    if not present:
        return "no samples in window"
    if any(isinstance(value, tuple) for value in present):
        by_le: dict[float, float] = {}
        for value in present:
            if isinstance(value, tuple):
                for bound, count in value:
                    by_le[bound] = by_le.get(bound, 0.0) + count
        return dialects.sorted_buckets(by_le.items())
    return sum(value for value in present if isinstance(value, float))
