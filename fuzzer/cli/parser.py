"""The ``gapfuzz`` command line: its parser, whose every complaint is one line, exit status 2."""
from __future__ import annotations

import argparse
import math
import sys

from gapfuzz.core.setting import (
    MAX_COUNT,
    MAX_MEMORY_GB,
    MAX_NUMBER,
    MAX_PARAMS,
    MAX_PER_SEED,
    MAX_SECONDS,
    MAX_SEED,
    MAX_WORKERS,
)

EXIT_FOUND = 1  # run --fail-on, diff --exit-code: what was asked about was found
EXIT_BAD_INPUT = 2
EXIT_INFRASTRUCTURE = 3  # Ray did not start, or a pool lost its nodes: nothing wrong with the input; --resume goes on


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (``--help`` shows the usage), and every
    ``--help`` shows each option's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        print(f"gapfuzz: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


class UserError(Exception):
    """Bad input from the command line; printed as one line, exit status 2."""


class InfrastructureError(Exception):
    """The machines, not the input: Ray did not start or a pool lost its nodes; one line, exit status 3."""


def version() -> str:
    """``gapfuzz 0.1.0 (torch 2.14.1, Python 3.11.7)``, from the installed metadata (nothing imported)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    def of(name: str) -> str:
        try:
            return installed(name)
        except PackageNotFoundError:
            return "not installed"
    return f"gapfuzz {of('gapfuzz')} (torch {of('torch')}, Python {sys.version.split()[0]})"


def setting(text: str) -> tuple[list[str], object, str]:
    """``KEY=VALUE`` of a campaign key (``run.budget_s=600``, ``backends.targets=[inductor@cpu]``): the dotted
    key, the value read as YAML (data: a number, a string, a list, a mapping), and the text."""
    from gapfuzz.core.strict_yaml import YamlError, load

    key, eq, value = text.partition("=")
    parts = key.strip().split(".")
    if not eq or not all(p.strip() and p.replace("_", "").replace("-", "").isalnum() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE with a dotted campaign key "
                                         f"(e.g. run.budget_s=600)")
    try:
        return parts, load(value, f"the value of {key}") if value.strip() else "", text
    except (YamlError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {' '.join(str(e).split())[:160]}") from None


def _number(kind, low: float, strict: bool, high: float):
    """A number in ``low`` (above it, if ``strict``) to ``high``: the bound of the campaign key the option stands
    for (``core.setting``), so no value given here overflows a timer, a memory limit or a count further in."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole' if kind is int else 'a'} number") from None
        if not math.isfinite(value) or value < low or (strict and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"{text!r}: a finite number {'above' if strict else 'at least'} {low:g} "
                                             f"and at most {high:,} is needed")
        return value
    parse.__name__ = kind.__name__
    return parse


# Each numeric option takes the bound of the campaign key it stands for (--timeout: capture.timeout_s, --memory-gb:
# pools.*.memory_gb, --seed: seed, ...); one that stands for none, the general one (``core.setting.bounded``).
def positive_int(high: int = MAX_NUMBER):
    return _number(int, 0, True, high)


def natural_int(high: int = MAX_NUMBER):
    return _number(int, 0, False, high)


