"""The cockpit's themes: every text colour legible on the backgrounds it is drawn on."""

from __future__ import annotations

import pytest

from cockpit.config import schema as config
from cockpit.themes import DEFAULT_THEME, THEMES, ansi_color_setting, next_theme

TEXT_COLOURS = ("foreground", "primary", "secondary", "accent", "warning", "error", "success")
BACKGROUNDS = ("background", "panel")
"""Panes sit on `background`, the status line on `panel`."""


def relative_luminance(hex_colour: str) -> float:
    """WCAG 2.x relative luminance of `#RRGGBB`."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    red, green, blue = linear
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(one: str, other: str) -> float:
    high, low = sorted((relative_luminance(one), relative_luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_formula_is_the_wcag_one() -> None:
    assert contrast("#FFFFFF", "#000000") == pytest.approx(21.0)
    assert contrast("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("theme", THEMES, ids=[theme.name for theme in THEMES])
def test_text_colours_read_at_4_5_to_1(theme: object) -> None:
    weak = []
    for text in TEXT_COLOURS:
        for background in BACKGROUNDS:
            ratio = contrast(getattr(theme, text), getattr(theme, background))
            if ratio < 4.5:
                weak.append(f"{text} on {background}: {ratio:.2f}")
    assert weak == []


def test_next_theme_cycles_through_the_cockpit_themes() -> None:
    names = [theme.name for theme in THEMES]
    assert [next_theme(name) for name in names] == [*names[1:], names[0]]
    assert next_theme("textual-dark") == names[0]


def test_a_config_accepts_exactly_the_cockpit_themes() -> None:
    assert tuple(theme.name for theme in THEMES) == config.THEME_NAMES
    assert config.Config().theme == DEFAULT_THEME
    for name in config.THEME_NAMES:
        assert config.parse_config(f"theme: {name}\n", "t.yaml").theme == name


def test_no_color_asks_for_native_ansi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert ansi_color_setting() is None
    monkeypatch.setenv("NO_COLOR", "1")
    assert ansi_color_setting() is True
