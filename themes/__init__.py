"""The cockpit's themes. Colours live here; the TCSS uses only theme variables."""

from __future__ import annotations

from pathlib import Path

from textual.theme import Theme

STYLESHEET = Path(__file__).with_name("cockpit.tcss")
"""The app's stylesheet (CSS_PATH)."""

COCKPIT_DARK = Theme(
    name="cockpit-dark",
    primary="#4FA3E0",
    secondary="#7FB4CA",
    accent="#C594C5",
    warning="#E5B84B",
    error="#E5534B",
    success="#57AB5A",
    foreground="#D4D7DC",
    background="#111418",
    surface="#181C22",
    panel="#232831",
    dark=True,
)

COCKPIT_LIGHT = Theme(
    name="cockpit-light",
    primary="#1F6FB2",
    secondary="#3A6F8F",
    accent="#8250DF",
    warning="#9A6700",
    error="#C62828",
    success="#1A7F37",
    foreground="#1F2328",
    background="#F6F8FA",
    surface="#FFFFFF",
    panel="#E3E8EE",
    dark=False,
)

COCKPIT_HIGH_CONTRAST = Theme(
    name="cockpit-high-contrast",
    primary="#FFFF00",
    secondary="#00FFFF",
    accent="#FF00FF",
    warning="#FFFF00",
    error="#FF5555",
    success="#00FF00",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#1C1C1C",
    dark=True,
    luminosity_spread=0.05,
    text_alpha=1.0,
)

THEMES: tuple[Theme, ...] = (COCKPIT_DARK, COCKPIT_LIGHT, COCKPIT_HIGH_CONTRAST)
THEME_NAMES: tuple[str, ...] = tuple(theme.name for theme in THEMES)
DEFAULT_THEME = COCKPIT_DARK.name


def next_theme(current: str) -> str:
    """The cockpit theme after `current`, wrapping; unknown themes start at the first."""
    if current not in THEME_NAMES:
        return THEME_NAMES[0]
    return THEME_NAMES[(THEME_NAMES.index(current) + 1) % len(THEME_NAMES)]