def positive_float(high: float = MAX_NUMBER):
    return _number(float, 0, True, high)


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m`` or ``1.5h``, bounded as ``run.budget_s`` is."""
    scale = {"s": 1, "m": 60, "h": 3600}.get(text.strip()[-1:].lower(), None)
    number = text.strip()[:-1] if scale else text
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (90s, 10m, 1.5h or seconds)") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration above 0 and at most {MAX_SECONDS:,} s is needed")
    return value


def overrides(settings: list) -> dict:
    """The nested mapping of ``setting`` results, later ones over earlier ones, for ``load_campaign``."""
    out: dict = {}
    for parts, value, text in settings:
        at = out
        for part in parts[:-1]:
            if not isinstance(at.get(part, {}), dict):
                raise UserError(f"{text!r}: {part} was given a value of its own by an earlier KEY=VALUE")
            at = at.setdefault(part, {})
        at[parts[-1]] = value
    return out


def path_arg(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    return text


EXAMPLES = {  # each command's --help ends with one
    "run": "gapfuzz run campaigns/inductor.yaml run.budget_s=600 'backends.targets=[inductor@cpu]' --fail-on new",
    "schema": "gapfuzz schema > campaign.schema.json",
    "triage": "gapfuzz triage runs/default --known known.yaml",
    "report": "gapfuzz report runs/default   (then open runs/default/report.html)",
    "diff": "gapfuzz diff runs/last-week runs/today --exit-code",
    "seeds list": "gapfuzz seeds list --source timm --filter 'test_*'",
    "seeds scan": "gapfuzz seeds scan --source timm --out runs/seed-scan",
    "repro": "gapfuzz repro runs/default c-2d5690b0fb   (a cluster id from gapfuzz triage)",
    "explain": "gapfuzz explain runs/default d-72ef",
    "mutators": "gapfuzz mutators",
    "backends": "gapfuzz backends --filter '*@cpu'",
}


def _with_examples(sub, prefix: str = "") -> None:
    for name, parser in sub.choices.items():
        example = EXAMPLES.get(f"{prefix}{name}")
        parser.epilog = f"example: {example}" if example else parser.epilog
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            _with_examples(action, f"{name} ")


def build_parser(commands: dict) -> argparse.ArgumentParser:
    """The parser; ``commands`` maps each command (``"seeds scan"``) to the function that runs it."""
    p = OneLineParser(prog="gapfuzz", description="Find where the same model behaves differently "
                                "across AI accelerators and software stacks.",
                      epilog="exit statuses: 0 done; 1 found what --fail-on or --exit-code asks about, or a "
                      "reproducer did not reproduce; 2 bad input (one line, nothing lost); 3 the machines (Ray did "
                      "not start, a pool lost its nodes: --resume goes on); 130 and 143 stopped by Ctrl-C or SIGTERM")
    p.add_argument("--version", action="version", version=version())
    sub = p.add_subparsers(dest="command", required=True)

    for add in (_run, _reading, _seeds, _repro, _listing):
        add(sub, commands)
    _with_examples(sub)
    return p


def _run(sub, commands: dict) -> None:
    """``run`` and ``schema``: a campaign and its file's schema."""
    r = sub.add_parser("run", help="run a campaign (no file: the embedded default campaign)")
    r.add_argument("campaign", nargs="?", help="campaign YAML file (default: the embedded default campaign)")
    r.add_argument("settings", nargs="*", metavar="KEY=VALUE", type=setting, default=[],
                   help="campaign keys over the file's, checked as the file is (run.budget_s=600)")
    r.add_argument("--address", help="Ray cluster to join ('auto' for the local cluster)")
    r.add_argument("--resume", action="store_true", help="continue the campaign in its existing folder")
    r.add_argument("--out", type=path_arg, help="run folder: a path, or a URI such as s3://bucket/runs/x "
                   "(default: <output>/<name> from the campaign)")
    r.add_argument("--time-budget", type=duration, metavar="DURATION", help="stop starting pairs after this wall "
                   "time (10m, 1h, 900s; default: the campaign's run.budget_s, else none); --resume goes on")
    r.add_argument("--quiet", action="store_true", help="no progress display (live on a terminal, lines in a log)")
    r.add_argument("--check", action="store_true", help="validate the file and print the plan (seeds, variants, "
                   "pairs and runs per backend and mode); run and write nothing")
    r.add_argument("--allow-exec-options", action="store_true", help="let backend options name a program, a library, "
                   "a path or compiler flags (e.g. Inductor's cpp.cxx): the campaign file's values then run here")
    r.add_argument("--fail-on", choices=("never", "findings", "new"), default="never",
                   help="exit 1 when the run has vendor findings (findings), or ones no known issue matches (new)")
    r.set_defaults(fn=commands["run"])

    sch = sub.add_parser("schema", help="print the JSON Schema of a campaign file (for editors)")
    sch.set_defaults(fn=commands["schema"])


def _reading(sub, commands: dict) -> None:
    """``triage``, ``report`` and ``diff``: reading run folders."""
    t = sub.add_parser("triage", help="cluster table of a run folder")
    t.add_argument("run_dir")
    t.add_argument("--limit", type=positive_int(), default=50, help="clusters to show")
    t.add_argument("--benign", action="store_true", help="also list differences explained without a defect")
    t.add_argument("--why", metavar="CLUSTER", help="why the runs of one cluster are one defect: its key's fields, "
                   "what the key folded (symptoms at the node, ops of one kernel, strict runs joined), what they "
                   "differ in (dtypes, probes, seeds) and the clusters it keeps apart")
    t.add_argument("--regressions", action="store_true", help="only clusters that show in the newest release of a "
                   "stack the campaign ran in several, and not in an earlier one")

    rp = sub.add_parser("report", help="write a self-contained HTML report of a run folder")
    rp.add_argument("run_dir")
    rp.add_argument("--out", type=path_arg, help="HTML file to write (default: RUN_DIR/report.html); with --vendor, "
                    "the folder for the digest (default: RUN_DIR/vendor/<stack>)")
    rp.add_argument("--vendor", metavar="STACK", help="instead of the HTML report, one issue text per behaviour of one "
                    "stack (e.g. openvino), each listing its operators and reproducers, and a pytest file of them")

    d = sub.add_parser("diff", help="clusters new, gone and still there between two campaigns")
    d.add_argument("run_a", help="the earlier run folder")
    d.add_argument("run_b", help="the later run folder")
    d.add_argument("--limit", type=positive_int(), default=50, help="clusters to show")
    d.add_argument("--exit-code", action="store_true", help="exit 1 when the later run has clusters the earlier "
                   "lacks that no known issue matches (for CI)")
    for q, name in ((t, "triage"), (rp, "report"), (d, "diff")):
        q.add_argument("--known", type=path_arg, help="known-issues file (YAML) that marks clusters already known")
        q.add_argument("--catalog", type=path_arg,
                       help="folder with a seed catalog (gapfuzz seeds scan) to rate impact against "
                            "(default: the run's)")
        q.set_defaults(fn=commands[name])


