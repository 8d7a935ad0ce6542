"""A kernel reads its own simple command line (`_ipykernel_launcher._plain_options`) as traitlets would."""

from __future__ import annotations

import pytest

from freeact_sub.kernels._ipykernel_launcher import KernelApp, _plain_options

ARGV = ["-f", "/tmp/k/connection.json", "--HistoryManager.hist_file=:memory:", "--IPKernelApp.parent_handle=123"]


def test_the_kernels_own_command_line_sets_what_traitlets_would() -> None:
    ours, theirs = KernelApp(), KernelApp()
    ours.parse_command_line(ARGV)
    super(KernelApp, theirs).parse_command_line(ARGV)  # traitlets' own parser
    for app in (ours, theirs):
        assert app.connection_file == "/tmp/k/connection.json"
        assert app.parent_handle == 123
        assert app.config.HistoryManager.hist_file.get_value(None) == ":memory:"
        assert app.extra_args == []
    assert ours.argv == theirs.argv == ARGV


@pytest.mark.parametrize(
    "argv",
    [
        ["--debug"],  # a flag
        ["-f"],  # an alias without its value
        ["--A.b=1", "--A.b=2"],  # repeated: traitlets collects a list
        ["--lower.b=1"],  # not a class section
        ["--A.B.c=1"],  # nested
        ["notebook.ipynb"],  # a positional argument
    ],
)
def test_anything_else_is_left_to_traitlets(argv: list[str]) -> None:
    assert _plain_options(argv) is None
