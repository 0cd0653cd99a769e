"""``seshat-runner``: the data plane's command line.

The runner executes one operation per process with exactly the credential that operation
needs. Its operations arrive in later work; until then its help lists them as planned and
no command pretends to run one.
"""

from __future__ import annotations

import click

__all__ = ["main"]

PLANNED = """\b
Planned commands (not available yet):
  op --input FILE         run one operation for the control plane, print one framed result
  schema plan|apply|drift|inspect
                          the declarative schema engine, for people and for measurement
  migrations status|up|baseline
                          versioned migrations: read the history, apply, adopt a database
"""


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=PLANNED,
    invoke_without_command=True,
)
@click.version_option(package_name="seshat", prog_name="seshat-runner")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Seshat's runner: one database operation per process.

    It never holds a Git, forge or Kubernetes credential; the control plane starts it with
    the one database credential an operation needs and reads its single framed result.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def main() -> None:
    """Entry point of the ``seshat-runner`` console script."""
    cli()
