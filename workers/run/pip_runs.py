"""pip as releases run it: its progress while it makes an environment here, its indexes on a cluster's nodes.

Making an environment runs pip for minutes (a torch release is gigabytes) and said nothing until it ended.
pip runs here with its output read as it comes (``run``), and ``Stages`` turns each line that opens a
stage (``Collecting``, ``Downloading``, ``Building wheel``, ``Installing collected packages``) into one line
of progress that names the release, the stage and the time so far, when the stage changes and otherwise at
most every ``every_s`` seconds; a failure is still read from the whole output (``releases.why_not``). On a
cluster each node makes the environment with Ray's ``pip`` runtime environment, told the indexes this
machine uses (``index_options``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Callable

# a line that opens a stage: its first words, and the stage's name in the progress line
_STAGES = (("Collecting", "collecting"), ("Processing", "collecting"), ("Downloading", "downloading"),
           ("Building wheel", "building"),
           ("Installing collected packages", "installing"), ("Successfully installed", "installed"))
EVERY_S = 10.0


def stage_of(line: str) -> tuple[str, str] | None:
    """(stage, what it works on) for a line of pip's that opens a stage; None for any other."""
    text = line.strip()
    for prefix, name in _STAGES:
        if text.startswith(prefix):
            words = text[len(prefix):].strip(" :").split()
            if prefix == "Processing" and words:  # a local file: its name, not where it lies
                words[0] = os.path.basename(words[0])
            return name, " ".join(words)[:120]
    return None


class Stages:
    """Says ``<what>: pip <stage> <item> (<seconds> s)`` through ``say`` as pip's stages come."""

    def __init__(self, say: Callable[[str], None], what: str, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.say, self.what, self.every_s, self.clock = say, what, every_s, clock
        self.t0 = self.last_said = clock()
        self.stage: str | None = None
        self.said: list[str] = []

    def feed(self, line: str) -> None:
        found = stage_of(line)
        if found is None:
            return
        stage, item = found
        now = self.clock()
        if stage == self.stage and now - self.last_said < self.every_s:
            return
        self.stage, self.last_said = stage, now
        text = f"{self.what}: pip {stage} {item} ({now - self.t0:.0f} s)".replace("  ", " ")
        self.said.append(text)
        self.say(text)


def run(command: list[str], timeout_s: float, on_line: Callable[[str], None]) -> tuple[int, str]:
    """``command`` with its output (stdout and stderr, merged) given to ``on_line`` line by line as it comes;
    (exit status, the whole output). ``subprocess.TimeoutExpired`` past ``timeout_s``, the process killed."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            on_line(line)

    reader = threading.Thread(target=read, name="pip-output", daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    finally:
        reader.join(timeout=5)
    return proc.returncode, "".join(lines)


TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyPI's Linux torch is the CUDA build, gigabytes more
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


def index_options(release, device: str) -> list[str]:
    """pip's options for a node that makes the environment of ``release`` (a ``releases.Release``) with Ray's
    ``pip`` runtime environment: the package indexes this machine's pip is configured with, those a node can
    reach (http and https: a ``file:`` mirror is this machine's), and for a torch release on a CPU pool
    PyTorch's CPU index; none when there is nothing to add to pip's own defaults on the node."""
    urls: list[str] = []
    try:
        listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        listed = ""
    found = {k: v.strip("'\"") for k, _, v in (line.partition("=") for line in listed.splitlines())}
    given = [os.environ.get("PIP_INDEX_URL", ""), os.environ.get("PIP_EXTRA_INDEX_URL", ""),
             *(v for k, v in found.items() if k.endswith(("index-url", "extra-index-url")))]
    main = os.environ.get("PIP_INDEX_URL") or next((v for k, v in found.items() if k.endswith(".index-url")), "")
    for url in " ".join(given).split():
        if url.startswith(("http://", "https://")) and url not in urls:
            urls.append(url)
    if device == "cpu" and any(d in TORCH_FAMILY for d, _ in release.pins) and TORCH_CPU_INDEX not in urls:
        urls.append(TORCH_CPU_INDEX)  # beside the main index: 2.13.0+cpu is the highest 2.13.0 pip sees
    if not urls:
        return []
    first = [f"--index-url={main}"] if main.startswith(("http://", "https://")) else []
    extra = [f"--extra-index-url={u}" for u in urls if u != main]
    return ["--disable-pip-version-check", "--no-cache-dir", *first, *extra]  # Ray's defaults, and the indexes
