"""Command-line options every command group shares (the main CLI, classroom/, notebooks/)."""

from __future__ import annotations

import click

from autograder.sandbox import CHOICES

SANDBOXES = click.Choice(CHOICES)
sandbox_option = click.option("--sandbox", type=SANDBOXES, default="auto", show_default=True)
