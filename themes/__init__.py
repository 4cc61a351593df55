"""The cockpit's themes (the TCSS uses only theme variables). Every text colour reads at 4.5:1
or better on both the pane background (`background`) and the status bar (`panel`)."""

from __future__ import annotations

import os
from pathlib import Path

from textual.theme import Theme

STYLESHEET = Path(__file__).with_name("cockpit.tcss")

THEMES: tuple[Theme, ...] = (
    Theme(
        name="cockpit-dark",
        primary="#4FA3E0",
        secondary="#7FB4CA",
        accent="#C594C5",
        warning="#E5B84B",
        error="#F06A62",
        success="#57AB5A",
        foreground="#D4D7DC",
        background="#111418",
        surface="#181C22",
        panel="#232831",
    ),
    Theme(
        name="cockpit-light",
        primary="#1A5F99",
        secondary="#33637F",
        accent="#6E3FC8",
        warning="#805700",
        error="#C62828",
        success="#18733A",
        foreground="#1F2328",
        background="#F6F8FA",
        surface="#FFFFFF",
        panel="#E3E8EE",
        dark=False,
    ),
    Theme(
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
        luminosity_spread=0.05,
        text_alpha=1.0,
    ),
)
THEME_NAMES: tuple[str, ...] = tuple(theme.name for theme in THEMES)
"""As `cockpit.config.schema.THEME_NAMES`, which configs are checked against without Textual."""
DEFAULT_THEME = THEME_NAMES[0]


def next_theme(current: str) -> str:
    """The cockpit theme after `current`, wrapping; unknown themes start at the first."""
    after = THEME_NAMES.index(current) + 1 if current in THEME_NAMES else 0
    return THEME_NAMES[after % len(THEME_NAMES)]


def ansi_color_setting() -> bool | None:
    """True under NO_COLOR: Textual's filter then resets colours to the terminal's, not greys."""
    return True if "NO_COLOR" in os.environ else None