def _seeds(sub, commands: dict) -> None:
    """``seeds list`` and ``seeds scan``."""
    s = sub.add_parser("seeds", help="list seeds")
    ss = s.add_subparsers(dest="seeds_command", required=True)
    sl = ss.add_parser("list", help="print seed ids, one a line (nothing is built)")
    sc = ss.add_parser("scan", help="build, capture and run seeds once on the reference, into a catalog")
    for q in (sl, sc):
        q.add_argument("--source", help="timm, torchvision, transformers or ops")
        q.add_argument("--filter", action="append", help="glob on the seed id, e.g. 'timm/resnet*' (repeatable)")
        q.add_argument("--exclude", action="append", help="glob of seeds to leave out (repeatable)")
    sl.set_defaults(fn=commands["seeds list"])
    sc.add_argument("--sample", type=positive_int(MAX_COUNT), help="scan a random sample of this many seeds")
    sc.add_argument("--seed", type=natural_int(MAX_SEED), default=0, help="random seed of the sample")
    sc.add_argument("--out", type=path_arg, default="runs/seed-scan",
                    help="folder of the catalog (resumed if it exists)")
    sc.add_argument("--workers", type=natural_int(MAX_WORKERS), default=0,
                    help="parallel workers (default: one per core)")
    sc.add_argument("--timeout", type=positive_float(MAX_SECONDS), default=600, help="seconds per seed")
    sc.add_argument("--max-params", type=positive_int(MAX_PARAMS), default=100_000_000, help="parameter cap")
    sc.add_argument("--memory-gb", type=positive_float(MAX_MEMORY_GB), help="memory limit per worker")
    sc.add_argument("--address", help="Ray cluster to join")
    sc.add_argument("--quiet", action="store_true", help="no progress display (live on a terminal, lines in a log)")
    sc.add_argument("--resume", action="store_true",
                    help="continue a scan (what it always does: seeds already in the catalog are skipped)")
    sc.set_defaults(fn=commands["seeds scan"])


def _repro(sub, commands: dict) -> None:
    """``repro`` and ``explain``: a cluster's representative, run again."""
    x = sub.add_parser("repro", help="minimise a cluster's representative; write repro.py and report.md")
    x.add_argument("run_dir")
    x.add_argument("cluster_id", nargs="?", help="a cluster id from 'gapfuzz triage' (a unique prefix will do)")
    x.add_argument("--all", action="store_true", help="every vendor cluster of the run, one after another, the "
                   "unreproduced first; those with a reproducer already are skipped")
    x.add_argument("--budget-s", type=positive_int(MAX_SECONDS), default=3600,
                   help="with --all: stop starting clusters after this many seconds")
    x.add_argument("--out", type=path_arg, help="folder (default: RUN_DIR/repros/<cluster id>)")
    x.add_argument("--max-calls", type=positive_int(MAX_COUNT), default=300, help="budget of checks while shrinking")
    x.add_argument("--tries", type=positive_int(MAX_PER_SEED), default=3,
                   help="fresh runs of repro.py before it is declared final")
    _replay_flags(x)
    x.add_argument("--against", action="append", default=[], metavar="STACK==RELEASE",
                   help="check the reproducer on this release too (the newest, before filing), in an environment "
                   "made for it; repeatable. The releases the campaign ran are always checked")
    x.set_defaults(fn=commands["repro"])

    e = sub.add_parser("explain", help="attribute one cluster again: its explanation, first divergent node and "
                       "culprit pass, beside what the campaign said")
    e.add_argument("run_dir")
    e.add_argument("cluster_id", help="a cluster id from 'gapfuzz triage' (a unique prefix will do)")
    _replay_flags(e)
    e.set_defaults(fn=commands["explain"])


def _listing(sub, commands: dict) -> None:
    """``mutators`` and ``backends``: what this install has."""
    m = sub.add_parser("mutators", help="list mutation operators")
    m.set_defaults(fn=commands["mutators"])
    b = sub.add_parser("backends", help="list backends and whether they are available here")
    b.add_argument("--filter", help="glob, e.g. '*@cpu'")
    b.set_defaults(fn=commands["backends"])


def _replay_flags(q) -> None:
    """What a command that replays a run folder's campaign may run here: only when the user says so."""
    q.add_argument("--allow-plugins", action="store_true",
                   help="import the plug-in backend classes the run folder's campaign names (its code runs here)")
    q.add_argument("--allow-exec-options", action="store_true", help="replay backend options that name a program, "
                   "a library, a path or compiler flags (from the run folder's campaign and records: they run here)")


