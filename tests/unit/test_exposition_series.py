"""A series the last scrape had is read again with its new value and the same labels, however
its label values are written; a value the parser refuses is still an error."""

from __future__ import annotations

import pytest

from cockpit.core.model import SourceFailure as SourceError
from cockpit.sources.exposition import LabelKey, read_scrape

URL = "http://127.0.0.1:1/metrics"
TRICKY = (
    r'vllm:request_success_total{finished_reason="stop",model_name="a}b \"c\" # {d} \\ e"} ',
    'vllm:request_success_total{finished_reason="length",model_name="plain"} ',
    'vllm:generation_tokens_total{model_name="x y"} ',
    "vllm:num_requests_running ",
)


def exposition(value: str, timestamp: str = "") -> str:
    return "".join(f"{line}{value}{timestamp}\n" for line in TRICKY)


def samples(text: str, after: str | None = None) -> list[tuple[str, LabelKey, str, str]]:
    """(name, labels, value, `_created`) of each sample kept, values as text (NaN == NaN);
    `after`: the exposition scraped before this one."""
    first = read_scrape(URL, after, dialect="vllm", seen=frozenset(), keep=[]) if after else None
    scrape = read_scrape(
        URL, text, dialect="vllm", seen=frozenset(), keep=[], known=first and first.series
    )
    return sorted(
        (name, labels, repr(value), repr(born))
        for name, by_labels in scrape.samples.items()
        for labels, (value, born) in by_labels.items()
    )


@pytest.mark.parametrize("second", ["7", "1e3", "NaN", "+Inf", "12 1700000000000"])
def test_a_known_series_reads_its_new_value_with_the_parsers_labels(second: str) -> None:
    value, _, timestamp = second.partition(" ")
    text = exposition(value, f" {timestamp}" if timestamp else "")
    fresh = samples(text)
    assert samples(text, after=exposition("5")) == fresh
    assert len(fresh) == len(TRICKY)
    assert (("finished_reason", "stop"), ("model_name", 'a}b "c" # {d} \\ e')) in {
        labels for _, labels, _, _ in fresh
    }


@pytest.mark.parametrize("garbled", ["1_000", "oops", "0x10"])
def test_a_known_series_with_a_garbled_value_is_an_error(garbled: str) -> None:
    with pytest.raises(SourceError, match="cannot parse the /metrics text"):
        samples(exposition(garbled), after=exposition("5"))


@pytest.mark.parametrize("suffix", [' # {trace_id="x"} {}', " 170000000000{}"])
def test_a_line_whose_last_word_is_not_its_value_is_read_whole(suffix: str) -> None:
    """An exemplar or a timestamp after the value: the text before the last word is not the
    series, and the value stays when the last word changes."""
    second = exposition("5", suffix.replace("{}", "9"))
    assert samples(second, after=exposition("5", suffix.replace("{}", "5"))) == samples(second)
