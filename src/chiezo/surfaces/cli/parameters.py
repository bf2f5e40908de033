"""A command's arguments and options derived from a request model (ops/requests.py): the CLI
offers what REST and MCP offer, with the same names, bounds, choices and defaults."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from chiezo.ops.requests import Param, Request, params

_F = TypeVar("_F", bound=Callable[..., Any])
_R = TypeVar("_R", bound=Request)


def request_options(model: type[Request]) -> Callable[[_F], _F]:
    """The arguments and options of a command taking ``model``'s parameters (ops/requests.py):
    ``--near-doc`` for ``near_doc``, a repeatable option for a list, click's ranges and choices
    for the declared bounds, so the CLI offers what REST and MCP offer."""

    def decorate(command: _F) -> _F:
        for param in reversed(params(model)):
            if not param.surface.attached:  # read from the environment (request_from)
                command = _click_param(param)(command)
        return command

    return decorate


def _click_param(param: Param) -> Callable[[_F], _F]:
    if param.surface.cli_argument == "words":
        return click.argument(param.name, nargs=-1)
    if param.surface.cli_argument:
        return click.argument(param.name, required=param.required, type=_click_type(param))
    long = param.surface.cli_name or "--" + param.name.replace("_", "-")
    flags = [long, *param.surface.cli_flags, param.name]
    if param.kind is bool and param.surface.cli_off:  # --grounded/--ungrounded
        paired = f"{flags[0]}/{param.surface.cli_off}"
        return click.option(paired, param.name, default=param.default, help=param.help)
    if param.kind is bool:
        return click.option(*flags, is_flag=True, default=param.default, help=param.help)
    shown = param.default is not None
    return click.option(
        *flags,
        required=param.required,
        type=_click_type(param),
        multiple=param.many,
        default=param.default,
        show_default=shown,
        help=param.help,
    )


def _click_type(param: Param) -> click.ParamType:
    if param.choices:
        return click.Choice(param.choices)
    bounds = param.bounds
    if not bounds or param.kind not in (int, float):
        return click.types.convert_type(param.kind)
    low = bounds.get("ge", bounds.get("gt"))
    # an int parameter's bounds are ints (Param.bounds is typed float, for both kinds)
    ranged: Callable[..., click.ParamType] = (
        click.IntRange if param.kind is int else click.FloatRange
    )
    return ranged(low, bounds.get("le"), min_open="gt" in bounds)


def request_from(model: type[_R], values: dict[str, Any]) -> _R:
    """The model from a command's values (its other options, e.g. --json, left out)."""
    taken = {}
    for param in params(model):
        if param.surface.attached:  # the current location: CHIEZO_HERE, never an option
            taken[param.name] = os.environ.get(param.surface.attached) or None
            continue
        value = values[param.name]
        if param.surface.cli_argument == "words":  # no words: no value (the service's reason)
            value = " ".join(value) or ("" if param.required else None)
        elif param.many and not value:  # an option never given (click's ()) is no value
            value = None
        taken[param.name] = value
    try:
        return model.model_validate(taken)
    except ValidationError as exc:  # a shape the model enforces (a note's text): a usage error
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise click.UsageError(f"{where}: {first['msg']}") from exc
