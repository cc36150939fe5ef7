"""MkDocs hooks: the pages that are made from the code, so that the site
cannot drift from it (issue 44).

* ``commands/<name>.md``: one page per `cratrace` command, from the typer
  app itself (its docstring, usage, arguments and options with their help
  and defaults), and ``commands/index.md`` listing them; the nav's
  "Commands" section is filled with them, so a new command gets its page
  without editing mkdocs.yml;
* ``tables.md``: rendered by `cratrace.tables.render_markdown`, the
  generator ``python -m cratrace.tables > docs/tables.md`` runs;
* ``<!-- presets -->`` in a page: the collector's presets
  (``cratrace_collect/presets/*.json``), the question each answers and what it
  records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# typer carries its own copy of click: commands are told apart by what
# they have (a group lists commands; a parameter names its kind), and
# contexts are made with the command's own context class.


def _root() -> Any:
    import typer

    from cratrace.cli.main import _register, app

    _register([])
    return typer.main.get_command(app)


def _ctx(cmd: Any, name: str, parent: Any = None) -> Any:
    return cmd.context_class(cmd, info_name=name, parent=parent)


def _commands() -> dict[str, Any]:
    """Command name → command, every command registered."""
    root = _root()
    ctx = _ctx(root, "cratrace")
    return {name: root.get_command(ctx, name) for name in root.list_commands(ctx)}


def _is_group(cmd: Any) -> bool:
    return hasattr(cmd, "list_commands")


def _prose(text: str) -> str:
    """Help text as Markdown: angle brackets outside code spans shown, not
    read as HTML (`OUT/<policy>/`)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def _cell(text: str) -> str:
    return _prose(" ".join(str(text).split())).replace("|", "\\|")


def _params(cmd: Any, ctx: Any) -> list[str]:
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    opts = [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]
    out: list[str] = []
    if args:
        out += ["**Arguments**", "", "| argument | meaning |", "|---|---|"]
        for p in args:
            req = "" if p.required else " (optional)"
            out.append(f"| `{p.human_readable_name.upper()}`{req} | {_cell(getattr(p, 'help', '') or '')} |")
        out.append("")
    if opts:
        out += ["**Options**", "", "| option | meaning | default |", "|---|---|---|"]
        for p in opts:
            names = ", ".join(f"`{n}`" for n in p.opts)
            if p.secondary_opts:
                names += " / " + ", ".join(f"`{n}`" for n in p.secondary_opts)
            if not p.is_flag and p.name != "help":
                names += f" *{_metavar(p, ctx)}*"
            default = p.default
            shown = "" if default is None or p.name == "help" or (p.is_flag and default is False and not p.secondary_opts) else f"`{default}`"
            if isinstance(default, (list, tuple)):
                shown = ""
            help_text = p.help or ""
            if p.required:
                help_text += " (required)"
            out.append(f"| {names} | {_cell(help_text)} | {shown} |")
        out.append("")
    return out


def _metavar(p: Any, ctx: Any) -> str:
    """An option's value as `--help` names it (typer: ``<path>``), bare."""
    import inspect

    takes_ctx = "ctx" in inspect.signature(p.make_metavar).parameters
    return (p.make_metavar(ctx) if takes_ctx else p.make_metavar()).strip("<>")


def _usage(cmd: Any, path: str) -> str:
    args = []
    for p in cmd.params:
        if p.param_type_name == "argument":
            name = p.name.upper() + ("..." if p.nargs == -1 else "")
            args.append(name if p.required else f"[{name}]")
    return f"cratrace {path} [OPTIONS] " + " ".join(args)


def _help(cmd: Any) -> str:
    """The docstring: paragraphs of prose, examples indented (code)."""
    out = []
    for line in (cmd.help or "").strip().splitlines():
        out.append(line if line.startswith("    ") else _prose(line))
    return "\n".join(out)


def _command_page(name: str, cmd: Any) -> str:
    ctx = _ctx(cmd, name, _ctx(_root(), "cratrace"))
    out = [f"# cratrace {name}", ""]
    if _is_group(cmd):
        out += [_help(cmd), "", "```text", f"cratrace {name} COMMAND [OPTIONS] ...", "```", ""]
        for sub_name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, sub_name)
            sub_ctx = _ctx(sub, sub_name, ctx)
            out += [f"## cratrace {name} {sub_name}", "", "```text", _usage(sub, f"{name} {sub_name}"), "```", "", _help(sub), ""]
            out += _params(sub, sub_ctx)
    else:
        out += ["```text", _usage(cmd, name), "```", "", _help(cmd), ""]
        out += _params(cmd, ctx)
    out += ["", f"Generated from `cratrace {name} --help`'s source, the typer app."]
    return "\n".join(out) + "\n"


def _index(commands: dict[str, Any]) -> str:
    out = [
        "# Commands",
        "",
        "Every command prints what it did in a line or two, `--json` where it has figures, "
        "and a one-line error with exit code 2 on bad input (1: it ran but found problems).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, cmd in commands.items():
        first = (cmd.help or "").strip().split("\n\n")[0]
        out.append(f"| [`cratrace {name}`]({name}.md) | {_cell(first)} |")
    return "\n".join(out) + "\n"


_PAGES: dict[str, str] = {}


def on_config(config: Any) -> Any:
    commands = _commands()
    _PAGES.clear()
    _PAGES["commands/index.md"] = _index(commands)
    for name, cmd in commands.items():
        _PAGES[f"commands/{name}.md"] = _command_page(name, cmd)
    for item in config["nav"] or []:
        if isinstance(item, dict) and "Commands" in item:
            item["Commands"] = ["commands/index.md"] + [{f"cratrace {n}": f"commands/{n}.md"} for n in commands]
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, text in _PAGES.items():
        old = files.get_file_from_path(uri)
        if old is not None:
            files.remove(old)
        files.append(File.generated(config, uri, content=text))
    return files


def on_page_read_source(page: Any, config: Any) -> str | None:
    if page.file.src_uri == "tables.md":
        from cratrace.tables import render_markdown

        return render_markdown()
    return None


def _presets() -> str:
    out = ["| preset | the question it answers | what it records |", "|---|---|---|"]
    for path in sorted((ROOT / "cratrace_collect" / "presets").glob("*.json")):
        p = json.loads(path.read_text())
        what = []
        if p.get("ftrace_events"):
            what.append("ftrace: " + ", ".join(f"`{e.split(':')[-1]}`" for e in p["ftrace_events"]))
        if p.get("perf_counters"):
            what.append("perf stat: " + ", ".join(f"`{c}`" for c in p["perf_counters"]))
        if p.get("xentrace_classes"):
            what.append("xentrace classes: " + ", ".join(f"`{c}`" for c in p["xentrace_classes"]))
        out.append(f"| `{p['name']}` | {_cell(p.get('question', ''))} | {'; '.join(what)} |")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- presets -->" in markdown:
        markdown = markdown.replace("<!-- presets -->", _presets())
    return markdown
