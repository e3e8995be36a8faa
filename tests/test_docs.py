"""The README and the docs pages against the real command line: every `hpdparse` command they
show parses with the options `hpdparse` has, and every repository file a README command names
exists, so the commands run as written on a fresh clone."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from hpdparse.commands.main import main
from tests.helpers.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Paths a README command writes or reads after an earlier command wrote them.
WRITTEN = ("out", "run.json")


def shell_blocks(text: str) -> list[str]:
    """The bodies of the ```sh and ```bash blocks of a Markdown text."""
    blocks, body, fence = [], [], None
    for line in text.splitlines():
        if fence is None:
            if line.startswith("```"):
                fence = line[3:].strip()
                body = []
        elif line.startswith("```"):
            if fence in ("sh", "bash"):
                blocks.append("\n".join(body))
            fence = None
        else:
            body.append(line)
    return blocks


def shell_commands(page: Path) -> list[list[str]]:
    """The `hpdparse ...` command lines of a page's shell blocks, split as a shell would, with
    the block's `name="..."` variables expanded and comments and a trailing `&` dropped."""
    commands = []
    for block in shell_blocks(page.read_text(encoding="utf-8")):
        variables: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if len(words) == 1 and re.fullmatch(r"\w+=.*", words[0]):
                name, value = words[0].split("=", 1)
                variables[name] = value
                continue
            expanded: list[str] = []
            for word in words:
                if word.startswith("$") and word[1:] in variables:
                    expanded += variables[word[1:]].split()
                else:
                    expanded.append(word)
            if expanded[-1:] == ["&"]:
                expanded.pop()
            if expanded and Path(expanded[0]).name == "hpdparse":
                commands.append(expanded[1:])
    return commands


def parse(args: list[str]) -> click.Context:
    """Parse `hpdparse ARGS` as the command line does (options, types, callbacks), running
    nothing."""
    name, *rest = args
    command = main.get_command(click.Context(main), name)
    assert command is not None, f"hpdparse has no command {name!r}"
    return command.make_context(name, rest)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_parses(page: Path) -> None:
    for args in shell_commands(page):
        try:
            parse(args)
        except click.UsageError as error:
            pytest.fail(f"{page.name}: hpdparse {shlex.join(args)}: {error.format_message()}")


def test_readme_commands_name_files_that_exist() -> None:
    commands = shell_commands(REPO / "README.md")
    assert len(commands) >= 10
    named = 0
    for args in commands:
        for word in args:
            if word.startswith("-") or "://" in word or word.startswith(WRITTEN):
                continue
            if "/" in word or word in ("samples",):
                named += 1
                matches = list(REPO.glob(word)) if "*" in word else [REPO / word]
                local = word.startswith(("samples", "tests/"))
                if local:
                    assert matches and all(m.exists() for m in matches), word
    assert named >= 5


def test_the_main_options_table_names_real_options() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Main options", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(-{1,2}[a-z][\w-]*)", table))
    convert = main.get_command(click.Context(main), "convert")
    assert convert is not None
    known = {opt for param in convert.params for opt in (*param.opts, *param.secondary_opts)}
    assert len(documented) >= 20
    assert documented <= known, sorted(documented - known)


def test_shell_commands_reads_variables_and_comments(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```sh\nm="--model x"\nhpdparse convert a.pdf $m -o out  # note\nhpdparse serve &\n```\n'
        "```python\nhpdparse convert not.pdf\n```\n"
    )
    assert shell_commands(page) == [["convert", "a.pdf", "--model", "x", "-o", "out"], ["serve"]]
    with pytest.raises(click.UsageError):
        parse(["convert", "a.pdf", "--no-such-option"])


def test_cli_page_names_every_serve_option() -> None:
    """docs/cli.md's `hpdparse serve` synopsis and section name each of serve's options, and
    no option serve lacks."""
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    synopsis = page.split("hpdparse serve ", 1)[1].split("```", 1)[0]
    section = page.split("## `hpdparse serve`", 1)[1].split("\n## ", 1)[0]
    serve = main.get_command(click.Context(main), "serve")
    assert serve is not None
    params = serve.get_params(click.Context(serve))
    known = {opt for param in params for opt in (*param.opts, *param.secondary_opts)}
    longs = {next(o for o in p.opts if o.startswith("--")) for p in params} - {"--help"}
    for text in (synopsis, section):
        named = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", text))
        assert named <= known, sorted(named - known)
        assert longs <= named, sorted(longs - named)
