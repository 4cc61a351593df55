"""Receipts: the cockpit's figures as markdown or JSON, with provenance (`cockpit report` and
`e` call these on the same snapshots: screen and receipt agree)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from operator import attrgetter
from typing import Any

from cockpit.core.catalogue import (
    LATENCIES,
    PERCENTILES,
    Section,
    section_of,
    slo_keys,
    tail_keys,
)
from cockpit.core.figures import LaneFigures, format_figure, format_value
from cockpit.core.ledger_figures import (
    GroupRatio,
    LedgerFigures,
    Prices,
    SpendRow,
    ledger_window_sql,
)
from cockpit.core.model import Figure, Freshness, LaneTotals, LedgerTotals, Unit
from cockpit.core.models import MODEL_FIGURES, NO_MODELS_SEEN, model_rows
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.text import visible
from cockpit.core.timeutil import stamp


def _cell(text: str) -> str:
    """A table cell from any text: a `|` or a line break in a name can't split the row."""
    return visible(text).replace("|", "\\|")


def markdown_table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(map(_cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in rows]
    return lines


def _value(figure: Figure) -> str:
    text = format_figure(figure)  # `—` when missing
    return f"{text} ({figure.reason})" if figure.reason else text


def _freshness_note(freshness: Freshness) -> list[str]:
    if freshness.state == "ok":
        return []
    return [f"> **Source {freshness.describe()}** — figures are the last good read.", ""]


def _ledger_rows(figures: LedgerFigures) -> list[tuple[str, str]]:
    f = figures.figures
    calls, share, reasoning = f["api_calls"], f["cache_read_share"], f["reasoning_tokens"]
    said = "" if reasoning.missing else f" (incl. {format_figure(reasoning)} reasoning)"
    return [
        ("Sessions / API calls", f"{format_figure(f['sessions'])} / {format_figure(calls)}"),
        (f["prompt_tokens"].label, format_figure(f["prompt_tokens"])),
        ("of which cache read", f"{format_figure(f['cache_read_tokens'])} ({_value(share)})"),
        (f["fresh_prefill_tokens"].label, format_figure(f["fresh_prefill_tokens"])),
        (f"Output tokens{said}", format_figure(f["output_tokens"])),
        ("Prompt : output", _value(f["prompt_output"])),
        ("Fresh prefill : output (after provider caching)", _value(f["fresh_output"])),
        (
            "Mean per API call",
            f"{_value(f['mean_prompt_per_call'])} prompt tokens in, "
            f"{_value(f['mean_output_per_call'])} out",
        ),
    ]


_GROUP_COLUMNS: tuple[tuple[str, str, Unit, str], ...] = (
    ("sessions", "sessions", "count", "counts.sessions"),
    ("api_calls", "API calls", "count", "counts.api_calls"),
    ("prompt_tokens", "prompt", "tokens", "counts.prompt"),
    ("output_tokens", "output", "tokens", "counts.output"),
    ("prompt_output", "prompt : output", "ratio", "prompt_output"),
    ("fresh_output", "fresh : output", "ratio", "fresh_output"),
    ("cache_read_share", "cache-read share", "share", "cache_read_share"),
)
"""A per-source/model/profile table's columns: JSON key, markdown header, unit, attribute."""


def _group_row(group: GroupRatio) -> tuple[str, ...]:
    return (
        group.name,
        *(format_value(attrgetter(at)(group), unit) for _, _, unit, at in _GROUP_COLUMNS),
    )


def _model_heading(totals: LedgerTotals) -> str:
    if totals.model_basis == "session_model_usage":
        return "### Per model (exact, from session_model_usage, main loop)"
    return "### Per model (from sessions.model: a session that switched models counts as its first)"


def ledger_markdown(
    figures: LedgerFigures, totals: LedgerTotals, window: str, prices: Prices
) -> list[str]:
    lines = [f"## The agent ledger: sessions started in the {window} to {stamp(totals.end)}", ""]
    if totals.narrowed_to is not None:
        lines += [f"The lane's own models only: {', '.join(totals.narrowed_to)}.", ""]
    lines += markdown_table((f"Metric ({window})", "Value"), _ledger_rows(figures))
    if figures.skipped:
        lines += ["", f"{figures.skipped} (not in the figures)."]
    if figures.busiest_source:
        lines += ["", f"Most API calls come from **{figures.busiest_source}**."]
    for heading, groups, missing_key in (
        ("### Per source", figures.by_source, "by_source"),
        (_model_heading(totals), figures.by_model, ""),
        ("### Per profile", figures.by_profile, "by_profile"),
    ):
        lines += ["", heading, ""]
        note = totals.missing.get(missing_key, "") if missing_key else ""
        if note and not groups:
            lines.append(f"Missing: {note}")
            continue
        header = (heading.split()[2].capitalize(), *(title for _, title, _, _ in _GROUP_COLUMNS))
        lines += markdown_table(header, map(_group_row, groups))
        if note:
            # An old schema credits its sessions to its ledger's profile: the rows are real,
            # the note says how they were grouped.
            lines += ["", f"Note: {note}"]
    if (side := totals.side_calls) is not None and side.api_calls:
        calls = "call" if side.api_calls == 1 else "calls"
        lines += [
            "",
            f"Side calls outside the main loop (title generation, …): "
            f"{format_value(side.api_calls, 'count')} {calls}, "
            f"{format_value(side.prompt, 'tokens')} prompt, "
            f"{format_value(side.output, 'tokens')} output (not in the totals above).",
        ]
    lines += ["", *spend_markdown(figures, prices)]
    return lines


def _spend_tokens(row: SpendRow) -> str:
    """A bucket's tokens, or why they can't be known (`— (schema 22 has no …)`)."""
    if row.tokens is None:
        return f"— ({row.missing})" if row.missing else "—"
    return format_value(row.tokens, "tokens")


def spend_markdown(figures: LedgerFigures, prices: Prices) -> list[str]:
    ratios = ", ".join(
        f"{name.replace('_', ' ')} {ratio:g}" for name, ratio in asdict(prices).items()
    )
    lines = [f"## Where the money goes (spend units: {ratios})", ""]
    spend = [(r.bucket, _spend_tokens(r), format_value(r.share, "share")) for r in figures.spend]
    lines += markdown_table(("Bucket", "Tokens", "Share of spend units"), spend)
    cached = figures["prompt_side_share"]
    uncached = figures["prompt_side_share_uncached"]
    lines += [
        "",
        f"Prompt-side share of spend: {_value(cached)} with caching as measured, "
        f"{_value(uncached)} with every prompt token at the input price.",
        "",
        f"USD: {_value(figures['cost_usd'])}; tokens of priced models "
        f"{_value(figures['paid_tokens'])}, of models without a price "
        f"{_value(figures['unpriced_tokens'])}.",
    ]
    return lines


def lane_markdown(figures: LaneFigures, totals: LaneTotals, window: str) -> list[str]:
    coverage = f" ({totals.coverage_note})" if totals.coverage_note else ""
    lines = [
        f"## The lane {totals.lane}: what the engine computed, {window} to "
        f"{stamp(totals.end)}{coverage}",
        "",
    ]

    def table(header: str, section: Section) -> list[str]:
        shown = [f for key, f in figures.figures.items() if section_of(key) == section]
        return markdown_table((header, "Value"), [(f.label, _value(f)) for f in shown])

    lines += table(f"Metric ({window})", "volume")
    lines += ["", f"### Where the time goes (per-request means, {window})", ""]
    lines += table("Figure", "timing")
    lines += _tails(figures, window)
    if slo := slo_keys(figures.figures):
        rows = [(f.label, _value(f)) for f in (figures[key] for key in slo)]
        lines += ["", f"### Latency targets met ({window})", ""]
        lines += markdown_table(("Figure", "Value"), rows)
    lines += ["", "### Now and the last minute, beside the window", ""]
    lines += table("Figure", "now")
    if figures.engine_keys:
        lines += ["", f"### What else the engine says ({window})", "", *table("Figure", "engine")]
    offload = (f for key, f in figures.figures.items() if section_of(key) == "offload")
    if any(not figure.missing for figure in offload):  # a lane with a KV connector
        lines += ["", f"### KV offload and transfer ({window})", "", *table("Figure", "offload")]
    return lines + models_markdown(totals, window)


def models_markdown(totals: LaneTotals, window: str) -> list[str]:
    """The lane's models, a row each (missing figures say why below), and its LoRA adapters."""
    lines = ["", f"### Models ({window}, `sum by` the engine's model label)", ""]
    rows = model_rows(totals)
    if rows:
        labels = tuple(rows[0].figures[key].label for key in MODEL_FIGURES)
        cells = [(row.model, *map(format_figure, row.figures.values())) for row in rows]
        lines += markdown_table(("Model", *labels), cells)
        said = [f"{row.model}, {f.label}: {f.reason}" for row in rows for f in row.figures.values()
                if f.reason]  # fmt: skip
        lines += [""] * bool(said) + [f"- {_cell(note)}" for note in said]
    else:
        lines.append(f"No rows: {totals.missing.get('models', NO_MODELS_SEEN)}")
    lora = totals.lora
    if lora is None:
        return [*lines, "", f"LoRA adapters: {totals.missing.get('lora', '')}"]
    lines += ["", f"LoRA adapters as the engine stated them at {stamp(lora.stated_at)}:", ""]
    most = format_value(lora.max_lora, "count")
    lora_rows = [("running", ", ".join(lora.running) or "none"),
                 ("waiting", ", ".join(lora.waiting) or "none"), ("max at once", most)]  # fmt: skip
    return lines + markdown_table(("LoRA", "Adapters"), lora_rows)


def _tails(figures: LaneFigures, window: str) -> list[str]:
    """The tails table: one row per latency, its histogram's mean beside its percentiles."""
    header = ("Latency", "mean", *(f"p{p}" for p in PERCENTILES))
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for histogram, mean_key, label, *_ in LATENCIES:
        tails = [f for key in tail_keys(histogram) if (f := figures.figures.get(key))]
        mean = figures.figures.get(mean_key)
        rows.append((label, *(format_figure(f) if f else "—" for f in (mean, *tails))))
        said: dict[str, list[str]] = {}  # reason -> the percentiles it is said of
        for tail in tails:
            if tail.reason and not tail.above:
                said.setdefault(tail.reason, []).append(tail.label.rsplit(" ", 1)[-1])
        notes += [f"{label} {', '.join(which)}: {why}" for why, which in said.items()]
    lines = ["", f"### Tails ({window}, from the engine's histograms)", ""]
    lines += markdown_table(header, rows)
    if any(f.above for f in figures.figures.values()):
        notes.insert(0, "`> x`: past the engine's largest finite bucket (x is a lower bound)")
    return lines + ([""] if notes else []) + [f"- {_cell(note)}" for note in notes]


def _provenance(lane: LaneSnapshot | None, ledger: LedgerSnapshot | None) -> list[str]:
    lines = ["## Provenance", ""]
    if ledger is not None and (totals := ledger.totals) is not None:
        start, end = totals.end - totals.window_s, totals.end
        for info in totals.ledgers:
            version = info.schema_version if info.schema_version is not None else "unknown"
            names = ", ".join(info.also_named)
            also = f"also named as {names}: read once; " if names else ""
            lines.append(
                f"- Ledger `{info.path}` (profile {info.profile}, schema {version}), opened "
                f"read-only; {also}sessions with started_at in ({start:.0f}, {end:.0f}] "
                f"(epoch seconds, UTC); freshness: {ledger.freshness.describe()}"
            )
        lines += [f"- Missing `{name}`: {reason}" for name, reason in totals.missing.items()]
        lines += ["", "The totals, reproduced with `sqlite3 'file:PATH?mode=ro'`:", ""]
        lines += ["```sql", f"{ledger_window_sql(start, end)};", "```", ""]
    if lane is not None and (lane_totals := lane.totals) is not None:
        lines.append(
            f"- Lane `{lane_totals.lane}`: {lane_totals.server or 'unknown server'}, selector "
            f"`{{{lane_totals.selector}}}`, dialect {lane_totals.dialect}, evaluated at "
            f"{stamp(lane_totals.end)}; freshness: {lane.freshness.describe()}"
        )
        if lane_totals.coverage_note:
            lines.append(f"- Window coverage: {lane_totals.coverage_note}")
        lines += [
            f"- Missing `{name}`: {reason}" for name, reason in sorted(lane_totals.missing.items())
        ]
        if lane_totals.queries:
            queries = [f"{key}: {expr}" for key, expr in sorted(lane_totals.queries.items())]
            lines += ["", "```promql", *queries, "```"]
    return lines


def markdown_receipt(
    lane: LaneSnapshot | None, ledger: LedgerSnapshot | None, prices: Prices | None = None
) -> str:
    """The receipt as markdown: ledger, spend, lane, provenance; no control character from
    outside reaches it (shown as symbols, line breaks among them: a name stays on its line)."""
    prices = prices or Prices()
    lines = ["# lane-cockpit receipt", ""]
    if ledger is not None and ledger.figures is not None and ledger.totals is not None:
        lines += _freshness_note(ledger.freshness)
        lines += [*ledger_markdown(ledger.figures, ledger.totals, ledger.window, prices), ""]
    elif ledger is not None:
        lines += [f"## The agent ledger: {ledger.freshness.describe()}", ""]
    if lane is not None and lane.figures is not None and lane.totals is not None:
        lines += _freshness_note(lane.freshness)
        lines += [*lane_markdown(lane.figures, lane.totals, lane.window), ""]
        lines += gpu_markdown(lane)
    elif lane is not None:
        lines += [f"## The lane {lane.lane}: {lane.freshness.describe()}", ""]
    lines += _provenance(lane, ledger)
    return "\n".join(map(visible, lines)).rstrip() + "\n"  # a line each, whatever a name holds


def _figure_json(figure: Figure) -> dict[str, Any]:
    data: dict[str, Any] = {"label": figure.label, "value": figure.value, "unit": figure.unit}
    if figure.value is not None:
        data["text"] = format_figure(figure)
    if figure.above:
        data["above"] = True
    if figure.reason:
        data["reason" if figure.missing else "note"] = figure.reason
    if figure.query:
        data["query"] = figure.query
    return data


def _group_json(groups: tuple[GroupRatio, ...]) -> list[dict[str, Any]]:
    return [
        {"name": g.name, **{key: attrgetter(at)(g) for key, _, _, at in _GROUP_COLUMNS}}
        for g in groups
    ]


def _figures_json(figures: Mapping[str, Figure]) -> dict[str, dict[str, Any]]:
    return {key: _figure_json(figure) for key, figure in figures.items()}


def json_receipt(
    lane: LaneSnapshot | None, ledger: LedgerSnapshot | None, prices: Prices | None = None
) -> dict[str, Any]:
    receipt: dict[str, Any] = {}
    if ledger is not None:
        receipt["ledger"] = _ledger_json(ledger, prices or Prices())
    if lane is not None:
        receipt["lane"] = _lane_json(lane)
        if (gpu := gpu_json(lane)) is not None:
            receipt["gpu"] = gpu
    return receipt


def _ledger_json(ledger: LedgerSnapshot, prices: Prices) -> dict[str, Any]:
    data: dict[str, Any] = {"window": ledger.window, "freshness": ledger.freshness.describe()}
    if ledger.figures is None or ledger.totals is None:
        return data
    totals = ledger.totals
    data.update(
        end=totals.end,
        figures=_figures_json(ledger.figures.figures),
        by_source=_group_json(ledger.figures.by_source),
        by_model=_group_json(ledger.figures.by_model),
        model_basis=totals.model_basis,
        by_profile=_group_json(ledger.figures.by_profile),
        busiest_source=ledger.figures.busiest_source,
        spend={"prices": asdict(prices), "rows": list(map(asdict, ledger.figures.spend))},
        missing=dict(totals.missing),
        skipped=dict(totals.skipped),
        provenance={
            "ledgers": [
                {
                    "path": i.path,
                    "profile": i.profile,
                    "schema_version": i.schema_version,
                    "also_named": list(i.also_named),
                }
                for i in totals.ledgers
            ],
            "sql": ledger_window_sql(totals.end - totals.window_s, totals.end),
            "tailer_sql": list(totals.queries),
        },
    )
    return data


def _lane_json(lane: LaneSnapshot) -> dict[str, Any]:
    data: dict[str, Any] = {
        "lane": lane.lane,
        "window": lane.window,
        "freshness": lane.freshness.describe(),
    }
    if lane.figures is None or lane.totals is None:
        return data
    totals = lane.totals
    data.update(
        end=totals.end,
        coverage=totals.coverage_note or None,
        figures=_figures_json(lane.figures.figures),
        models=[
            {"model": row.model, "figures": _figures_json(row.figures)}
            for row in model_rows(totals)
        ],
        lora=None if totals.lora is None else asdict(totals.lora),
        missing=dict(totals.missing),
        provenance={
            "server": totals.server,
            "selector": totals.selector,
            "dialect": totals.dialect,
            "queries": dict(totals.queries),
        },
    )
    return data


def gpu_markdown(lane: LaneSnapshot) -> list[str]:
    """The lane's GPUs: its GPU figures, then one row per GPU (nothing without a GPU source)."""
    gpu = lane.gpu_figures()
    if gpu is None:
        return []
    lines = [f"## The GPUs of {lane.lane}: {gpu.source or 'none read'}, {gpu.where}", ""]
    if gpu.reason:
        lines += [f"> {gpu.reason}", ""]
    rows = [(f.label, _value(f)) for f in gpu.figures.values()]
    lines += markdown_table((f"Figure ({lane.window})", "Value"), rows)
    if gpu.per_gpu:
        keys = list(gpu.per_gpu[0][1])
        header = ("GPU", *(gpu.per_gpu[0][1][key].label for key in keys))
        per_gpu = [
            (f"{one.id} {one.name}".strip(), *(format_figure(figures[k]) for k in keys))
            for one, figures in gpu.per_gpu
        ]
        lines += ["", *markdown_table(header, per_gpu)]
    return [*lines, ""]


def gpu_json(lane: LaneSnapshot) -> dict[str, Any] | None:
    """The lane's GPU figures and each GPU's, values in SI units and shares 0-1."""
    gpu = lane.gpu_figures()
    if gpu is None:
        return None
    data: dict[str, Any] = {"source": gpu.source, "where": gpu.where, "window": lane.window}
    if gpu.reason:
        data["reason"] = gpu.reason
    data["figures"] = _figures_json(gpu.figures)
    data["gpus"] = [
        {
            "id": one.id,
            "uuid": one.uuid,
            "name": one.name,
            "figures": _figures_json(figures),
            **({"processes": [list(p) for p in one.processes]} if one.processes else {}),
        }
        for one, figures in gpu.per_gpu
    ]
    totals = lane.totals.gpu if lane.totals is not None else None
    if totals is not None and totals.queries:
        data["queries"] = dict(totals.queries)
    return data
