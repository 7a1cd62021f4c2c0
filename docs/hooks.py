"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml).

- The options reference and the CLI reference are written from the code (the plugin's
  ``pytest_addoption`` and the ``pdebench`` command's argparse parser) by ``python
  docs/hooks.py``, and committed, so their links work on GitHub too; the build stops when a
  committed page is not what the code writes now, so they cannot drift from what the code
  accepts.
- A file outside docs/ that a page links to (a library guide, an example solver, a dated
  result in benchmarks/results/) joins the site at its path in the repository: Markdown as a
  page, source code as a page holding the file in a code block, anything else copied as it
  is. Pages link to such files by their real relative path (``../guides/DOLFINX_GUIDE.md``),
  which reads right in the repository; the links are rewritten to the site's copy here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parent.parent
DOCS = "docs/"
# a suffix shown as code (its highlighting language); other files outside docs/ are copied
CODE = {".py": "python", ".cpp": "cpp", ".h": "cpp", ".toml": "toml", ".sh": "bash", ".txt": "text"}
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")  # [text](target#anchor), ![image](target)

_repo_path_of: dict[str, str] = {}  # site path of a page taken from outside docs/ -> its path in the repository


def on_files(files: Files, config) -> Files:
    _repo_path_of.clear()
    pages = [(DOCS + file.src_uri, file.content_string) for file in files.documentation_pages()]
    outside: set[str] = set()
    while pages:  # the pages outside docs/ are searched for links too
        page, text = pages.pop()
        for match in LINK.finditer(text):
            target = _resolve(page, match.group(1))
            if target and not target.startswith(DOCS) and target not in outside and (REPO / target).is_file():
                outside.add(target)
                if target.endswith(".md"):
                    pages.append((target, (REPO / target).read_text()))
    for path in sorted(outside):
        site = _site_path(path)
        _repo_path_of[site] = path
        if path.endswith(".md"):
            files.append(File.generated(config, site, content=(REPO / path).read_text()))
        elif Path(path).suffix in CODE:
            files.append(File.generated(config, site, content=_code_page(path)))
        else:
            files.append(File.generated(config, site, abs_src_path=str(REPO / path)))
    stale = [name for name, text in reference_pages().items() if (REPO / DOCS / name).read_text() != text]
    if stale:
        from mkdocs.exceptions import PluginError

        names = ", ".join(DOCS + name for name in stale)
        raise PluginError(f"{names}: not what the code says now; run python docs/hooks.py")
    return files


def reference_pages() -> dict[str, str]:
    """The pages written from the code, by their path under docs/."""
    return {"reference/options.md": options_page(), "reference/cli.md": cli_page()}


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Links to files outside docs/ point to their copies on the site."""
    src = page.file.src_uri
    here = _repo_path_of.get(src, DOCS + src)

    def rewrite(match: re.Match) -> str:
        target = _resolve(here, match.group(1))
        if target is None or (not target.startswith(DOCS) and _site_path(target) not in _repo_path_of):
            return match.group(0)  # a web address, or a file that is not there: MkDocs reports it
        link = posixpath.relpath(_site_path(target), posixpath.dirname(src) or ".")
        return f"]({link}{match.group(2) or ''})"

    return LINK.sub(rewrite, markdown)


def _resolve(page: str, target: str) -> str | None:
    """The repository path a relative link of the page (a repository path) points to."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
    return None if path.startswith("..") else path


def _site_path(path: str) -> str:
    if path.startswith(DOCS):
        return path.removeprefix(DOCS)
    return path + ".md" if Path(path).suffix in CODE else path


def _code_page(path: str) -> str:
    text = (REPO / path).read_text()
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return (
        f"# {Path(path).name}\n\n`{path}`, as it is in the repository.\n\n"
        f"{fence}{CODE[Path(path).suffix]}\n{text.rstrip()}\n{fence}\n"
    )


# ---- the references, from the code ----


def options_page() -> str:
    """Every option of the plugin, group by group, as pytest_addoption declares it."""
    from _pytest.config.argparsing import Parser

    from pytest_pdebench import plugin

    parser = Parser(_ispytest=True)
    plugin.pytest_addoption(parser)
    lines = [
        "# Options",
        "",
        "The plugin's options, written from its `pytest_addoption` (`pytest_pdebench/plugin.py`) "
        "by `python docs/hooks.py`; `pytest --help` shows the same. "
        "An option takes `--pde-x=VALUE` or `--pde-x VALUE`.",
    ]
    for group in parser._groups:  # pytest keeps the groups and their titles private
        if not group.options:
            continue
        lines += ["", f"## {group._arggroup.title}", "", "| option | default | meaning |", "|---|---|---|"]
        for option in group.options:
            attrs = option.attrs()
            name = option.names()[-1]
            usage = f"{name} {attrs['metavar']}" if attrs.get("metavar") else name
            if attrs.get("choices"):
                usage = f"{name} {{{','.join(attrs['choices'])}}}"
            default = attrs.get("default")
            shown = "" if default in (None, False, []) else f"`{default}`"
            meaning = attrs.get("help", "")
            if attrs.get("action") == "append":
                meaning += " (repeatable)"
            anchor = name.lstrip("-")
            lines.append(f'| <a id="{anchor}"></a>`{usage}` | {shown} | {_cell(meaning)} |')
    return "\n".join(lines) + "\n"


def cli_page() -> str:
    """Every subcommand of `pdebench`, with the help argparse prints for it."""
    with _columns(100):  # argparse wraps help to the terminal: a fixed width for the page
        parser = _pdebench_parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        helps = {choice.dest: choice.help for choice in commands._choices_actions}
        lines = [
            "# The pdebench command",
            "",
            "Written from the command's argparse parser (`pytest_pdebench/cli/`) by `python docs/hooks.py`; "
            "`pdebench COMMAND --help` prints the same.",
            "",
            "| command | what it does |",
            "|---|---|",
        ]
        summaries = {
            name: helps.get(name) or (sub.description or "").strip().split("\n")[0]
            for name, sub in commands.choices.items()
        }
        lines += [f"| [`{name}`](#{name}) | {_cell(summary)} |" for name, summary in summaries.items()]
        for name, sub in commands.choices.items():
            lines += ["", f"## {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _pdebench_parser() -> argparse.ArgumentParser:
    """The parser of ``cli.main``: from ``cli._parser()`` where cli.py has it, else caught on
    its way through ``parse_args`` (an older main() built it and parsed at once)."""
    from pytest_pdebench import cli

    if hasattr(cli, "_parser"):
        return cli._parser()

    class Built(Exception):
        pass

    def catch(self, *args, **kwargs):
        raise Built(self)

    parse_args = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = catch  # type: ignore[method-assign]
    try:
        cli.main([])
    except Built as built:
        return built.args[0]
    finally:
        argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]
    raise RuntimeError("pdebench's main() parsed nothing: the CLI reference cannot be written")


@contextlib.contextmanager
def _columns(width: int):
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _cell(text: str) -> str:
    """One table cell: on one line, its bars escaped, and <library> shown, not read as a tag."""
    text = " ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


if __name__ == "__main__":  # rewrite the reference pages from the code
    for name, text in reference_pages().items():
        (REPO / DOCS / name).parent.mkdir(exist_ok=True)
        (REPO / DOCS / name).write_text(text)
        print(f"wrote {DOCS}{name}")
